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
    assert!(
        shown.starts_with("jobs\tleader\tcand-a\tserver_pid="),
        "{shown}"
    );
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
    // A name is one field of a TAB-separated line.
    let out = output(eventsource(Some(&db)).args(["leader", "show", "a\tb"])).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("control characters"), "{}", out.stderr);
}

/// The next `--watch` line, its time column checked and cut off.
async fn watched_line(watch: &mut Running) -> String {
    let line = watch.next_line().await;
    let (time, rest) = line.split_once('\t').expect("a time column");
    chrono::DateTime::parse_from_rfc3339(time).unwrap_or_else(|e| panic!("{line}: {e}"));
    rest.to_owned()
}

#[tokio::test]
async fn show_watch_reports_the_leader_and_the_vacancy() {
    let db = installed().await;
    let mut watch = Running::start(
        eventsource(Some(&db)).args(["leader", "show", "--watch", "--every", "100ms", "watched"]),
    );
    assert_eq!(
        watched_line(&mut watch).await,
        "watched\tvacant\t-\t-\tlast_term=-"
    );
    let mut a = Running::start(&mut candidate(&db, "watched-a", "watched"));
    let ta = leading_term(&mut a, "watched").await;
    let line = watched_line(&mut watch).await;
    assert!(
        line.starts_with("watched\tleader\twatched-a\tserver_pid="),
        "{line}"
    );
    assert!(line.ends_with(&format!("term={ta}")), "{line}");
    a.send_line("done").await;
    a.finish().await;
    assert_eq!(
        watched_line(&mut watch).await,
        format!("watched\tvacant\t-\t-\tlast_term={ta}")
    );
    // Ending a watch on purpose is a success, as for `lock holders --watch`.
    watch.signal(Signal::SIGINT);
    assert_eq!(watch.finish().await.code, 0);
}

#[tokio::test]
async fn show_watch_reports_terms_that_came_and_went_between_looks() {
    let db = installed().await;
    let mut watch = Running::start(eventsource(Some(&db)).args([
        "leader",
        "show",
        "--watch",
        "--interval",
        "100ms",
        "brief",
    ]));
    assert_eq!(
        watched_line(&mut watch).await,
        "brief\tvacant\t-\t-\tlast_term=-"
    );
    // No look happens while the watcher is stopped: two terms begin and
    // end unseen.
    watch.signal(Signal::SIGSTOP);
    for _ in 0..2 {
        let out =
            output(eventsource(Some(&db)).args(["leader", "run", "brief", "--", "true"])).await;
        assert_eq!(out.code, 0, "{out:?}");
    }
    watch.signal(Signal::SIGCONT);
    // Terms are fencing tokens: timeline 1 above the low 40 bits.
    let first = (1u64 << pgcoord::postgres::fencing::EPOCH_SHIFT) + 1;
    let skipped = watched_line(&mut watch).await;
    assert!(
        skipped.starts_with(&format!("brief\tskipped\tterms={first}..{}\t", first + 1)),
        "{skipped}"
    );
    assert_eq!(
        watched_line(&mut watch).await,
        format!("brief\tvacant\t-\t-\tlast_term={}", first + 1)
    );
    watch.signal(Signal::SIGTERM);
    assert_eq!(watch.finish().await.code, 0);
}

#[tokio::test]
async fn before_lock_install_show_and_run_say_to_run_it() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["leader", "show", "early"])).await;
    assert_eq!((out.code, out.stdout.as_str()), (78, ""), "{out:?}");
    assert!(
        out.stderr.contains("eventsource lock install"),
        "{}",
        out.stderr
    );
    let out = output(eventsource(Some(&db)).args(["leader", "show", "--watch", "early"])).await;
    assert_eq!((out.code, out.stdout.as_str()), (78, ""), "{out:?}");
    let out =
        output(eventsource(Some(&db)).args(["leader", "run", "early", "--", "echo", "ran"])).await;
    assert_eq!((out.code, out.stdout.as_str()), (78, ""), "{out:?}");
    assert!(
        out.stderr.contains("leader run needs the fence table")
            && out.stderr.contains("eventsource lock install")
            && !out.stderr.contains("--fence"),
        "{}",
        out.stderr
    );
}

/// Its start and end: a NAME of 128 KiB must not flood a failed
/// assertion's message.
fn ends(text: &str) -> String {
    match text.len() {
        0..=400 => text.to_owned(),
        n => format!(
            "{} [... {} bytes ...] {}",
            &text[..200],
            n - 400,
            &text[n - 200..]
        ),
    }
}

/// A NAME too long for COMMAND's environment (as `election:NAME` in
/// EVENTSOURCE_LOCK_KEY, 128 KiB at most with the NUL) is a usage error
/// before the election is entered: it used to lead, write a term, and
/// only then fail to start COMMAND (126, "Argument list too long").
#[tokio::test]
async fn a_name_too_long_for_commands_environment_is_refused_before_leading() {
    let db = installed().await;
    let longest = "n".repeat(131_041);
    let over = format!("{longest}n");
    let out = output(eventsource(Some(&db)).args([
        "leader",
        "run",
        "--no-wait",
        &over,
        "--",
        "echo",
        "ran",
    ]))
    .await;
    assert_eq!(out.code, 2, "{}", ends(&out.stderr));
    assert_eq!(out.stdout, "", "COMMAND ran");
    assert!(
        out.stderr
            .contains("NAME is 131042 bytes: COMMAND gets it in EVENTSOURCE_LOCK_KEY")
            && out.stderr.contains("NAME has at most 131041 bytes"),
        "{}",
        ends(&out.stderr)
    );
    // Nobody led: no term written, for this name or any.
    let shown = show(&db, &over).await;
    assert!(
        shown.ends_with("n\tvacant\t-\t-\tlast_term=-\n"),
        "{}",
        ends(&shown)
    );
    let client = db.connect().await.unwrap();
    let terms: i64 = client
        .query_one("SELECT count(*) FROM eventsource_lock_fences", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(terms, 0);

    // The longest NAME reaches COMMAND whole.
    let out = output(eventsource(Some(&db)).args([
        "leader",
        "run",
        "--no-wait",
        &longest,
        "--",
        "bash",
        "-c",
        "echo ${#EVENTSOURCE_LOCK_KEY} ${#EVENTSOURCE_LEADER_NAME}",
    ]))
    .await;
    assert_eq!(out.code, 0, "{}", ends(&out.stderr));
    assert_eq!(out.stdout, "131050 131041\n");
}

#[tokio::test]
async fn show_watch_uses_one_named_session_and_opens_another_when_it_ends() {
    let db = installed().await;
    let app = format!("watch-{}", db.name());
    let mut watch = Running::start(
        eventsource(Some(&db))
            .args(["leader", "show", "--watch", "--every", "100ms", "phoenix"])
            .env("PGAPPNAME", &app),
    );
    assert_eq!(
        watched_line(&mut watch).await,
        "phoenix\tvacant\t-\t-\tlast_term=-"
    );
    let admin = db.connect().await.unwrap();
    let sessions = |app: String| {
        let (admin, name) = (&admin, db.name().to_owned());
        async move {
            let rows = admin
                .query(
                    "SELECT pid, application_name FROM pg_stat_activity \
                     WHERE datname = $1 AND pid <> pg_backend_pid()",
                    &[&name],
                )
                .await
                .unwrap();
            let all: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            let named = all
                .iter()
                .filter(|(_, a)| *a == app)
                .map(|(p, _)| *p)
                .collect();
            (all, named)
        }
    };
    let (all, named): (_, Vec<i32>) = sessions(app.clone()).await;
    assert_eq!(named.len(), 1, "one session, named by PGAPPNAME: {all:?}");
    assert!(
        !all.iter().any(|(_, a)| a.starts_with("eventsource")),
        "none named otherwise: {all:?}"
    );

    // Its session ends under it: the watch opens another and sees the
    // next leader.
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&named[0]])
        .await
        .unwrap();
    let mut a = Running::start(&mut candidate(&db, "phoenix-a", "phoenix"));
    let term = leading_term(&mut a, "phoenix").await;
    loop {
        let line = watched_line(&mut watch).await;
        if line.starts_with("phoenix\tleader\tphoenix-a\t") {
            assert!(line.ends_with(&format!("term={term}")), "{line}");
            break;
        }
    }
    let (all, again): (_, Vec<i32>) = sessions(app.clone()).await;
    assert!(
        again.len() == 1 && again[0] != named[0],
        "a new session, named alike: {all:?}"
    );
    a.send_line("done").await;
    a.finish().await;
    watch.signal(Signal::SIGHUP);
    assert_eq!(watch.finish().await.code, 0);
}
