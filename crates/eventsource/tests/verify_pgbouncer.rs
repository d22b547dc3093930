//! `verify()` behind a real transaction-mode pooler (PgBouncer), which
//! silently breaks session locks: it must say so.
//!
//! Needs the `pgbouncer` binary (Debian package `pgbouncer`). Without it the
//! test says so and passes, unless `EVENTSOURCE_REQUIRE_PGBOUNCER=1`, which
//! makes its absence a failure (CI sets it after installing the package).
#![cfg(feature = "postgres")]

mod common;
mod fault_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use eventsource::adapters::postgres::{PostgresLockManager, VerifyProblem};
use eventsource::BackendErrorKind;
use eventsource_testkit::locks::eventually_async;

fn pgbouncer_binary() -> Option<PathBuf> {
    [
        "/usr/sbin/pgbouncer",
        "/usr/bin/pgbouncer",
        "/usr/local/bin/pgbouncer",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A PgBouncer in `pool_mode` in front of `upstream_port`.
struct Bouncer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Bouncer {
    fn start(bin: &Path, upstream_port: u16, pool_mode: &str) -> Bouncer {
        let dir =
            std::env::temp_dir().join(format!("eventsource-pgbouncer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n\
                 * = host=127.0.0.1 port={upstream_port} user=postgres\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = any\n\
                 pool_mode = {pool_mode}\n\
                 default_pool_size = 4\n\
                 ignore_startup_parameters = options,extra_float_digits\n\
                 logfile = {log}\n",
                log = dir.join("pgbouncer.log").display()
            ),
        )
        .unwrap();
        let mut cmd = if is_root() {
            // PgBouncer refuses to run as root.
            let ok = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(ok.success());
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin);
            c
        } else {
            Command::new(bin)
        };
        let child = cmd
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Bouncer { child, dir, port }
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        // runuser forwards SIGTERM to pgbouncer.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pgbouncer_or_skip() -> Option<PathBuf> {
    let bin = pgbouncer_binary();
    if bin.is_none() {
        assert!(
            std::env::var("EVENTSOURCE_REQUIRE_PGBOUNCER").as_deref() != Ok("1"),
            "pgbouncer is required (EVENTSOURCE_REQUIRE_PGBOUNCER=1) but not installed"
        );
        eprintln!("SKIPPED: no pgbouncer binary (apt-get install pgbouncer)");
    }
    bin
}

/// `verify()` through a PgBouncer in `pool_mode` (after checking that a
/// direct connection passes).
async fn verify_through(bin: &Path, pool_mode: &str) -> eventsource::Result<()> {
    let (cluster, db) = fault_support::private_db(&[]).await;
    let bouncer = Bouncer::start(bin, cluster.port(), pool_mode);
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/{}",
        bouncer.port,
        db.name()
    );
    let config: tokio_postgres::Config = url.parse().unwrap();
    eventually_async("pgbouncer accepts connections", || {
        let config = config.clone();
        async move {
            let connect = config.connect(tokio_postgres::NoTls);
            match tokio::time::timeout(Duration::from_secs(2), connect).await {
                Ok(Ok((client, conn))) => {
                    tokio::spawn(conn);
                    client.simple_query("SELECT 1").await.is_ok()
                }
                _ => false,
            }
        }
    })
    .await;
    common::manager(&db, "direct").verify().await.unwrap();
    let m = PostgresLockManager::from_url(&format!("{url}?sslmode=disable")).unwrap();
    m.verify().await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_catches_pgbouncer_in_transaction_mode() {
    let Some(bin) = pgbouncer_or_skip() else {
        return;
    };
    let err = verify_through(&bin, "transaction").await.unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(backend.kind(), BackendErrorKind::NotPostgres, "{err:?}");
    let problem = std::error::Error::source(backend)
        .and_then(|s| s.downcast_ref::<VerifyProblem>())
        .expect("a VerifyProblem source");
    assert!(
        matches!(
            problem,
            VerifyProblem::SessionNotKept { .. } | VerifyProblem::SharedBackend { .. }
        ),
        "{problem:?}"
    );
    assert!(err.to_string().contains("pool"), "{err}");
    eprintln!("verify through PgBouncer (transaction mode): {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_in_session_mode_passes() {
    let Some(bin) = pgbouncer_or_skip() else {
        return;
    };
    verify_through(&bin, "session").await.unwrap();
}
