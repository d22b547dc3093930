//! A real PgBouncer in front of a test server, in its stock configuration.
//!
//! Only what a pooler cannot run without is set: where it listens, where the
//! server is, `auth_type = any` (the test cluster trusts local connections)
//! and `pool_mode`. Nothing else, `ignore_startup_parameters` included, so a
//! client that works here works behind a PgBouncer as Debian installs it.
//!
//! Needs the `pgbouncer` binary (Debian package `pgbouncer`).
//! [`pgbouncer_binary`] finds it; tests skip without it unless
//! `EVENTSOURCE_REQUIRE_PGBOUNCER=1` (see [`pgbouncer_or_skip`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use pgcoord::Result;

use crate::pg::{free_port, harness_error, is_root};

/// Where the `pgbouncer` binary is, if installed.
pub fn pgbouncer_binary() -> Option<PathBuf> {
    [
        "/usr/sbin/pgbouncer",
        "/usr/bin/pgbouncer",
        "/usr/local/bin/pgbouncer",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// The binary, or `None` after printing that the test is skipped. Panics
/// when `EVENTSOURCE_REQUIRE_PGBOUNCER=1` and there is none (CI sets it).
pub fn pgbouncer_or_skip() -> Option<PathBuf> {
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

/// A running PgBouncer; dropping it stops it and removes its directory.
#[derive(Debug)]
pub struct Bouncer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Bouncer {
    /// Starts PgBouncer in `pool_mode` (`session`, `transaction`,
    /// `statement`) in front of the server on 127.0.0.1:`upstream_port`,
    /// connecting upstream as `postgres`.
    pub fn start(bin: &Path, upstream_port: u16, pool_mode: &str) -> Result<Bouncer> {
        Self::start_with(bin, upstream_port, pool_mode, "")
    }

    /// [`start`](Self::start) with `settings` (`name = value` lines) added
    /// to its `[pgbouncer]` section, for a test of a setting changed on
    /// purpose.
    pub fn start_with(
        bin: &Path,
        upstream_port: u16,
        pool_mode: &str,
        settings: &str,
    ) -> Result<Bouncer> {
        let dir =
            std::env::temp_dir().join(format!("eventsource-pgbouncer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).map_err(|e| harness_error(e.to_string()))?;
        let port = free_port()?;
        let ini = dir.join("pgbouncer.ini");
        let config = format!(
            "[databases]\n\
             * = host=127.0.0.1 port={upstream_port} user=postgres\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = any\n\
             pool_mode = {pool_mode}\n\
             logfile = {log}\n\
             {settings}\n",
            log = dir.join("pgbouncer.log").display()
        );
        std::fs::write(&ini, config).map_err(|e| harness_error(e.to_string()))?;
        let mut cmd = if is_root() {
            // PgBouncer refuses to run as root.
            let owned = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()
                .map_err(|e| harness_error(e.to_string()))?;
            if !owned.success() {
                return Err(harness_error("chown of the PgBouncer directory failed"));
            }
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
            .map_err(|e| harness_error(format!("cannot start pgbouncer: {e}")))?;
        Ok(Bouncer { child, dir, port })
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for database `db` through the pooler.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Its log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
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
