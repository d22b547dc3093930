//! `lock top` behind a multi-host URL whose first server dies and whose
//! next host is another server, where `lock install` never ran: the view
//! lists the second server (without fence tokens, where every refresh
//! used to fail on the missing fencing table), and a lock already held
//! there shows the `<=` bound of a fresh start, not the time since the
//! switch.

use pgcoord_testkit::pg::StopMode;

use crate::common::*;
use crate::tmux::{tmux_or_skip, Tmux};

#[tokio::test]
async fn top_lists_the_next_server_afresh_without_its_missing_fence_table() {
    if !tmux_or_skip("`lock top` across servers") {
        return;
    }
    let (first, db) = private_db(&[]).await;
    let (second, other) = private_db(&[]).await;
    other
        .connect()
        .await
        .unwrap()
        .batch_execute(&format!("CREATE DATABASE \"{}\"", db.name()))
        .await
        .unwrap();
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    let on_first = session(&db, "first-holder").await;
    on_first
        .execute("SELECT pg_advisory_lock(61)", &[])
        .await
        .unwrap();
    let _on_second = holding_on(second.port(), db.name(), "second-holder", 62).await;
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?connect_timeout=3",
        first.port(),
        second.port(),
        db.name()
    );
    let top = Tmux::start(
        &db,
        &format!("DATABASE_URL='{url}' {BIN} lock top --interval 2s"),
    )
    .await;
    top.until("the first server's holder with fence tokens", |s| {
        s.contains("first-holder") && s.contains("fence tokens from")
    })
    .await;
    tokio::task::spawn_blocking(move || first.stop(StopMode::Immediate))
        .await
        .unwrap()
        .unwrap();
    let screen = top
        .until("the second server's holder", |s| {
            s.contains("second-holder")
        })
        .await;
    let row = screen
        .lines()
        .find(|l| l.contains("second-holder"))
        .unwrap();
    assert!(
        row.split_whitespace().any(|cell| cell.starts_with("<=")),
        "held before the view reached this server: a bound, {row:?}\n{screen}"
    );
    assert!(!screen.contains("first-holder"), "{screen}");
    assert!(!screen.contains("fence tokens from"), "{screen}");
    top.press("q").await;
}
