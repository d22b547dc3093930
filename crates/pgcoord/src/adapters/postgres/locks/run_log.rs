//! [`PostgresRunLog`]: the [`RunLog`] of [`once_per`](crate::coordination::once_per)
//! and `eventsource lock run --min-interval`, in the fence table.
//!
//! Each key's last run start is the `last_run_started` column of its row
//! in `eventsource_lock_fences` (one row per key, whatever the number of
//! runs), written by the install step's SQL function
//! `eventsource_lock_claim_run(lock_ids, keys, interval_us)`. The function
//! creates missing rows (with fence 0: no token handed out yet, so a later
//! fenced acquisition still gets its timeline's first token), locks the keys' rows in lock-id order,
//! and only then reads `clock_timestamp()`: the server's clock at the
//! moment of the claim, never the start of a transaction (`now()`), which
//! may be long before when the claim waited for a row lock or ran inside a
//! transaction that had been open for a while.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::error::SqlState;
use tokio_postgres::GenericClient;

use crate::adapters::postgres::connection::connect::pg_error;
use crate::coordination::{RunLog, RunStart};
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};
use crate::ports::lock_id::checked_lock_id;

const CLAIM: &str = "SELECT started, at, last_started \
     FROM eventsource_lock_claim_run($1::int8[], $2::text[], $3::int8)";
/// The keys' rows locked as the claim locks them (in lock-id order).
const LAST_STARTS: &str = "SELECT f.lock_id, f.last_run_started \
     FROM eventsource_lock_fences f WHERE f.lock_id = ANY ($1::int8[]) \
     ORDER BY f.lock_id FOR NO KEY UPDATE";
/// Only where the start is still the one taken back.
const TAKE_BACK: &str = "UPDATE eventsource_lock_fences f SET last_run_started = p.previous \
     FROM unnest($1::int8[], $2::timestamptz[]) AS p(lock_id, previous) \
     WHERE f.lock_id = p.lock_id AND f.last_run_started = $3";

/// The run log in the fence table (`eventsource lock install` or
/// [`install_fencing`](crate::adapters::postgres::PostgresLockManager::install_fencing) once;
/// again for a database installed by a version without `--min-interval`),
/// over a session or a transaction of the caller's.
#[derive(Debug)]
pub struct PostgresRunLog<'a, C> {
    client: &'a C,
}

impl<'a, C: GenericClient> PostgresRunLog<'a, C> {
    /// A run log that claims on `client` (a `Client` or a `Transaction`;
    /// inside a transaction the record commits with it, and its row locks
    /// last until it ends).
    pub fn new(client: &'a C) -> Self {
        Self { client }
    }
}

impl<C: GenericClient + Sync> PostgresRunLog<'_, C> {
    /// Each key's last recorded start (`None`: none, or no row yet),
    /// locking the rows that exist until the transaction ends. Called in a
    /// transaction before [`RunLog::claim_start`], it gives the starts
    /// that the claim replaces, for [`PostgresRunLog::take_back`].
    pub async fn last_starts(&self, keys: &[&str]) -> Result<Vec<(String, Option<DateTime<Utc>>)>> {
        let ids = keys
            .iter()
            .map(|k| checked_lock_id(k, None))
            .collect::<Result<Vec<_>>>()?;
        let rows = self
            .client
            .query(LAST_STARTS, &[&ids])
            .await
            .map_err(|e| Error::Backend(claim_error(e)))?;
        Ok(keys
            .iter()
            .zip(&ids)
            .map(|(key, id)| {
                let row = rows.iter().find(|r| r.get::<_, i64>(0) == *id);
                (key.to_string(), row.and_then(|r| r.get(1)))
            })
            .collect())
    }

    /// Takes back a start recorded at `at` whose run never ran (its
    /// command could not be started): each key's start is put back to
    /// what it was (`previous`, from [`PostgresRunLog::last_starts`];
    /// `None` removes the record), where it is still `at`. Returns how many
    /// keys' starts were taken back.
    pub async fn take_back(
        &self,
        at: DateTime<Utc>,
        previous: &[(String, Option<DateTime<Utc>>)],
    ) -> Result<u64> {
        let ids = previous
            .iter()
            .map(|(k, _)| checked_lock_id(k, None))
            .collect::<Result<Vec<_>>>()?;
        let starts: Vec<Option<DateTime<Utc>>> = previous.iter().map(|(_, p)| *p).collect();
        self.client
            .execute(TAKE_BACK, &[&ids, &starts, &at])
            .await
            .map_err(|e| Error::Backend(claim_error(e)))
    }
}

impl<C: GenericClient + Sync> RunLog for PostgresRunLog<'_, C> {
    /// # Cancel safety
    ///
    /// Leak-free, not cancel safe: one statement, which a dropped call
    /// abandons; on a plain session it may still have committed (the start
    /// then counts), in a transaction it commits only with the transaction.
    async fn claim_start(&self, keys: &[&str], min_interval: Duration) -> Result<RunStart> {
        let mut ids = Vec::with_capacity(keys.len());
        let mut names = Vec::with_capacity(keys.len());
        for key in keys {
            let id = checked_lock_id(key, None)?;
            if !ids.contains(&id) {
                ids.push(id);
                names.push(key.to_string());
            }
        }
        if ids.is_empty() {
            return Err(Error::InvalidArgument("claim_start needs a key".into()));
        }
        let micros = i64::try_from(min_interval.as_micros()).map_err(|_| {
            Error::InvalidArgument(format!("min_interval {min_interval:?} is too long"))
        })?;
        let row = self
            .client
            .query_one(CLAIM, &[&ids, &names, &micros])
            .await
            .map_err(|e| Error::Backend(claim_error(e)))?;
        let started: bool = row.get(0);
        let at: DateTime<Utc> = row.get(1);
        if started {
            return Ok(RunStart::Recorded { at });
        }
        let last_started: DateTime<Utc> = row.get(2);
        let next_at = last_started + chrono::Duration::microseconds(micros);
        Ok(RunStart::TooSoon {
            last_started,
            now: at,
            next_at,
        })
    }
}

/// A missing table, function or column is the install step not run (or
/// run by a version without the run log).
fn claim_error(e: tokio_postgres::Error) -> BackendError {
    let missing = matches!(
        e.code(),
        Some(c) if *c == SqlState::UNDEFINED_TABLE
            || *c == SqlState::UNDEFINED_FUNCTION
            || *c == SqlState::UNDEFINED_COLUMN
    );
    tracing::debug!(error = ?e, "run log claim failed");
    if missing {
        return BackendError::new(
            BackendErrorKind::FencingNotInstalled,
            "the run log (eventsource_lock_fences.last_run_started and \
             eventsource_lock_claim_run) is missing: run \
             PostgresLockManager::install_fencing() or `eventsource lock install` once \
             (again for a database installed by an older version)",
        )
        .with_source(e);
    }
    pg_error(e, BackendErrorKind::Query)
}
