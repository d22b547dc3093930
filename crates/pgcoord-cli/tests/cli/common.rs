//! Helpers: the real binary, a fresh database, bounded waits.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pgcoord::inspect::{query_holders, AdvisoryLock};
use pgcoord_testkit::pg::TestDatabase;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_postgres::{Client, NoTls};

/// The bound on any single wait in these tests; reaching it is a failure,
/// never a synchronisation.
pub const BOUND: Duration = Duration::from_secs(120);

pub const BIN: &str = env!("CARGO_BIN_EXE_eventsource");

/// A host (a socket directory that does not exist) where no server ever
/// answers: the libpq default the tests run with, so that nothing reaches
/// a server of the machine's own.
pub const NO_SERVER_HOST: &str = "/nonexistent/pgcoord-test-no-server";

/// `eventsource` with a clean environment: DATABASE_URL only when `db` is
/// given; none of the caller's `PG*` variables, and libpq's defaults aimed
/// at nothing (no server, no password file, no service file).
pub fn eventsource(db: Option<&TestDatabase>) -> Command {
    prepared(Command::new(BIN), db)
}

/// [`eventsource`] started by `wrapper` (say `["nohup"]`): the wrapper's
/// program and arguments, then the tool's path.
pub fn eventsource_under(wrapper: &[&str], db: Option<&TestDatabase>) -> Command {
    let mut c = Command::new(wrapper[0]);
    c.args(&wrapper[1..]).arg(BIN);
    prepared(c, db)
}

fn prepared(mut c: Command, db: Option<&TestDatabase>) -> Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            c.env_remove(key);
        }
    }
    c.env("PGHOST", NO_SERVER_HOST)
        .env("PGPASSFILE", "/nonexistent/pgcoord-test-pgpass")
        .env("PGSERVICEFILE", "/nonexistent/pgcoord-test-pg_service.conf")
        .env("PGSYSCONFDIR", "/nonexistent/pgcoord-test-sysconf");
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
    stderr_lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Running {
    pub fn start(cmd: &mut Command) -> Self {
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().expect("eventsource starts");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let err = child.stderr.take().unwrap();
        let (tx, stderr_lines) = tokio::sync::mpsc::unbounded_channel();
        let stderr = tokio::spawn(async move {
            let mut s = String::new();
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                s.push_str(&line);
                s.push('\n');
                let _ = tx.send(line);
            }
            s
        });
        Self {
            child,
            stdin,
            lines,
            stderr,
            stderr_lines,
        }
    }

    /// Waits for a stderr line containing `needle`; returns it.
    pub async fn expect_stderr(&mut self, needle: &str) -> String {
        loop {
            let line = tokio::time::timeout(BOUND, self.stderr_lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no stderr line with {needle:?} in time"))
                .unwrap_or_else(|| panic!("stderr closed before a line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// The stderr lines the tool wrote so far and no check has read yet.
    pub fn stderr_so_far(&mut self) -> String {
        let mut text = String::new();
        while let Ok(line) = self.stderr_lines.try_recv() {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id().expect("running") as i32)
    }

    pub fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).expect("signal sent");
    }

    /// Waits for the next stdout line and returns it.
    pub async fn next_line(&mut self) -> String {
        tokio::time::timeout(BOUND, self.lines.next_line())
            .await
            .expect("a stdout line in time")
            .expect("read stdout")
            .expect("stdout still open")
    }

    /// Waits for the next stdout line and checks it. On a mismatch the
    /// panic says what the tool wrote to stderr and how it ended, if it has
    /// (a command whose stdout closed unannounced was killed: by whom is
    /// on the tool's stderr).
    pub async fn expect_line(&mut self, want: &str) {
        let line = tokio::time::timeout(BOUND, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no line {want:?} in time"))
            .expect("read stdout");
        if line.as_deref() != Some(want) {
            let mut stderr = String::new();
            let settle = Duration::from_secs(5);
            while let Ok(Some(l)) = tokio::time::timeout(settle, self.stderr_lines.recv()).await {
                stderr.push_str(&l);
                stderr.push('\n');
            }
            let status = self.child.try_wait().ok().flatten();
            panic!(
                "expected the line {want:?}, got {line:?}; the tool's exit status so far: \
                 {status:?}; its stderr so far:\n{stderr}"
            );
        }
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
        "pgcoord-cli-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A login role of its own for `db` (`setup` runs after it is made,
/// `$ROLE` naming it): its name, and `db`'s URL as it.
pub async fn login_role(db: &TestDatabase, name: &str, setup: &str) -> (String, String) {
    let role = format!("{name}_{}", db.name());
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN NOSUPERUSER; {}",
            setup.replace("$ROLE", &role)
        ))
        .await
        .unwrap();
    let url = format!(
        "postgres://{role}@{}",
        db.url().split_once('@').expect("a URL with a user").1
    );
    (role, url)
}

/// A plain session on the server at 127.0.0.1:`port` (database `db`,
/// `application_name` `app`) that holds advisory lock `id`; the lock is
/// held while the client lives.
pub async fn holding_on(port: u16, db: &str, app: &str, id: i64) -> Client {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=postgres dbname={db} application_name={app}"),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    client
}

/// A private cluster of its own, for fault tests (stopping the server,
/// terminating backends, server settings), and a fresh database on it.
pub async fn private_db(
    settings: &[(&str, &str)],
) -> (
    std::sync::Arc<pgcoord_testkit::pg::TestCluster>,
    TestDatabase,
) {
    use pgcoord_testkit::pg::{ClusterOptions, TestCluster};
    let options = ClusterOptions {
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let cluster = std::sync::Arc::new(
        tokio::task::spawn_blocking(move || TestCluster::start_with(options))
            .await
            .unwrap()
            .expect("private cluster"),
    );
    let db = TestDatabase::create_on(cluster.clone()).await.unwrap();
    (cluster, db)
}

/// A streaming hot standby of `primary` (the test kit's `pg_basebackup -R`).
pub async fn standby_of(
    primary: &std::sync::Arc<pgcoord_testkit::pg::TestCluster>,
) -> pgcoord_testkit::pg::TestCluster {
    let p = primary.clone();
    tokio::task::spawn_blocking(move || p.start_standby())
        .await
        .unwrap()
        .expect("a standby")
}

/// Whether process `pid` has ended: gone, or a zombie not yet reaped.
pub fn has_ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "pid (comm) STATE ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// Polls `cond` until it holds, bounded by [`BOUND`] (for facts with no
/// event to wait on: a process's end seen from outside, a file written by
/// another process).
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pid a process wrote to `path` (waits for the file to be complete).
pub async fn read_pid(path: &std::path::Path) -> i32 {
    let mut pid = 0;
    until(
        &format!("a pid in {}", path.display()),
        || match std::fs::read_to_string(path) {
            Ok(text) if text.ends_with('\n') => {
                pid = text.trim().parse().unwrap_or(0);
                pid > 0
            }
            _ => false,
        },
    )
    .await;
    pid
}

/// Terminates every backend whose application_name is `eventsource/HOLDER`.
pub async fn terminate_holder(db: &TestDatabase, holder_id: &str) {
    let admin = db.connect().await.unwrap();
    let n: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid, 30000)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&format!("eventsource/{holder_id}")],
        )
        .await
        .unwrap()
        .get(0);
    assert!(n >= 1, "found the holder's backend");
}

/// A server that accepts TCP connections (up to 8, kept open) and never
/// says a word: its port, and the thread holding them.
pub fn silent_server() -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepting = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(8) {
            held.push(stream);
        }
    });
    (port, accepting)
}
