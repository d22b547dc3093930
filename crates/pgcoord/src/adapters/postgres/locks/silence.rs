//! Timers that decide "the server did not answer", without counting time
//! this process did not run.
//!
//! A process can stop while a request is out: a Ctrl-Z of `eventsource
//! lock run`, SIGSTOP, a debugger, a paused virtual machine, a host that
//! swaps. The server answers meanwhile and its answer waits in the socket.
//! When the process runs again, the timer and the socket are ready in the
//! same turn of the runtime, and the task that runs first decides: a plain
//! `tokio::time::timeout` polls the request once, finds its answer not yet
//! read (the connection task has not run), and reports a silent server
//! that did answer. A holder's ping lost that way ends its session and
//! tells every holder of a loss that did not happen.
//!
//! So a timer that fires more than [`STALLED`] after its instant (the
//! process, not the server, was away) looks again for [`RELOOK`] before
//! the server is called silent: time enough to read what is waiting. At
//! most [`MAX_RELOOKS`] times per request, so a runtime that is always
//! late still reports a server that is really silent. A process that ran
//! again just before the instant has its timer fire on time, with the
//! answer perhaps still unread: every timer takes a [`LAST_LOOK`] before
//! it gives up.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use tokio::time::Instant;

use crate::ports::deadline::deadline_after;

/// How late a timer must fire for the process to count as having been
/// away (a timer on a busy runtime is a few milliseconds late).
const STALLED: Duration = Duration::from_millis(10);

/// How long a late timer looks again for an answer already sent.
const RELOOK: Duration = Duration::from_secs(1);

/// The last look of every timer before the server is called silent: a
/// process that ran again just before its timer fired may not have read
/// the answer that waited for it yet.
const LAST_LOOK: Duration = Duration::from_millis(50);

/// How many times one request's timer looks again.
const MAX_RELOOKS: u32 = 3;

/// The server sent no answer in time (while this process ran).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Silent;

/// `answer`, if the server gives it within `limit` of now (a limit the
/// clock cannot hold is none).
pub(crate) async fn answer_within<F: Future>(
    limit: Duration,
    answer: F,
) -> Result<F::Output, Silent> {
    match deadline_after(Instant::now(), limit) {
        Some(by) => answer_by(by, answer).await,
        None => Ok(answer.await),
    }
}

/// `answer`, if the server gives it by `by`; a timer that fires late
/// looks again first (see the module docs).
pub(crate) async fn answer_by<F: Future>(by: Instant, answer: F) -> Result<F::Output, Silent> {
    let mut answer = pin!(answer);
    let mut at = by;
    let mut relooks = MAX_RELOOKS;
    let mut last_look = true;
    loop {
        tokio::select! {
            // As `tokio::time::timeout`: an answer ready in the same turn
            // as the timer wins.
            biased;
            out = &mut answer => return Ok(out),
            () = tokio::time::sleep_until(at) => {}
        }
        let now = Instant::now();
        if now.saturating_duration_since(at) >= STALLED && relooks > 0 {
            tracing::debug!(late = ?now - at, "a timer fired late: looking again for an answer");
            relooks -= 1;
            at = now + RELOOK;
        } else if last_look {
            last_look = false;
            at = now + LAST_LOOK;
        } else {
            break;
        }
    }
    Err(Silent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// The process "stops" for ten seconds: the clock jumps past both the
    /// one-second limit and the answer sent at five seconds, so both are
    /// due in the same turn, the limit's task first.
    #[tokio::test(start_paused = true)]
    async fn an_answer_sent_while_the_process_was_away_is_taken() {
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let _ = tx.send(7);
        });
        let waiting = tokio::spawn(answer_within(Duration::from_secs(1), rx));
        tokio::task::yield_now().await; // both timers set
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(waiting.await.unwrap(), Ok(Ok(7)));
    }

    /// A process that ran again just before the limit: the timer fires on
    /// time, the answer is read a moment later.
    #[tokio::test(start_paused = true)]
    async fn an_answer_read_just_after_an_on_time_limit_is_taken() {
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1001)).await;
            let _ = tx.send(7);
        });
        assert_eq!(answer_within(Duration::from_secs(1), rx).await, Ok(Ok(7)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_stays_silent_is_silent_by_the_limit() {
        let (_tx, rx) = oneshot::channel::<()>();
        let started = Instant::now();
        assert_eq!(answer_within(Duration::from_secs(2), rx).await, Err(Silent));
        // Paused time only moves to the next timer: on time, so only the
        // last look.
        assert_eq!(started.elapsed(), Duration::from_secs(2) + LAST_LOOK);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_server_after_a_stall_is_silent_after_a_look_again() {
        let (_tx, rx) = oneshot::channel::<()>();
        let waiting = tokio::spawn(answer_within(Duration::from_secs(1), rx));
        tokio::task::yield_now().await;
        let started = Instant::now();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(waiting.await.unwrap(), Err(Silent));
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(10) + RELOOK + LAST_LOOK
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_too_long_for_the_clock_is_none() {
        assert_eq!(answer_within(Duration::MAX, async { 1 }).await, Ok(1));
    }
}
