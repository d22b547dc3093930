//! One demo worker process (`eventsource demo-worker`, hidden).
//!
//! Loops until its time is (nearly) up: picks a key at random, records `wait`,
//! acquires the key, records `enter`, stays a few milliseconds, records
//! `exit`, releases. Reports `enter KEY`, `exit KEY`, `stall KEY` and
//! `done N` on stdout for the demo's status line. With `--stall-after-ms`,
//! it stays inside the first critical section it enters after that time,
//! until the demo kills it. The end of its time is never a failure: it
//! starts no acquisition in the last [`LAST_CALL`] of its run, and a wait
//! cut short by the end of the run ends the loop.

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Duration;

use pgcoord::{error::BackendErrorKind, DistributedLock, Error};
use tokio::time::Instant;

use super::record::{append, Kind};
use crate::cli::WorkerArgs;
use crate::db::{self, Database};
use crate::{exit, report};

/// How close to its end a worker stops starting acquisitions. A wait this
/// short would be mostly the round trip to the server: whatever the lock
/// manager answers for it (a grant, a timeout, a server that "did not answer
/// in time" within a millisecond) says nothing about the locks, so the last
/// moments of a run are not spent on it.
pub const LAST_CALL: Duration = Duration::from_millis(100);

/// True when an acquisition failed only because the run's time was up: a
/// lock timeout, or the server not answering before a deadline that had
/// (nearly) passed. Any other failure, or a slow server well before the end,
/// is a real error and fails the worker.
fn time_was_up(e: &Error, end: Instant) -> bool {
    e.is_timeout()
        || (Instant::now() + LAST_CALL >= end
            && e.as_backend()
                .is_some_and(|b| b.kind() == BackendErrorKind::NoAnswer))
}

/// A small xorshift generator: the demo needs variety, not quality.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn seeded(id: u32) -> Self {
        let seed = super::record::now_ns() ^ (u64::from(std::process::id()) << 32) ^ u64::from(id);
        Self(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Runs one worker; returns its exit code.
pub async fn worker(args: WorkerArgs) -> i32 {
    let url = std::env::var("DATABASE_URL").unwrap_or_default();
    let db = match Database::parse(&url) {
        Ok(db) => db,
        Err(msg) => {
            report!("demo worker {}: {msg}", args.id);
            return exit::USAGE;
        }
    };
    let mut record = match OpenOptions::new().append(true).open(&args.record) {
        Ok(f) => f,
        Err(e) => {
            report!(
                "demo worker {}: cannot open {}: {e}",
                args.id,
                args.record.display()
            );
            return exit::SOFTWARE;
        }
    };
    let locks = db
        .manager_builder()
        .holder_id(format!("demo-worker-{}", args.id))
        .build();
    let locks = match locks {
        Ok(l) => l,
        Err(e) => {
            report!("demo worker {}: {e}", args.id);
            return exit::SOFTWARE;
        }
    };
    let mut rng = Rng::seeded(args.id);
    let start = Instant::now();
    let end = start + Duration::from_millis(args.millis);
    let stall_at = args
        .stall_after_ms
        .map(|ms| start + Duration::from_millis(ms));
    let mut entered = 0u64;
    let id = args.id;

    loop {
        let now = Instant::now();
        if now + LAST_CALL >= end {
            break;
        }
        let key = format!("{}{}", args.prefix, rng.below(u64::from(args.keys)));
        if let Err(e) = append(&mut record, id, Kind::Wait, &key) {
            report!("demo worker {id}: cannot write the record: {e}");
            return exit::SOFTWARE;
        }
        let guard = match locks.acquire(&key, Some(end - now)).await {
            Ok(g) => g,
            Err(e) if time_was_up(&e, end) => break,
            Err(e) => return db::fail(&format!("demo worker {id}"), Some(&db), &e),
        };
        if let Err(e) = append(&mut record, id, Kind::Enter, &key) {
            report!("demo worker {id}: cannot write the record: {e}");
            return exit::SOFTWARE;
        }
        entered += 1;
        say(&format!("enter {key}"));
        if stall_at.is_some_and(|t| Instant::now() >= t) {
            // Hold the lock until the demo kills this process.
            say(&format!("stall {key}"));
            let _still_held = &guard;
            match std::future::pending::<std::convert::Infallible>().await {}
        }
        tokio::time::sleep(Duration::from_millis(1 + rng.below(8))).await;
        if let Err(e) = append(&mut record, id, Kind::Exit, &key) {
            report!("demo worker {id}: cannot write the record: {e}");
            return exit::SOFTWARE;
        }
        say(&format!("exit {key}"));
        if let Err(e) = guard.release().await {
            return db::fail(&format!("demo worker {id}: release"), Some(&db), &e);
        }
        let think = rng.below(3);
        if think > 0 {
            tokio::time::sleep(Duration::from_millis(think)).await;
        }
    }
    say(&format!("done {entered}"));
    0
}
