//! The server sessions a run uses: how many (a role limited to two
//! connections), and that the URL's `options=` reaches them.

use pgcoord::lock_id_for_key;

use crate::common::*;

/// A role allowed `limit` connections, and the database URL as that role.
async fn limited_role(db: &pgcoord_testkit::pg::TestDatabase, limit: i32) -> String {
    let role = format!("limited_{}", db.name());
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN CONNECTION LIMIT {limit}"
        ))
        .await
        .unwrap();
    let url = db.url();
    let as_role = url.replacen("://postgres@", &format!("://{role}@"), 1);
    assert_ne!(url, as_role, "a URL of the test harness's form");
    as_role
}

#[tokio::test]
async fn a_no_wait_conflict_names_the_holder_within_two_connections() {
    let db = database().await;
    let url = limited_role(&db, 2).await;
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.application_name("eventsource/limited-holder");
    let (holder, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    holder
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[&lock_id_for_key("limited")],
        )
        .await
        .unwrap();
    let out = output(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "run",
        "--no-wait",
        "limited",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    assert!(out.stderr.contains("limited-holder"), "{}", out.stderr);
}

#[tokio::test]
async fn a_waiting_run_needs_one_connection() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let url = limited_role(&db, 2).await;
    let (holder, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    holder
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[&lock_id_for_key("queued-limited")],
        )
        .await
        .unwrap();
    let run = Running::start(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "run",
        "queued-limited",
        "--",
        "echo",
        "ran",
    ]));
    wait_for(&inspector, "queued-limited", "the run waiting", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    holder
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "ran\n");
}

/// What the README promises today: a waiting run holds at most two server
/// sessions (the lock's and the wait's).
#[tokio::test]
async fn a_waiting_run_holds_at_most_two_sessions() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let holder = session(&db, "someone").await;
    holder
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[&lock_id_for_key("counted")],
        )
        .await
        .unwrap();
    let run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "counted",
        "counted",
        "--",
        "true",
    ]));
    wait_for(&inspector, "counted", "the run waiting", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    let sessions: i64 = inspector
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'eventsource/counted'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!((1..=2).contains(&sessions), "{sessions} sessions");
    holder
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    eprintln!("a waiting run held {sessions} server sessions");
}

/// `options=` in the URL reaches the server as given: an unknown setting
/// there makes the server refuse the session, naming it.
#[tokio::test]
async fn url_options_reach_the_server() {
    let db = database().await;
    let base = db.url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20eventsource_no_such_setting%3D1");
    let out = output(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "run",
        "--no-wait",
        "opts",
        "--",
        "echo",
        "ran",
    ]))
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("eventsource_no_such_setting"),
        "{}",
        out.stderr
    );
    // A valid one is accepted.
    let url = format!("{base}{sep}options=-c%20search_path%3Dpublic");
    let out = output(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "run",
        "--no-wait",
        "opts",
        "--",
        "echo",
        "ran",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "ran\n");
}

/// `--min-interval` records the start on a second server session. Behind a
/// session pool with one server connection, which the run's lock session
/// holds, that statement is queued by the pooler (up to its
/// `query_wait_timeout`, 120 s, the lock held all along): the tool gives
/// it 30 s, says why, runs nothing and lets the lock go.
#[tokio::test]
async fn min_interval_behind_a_pool_of_one_gives_up_and_says_why() {
    let Some(bin) = pgcoord_testkit::pgbouncer::pgbouncer_or_skip() else {
        return;
    };
    let (cluster, db) = private_db(&[]).await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let bouncer = pgcoord_testkit::pgbouncer::Bouncer::start_with(
        &bin,
        cluster.port(),
        "session",
        "default_pool_size = 1",
    )
    .unwrap();
    let url = format!("{}?sslmode=disable", bouncer.url(db.name()));
    let inspector = db.connect().await.unwrap();
    let mut out = None;
    // PgBouncer may still be starting: a refused connection is retried.
    for _ in 0..50 {
        let o = output(eventsource(None).env("DATABASE_URL", &url).args([
            "lock",
            "run",
            "--min-interval",
            "1h",
            "pooled-hourly",
            "--",
            "echo",
            "ran",
        ]))
        .await;
        if o.code == 69 && o.stderr.contains("cannot connect") {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        }
        out = Some(o);
        break;
    }
    let out = out.expect("PgBouncer never accepted a connection");
    assert_eq!(out.code, 69, "{out:?}\n{}", bouncer.log());
    assert!(
        out.stderr.contains("second server session"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "", "the command must not run");
    assert!(is_free(&inspector, "pooled-hourly").await);
}

/// `lock holders` through a transaction-mode PgBouncer with one server
/// connection, four runs at once: each prepares `s0`, and a run whose
/// statement lands on the server connection where another run's `s0` is
/// fails (SQLSTATE 42P05). The line says first that the pooler served the
/// statements on different server connections, not only the server's
/// words, which blame the database.
#[tokio::test]
async fn holders_through_a_transaction_pooler_say_so_first() {
    let Some(bin) = pgcoord_testkit::pgbouncer::pgbouncer_or_skip() else {
        return;
    };
    let (cluster, db) = private_db(&[]).await;
    let bouncer = pgcoord_testkit::pgbouncer::Bouncer::start_with(
        &bin,
        cluster.port(),
        "transaction",
        "default_pool_size = 1",
    )
    .unwrap();
    let url = format!("{}?sslmode=disable", bouncer.url(db.name()));
    let mut failed = None;
    // PgBouncer may still be starting (a refused connection is retried);
    // runs that do not meet may all succeed, and under load a run may
    // fail another way first (the pooler's own limits): the run looked
    // at is one whose prepared statement met another's.
    for _ in 0..50 {
        let runs = (0..4).map(|_| {
            let mut cmd = eventsource(None);
            cmd.env("DATABASE_URL", &url).args(["lock", "holders"]);
            async move { output(&mut cmd).await }
        });
        let outs = futures_util::future::join_all(runs).await;
        if let Some(o) = outs
            .into_iter()
            .find(|o| o.code != 0 && o.stderr.contains("prepared statement"))
        {
            failed = Some(o);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let out = failed.unwrap_or_else(|| panic!("no run failed\n{}", bouncer.log()));
    assert_eq!(out.code, 69, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(
            "eventsource: cannot list lock holders: a pooler in transaction or statement mode"
        ) && out.stderr.contains("on different server connections"),
        "{}",
        out.stderr
    );
    // The server's words: another client's statement of the same name
    // there (42P05), or this client's gone (26000), as the pool served it.
    assert!(
        out.stderr.contains("already exists") || out.stderr.contains("does not exist"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("need a direct connection or the pooler's session mode"),
        "{}",
        out.stderr
    );
}
