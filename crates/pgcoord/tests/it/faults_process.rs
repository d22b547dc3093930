//! Fault injection on the holder's process: SIGKILL and SIGSTOP.
//!
//! The holder is this test binary run again as a child (`fault_child`).
//! A killed holder's locks are freed by the server at once, so a waiter in
//! another process gets them. A frozen holder keeps its locks: its kernel
//! still answers TCP keepalives, and it cannot hear of anything. Only a
//! server-side `idle_session_timeout` (longer than the manager's liveness
//! interval) bounds that; with it the frozen holder loses its lock, and
//! learns so when it wakes.

use crate::common;
use crate::fault_support;

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fault_support::*;
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock};
use pgcoord_testkit::pg::TestDatabase;
use tokio::sync::mpsc;

const SECS: Duration = Duration::from_secs(30);

/// Run by the tests below in a child process: takes the lock, then prints
/// whether it is lost every 50 ms until killed.
#[tokio::test]
#[ignore = "a child process of the tests in this file"]
async fn fault_child() {
    let var =
        |n: &str| std::env::var(n).expect("a child process, started by the tests in this file");
    let (url, k) = (var("ES_FAULT_URL"), var("ES_FAULT_KEY"));
    let m = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id("child")
        .liveness_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let g = m.acquire(&k, None).await.unwrap();
    println!("HELD");
    loop {
        println!("lost={}", g.is_lost());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Holder {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Holder {
    async fn start(db: &TestDatabase, key: &str) -> Holder {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(common::worker_args(module_path!(), "fault_child"))
            .arg("--nocapture")
            .env("ES_FAULT_URL", db.url())
            .env("ES_FAULT_KEY", key)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut h = Holder { child, lines };
        h.expect("HELD").await;
        h
    }

    /// Waits for a line ending with `want`.
    async fn expect(&mut self, want: &str) {
        tokio::time::timeout(SECS, async {
            while let Some(line) = self.lines.recv().await {
                // The harness prints "test fault_child ... " before it.
                if line.trim().ends_with(want) {
                    return;
                }
            }
            panic!("the child exited before printing {want:?}");
        })
        .await
        .unwrap_or_else(|_| panic!("the child never printed {want:?}"));
    }

    /// Drains what was printed before now, then returns the next status line.
    async fn next_status(&mut self) -> String {
        while self.lines.try_recv().is_ok() {}
        tokio::time::timeout(SECS, async {
            loop {
                let line = self.lines.recv().await.expect("child exited");
                if line.starts_with("lost=") {
                    return line;
                }
            }
        })
        .await
        .expect("no status from the child")
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} failed");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_process_hands_the_lock_to_a_waiter_in_another_process() {
    let (_cluster, db) = private_db(&[]).await;
    let client = db.connect().await.unwrap();
    let k = key("sigkill");
    let mut holder = Holder::start(&db, &k).await;
    let m = common::manager(&db, "survivor");
    assert!(
        m.try_lock(&k)
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))
            .unwrap()
            .is_none(),
        "the child does not hold it"
    );
    let m2 = m.clone();
    let k2 = k.clone();
    let waiter = tokio::spawn(async move { m2.acquire(&k2, Some(SECS)).await });
    common::wait_for_waiters(&client, lock_id_for_key(&k), 1).await;
    holder.child.kill().unwrap(); // SIGKILL
    holder.child.wait().unwrap();
    let g = waiter
        .await
        .unwrap()
        .expect("the waiter never got the killed holder's lock");
    assert!(!g.is_lost());
    g.release().await.unwrap();
    assert_eq!(advisory_locks(&client).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_holder_keeps_its_lock_with_default_server_settings() {
    let (_cluster, db) = private_db(&[]).await;
    let k = key("sigstop");
    let mut holder = Holder::start(&db, &k).await;
    let m = common::manager(&db, "observer");
    holder.signal("-STOP");
    // Longer than every client-side bound (liveness 200 ms + 2 s timeout,
    // keepalives 5 s + 3 x 1 s apply to the dead-peer case only): the
    // server still sees a live, idle session, so the lock stays taken.
    let err = m
        .acquire(&k, Some(Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    holder.signal("-CONT");
    assert_eq!(holder.next_status().await, "lost=false");
    assert!(m
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_session_timeout_bounds_a_frozen_holder() {
    // The manager pings every 200 ms (the child's setting), so only a
    // holder that stops running goes 2 s without a statement.
    let (_cluster, db) = private_db(&[("idle_session_timeout", "2s")]).await;
    let k = key("lease");
    let mut holder = Holder::start(&db, &k).await;
    let m = common::manager(&db, "observer");
    // Alive, the holder keeps the lock well past the idle timeout.
    let err = m
        .acquire(&k, Some(Duration::from_secs(4)))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(holder.next_status().await, "lost=false");
    holder.signal("-STOP");
    let g = m
        .acquire(&k, Some(SECS))
        .await
        .expect("the frozen holder's lock was never freed");
    holder.signal("-CONT");
    // Awake again, it hears that its session is gone.
    holder.expect("lost=true").await;
    g.release().await.unwrap();
}
