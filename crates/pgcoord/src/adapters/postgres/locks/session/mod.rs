//! Session actors: one task per PostgreSQL session.
//!
//! Callers talk to a session only through its [`SessionHandle`] (a
//! mailbox); the actor owns the `Client` and is polled together with its
//! connection (`drive.rs`), by the session's own task or by a caller that
//! waits for an answer and finds nobody else polling
//! ([`CoPolled`](super::co_poll::CoPolled)). The work never belongs to a
//! caller, so dropping a caller's future never leaves a statement
//! half-done on a session someone else then reuses, and an uncontended
//! statement wakes no task but its caller. Inside this folder imports
//! point one way:
//!
//! ```text
//! actor ──> drive
//! actor ──> batch ──────┬──> reconcile ──┐
//!   │  ├──> wait ───────┼─────────────────┴──> state ──> statements ──> sql
//!   │  └──> downgrade ──┤
//!   └──> pool ──────┴──> mailbox ──> queue
//! ```
//!
//! Every file that runs a lock statement checks its answer with `answer`
//! (the request numbers), which imports none of them.
//!
//! A session is either *shared* (uncontended locks of many owners,
//! concurrent requests batched into one statement) or *dedicated* (one
//! blocking wait at a time, then the one lock it was granted).

mod actor;
mod answer;
mod batch;
mod batch_buffers;
mod batch_form;
mod claim;
mod context;
mod downgrade;
mod drive;
mod liveness;
mod mailbox;
mod pool;
mod queue;
mod reconcile;
mod sql;
mod state;
mod statements;
mod try_any;
mod wait;

pub(crate) use actor::{send_dedicated, spawn};
pub(crate) use context::SessionContext;
pub(crate) use mailbox::{
    send_to, session_ended, Granted, Kind, Op, SessionHandle, WaitMode, WaitOutcome, WaitRequest,
};
pub(crate) use pool::WaitPool;
