//! A semaphore permit holder killed with SIGKILL (a child process of this
//! test binary): its permit comes to a waiter. No timing threshold: only
//! that it happens (within a generous bound that fails the test).

use crate::common;
use crate::fault_support;

use std::process::Stdio;
use std::time::Duration;

use fault_support::private_db;
use pgcoord::coordination::Semaphore;
use pgcoord::PostgresLockManager;

fn worker_manager(url: &str, holder: String) -> PostgresLockManager {
    PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(holder)
        .build()
        .unwrap()
}

/// Run as a child: takes the one permit of `co:crash`, says which slot
/// on stdout, and keeps it until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the tests in this file"]
async fn coordination_holder() {
    let url = std::env::var("ES_CO_HOLD_URL")
        .expect("ES_CO_HOLD_URL: a holder, started by the tests in this file");
    let sem = Semaphore::new(worker_manager(&url, "co-holder".into()), "co:crash", 1).unwrap();
    let permit = sem.acquire(None).await.unwrap();
    println!("held {}", permit.slot());
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_permit_comes_to_a_waiter() {
    use tokio::io::AsyncBufReadExt;
    let (_cluster, db) = private_db(&[]).await;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(common::worker_args(module_path!(), "coordination_holder"))
        .arg("--nocapture")
        .env("ES_CO_HOLD_URL", db.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let held = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the holder said which slot");
        // libtest prints "test NAME ... " on the same line first.
        if let Some((_, slot)) = line.split_once("held ") {
            break slot.trim().to_owned();
        }
    };
    let sem = Semaphore::new(worker_manager(&db.url(), "co-waiter".into()), "co:crash", 1).unwrap();
    assert!(
        sem.try_acquire().await.unwrap().is_none(),
        "the holder's permit is free"
    );
    let waiter = tokio::spawn(async move { sem.acquire(None).await.map(|p| p.slot()) });
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    let slot = tokio::time::timeout(Duration::from_secs(120), waiter)
        .await
        .expect("the permit never came back")
        .unwrap()
        .unwrap();
    assert_eq!(slot.to_string(), held);
}
