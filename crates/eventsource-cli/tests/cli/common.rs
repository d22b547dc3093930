//! Helpers: the real binary, a fresh database, bounded waits.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use eventsource::adapters::postgres::{query_holders, AdvisoryLock};
use eventsource_testkit::pg::TestDatabase;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_postgres::{Client, NoTls};

/// The bound on any single wait in these tests; reaching it is a failure,
/// never a synchronisation.
pub const BOUND: Duration = Duration::from_secs(120);

pub const BIN: &str = env!("CARGO_BIN_EXE_eventsource");

/// `eventsource` with a clean environment: DATABASE_URL only when `db` is given.
pub fn eventsource(db: Option<&TestDatabase>) -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("DATABASE_URL")
        .env_remove("EVENTSOURCE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(db) = db {
        c.env("DATABASE_URL", db.url());
    }
    c
}

#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The exit code, or 128+N for death by signal N.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().expect("exited or signalled"))
}

/// Runs to completion (bounded).
pub async fn output(cmd: &mut Command) -> Output {
    let out = tokio::time::timeout(BOUND, cmd.output())
        .await
        .expect("eventsource did not finish")
        .expect("eventsource runs");
    Output {
        code: exit_code(out.status),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A running `eventsource`, its stdout read line by line.
pub struct Running {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: tokio::task::JoinHandle<String>,
}

impl Running {
    pub fn start(cmd: &mut Command) -> Self {
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().expect("eventsource starts");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut err = child.stderr.take().unwrap();
        let stderr = tokio::spawn(async move {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s).await;
            s
        });
        Self {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id().expect("running") as i32)
    }

    pub fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).expect("signal sent");
    }

    /// Waits for the next stdout line and checks it.
    pub async fn expect_line(&mut self, want: &str) {
        let line = tokio::time::timeout(BOUND, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no line {want:?} in time"))
            .expect("read stdout");
        assert_eq!(line.as_deref(), Some(want));
    }

    /// Writes a line to the command's stdin.
    pub async fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin piped");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Waits for the exit; the rest of stdout (until every writer closed it) and stderr.
    pub async fn finish(mut self) -> Output {
        drop(self.stdin.take());
        let status = tokio::time::timeout(BOUND, self.child.wait())
            .await
            .expect("eventsource did not exit")
            .unwrap();
        let mut rest = String::new();
        let mut lines = self.lines;
        tokio::time::timeout(BOUND, async {
            while let Some(l) = lines.next_line().await.unwrap() {
                rest.push_str(&l);
                rest.push('\n');
            }
        })
        .await
        .expect("stdout stays open: some process still writes to it");
        let stderr = tokio::time::timeout(BOUND, self.stderr)
            .await
            .expect("stderr closed")
            .unwrap();
        Output {
            code: exit_code(status),
            stdout: rest,
            stderr,
        }
    }
}

pub async fn database() -> TestDatabase {
    TestDatabase::create().await.expect("test database")
}

/// A session with a chosen application_name (its connection task spawned).
pub async fn session(db: &TestDatabase, application_name: &str) -> Client {
    let mut config = db.config();
    config.application_name(application_name);
    let (client, conn) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// Polls `query_holders` until `pred` holds for `key`'s entry (or its
/// absence). PostgreSQL has no event for "someone started waiting", so this
/// polls, bounded by [`BOUND`].
pub async fn wait_for(
    client: &Client,
    key: &str,
    what: &str,
    pred: impl Fn(Option<&AdvisoryLock>) -> bool,
) -> Option<AdvisoryLock> {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let locks = query_holders(client, &[key]).await.expect("query_holders");
        if pred(locks.first()) {
            return locks.into_iter().next();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw {what} on {key}: {locks:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn is_free(client: &Client, key: &str) -> bool {
    query_holders(client, &[key]).await.unwrap().is_empty()
}

/// A fresh scratch directory under the system temp dir, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn scratch_dir() -> Scratch {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "eventsource-cli-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}
