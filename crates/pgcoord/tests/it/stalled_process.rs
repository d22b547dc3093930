//! A process that stops while it waits or holds (SIGSTOP, a Ctrl-Z of the
//! tool, a debugger, a paused virtual machine) is not a server that did
//! not answer. Here the stop is this test's runtime thread blocked past
//! every limit: the server answers meanwhile (it ends a wait at its
//! deadline, it answers a holder's ping), and the caller reads that answer
//! when its runtime runs again.

use crate::common;
use crate::fault_support;

use std::time::Duration;

use common::{connect, manager, shared_db, wait_for_waiters};
use fault_support::{holder_pid, key, private_db};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pgcoord::{lock_id_for_key, DistributedLock, PostgresLockManager};

/// The wait's deadline.
const DEADLINE: Duration = Duration::from_millis(300);

/// The stop: past the deadline, the default liveness timeout (2 s, the
/// limit for a wait's answer past its deadline) and the one-second
/// backstop of a wait line.
const STOP: Duration = Duration::from_millis(3500);

async fn stopped_while_waiting(single_session: bool) {
    let db = shared_db().await;
    let k = format!("stalled:{single_session}:{}", uuid::Uuid::new_v4());
    let id = lock_id_for_key(&k);
    let holder = connect(&db.url()).await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .holder_id("stalled")
        .single_session(single_session)
        .build()
        .unwrap();
    let waiter = {
        let (m, k) = (m.clone(), k.clone());
        tokio::spawn(async move { m.acquire(&k, Some(DEADLINE)).await })
    };
    wait_for_waiters(&holder, id, 1).await;
    // The stop: nothing of this (single-threaded) runtime runs meanwhile.
    std::thread::sleep(STOP);
    match waiter.await.unwrap() {
        Err(e) if e.is_timeout() && e.as_backend().is_none() => {}
        Err(e) => panic!("single_session {single_session}: expected a lock timeout, got {e}"),
        Ok(_) => panic!("single_session {single_session}: granted a key held elsewhere"),
    }
    // The manager still works, and believes it holds nothing.
    assert!(!m.is_held(&k));
    holder
        .execute("SELECT pg_advisory_unlock($1)", &[&id])
        .await
        .unwrap();
    let g = m.acquire(&k, Some(Duration::from_secs(10))).await.unwrap();
    g.release().await.unwrap();
}

#[tokio::test]
async fn a_wait_whose_deadline_passed_while_the_process_was_stopped_is_a_timeout() {
    stopped_while_waiting(false).await;
}

#[tokio::test]
async fn a_single_session_wait_stopped_past_its_deadline_is_a_timeout() {
    stopped_while_waiting(true).await;
}

/// Bytes the server process has received on its socket from `client_port`
/// and not read yet (`/proc/net/tcp`'s rx_queue of the server's end).
fn unread_by_server(server_port: u16, client_port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap(), 16).unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let rx = f[4].split(':').nth(1).unwrap();
            (port(f[1]) == server_port && port(f[2]) == client_port)
                .then(|| u64::from_str_radix(rx, 16).unwrap())
        })
        .sum()
}

/// A holder's liveness ping goes out, the process stops, the server
/// answers it during the stop: the holder keeps its session and its lock.
/// (The ping is held in flight by freezing the holder's server process
/// until the ping waits, unread, in its socket.)
#[tokio::test]
async fn a_ping_answered_while_the_process_was_stopped_keeps_the_lock() {
    let (_cluster, db) = private_db(&[]).await;
    let observer = connect(&db.url()).await;
    let m = manager(&db, "stalled-holder");
    let k = key("ping");
    let id = lock_id_for_key(&k);
    let guard = m.acquire(&k, None).await.unwrap();
    let backend = holder_pid(&observer, id).await.unwrap();
    let row = observer
        .query_one(
            "SELECT inet_server_port(), client_port FROM pg_stat_activity WHERE pid = $1",
            &[&backend],
        )
        .await
        .unwrap();
    let (server_port, client_port) = (row.get::<_, i32>(0) as u16, row.get::<_, i32>(1) as u16);
    kill(Pid::from_raw(backend), Signal::SIGSTOP).unwrap();
    pgcoord_testkit::locks::eventually_async(
        "a ping waiting in the frozen server's socket",
        || async { unread_by_server(server_port, client_port) > 0 },
    )
    .await;
    // The server process answers a moment into this process's stop.
    let thaw = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        kill(Pid::from_raw(backend), Signal::SIGCONT).unwrap();
    });
    // The stop: past the ping's 2 s limit.
    std::thread::sleep(STOP);
    thaw.join().unwrap();
    // A round trip through the same session's actor, after it has dealt
    // with the ping's outcome.
    let other = key("ping-other");
    drop(m.try_lock(&other).await.unwrap());
    assert!(!guard.is_lost(), "a live session counted lost");
    assert_eq!(holder_pid(&observer, id).await, Some(backend));
    guard.release().await.unwrap();
}
