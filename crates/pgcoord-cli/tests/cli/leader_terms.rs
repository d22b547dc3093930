//! `leader show --watch` when the term read goes back: the server now read
//! did not hand out the last term seen (an old primary brought back as a
//! primary beside the promoted standby, a restored backup), and the watch
//! says so instead of printing the smaller term as if nothing happened.

use nix::sys::signal::Signal;

use crate::common::*;

#[tokio::test]
async fn show_watch_warns_when_the_term_goes_back() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = output(eventsource(Some(&db)).args(["leader", "run", "split", "--", "true"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let mut watch = Running::start(
        eventsource(Some(&db)).args(["leader", "show", "--watch", "--every", "100ms", "split"]),
    );
    let first = watch.next_line().await;
    let term: u64 = first
        .rsplit_once("last_term=")
        .and_then(|(_, t)| t.parse().ok())
        .unwrap_or_else(|| panic!("a vacancy with its last term: {first}"));

    // Another server's count: one term fewer.
    let admin = db.connect().await.unwrap();
    let changed = admin
        .execute(
            "UPDATE eventsource_lock_fences SET fence = fence - 1 WHERE fence = $1",
            &[&(term as i64)],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1);
    let warning = watch.expect_stderr("term went back").await;
    assert!(
        warning.contains(&format!("from {term} to {}", term - 1))
            && warning.contains("an old primary back as a primary"),
        "{warning}"
    );
    let line = watch.next_line().await;
    assert!(line.ends_with(&format!("last_term={}", term - 1)), "{line}");
    watch.signal(Signal::SIGINT);
    assert_eq!(watch.finish().await.code, 0);
}
