//! `lock run --min-interval`: with the lock held, record this run's start
//! in the fence table (the library's `PostgresRunLog`), or skip the run
//! when one started within the interval, by the database server's clock.
//!
//! The start is recorded before COMMAND starts, so a run that crashes
//! still counts. A COMMAND that could not be started at all (not found,
//! not executable: exit 127 or 126) ran nothing: its start is taken back
//! ([`take_back`]; the starts it replaced are read in the claim's own
//! transaction), so that a host with a broken path does not use up the
//! interval of the healthy ones.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use pgcoord::coordination::{RunLog, RunStart};
use pgcoord::error::BackendErrorKind;
use pgcoord::postgres::PostgresRunLog;
use pgcoord::Error;

use crate::cli::RunArgs;
use crate::db::{self, Database};
use crate::duration::format_duration;
use crate::{exit, report};

/// The environment variable with the recorded start (RFC 3339, UTC).
pub const STARTED_ENV: &str = "EVENTSOURCE_RUN_STARTED";

/// A recorded start, and the starts it replaced (for [`take_back`]).
pub struct Claim {
    /// This run's start.
    pub at: DateTime<Utc>,
    /// Each key's start before, if any.
    previous: Vec<(String, Option<DateTime<Utc>>)>,
}

/// What the claim came to.
pub enum Claimed {
    /// Run COMMAND: its start, recorded.
    Run(Claim),
    /// Do not run COMMAND: the tool's exit code (reported already).
    Exit(i32),
}

/// Records this run's start for the run's keys (KEY, every `--also`, or
/// the semaphore KEY), or reports why COMMAND must not run.
///
/// It runs on a second, short-lived session, with `statement_timeout`
/// turned off, its connection and its statement given
/// [`db::ANSWER_WITHIN`] together: behind a pooler with no
/// server connection free for it, the statement would otherwise wait in
/// the pooler's queue (PgBouncer's `query_wait_timeout`, 120 s) while the
/// lock is held.
pub async fn claim(args: &RunArgs, interval: Duration, db: &Database, what: &str) -> Claimed {
    let keys = crate::multi::keys(args);
    let claimed = db::answered(async {
        let mut client = db.connect().await?;
        // As the lock's own sessions (and the doctor's): a role's short
        // statement_timeout must not cancel the claim (its synchronous
        // commit counts against it) while the lock is held. The session
        // ends right after the claim.
        client
            .batch_execute("SET statement_timeout = 0")
            .await
            .map_err(Error::from)?;
        let tx = client.transaction().await.map_err(Error::from)?;
        let log = PostgresRunLog::new(&tx);
        // In the claim's transaction, its rows locked: what it replaces.
        let previous = log.last_starts(&keys).await?;
        let start = log.claim_start(&keys, interval).await?;
        tx.commit().await.map_err(Error::from)?;
        Ok::<_, Error>((start, previous))
    })
    .await;
    match claimed {
        Ok((RunStart::Recorded { at }, previous)) => Claimed::Run(Claim { at, previous }),
        Ok((
            RunStart::TooSoon {
                last_started,
                now,
                next_at,
            },
            _,
        )) => {
            let ago = (now - last_started).to_std().unwrap_or_default();
            let wait = (next_at - now).to_std().unwrap_or_default();
            report!(
                "{what} skipped: the last run started at {} ({} ago by the database's clock), \
                 within --min-interval {}; the next run may start at {} (in {}); the command \
                 was not run; exiting with {}",
                timestamp(last_started),
                format_duration(round_ms(ago)),
                format_duration(interval),
                timestamp(next_at),
                format_duration(round_ms(wait)),
                args.conflict_exit_code
            );
            Claimed::Exit(args.conflict_exit_code)
        }
        Err(e)
            if e.as_backend()
                .is_some_and(|b| b.kind() == BackendErrorKind::FencingNotInstalled) =>
        {
            report!(
                "{what} not run: --min-interval records each run's start in the fence table, {}; \
                 or the table is from an older version, which running `eventsource lock \
                 install` again upgrades; the command was not run",
                crate::messages::no_fence_table(&db.shown())
            );
            Claimed::Exit(exit::CONFIG)
        }
        Err(e) => {
            let (mut line, code) =
                crate::read_only::describe("cannot record the run's start", db, &e).await;
            let backend = e.as_backend();
            if backend.is_some_and(|b| b.kind() == BackendErrorKind::NoAnswer) {
                line.push_str(
                    " (--min-interval records it on a second server session: a pooler with no \
                     server connection free, or a role at its connection limit?)",
                );
            } else if backend
                .and_then(|b| b.code())
                .is_some_and(|c| c.code() == "53300")
            {
                line.push_str(
                    " (--min-interval records it on a second server session, beside the \
                     lock's: the role's CONNECTION LIMIT, the database's or max_connections \
                     must leave room for two)",
                );
            }
            report!("{line}; the command was not run");
            Claimed::Exit(code)
        }
    }
}

/// Takes back `claim` (COMMAND could not be started: nothing ran), on a
/// session of its own, while the lock is still held; returns the end of
/// the error line: whether the start still counts.
pub async fn take_back(claim: &Claim, db: &Database) -> String {
    let taken = db::answered(async {
        let client = db.connect().await?;
        client
            .batch_execute("SET statement_timeout = 0")
            .await
            .map_err(Error::from)?;
        PostgresRunLog::new(&client)
            .take_back(claim.at, &claim.previous)
            .await
    })
    .await;
    match taken {
        Ok(_) => format!(
            "its start ({}) was taken back, so it does not count for --min-interval",
            timestamp(claim.at)
        ),
        Err(e) => format!(
            "{}: its start ({}) still counts for --min-interval",
            db::describe_failure("taking back the run's start failed", Some(db), &e),
            timestamp(claim.at)
        ),
    }
}

/// A start as messages and COMMAND's environment show it.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}
