//! How an answer reaches the caller: the reply of a wait sent straight to a
//! session, and the last check of a grant before it is returned.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::no_answer;
use crate::adapters::postgres::locks::session::session_ended;
use crate::adapters::postgres::locks::session::{Granted, WaitOutcome};
use crate::adapters::postgres::locks::silence::answer_by;
use crate::ports::deadline::deadline_after;
use crate::ports::error::{AcquireFailure, BackendError, BackendErrorKind};

/// The answer to a wait sent straight to a session (not through a wait
/// line), as the acquisition's outcome. The wait carries the deadline as
/// its `lock_timeout`, so the server itself ends it then; a server still
/// silent `grace` past the deadline (the liveness timeout: connecting may
/// come first) did not answer.
pub(super) async fn wait_reply(
    rx: oneshot::Receiver<WaitOutcome>,
    deadline: Option<Instant>,
    grace: Duration,
) -> Result<Granted, AcquireFailure> {
    let sent = Instant::now();
    // A deadline so far away that `grace` past it overflows the clock is
    // none.
    let outcome = match deadline.and_then(|d| deadline_after(d, grace)) {
        None => rx.await,
        Some(by) => match answer_by(by, rx).await {
            Ok(r) => r,
            Err(_) => return Err(no_answer(sent.elapsed())),
        },
    };
    match outcome {
        Ok(WaitOutcome::Granted(g)) => Ok(g),
        Ok(WaitOutcome::TimedOut | WaitOutcome::Abandoned) => Err(AcquireFailure::Timeout),
        Ok(WaitOutcome::Cancelled(reason)) => Err(AcquireFailure::Cancelled { reason }),
        Ok(WaitOutcome::Failed(e)) => Err(AcquireFailure::Backend(e)),
        Err(_) => Err(AcquireFailure::Backend(session_ended())),
    }
}

/// The last check before a grant reaches its caller: a session can be
/// granted a lock and be terminated a moment later, and under load the
/// client may learn of the grant only after the server has already released
/// the lock with the dying session. When the session's end is known by now,
/// the grant is dropped and the acquisition fails as a closed session; when
/// it is not yet known, the guard's loss signal fires as soon as it is (the
/// window that only fencing closes; see docs/reliability.md).
pub(super) fn alive(granted: Granted) -> Result<Granted, AcquireFailure> {
    let lease_over = granted.lease.as_ref().is_some_and(|l| l.lease_over());
    if granted.dead.is_raised() || lease_over {
        drop(granted);
        return Err(AcquireFailure::Backend(BackendError::new(
            BackendErrorKind::Closed,
            "the session ended as the lock was granted",
        )));
    }
    Ok(granted)
}
