//! What every scenario gets (`Ctx`), what it hands back (`RunOut`,
//! `ScenarioReport`), and the database it runs against.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::postgres::LibpqEnv;
use pgcoord::ConnectOptions;
use pgcoord_testkit::pg::{ClusterOptions, TestCluster, TestDatabase};
use pgcoord_workloads::LockTableRoom;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::task::JoinHandle;

use crate::probe::Monitor;
use crate::stats::{Window, WorkerOut};
use crate::transport::Transport;
use crate::{alloc, Res};

/// What every scenario needs.
#[derive(Clone)]
pub struct Ctx {
    /// The connection settings, pinned to the run's transport
    /// ([`transport::resolve`](crate::transport::resolve)): every session
    /// of the run, ours and the baselines', is made from these.
    pub options: ConnectOptions,
    /// TLS or plaintext, the same for every session.
    pub transport: Transport,
    pub url: String,
    pub monitor: Arc<Monitor>,
    pub warmup: Duration,
    pub measure: Duration,
    pub quick: bool,
    pub batched_sessions: Option<usize>,
    /// `--trials`: trials of the coordination scenarios (None: their defaults).
    pub trials: Option<usize>,
    /// Why `held10k` / `capacity` cannot run on this server (lock table too small), if so.
    pub lock_table_short: Option<String>,
    /// Slots in the server's shared lock table (None: unknown).
    pub lock_table_slots: Option<u64>,
    /// Whether the bench started its own server (no `DATABASE_URL`): the
    /// scenarios that stop servers run only then.
    pub private_server: bool,
}

/// What was sampled while a window was open.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sampled {
    pub allocs: u64,
    pub alloc_bytes: u64,
    pub connections: u32,
    pub statements: Option<(i64, i64)>,
    /// CPU time of this process over the window.
    pub client_cpu_ns: Option<u64>,
    /// CPU time of the scenario's server backends over the window (local server only).
    pub server_cpu_ns: Option<u64>,
}

impl Ctx {
    /// Opens a measured window after the warm-up and samples, in the
    /// background, allocations over the window and, at its midpoint, the
    /// sessions whose `application_name` matches `app_pattern` (LIKE).
    pub fn start_window(&self, app_pattern: &str) -> (Window, JoinHandle<Res<Sampled>>) {
        self.start_window_after(self.warmup, app_pattern)
    }

    /// [`start_window`](Self::start_window) with a warm-up of `warmup`.
    pub fn start_window_after(
        &self,
        warmup: Duration,
        app_pattern: &str,
    ) -> (Window, JoinHandle<Res<Sampled>>) {
        let w = Window::after(warmup, self.measure);
        let monitor = self.monitor.clone();
        let pattern = app_pattern.to_owned();
        let probe = tokio::spawn(async move {
            tokio::time::sleep_until(w.start.into()).await;
            let (a0, b0) = alloc::totals();
            let s0 = monitor.lock_statements().await?;
            let c0 = alloc::cpu_ns(None);
            let pids = monitor.pids_like(&pattern).await?;
            let server_cpu = |pids: &[i32]| -> Option<u64> {
                if pids.is_empty() {
                    return None;
                }
                pids.iter().map(|p| alloc::cpu_ns(Some(*p))).sum()
            };
            let p0 = server_cpu(&pids);
            tokio::time::sleep_until((w.start + (w.end - w.start) / 2).into()).await;
            let connections = monitor.sessions_like(&pattern).await?;
            tokio::time::sleep_until(w.end.into()).await;
            let (a1, b1) = alloc::totals();
            let c1 = alloc::cpu_ns(None);
            let p1 = server_cpu(&pids);
            let s1 = monitor.lock_statements().await?;
            let statements = s0.zip(s1).map(|(a, b)| (b.0 - a.0, b.1 - a.1));
            Ok(Sampled {
                allocs: a1 - a0,
                alloc_bytes: b1 - b0,
                connections,
                statements,
                client_cpu_ns: c0.zip(c1).map(|(a, b)| b.saturating_sub(a)),
                server_cpu_ns: p0.zip(p1).map(|(a, b)| b.saturating_sub(a)),
            })
        });
        (w, probe)
    }
}

/// One run of a throughput scenario.
pub struct RunOut {
    pub w: Window,
    pub workers: Vec<WorkerOut>,
    pub sampled: Sampled,
    /// Scenario-specific figures of this round (kept per round in the report).
    pub extra: Map<String, Value>,
}

impl RunOut {
    pub async fn finish(
        w: Window,
        workers: Vec<WorkerOut>,
        probe: JoinHandle<Res<Sampled>>,
    ) -> Res<Self> {
        let sampled = probe.await??;
        Ok(Self {
            w,
            workers,
            sampled,
            extra: Map::new(),
        })
    }

    /// Adds a scenario-specific figure for this round.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }
}

/// One scenario's line in the report; `extra` holds scenario-specific figures.
#[derive(Debug, Serialize)]
pub struct ScenarioReport {
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub connections: u32,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The database to run against: `DATABASE_URL`, or a throwaway cluster
/// (with `max_locks_per_transaction=256`, so 10,000 locks fit, and
/// `pg_stat_statements` preloaded for exact statement counts).
pub async fn setup() -> Res<(ConnectOptions, String, Option<TestDatabase>)> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => {
            let options = user_options(&url)?;
            for w in options.warnings() {
                eprintln!("note: {w}");
            }
            Ok((options, url, None))
        }
        _ => {
            let cluster = tokio::task::spawn_blocking(|| {
                TestCluster::start_with(ClusterOptions {
                    settings: vec![
                        ("max_locks_per_transaction".into(), "256".into()),
                        // Exact statement counts per scenario (batching), see probe.rs.
                        (
                            "shared_preload_libraries".into(),
                            "pg_stat_statements".into(),
                        ),
                        ("pg_stat_statements.track_utility".into(), "off".into()),
                        ("pg_stat_statements.save".into(), "off".into()),
                    ],
                })
            })
            .await??;
            let db = TestDatabase::create_on(Arc::new(cluster)).await?;
            let url = db.url();
            Ok((ConnectOptions::parse(&url)?, url, Some(db)))
        }
    }
}

/// The settings of a user's `DATABASE_URL` (or a child process's copy of
/// it), with libpq's rules: what the URL leaves out comes from `PGPASSWORD`,
/// the password file (`PGPASSFILE`, else `~/.pgpass`), `PGSSLMODE` and the
/// other `PG*` variables, as `psql` would take it.
pub fn user_options(url: &str) -> Res<ConnectOptions> {
    options_in(url, &LibpqEnv::from_process())
}

/// [`user_options`] over a given environment.
fn options_in(url: &str, env: &LibpqEnv) -> Res<ConnectOptions> {
    Ok(ConnectOptions::resolve(Some(url), env)?)
}

/// Locks the scenarios that hold 10,000 at once need room for.
pub const HELD_LOCKS: usize = 10_000;

/// Why the server's shared lock table cannot take [`HELD_LOCKS`] more locks
/// with room to spare (None: it can). The table has
/// `max_locks_per_transaction` slots per backend slot (`max_connections`,
/// autovacuum and background workers, WAL senders, prepared transactions:
/// [`pgcoord_workloads::lock_table_room`], as `eventsource lock bench`
/// counts them); filling it breaks every session on the server (53200),
/// so ask for twice the locks held.
pub fn lock_table_short(room: &LockTableRoom) -> Option<String> {
    let need = 2 * HELD_LOCKS as i64;
    (room.slots < need).then(|| {
        format!(
            "the server's lock table has {} slots (max_locks_per_transaction={} x {} backend \
             slots: max_connections={}, autovacuum and background workers, WAL senders, \
             prepared transactions); holding {HELD_LOCKS} needs at least {need} \
             (raise max_locks_per_transaction)",
            room.slots, room.max_locks_per_transaction, room.backend_slots, room.max_connections
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(per: i64, conns: i64, backends: i64) -> LockTableRoom {
        LockTableRoom {
            max_locks_per_transaction: per,
            max_connections: conns,
            backend_slots: backends,
            slots: per * backends,
        }
    }

    #[test]
    fn a_database_url_follows_libpqs_environment() {
        let env =
            LibpqEnv::from_vars([("PGPASSWORD", "from-env-S3cret"), ("PGSSLMODE", "disable")]);
        let o = options_in("postgres://app@db.example:5433/app", &env).unwrap();
        assert_eq!(o.config().get_password(), Some(&b"from-env-S3cret"[..]));
        assert_eq!(o.ssl_mode(), pgcoord::postgres::SslMode::Disable);
        // The sqlx baselines get the same password.
        let s = crate::transport::sqlx_options(&o, "bench/t").unwrap();
        assert_eq!(s.get_port(), 5433);
        // The URL wins over the environment.
        let o = options_in("postgres://app:in-url@db.example/app", &env).unwrap();
        assert_eq!(o.config().get_password(), Some(&b"in-url"[..]));
    }

    #[test]
    fn the_lock_table_counts_every_backend_slot() {
        // Debian's defaults: 64 x (100 + 3 + 1 + 8 + 10 + 0) = 7,808.
        let why = lock_table_short(&room(64, 100, 122)).unwrap();
        assert!(why.contains("7808 slots"), "{why}");
        assert!(why.contains("122 backend slots"), "{why}");
        assert_eq!(lock_table_short(&room(256, 100, 122)), None);
    }
}
