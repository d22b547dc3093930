//! A throwaway PostgreSQL cluster, booted from the installed server
//! binaries, for demos, tests and benchmarks of `pgcoord`.
//!
//! [`TestCluster::start`] runs `initdb` and `pg_ctl` (through
//! `runuser -u postgres` when running as root) in a new temporary directory
//! and starts the server on a free port of 127.0.0.1 with `fsync=off`. A
//! small reaper process stops the server and removes the directory once the
//! process that started it has exited, however it exited; dropping the
//! value does the same at once.
//!
//! This crate is what `eventsource demo` boots when it is given no
//! database; the test kit (`pgcoord-testkit`) builds its fresh-database-per-
//! test harness, its standbys and its PgBouncer on it. It needs the server
//! binaries (`initdb`, `pg_ctl`; on Debian and Ubuntu the `postgresql`
//! package) on `PATH` or under `/usr/lib/postgresql/VERSION/bin`, and as
//! root `runuser` (util-linux) on `PATH` or in `/usr/sbin` or `/sbin`. Unix only.
//!
//! ```no_run
//! let cluster = pgcoord_cluster::TestCluster::start()?;
//! println!("connect to {}", cluster.url("postgres"));
//! drop(cluster); // stops the server and removes its directory
//! # Ok::<(), pgcoord::Error>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Error, Result,
};

mod runuser;
mod standby;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn harness_error(msg: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Other, msg))
}

/// How to stop a cluster, as `pg_ctl stop -m MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Wait for clients to disconnect.
    Smart,
    /// Terminate sessions, then shut down cleanly.
    Fast,
    /// Abort at once, as a crash would.
    Immediate,
}

impl StopMode {
    fn as_str(self) -> &'static str {
        match self {
            StopMode::Smart => "smart",
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        }
    }
}

/// Extra settings for a private cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// `-c name=value` server settings added to the defaults.
    pub settings: Vec<(String, String)>,
}

/// A PostgreSQL cluster in a temporary directory, owned by this process.
///
/// Dropping it stops the server (immediate mode) and removes the directory.
#[derive(Debug)]
pub struct TestCluster {
    bin_dir: PathBuf,
    data_dir: PathBuf,
    port: u16,
    settings: Vec<(String, String)>,
    /// `runuser`, when the server's programs run as `postgres` (started as root).
    runuser: Option<PathBuf>,
}

fn find_bin_dir() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("initdb");
            if candidate.is_file() {
                let real = std::fs::canonicalize(&candidate).unwrap_or(candidate);
                if let Some(parent) = real.parent() {
                    if parent.join("pg_ctl").is_file() {
                        return Ok(parent.to_path_buf());
                    }
                }
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p).ok_or_else(|| {
        harness_error(
            "no PostgreSQL server binaries found (initdb, pg_ctl): install them \
             (e.g. `apt-get install -y postgresql`) or give a database URL",
        )
    })
}

/// Whether this process runs as root (the server then runs as the
/// `postgres` user, as `initdb` refuses root).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A TCP port of 127.0.0.1 that was free a moment ago (the caller retries
/// when another process takes it first).
pub fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| harness_error(format!("cannot find a free port: {e}")))?;
    Ok(listener
        .local_addr()
        .map_err(|e| harness_error(e.to_string()))?
        .port())
}

impl TestCluster {
    /// Creates and starts a private cluster with the default test settings.
    pub fn start() -> Result<Self> {
        Self::start_with(ClusterOptions::default())
    }

    /// Creates and starts a private cluster with extra settings.
    pub fn start_with(options: ClusterOptions) -> Result<Self> {
        let bin_dir = find_bin_dir()?;
        // Looked up before anything is created: a root without runuser
        // cannot run the server at all.
        let runuser = is_root().then(runuser::find_runuser).transpose()?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let data_dir = std::env::temp_dir().join(format!(
            "eventsource-pg-{}-{}-{}",
            std::process::id(),
            n,
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| harness_error(format!("cannot create {}: {e}", data_dir.display())))?;
        let mut cluster = TestCluster {
            bin_dir,
            data_dir,
            port: 0,
            settings: options.settings,
            runuser,
        };
        if cluster.runuser.is_some() {
            cluster.run_checked(
                Command::new("chown")
                    .arg("postgres:")
                    .arg(&cluster.data_dir),
            )?;
        }
        let initdb = cluster.pg_command("initdb");
        let mut initdb = initdb;
        initdb.arg("-D").arg(cluster.data_dir.join("data")).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-locale",
        ]);
        cluster.run_checked(&mut initdb)?;
        cluster.spawn_reaper();
        let mut last_err = None;
        for _ in 0..5 {
            cluster.port = free_port()?;
            match cluster.pg_ctl_start() {
                Ok(()) => return Ok(cluster),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| harness_error("cluster did not start")))
    }

    fn pg_command(&self, program: &str) -> Command {
        let exe = self.bin_dir.join(program);
        if let Some(runuser) = &self.runuser {
            let mut c = Command::new(runuser);
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    fn run_checked(&self, cmd: &mut Command) -> Result<()> {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| harness_error(format!("cannot run {cmd:?}: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(harness_error(format!(
                "{cmd:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }

    fn pg_ctl_start(&self) -> Result<()> {
        let mut opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=400 -c shared_buffers=64MB",
            self.port,
            self.data_dir.display()
        );
        for (k, v) in &self.settings {
            opts.push_str(&format!(" -c {k}={v}"));
        }
        let mut cmd = self.pg_command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir.join("data"))
            .arg("-o")
            .arg(opts)
            .arg("-l")
            .arg(self.data_dir.join("server.log"))
            .args(["-w", "-t", "60", "start"]);
        self.run_checked(&mut cmd)
    }

    /// Stops the server (`pg_ctl stop -m MODE`).
    pub fn stop(&self, mode: StopMode) -> Result<()> {
        let mut cmd = self.pg_command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir.join("data"))
            .args(["-w", "-m", mode.as_str(), "stop"]);
        self.run_checked(&mut cmd)
    }

    /// Starts the server again on the same port after [`stop`](Self::stop).
    pub fn start_again(&self) -> Result<()> {
        self.pg_ctl_start()
    }

    /// Restarts the server (`stop -m MODE`, then start on the same port).
    pub fn restart(&self, mode: StopMode) -> Result<()> {
        self.stop(mode)?;
        self.start_again()
    }

    /// Reloads the server's configuration (`pg_ctl reload`).
    pub fn reload(&self) -> Result<()> {
        let mut cmd = self.pg_command("pg_ctl");
        cmd.arg("-D").arg(self.data_dir.join("data")).arg("reload");
        self.run_checked(&mut cmd)
    }

    /// Writes `contents` to a file of the data directory, owned by the
    /// server's user and readable by it alone (as a key file must be).
    fn write_data_file(&self, name: &str, contents: &str) -> Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.data_dir.join("data").join(name);
        std::fs::write(&path, contents)
            .map_err(|e| harness_error(format!("cannot write {}: {e}", path.display())))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| harness_error(format!("cannot chmod {}: {e}", path.display())))?;
        if self.runuser.is_some() {
            self.run_checked(Command::new("chown").arg("postgres:").arg(&path))?;
        }
        Ok(path)
    }

    /// Replaces `pg_hba.conf` with `contents`, e.g. to require
    /// `scram-sha-256` passwords for a role, and restarts the server (fast
    /// mode) so that it surely applies (a reload is asynchronous).
    pub fn set_hba(&self, contents: &str) -> Result<()> {
        self.write_data_file("pg_hba.conf", contents)?;
        self.restart(StopMode::Fast)
    }

    /// Turns TLS on with a certificate chain and key in PEM (written into
    /// the data directory), then restarts the server (fast mode). Clients
    /// that do not ask for TLS still connect in clear text.
    pub fn enable_tls(&self, cert_pem: &str, key_pem: &str) -> Result<()> {
        self.tls_on(cert_pem, key_pem, None)
    }

    /// [`enable_tls`](Self::enable_tls), and trusts client certificates
    /// signed by `client_ca_pem` (`ssl_ca_file`), for `cert` lines of
    /// `pg_hba.conf`.
    pub fn enable_tls_with_client_ca(
        &self,
        cert_pem: &str,
        key_pem: &str,
        client_ca_pem: &str,
    ) -> Result<()> {
        self.tls_on(cert_pem, key_pem, Some(client_ca_pem))
    }

    fn tls_on(&self, cert_pem: &str, key_pem: &str, client_ca_pem: Option<&str>) -> Result<()> {
        let cert = self.write_data_file("server.crt", cert_pem)?;
        let key = self.write_data_file("server.key", key_pem)?;
        let conf = self.data_dir.join("data").join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)
            .map_err(|e| harness_error(format!("cannot read {}: {e}", conf.display())))?;
        text.push_str(&format!(
            "\nssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
            cert.display(),
            key.display()
        ));
        if let Some(ca) = client_ca_pem {
            let ca = self.write_data_file("client_ca.crt", ca)?;
            text.push_str(&format!("ssl_ca_file = '{}'\n", ca.display()));
        }
        std::fs::write(&conf, text)
            .map_err(|e| harness_error(format!("cannot write {}: {e}", conf.display())))?;
        self.restart(StopMode::Fast)
    }

    /// The TCP port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's directory (data in `data/`, log in `server.log`).
    pub fn dir(&self) -> &Path {
        &self.data_dir
    }

    /// A connection URL for database `db` as the `postgres` superuser.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Makes sure the cluster is stopped and removed even if this process is
    /// killed: a detached shell waits for our pid to vanish, then cleans up.
    fn spawn_reaper(&self) {
        let pg_ctl = self.bin_dir.join("pg_ctl");
        let data = self.data_dir.join("data");
        let stop = if let Some(runuser) = &self.runuser {
            format!(
                "{} -u postgres -- {} -D {} -m immediate stop",
                runuser.display(),
                pg_ctl.display(),
                data.display()
            )
        } else {
            format!(
                "{} -D {} -m immediate stop",
                pg_ctl.display(),
                data.display()
            )
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            dir = self.data_dir.display()
        );
        use std::os::unix::process::CommandExt;
        let _ = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let _ = self.stop(StopMode::Immediate);
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// The crate README's example, compiled as a doctest so that it stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
