//! `leader run` (the term in COMMAND's environment, one leader at a time
//! across processes, hand-over on exit and on SIGKILL, exit 76 on loss)
//! and `leader show` (who leads, `--watch` reporting vacancies).

use nix::sys::signal::Signal;
use tokio::process::Command;

use crate::common::*;

async fn installed() -> pgcoord_testkit::pg::TestDatabase {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    db
}

/// `leader run` printing `leading <term> <name>`, then waiting for a line
/// on stdin before it exits.
fn candidate(db: &pgcoord_testkit::pg::TestDatabase, id: &str, name: &str) -> Command {
    let mut cmd = eventsource(Some(db));
    cmd.args(["leader", "run", "--holder-id", id, name, "--", "bash", "-c"])
        .arg("echo \"leading $EVENTSOURCE_LEADER_TERM $EVENTSOURCE_LEADER_NAME\"; read x");
    cmd
}

/// Reads `leading <term> <name>` and returns the term.
async fn leading_term(run: &mut Running, name: &str) -> u64 {
    let line = run.next_line().await;
    let mut parts = line.split(' ');
    assert_eq!(parts.next(), Some("leading"), "{line}");
    let term = parts.next().and_then(|t| t.parse().ok()).expect("a term");
    assert_eq!(parts.next(), Some(name), "{line}");
    term
}

async fn show(db: &pgcoord_testkit::pg::TestDatabase, name: &str) -> String {
    let out = output(eventsource(Some(db)).args(["leader", "show", name])).await;
    assert_eq!(out.code, 0, "{out:?}");
    out.stdout
}

#[tokio::test]
async fn one_leader_at_a_time_terms_grow_and_exit_hands_over() {
    let db = installed().await;
    let inspector = db.connect().await.unwrap();
    assert!(show(&db, "jobs").await.starts_with("jobs\tvacant"));
    let mut a = Running::start(&mut candidate(&db, "cand-a", "jobs"));
    let ta = leading_term(&mut a, "jobs").await;
    let shown = show(&db, "jobs").await;
    assert!(shown.starts_with("jobs\tleader\tcand-a\tpid="), "{shown}");
    assert!(shown.ends_with(&format!("term={ta}\n")), "{shown}");
    // B waits in the election's queue while A leads.
    let mut b = Running::start(&mut candidate(&db, "cand-b", "jobs"));
    wait_for(&inspector, "election:jobs", "a waiting candidate", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    a.send_line("done").await;
    assert_eq!(a.finish().await.code, 0);
    let tb = leading_term(&mut b, "jobs").await;
    assert!(tb > ta, "{tb} > {ta}");
    assert!(show(&db, "jobs").await.contains("\tcand-b\t"));
    b.send_line("done").await;
    assert_eq!(b.finish().await.code, 0);
    let shown = show(&db, "jobs").await;
    assert_eq!(shown, format!("jobs\tvacant\t-\t-\tlast_term={tb}\n"));
}

#[tokio::test]
async fn a_sigkilled_leader_is_followed_by_the_waiting_candidate() {
    let db = installed().await;
    let inspector = db.connect().await.unwrap();
    let mut a = Running::start(&mut candidate(&db, "killed", "failover"));
    let ta = leading_term(&mut a, "failover").await;
    let mut b = Running::start(&mut candidate(&db, "next", "failover"));
    wait_for(
        &inspector,
        "election:failover",
        "a waiting candidate",
        |l| l.is_some_and(|l| l.waiters.len() == 1),
    )
    .await;
    a.signal(Signal::SIGKILL);
    let tb = leading_term(&mut b, "failover").await;
    assert!(tb > ta);
    b.send_line("done").await;
    assert_eq!(b.finish().await.code, 0);
}

#[tokio::test]
async fn lost_leadership_stops_the_command_and_exits_76() {
    let db = installed().await;
    let mut a = Running::start(&mut candidate(&db, "deposed", "lossy"));
    leading_term(&mut a, "lossy").await;
    terminate_holder(&db, "deposed").await;
    let out = a.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("lost"), "{}", out.stderr);
}

#[tokio::test]
async fn no_wait_while_someone_leads_exits_with_the_conflict_code() {
    let db = installed().await;
    let mut a = Running::start(&mut candidate(&db, "holder", "busy"));
    leading_term(&mut a, "busy").await;
    let out = output(eventsource(Some(&db)).args([
        "leader",
        "run",
        "--no-wait",
        "busy",
        "--",
        "echo",
        "ran",
    ]))
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    assert_eq!(out.stdout, "", "the command must not run");
    a.send_line("done").await;
    a.finish().await;
}

#[tokio::test]
async fn an_empty_name_is_a_usage_error() {
    let db = database().await;
    for args in [
        &["leader", "run", "", "--", "true"][..],
        &["leader", "show", ""],
    ] {
        let out = output(eventsource(Some(&db)).args(args)).await;
        assert_eq!(out.code, 2, "{out:?}");
        assert!(out.stderr.contains("needs a name"), "{}", out.stderr);
    }
}

#[tokio::test]
async fn show_watch_reports_the_leader_and_the_vacancy() {
    let db = installed().await;
    let mut watch = Running::start(
        eventsource(Some(&db)).args(["leader", "show", "--watch", "--every", "20ms", "watched"]),
    );
    watch
        .expect_line("watched\tvacant\t-\t-\tlast_term=-")
        .await;
    let mut a = Running::start(&mut candidate(&db, "watched-a", "watched"));
    let ta = leading_term(&mut a, "watched").await;
    let line = watch.next_line().await;
    assert!(
        line.starts_with("watched\tleader\twatched-a\tpid="),
        "{line}"
    );
    assert!(line.ends_with(&format!("term={ta}")), "{line}");
    a.send_line("done").await;
    a.finish().await;
    watch
        .expect_line(&format!("watched\tvacant\t-\t-\tlast_term={ta}"))
        .await;
    watch.signal(Signal::SIGINT);
    assert_eq!(watch.finish().await.code, 130);
}
