//! `lock run --timeout` with both servers in its URL follows a failover:
//! started while the primary is down and no server accepts writes, it
//! retries, and runs the command on the standby once that is promoted.
//! `leader run` likewise: the leader on the dead primary is told (exit
//! 76), and the candidate that waited behind it leads on the promoted
//! standby with a greater term, with nobody restarting anything.

use std::sync::Arc;

use pgcoord_testkit::pg::{StopMode, TestCluster, TestDatabase};

use crate::common::*;

/// A private primary, a streaming standby of it, and the URL naming both
/// (`target_session_attrs=read-write`).
async fn pair() -> (Arc<TestCluster>, Arc<TestCluster>, TestDatabase, String) {
    let (primary, db) = private_db(&[]).await;
    let standby = Arc::new(standby_of(&primary).await);
    let both = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=read-write",
        primary.port(),
        standby.port(),
        db.name()
    );
    (primary, standby, db, both)
}

/// `leader run` over both servers, printing `leading <term>`, then
/// waiting for a line on stdin.
fn leader_run(both: &str, id: &str) -> tokio::process::Command {
    let mut cmd = eventsource(None);
    cmd.env("DATABASE_URL", both)
        .args([
            "leader",
            "run",
            "--timeout",
            "5m",
            "--holder-id",
            id,
            "jobs",
        ])
        .args([
            "--",
            "bash",
            "-c",
            "echo \"leading $EVENTSOURCE_LEADER_TERM\"; read x",
        ]);
    cmd
}

async fn leading_term(run: &mut Running) -> u64 {
    let line = run.next_line().await;
    let term = line.strip_prefix("leading ").and_then(|t| t.parse().ok());
    term.unwrap_or_else(|| panic!("not a leading line: {line}"))
}

#[tokio::test]
async fn a_run_waiting_for_a_primary_runs_once_the_standby_is_promoted() {
    let (primary, standby, _db, both) = pair().await;
    // Both servers answer, the primary takes the lock.
    let out = output(eventsource(None).env("DATABASE_URL", &both).args([
        "lock",
        "run",
        "--timeout",
        "30s",
        "cutover",
        "--",
        "echo",
        "first",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");

    // Nothing accepts writes: the run says it retries, and why, without
    // asking for a primary the URL already lists.
    let line = run_across_promotion(&primary, &standby, &both).await;
    assert!(!line.contains("held elsewhere"), "{line}");
    assert!(
        line.contains("no host of the URL takes writes now")
            && line.contains("a failover under way")
            && !line.contains("list it among the hosts"),
        "{line}"
    );
}

/// Stops `primary`, starts `lock run --timeout 5m cutover` on `url`,
/// waits for its line saying it retries, promotes `standby` and checks
/// that the command then ran. Returns the retry line.
async fn run_across_promotion(
    primary: &Arc<TestCluster>,
    standby: &Arc<TestCluster>,
    url: &str,
) -> String {
    let stopping = primary.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Immediate))
        .await
        .unwrap()
        .unwrap();
    let mut run = Running::start(eventsource(None).env("DATABASE_URL", url).args([
        "lock",
        "run",
        "--timeout",
        "5m",
        "cutover",
        "--",
        "echo",
        "after failover",
    ]));
    let line = run.expect_stderr("retrying until --timeout runs out").await;
    let s = standby.clone();
    tokio::task::spawn_blocking(move || s.promote())
        .await
        .unwrap()
        .expect("promoted");
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "after failover\n");
    // The last word on the retries is that they ended well.
    assert!(
        out.stderr.contains("acquired after retrying"),
        "{}",
        out.stderr
    );
    line
}

#[tokio::test]
async fn a_run_with_the_standby_first_and_no_session_attrs_waits_for_its_promotion() {
    let (primary, standby, db, _) = pair().await;
    // No target_session_attrs: the first host that answers is used, and
    // with the primary down that is the standby, which is refused.
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}",
        standby.port(),
        primary.port(),
        db.name()
    );
    // Within --timeout a standby is tried again: it may be promoted.
    let line = run_across_promotion(&primary, &standby, &url).await;
    assert!(line.contains("is a hot standby"), "{line}");
    assert!(line.contains("--allow-standby"), "the tool's flag: {line}");
}

#[tokio::test]
async fn leader_run_is_deposed_by_the_failover_and_the_next_candidate_leads_on_the_new_primary() {
    let (primary, standby, db, both) = pair().await;
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", &both)
            .args(["lock", "install"]),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    let on_standby = connect_to(&standby.url(db.name())).await;
    until_async_replayed(&on_standby).await;

    let mut first = Running::start(&mut leader_run(&both, "first"));
    let term_before = leading_term(&mut first).await;
    let mut next = Running::start(&mut leader_run(&both, "next"));
    let inspector = db.connect().await.unwrap();
    wait_for(&inspector, "election:jobs", "the candidate queued", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    drop(inspector);

    let stopping = primary.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Immediate))
        .await
        .unwrap()
        .unwrap();
    // The leader is told: its command is stopped and it exits 76.
    let out = first.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("lost"), "{}", out.stderr);
    // The candidate's wait ended with the primary; it retries on its own.
    next.expect_stderr("retrying until --timeout runs out")
        .await;

    let s = standby.clone();
    tokio::task::spawn_blocking(move || s.promote())
        .await
        .unwrap()
        .expect("promoted");
    let term_after = leading_term(&mut next).await;
    assert!(term_after > term_before, "{term_after} > {term_before}");
    let promoted = connect_to(&standby.url(db.name())).await;
    let led = wait_for(
        &promoted,
        "election:jobs",
        "the leader on the new primary",
        |l| l.is_some_and(|l| l.holders.len() == 1),
    )
    .await;
    let led = led.unwrap();
    assert_eq!(led.holders[0].holder_id.as_deref(), Some("next"), "{led:?}");
    next.send_line("done").await;
    let out = next.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
}

async fn connect_to(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
    tokio::spawn(conn);
    client
}

/// Waits until the standby has replayed `lock install`.
async fn until_async_replayed(on_standby: &tokio_postgres::Client) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let replayed = on_standby
            .query_one(
                "SELECT to_regclass('eventsource_lock_fences') IS NOT NULL",
                &[],
            )
            .await
            .is_ok_and(|r| r.get::<_, bool>(0));
        if replayed {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the standby never replayed the install"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
