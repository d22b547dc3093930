//! What a role's own settings do to the commands: a role refused the
//! login to the database (no CONNECT privilege) is a refused login (69),
//! not a missing privilege on our objects (78); a role's short
//! `statement_timeout` does not cancel `--min-interval`'s record, and a
//! statement it cancels elsewhere is named as such.

use crate::common::*;

#[tokio::test]
async fn a_login_refused_for_lack_of_connect_exits_69_in_every_command() {
    let db = database().await;
    let name = db.name().to_owned();
    let (_, url) = login_role(
        &db,
        "noconnect",
        &format!("REVOKE CONNECT ON DATABASE {name} FROM PUBLIC"),
    )
    .await;
    let commands: [&[&str]; 6] = [
        &["lock", "run", "--no-wait", "k", "--", "echo", "ran"],
        &["lock", "run", "--timeout", "10s", "k", "--", "echo", "ran"],
        &["leader", "run", "e", "--", "echo", "ran"],
        &["lock", "holders"],
        &["leader", "show", "e"],
        &["lock", "doctor"],
    ];
    for args in commands {
        let out = output(eventsource(None).env("DATABASE_URL", &url).args(args)).await;
        assert_eq!(out.code, 69, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("permission denied for database")
                && out.stderr.contains("CONNECT privilege"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(!out.stdout.contains("ran"), "{args:?}: {out:?}");
        // The server's own DETAIL reaches the line, whichever command.
        assert!(
            out.stderr.contains("User does not have CONNECT privilege"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

/// Waits until a backend of `role` waits for a heavyweight lock (a table
/// lock another session holds); fails with the tool's output if `run`
/// ends first. PostgreSQL has no event for "started waiting": polled,
/// bounded by [`BOUND`].
async fn until_waiting(admin: &tokio_postgres::Client, role: &str, mut run: Running) -> Running {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let waiting: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE usename = $1 AND wait_event_type = 'Lock'",
                &[&role],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            return run;
        }
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!(
                "the run ended ({status}) before its statement waited: {:?}",
                run.finish().await
            );
        }
        if tokio::time::Instant::now() >= deadline {
            // What the role's sessions were doing instead, and what the
            // tool said: the two clues a rare failure here leaves.
            let sessions: Vec<String> = admin
                .query(
                    "SELECT format('%s %s/%s: %s', state, wait_event_type, wait_event, \
                     left(query, 200)) FROM pg_stat_activity WHERE usename = $1",
                    &[&role],
                )
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            panic!(
                "never saw {role} wait; its sessions: {sessions:?}; the tool's stderr:\n{}",
                run.stderr_so_far()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn min_interval_records_the_start_whatever_the_roles_statement_timeout() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let (_, url) = login_role(
        &db,
        "shorttimeout",
        "ALTER ROLE $ROLE SET statement_timeout = '1ms'; \
         GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO $ROLE",
    )
    .await;
    let role_name = format!("shorttimeout_{}", db.name());
    // The claim has to wait for this table lock far longer than the
    // role's 1 ms: only a session that turned statement_timeout off
    // outlasts it.
    let mut admin = db.connect().await.unwrap();
    let tx = admin.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE eventsource_lock_fences IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let watcher = db.connect().await.unwrap();
    let run = Running::start(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "run", "--min-interval", "1h", "claimed", "--"])
            .args(["sh", "-c", "echo \"ran $EVENTSOURCE_RUN_STARTED\""]),
    );
    let run = until_waiting(&watcher, &role_name, run).await;
    tx.commit().await.unwrap();
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("ran 2"), "{out:?}");
}

#[tokio::test]
async fn a_statement_cancelled_by_statement_timeout_is_named_as_such() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let (_, url) = login_role(
        &db,
        "cancelled",
        "ALTER ROLE $ROLE SET statement_timeout = '1ms'; \
         GRANT SELECT ON eventsource_lock_fences TO $ROLE",
    )
    .await;
    // `leader show` reads the fence table: it waits for this lock until
    // the role's statement_timeout cancels it.
    let mut admin = db.connect().await.unwrap();
    let tx = admin.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE eventsource_lock_fences IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["leader", "show", "e"]),
    )
    .await;
    tx.rollback().await.unwrap();
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr.contains("(SQLSTATE 57014)")
            && out.stderr.contains("statement_timeout setting")
            && out.stderr.contains("the server answered"),
        "{}",
        out.stderr
    );
}
