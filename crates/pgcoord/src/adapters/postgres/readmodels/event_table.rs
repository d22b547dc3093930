//! [`PostgresEventTable`]: events kept in a PostgreSQL table, as a
//! projection feed that never skips a row committed out of position order.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_postgres::GenericClient;

use super::event_table_errors::{parse_xid, sequence_error, serialization};
use super::listen::{spawn_listener, Listener};
use super::pool::PostgresDatabase;
use super::source::query_error;
use super::watermark::Watermark;
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{EventFeed, FeedSignal};

/// The longest table name accepted (its sequence's name adds 13 bytes to
/// PostgreSQL's 63).
const MAX_NAME: usize = 48;

/// An append-only table of events, written by any number of concurrent
/// transactions, read by a projection runner in position order:
///
/// ```sql
/// CREATE TABLE events (
///     position    BIGINT PRIMARY KEY DEFAULT (CASE WHEN pg_current_xact_id() IS NOT NULL
///                                             THEN nextval('events_position_seq') END),
///     tx          XID8 NOT NULL DEFAULT pg_current_xact_id(),
///     recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
///     payload     JSONB NOT NULL
/// )
/// ```
///
/// A `bigserial` position alone is not enough: transactions take positions
/// in one order and commit in another, so a reader that has seen position
/// 2 cannot tell whether position 1 is a rollback or a transaction still
/// running, and a checkpoint moved past 2 would skip 1 when it commits.
/// This feed reads only up to the position below which every transaction
/// has finished, from transaction-id evidence rather than a timer: the
/// position default takes the writer's transaction id before its position,
/// and the feed reads the sequence, then takes a transaction id of its
/// own, and treats the positions the sequence had handed out as final once
/// `pg_snapshot_xmin(pg_current_snapshot())` (the oldest transaction id
/// still running) has passed that id. A transaction that stays open holds
/// the feed back (events after it wait; none is skipped); so does any long
/// writing transaction of the database, as with every reader of this kind.
///
/// The final position is learnt from one server's history. When the
/// table's sequence is found below it (a standby promoted before it had the
/// last commits, a restored backup), the feed forgets it, warns, and learns
/// it again from that server's evidence before it reads past the
/// checkpoint, so an event appended after such a failover is not skipped
/// because its position was final on the old primary.
///
/// While positions wait for running transactions, the feed raises its own
/// signal after a growing pause (10 ms doubling to 1 s) to look again: the
/// end of a transaction sends nothing.
///
/// [`append`](Self::append) writes an event in the caller's transaction
/// and, with [`listen`](Self::listen), sends a notification that commits
/// with it, which wakes the runner. A rollback sends nothing: the runner's
/// idle interval covers that case.
///
/// A role with SELECT and INSERT on the table and USAGE and SELECT on its
/// sequence can write and read; [`create_table`](Self::create_table) needs
/// CREATE, once.
pub struct PostgresEventTable<E> {
    db: PostgresDatabase,
    table: String,
    watermark: Arc<Mutex<Watermark>>,
    signal: FeedSignal,
    listener: Option<Arc<Listener>>,
    _event: PhantomData<fn() -> E>,
}

impl<E> Clone for PostgresEventTable<E> {
    fn clone(&self) -> Self {
        Self {
            db: self.db.clone(),
            table: self.table.clone(),
            watermark: self.watermark.clone(),
            signal: self.signal.clone(),
            listener: self.listener.clone(),
            _event: PhantomData,
        }
    }
}

impl<E> fmt::Debug for PostgresEventTable<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresEventTable")
            .field("table", &self.table)
            .field("listening", &self.listener.is_some())
            .finish()
    }
}

impl<E: Serialize + DeserializeOwned + Send + Sync> PostgresEventTable<E> {
    /// The event table `table` (an unquoted lowercase identifier of at most
    /// 48 bytes: letters, digits, `_`) on `db`. Performs no I/O.
    pub fn new(db: PostgresDatabase, table: &str) -> Result<Self> {
        check_table_name(table)?;
        Ok(Self {
            db,
            table: table.to_owned(),
            watermark: Arc::default(),
            signal: FeedSignal::new(),
            listener: None,
            _event: PhantomData,
        })
    }

    /// Starts a `LISTEN` session of its own on the table's channel (the
    /// table's name), so a runner wakes when an [`append`](Self::append)
    /// commits. Must be called inside a tokio runtime; the session ends
    /// with the last clone of this feed.
    pub fn listen(mut self) -> Self {
        let listener = spawn_listener(
            &self.db,
            vec![self.table.clone()],
            Box::new(|_, _| true),
            self.signal.clone(),
        );
        self.listener = Some(Arc::new(listener));
        self
    }

    /// The table's name, also its notification channel.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table and its sequence when the table is missing (a
    /// table that exists is left alone, so this needs CREATE only once).
    ///
    /// # Cancel safety
    ///
    /// One script in one implicit transaction: dropped, all or none of it
    /// ran.
    pub async fn create_table(&self) -> Result<()> {
        let client = self.db.get().await?;
        let exists: bool = client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&self.table])
            .await
            .map_err(query_error)?
            .get(0);
        if exists {
            return Ok(());
        }
        let t = &self.table;
        let script = format!(
            "CREATE SEQUENCE IF NOT EXISTS \"{t}_position_seq\";\n\
             CREATE TABLE IF NOT EXISTS \"{t}\" (\n\
               \"position\" BIGINT PRIMARY KEY DEFAULT (CASE WHEN pg_current_xact_id() IS NOT NULL \
                 THEN nextval('\"{t}_position_seq\"') END),\n\
               \"tx\" XID8 NOT NULL DEFAULT pg_current_xact_id(),\n\
               \"recorded_at\" TIMESTAMPTZ NOT NULL DEFAULT now(),\n\
               \"payload\" JSONB NOT NULL);\n\
             ALTER SEQUENCE \"{t}_position_seq\" OWNED BY \"{t}\".\"position\";"
        );
        client.batch_execute(&script).await.map_err(query_error)
    }

    /// Appends `event` in `client`'s transaction (or on its own, on a bare
    /// client) and returns its position; with a notification on the
    /// table's channel that is delivered when the transaction commits.
    ///
    /// # Cancel safety
    ///
    /// One statement: inside a transaction, dropped means rolled back with
    /// it; on its own, the event was written or not.
    pub async fn append<C: GenericClient + Sync>(&self, client: &C, event: &E) -> Result<i64> {
        let sql = format!(
            "WITH e AS (INSERT INTO \"{t}\" (\"payload\") VALUES ($1) RETURNING \"position\") \
             SELECT e.\"position\", pg_notify($2, '') FROM e",
            t = self.table
        );
        let payload = serde_json::to_value(event).map_err(serialization::<E>)?;
        let row = client
            .query_one(&sql, &[&payload, &self.table])
            .await
            .map_err(query_error)?;
        Ok(row.get(0))
    }

    /// Moves the watermark forward as far as the evidence allows; returns
    /// the final position. Two short statements. `known` is the final
    /// position known before the call: a sequence found below it means
    /// another table's history (a failover that lost commits), and the
    /// watermark starts again from nothing.
    async fn final_position<C: GenericClient + Sync>(&self, client: &C, known: i64) -> Result<i64> {
        // The sequence first, then a transaction id (in the same row, so
        // after the read): every position handed out so far belongs to a
        // transaction whose id is below ours.
        let row = client
            .query_one(
                &format!(
                    "SELECT last_value, is_called, pg_current_xact_id()::text FROM \"{}_position_seq\"",
                    self.table
                ),
                &[],
            )
            .await
            .map_err(|e| sequence_error(&self.table, e))?;
        let (last, called, xid): (i64, bool, String) = (row.get(0), row.get(1), row.get(2));
        let hi = if called { last } else { last - 1 };
        let xid = parse_xid(&xid)?;
        // A later statement, so our own transaction above has ended.
        let xmin: String = client
            .query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[])
            .await
            .map_err(query_error)?
            .get(0);
        let xmin = parse_xid(&xmin)?;
        let (safe, held_back) = {
            let mut w = self.lock();
            if w.forget_if_behind(hi, known) {
                tracing::warn!(
                    table = %self.table,
                    sequence = hi,
                    final_position = known,
                    "event table's position sequence moved back (a failover to a standby \
                     that missed the last commits, a restored backup or a restarted \
                     sequence): the feed forgets which positions it knew to be final"
                );
            }
            w.candidate(hi, xid);
            let safe = w.promote(xmin);
            (safe, w.note_held_back())
        };
        if let Some(streak) = held_back {
            // Positions wait for transactions still running, whose end
            // sends nothing: look again after a growing pause (10 ms
            // doubling to 1 s) for as long as that lasts.
            let pause = Duration::from_millis(10u64 << streak.min(7)).min(Duration::from_secs(1));
            let signal = self.signal.clone();
            tokio::spawn(async move {
                tokio::time::sleep(pause).await;
                signal.notify();
            });
        }
        Ok(safe)
    }

    /// Up to `limit` events in `(after, upto]`, in position order; none
    /// when the table's sequence stands below `upto` (a final position
    /// learnt on another history: see [`final_position`](Self::final_position)).
    async fn rows<C: GenericClient + Sync>(
        &self,
        client: &C,
        after: i64,
        upto: i64,
        limit: usize,
    ) -> Result<Vec<(i64, E)>> {
        if upto <= after {
            return Ok(Vec::new());
        }
        let t = &self.table;
        let rows = client
            .query(
                &format!(
                    "SELECT \"position\", \"payload\" FROM \"{t}\" WHERE \"position\" > $1 \
                     AND \"position\" <= $2 AND $2 <= (SELECT CASE WHEN is_called THEN last_value \
                     ELSE last_value - 1 END FROM \"{t}_position_seq\") \
                     ORDER BY \"position\" LIMIT $3"
                ),
                &[&after, &upto, &(limit as i64)],
            )
            .await
            .map_err(query_error)?;
        rows.iter()
            .map(|r| {
                let payload: serde_json::Value = r.try_get(1).map_err(query_error)?;
                let event = serde_json::from_value(payload).map_err(serialization::<E>)?;
                Ok((r.get::<_, i64>(0), event))
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watermark> {
        // Every update is one small step; a panic cannot leave it torn.
        self.watermark.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Refuses a name that is not a plain lowercase identifier (it goes into
/// SQL unquoted-safe, and names the sequence and channel).
pub(crate) fn check_table_name(table: &str) -> Result<()> {
    let ok = !table.is_empty()
        && table.len() <= MAX_NAME
        && table.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && table
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "event table name {table:?}: use 1 to {MAX_NAME} lowercase letters, digits or _, not starting with a digit"
        )))
    }
}

impl<E: Serialize + DeserializeOwned + Send + Sync> EventFeed for PostgresEventTable<E> {
    type Event = E;

    /// Cancel safe: reads (the watermark only moves on evidence, so a
    /// dropped call leaves it right).
    ///
    /// The watermark is moved only when the final positions known would
    /// not fill a batch, or when they did not: a gap (rolled-back
    /// positions, sequence values a crash skipped) can leave a range of
    /// final positions with fewer events than it has positions.
    async fn read_after(&self, after: Option<i64>, limit: usize) -> Result<Vec<(i64, E)>> {
        let after = after.unwrap_or(0);
        let client = self.db.get().await?;
        let known = self.lock().safe();
        if known - after < limit as i64 {
            let upto = self.final_position(&*client, known).await?;
            return self.rows(&*client, after, upto, limit).await;
        }
        let mut events = self.rows(&*client, after, known, limit).await?;
        if events.len() < limit {
            let upto = self.final_position(&*client, known).await?;
            if upto < known {
                // Forgotten (the sequence moved back): nothing was read
                // above, and only what is final now may be.
                return self.rows(&*client, after, upto, limit).await;
            }
            let more = self.rows(&*client, known, upto, limit - events.len());
            events.extend(more.await?);
        }
        Ok(events)
    }

    /// One read at the position, without the watermark: the event was
    /// handed out before, so it is committed, whatever runs meanwhile.
    /// Leaves the watermark as it is (tailing keeps its safeguard).
    async fn read_at(&self, position: i64) -> Result<Option<E>> {
        let client = self.db.get().await?;
        let row = client
            .query_opt(
                &format!(
                    "SELECT \"payload\" FROM \"{}\" WHERE \"position\" = $1",
                    self.table
                ),
                &[&position],
            )
            .await
            .map_err(query_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let payload: serde_json::Value = row.try_get(0).map_err(query_error)?;
        serde_json::from_value(payload)
            .map(Some)
            .map_err(serialization::<E>)
    }

    fn signal(&self) -> Option<FeedSignal> {
        self.listener.as_ref().map(|_| self.signal.clone())
    }

    /// The highest committed position (visible to a fresh snapshot).
    async fn head(&self) -> Result<Option<i64>> {
        let client = self.db.get().await?;
        let row = client
            .query_one(
                &format!("SELECT max(\"position\") FROM \"{}\"", self.table),
                &[],
            )
            .await
            .map_err(query_error)?;
        Ok(row.get(0))
    }
}
