//! What the rebuild tests share: a handler that says which version wrote a
//! row and whether it ran warming up, a reader that checks every read, and
//! the rebuild's type.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pgcoord::readmodels::postgres::{
    PostgresDatabase, PostgresEventTable, PostgresReadModelRepository,
};
use pgcoord::readmodels::{warming_up, ReadModelHandler, ReadModelMeta, ReadModelRepository};
use pgcoord::readmodels::{ProjectionRebuild, ProjectionRunner, ReadModelProjection};
use tokio_util::sync::CancellationToken;

use super::support::*;

/// Writes each event's row with `"{marker} {n}"`, and remembers what
/// [`warming_up`] said for each event. At `stall_at` it says so on the
/// channel and never finishes (for the test to drop the run). Takes
/// `delay` per event (for a kill to land inside a batch).
pub struct Marked {
    pub marker: &'static str,
    pub delay: std::time::Duration,
    pub flags: Mutex<Vec<(i64, bool)>>,
    pub stall_at: Mutex<Option<(i64, tokio::sync::oneshot::Sender<()>)>>,
}

impl Marked {
    pub fn new(marker: &'static str) -> Self {
        Self {
            marker,
            delay: std::time::Duration::ZERO,
            flags: Mutex::default(),
            stall_at: Mutex::default(),
        }
    }

    pub fn stalling_at(marker: &'static str, n: i64) -> (Self, tokio::sync::oneshot::Receiver<()>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let h = Self::new(marker);
        *h.stall_at.lock().unwrap() = Some((n, tx));
        (h, rx)
    }

    pub fn slow(marker: &'static str, delay: std::time::Duration) -> Self {
        Self {
            delay,
            ..Self::new(marker)
        }
    }

    pub fn seen(&self) -> Vec<i64> {
        self.flags.lock().unwrap().iter().map(|(n, _)| *n).collect()
    }

    pub fn all_warming_up(&self, expected: bool) -> bool {
        let flags = self.flags.lock().unwrap();
        !flags.is_empty() && flags.iter().all(|(_, w)| *w == expected)
    }
}

impl ReadModelHandler for Marked {
    type Model = Seen;
    type Event = Ev;

    async fn handle<R: ReadModelRepository<Seen>>(
        &self,
        event: &Ev,
        repo: &R,
    ) -> pgcoord::Result<()> {
        let stall = {
            let mut at = self.stall_at.lock().unwrap();
            match at.take() {
                Some((n, tx)) if n == event.n => Some(tx),
                other => {
                    *at = other;
                    None
                }
            }
        };
        if let Some(tx) = stall {
            let _ = tx.send(());
            std::future::pending::<()>().await;
        }
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let row = match repo.get(id_of(event.n)).await? {
            Some(mut seen) => {
                seen.text.push_str(" (again)");
                seen
            }
            None => Seen {
                meta: ReadModelMeta::new(id_of(event.n)),
                position: event.n,
                text: format!("{} {}", self.marker, event.n),
            },
        };
        repo.save(&row).await?;
        self.flags.lock().unwrap().push((event.n, warming_up()));
        Ok(())
    }
}

pub type Repo = PostgresReadModelRepository<Seen, PostgresDatabase>;
pub type Rebuild = ProjectionRebuild<Marked, Repo, PostgresEventTable<Ev>>;
pub type LiveRunner = ProjectionRunner<Marked, Repo, PostgresEventTable<Ev>>;

pub fn live_runner(db: &PostgresDatabase, feed: &PostgresEventTable<Ev>) -> Arc<LiveRunner> {
    let projection =
        ReadModelProjection::new(Marked::new("live"), db.repository::<Seen>()).named("seen");
    Arc::new(
        ProjectionRunner::new(projection, feed.clone())
            .batch_size(4)
            .idle_interval(None),
    )
}

pub fn rebuild_with(
    db: &PostgresDatabase,
    feed: &PostgresEventTable<Ev>,
    handler: Marked,
) -> Arc<Rebuild> {
    let projection = ReadModelProjection::new(handler, db.repository::<Seen>()).named("seen");
    Arc::new(ProjectionRebuild::new(projection, feed.clone()).batch_size(4))
}

/// One statement (one snapshot): the live checkpoint, the rows of the
/// table readers see, their distinct positions, the highest, and the
/// rebuilt ones.
const READ: &str = r#"SELECT
    (SELECT "position" FROM "eventsource_projection_checkpoints" WHERE "projection" = 'seen'),
    (SELECT count(*) FROM "seen"),
    (SELECT count(DISTINCT "position") FROM "seen"),
    (SELECT coalesce(max("position"), 0) FROM "seen"),
    (SELECT count(*) FROM "seen" WHERE "text" LIKE 'rebuilt %')"#;

/// What the reader saw.
#[derive(Default)]
pub struct Reads {
    pub total: AtomicU64,
    pub rebuilt: AtomicU64,
}

/// Reads in a loop until `stop`: every read must be a whole table, as
/// far as the live checkpoint says (rows of exactly positions
/// 1..=checkpoint, each once). `first` is told after the first read.
pub async fn read_until(
    db: PostgresDatabase,
    stop: CancellationToken,
    reads: Arc<Reads>,
    first: tokio::sync::oneshot::Sender<()>,
) {
    let mut first = Some(first);
    loop {
        let client = db.get().await.unwrap();
        let row = client.query_one(READ, &[]).await.unwrap();
        drop(client);
        let checkpoint: i64 = row.get::<_, Option<i64>>(0).unwrap_or(0);
        let (rows, distinct, max, rebuilt): (i64, i64, i64, i64) =
            (row.get(1), row.get(2), row.get(3), row.get(4));
        assert_eq!(
            rows, checkpoint,
            "rows read against the checkpoint (a half-built table?)"
        );
        assert_eq!(
            (distinct, max),
            (rows, rows),
            "rows of positions 1..={checkpoint}, each once"
        );
        reads.total.fetch_add(1, Ordering::Relaxed);
        if rebuilt > 0 {
            assert_eq!(rebuilt, rows.min(rebuilt), "rebuilt rows");
            reads.rebuilt.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        if stop.is_cancelled() {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// Whether `table` exists.
pub async fn exists(db: &PostgresDatabase, table: &str) -> bool {
    let client = db.get().await.unwrap();
    client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .unwrap()
        .get(0)
}

/// The checkpoint row `name`, if there is one.
pub async fn checkpoint_row(db: &PostgresDatabase, name: &str) -> Option<i64> {
    let client = db.get().await.unwrap();
    client
        .query_opt(
            r#"SELECT "position" FROM "eventsource_projection_checkpoints" WHERE "projection" = $1"#,
            &[&name],
        )
        .await
        .unwrap()
        .map(|r| r.get(0))
}
