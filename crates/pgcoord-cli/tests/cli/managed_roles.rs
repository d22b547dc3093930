//! The roles of a managed service, after `lock install` by the database's
//! owner: a role whose sessions are read-only by default is told so (not
//! sent looking for a standby), a role whose search_path misses the fence
//! table's schema is told that, and `lock install` run again by a role
//! that did not create the objects reports them up to date (or names
//! their owner when they are not).

use crate::common::*;

async fn installed(db: &pgcoord_testkit::pg::TestDatabase) {
    let out = output(eventsource(Some(db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
}

async fn run_as(url: &str, args: &[&str]) -> Output {
    output(eventsource(None).env("DATABASE_URL", url).args(args)).await
}

/// What a read-only role must be told: its own setting, on a primary.
fn blames_the_setting(args: &[&str], out: &Output) {
    assert_eq!(out.code, 78, "{args:?}: {out:?}");
    assert!(!out.stdout.contains("ran"), "{args:?}: {out:?}");
    assert!(
        out.stderr.contains("25006")
            && out.stderr.contains("default_transaction_read_only is on")
            && out.stderr.contains("ALTER ROLE")
            && out.stderr.contains("the server is a primary"),
        "{args:?}: {}",
        out.stderr
    );
    assert!(!out.stderr.contains("standby"), "{args:?}: {}", out.stderr);
}

#[tokio::test]
async fn a_role_read_only_by_default_is_told_so_not_sent_to_a_standby() {
    let db = database().await;
    installed(&db).await;
    let (_, url) = login_role(
        &db,
        "reader",
        "ALTER ROLE $ROLE SET default_transaction_read_only = on; \
         GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO $ROLE",
    )
    .await;
    let commands: [&[&str]; 3] = [
        &["lock", "run", "--fence", "kr", "--", "echo", "ran"],
        &[
            "lock",
            "run",
            "--min-interval",
            "1m",
            "kr2",
            "--",
            "echo",
            "ran",
        ],
        &["leader", "run", "lr", "--", "echo", "ran"],
    ];
    for args in commands {
        blames_the_setting(args, &run_as(&url, args).await);
    }
    // `lock install` finds it all up to date: nothing to write.
    let install = ["lock", "install"];
    let out = run_as(&url, &install).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("up to date"), "{}", out.stdout);
    // From an older version (no run log), it would have to write.
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute("ALTER TABLE eventsource_lock_fences DROP COLUMN last_run_started")
        .await
        .unwrap();
    blames_the_setting(&install, &run_as(&url, &install).await);
    installed(&db).await;
    // The doctor passes (the locks work) and warns about the rest.
    let out = run_as(&url, &["lock", "doctor"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let warning = out
        .stdout
        .lines()
        .find(|l| l.contains("default_transaction_read_only"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        warning.starts_with("warning: for --fence, --min-interval, leader run"),
        "{warning}"
    );
    // Without the setting: no such warning.
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !out.stdout.contains("default_transaction_read_only"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn a_fence_table_outside_the_roles_search_path_is_named_as_a_possibility() {
    let db = database().await;
    installed(&db).await;
    let (_, url) = login_role(
        &db,
        "elsewhere",
        "GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO $ROLE; \
         ALTER ROLE $ROLE SET search_path = nosuchschema",
    )
    .await;
    let commands: [&[&str]; 4] = [
        &["leader", "show", "x"],
        &["leader", "run", "x", "--", "echo", "ran"],
        &[
            "lock",
            "run",
            "--min-interval",
            "1m",
            "kk",
            "--",
            "echo",
            "ran",
        ],
        &["lock", "run", "--fence", "k2", "--", "echo", "ran"],
    ];
    for args in commands {
        let out = run_as(&url, args).await;
        assert_eq!(out.code, 78, "{args:?}: {out:?}");
        assert!(!out.stdout.contains("ran"), "{args:?}: {out:?}");
        assert!(
            out.stderr
                .contains("or not in a schema of this role's search_path")
                && out.stderr.contains("eventsource lock install"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // `lock install` with no schema of the search_path: the set-up (78),
    // not the command line (2).
    let out = run_as(&url, &["lock", "install"]).await;
    assert_eq!(out.code, 78, "{out:?}");
    assert!(
        out.stderr
            .contains("no schema of this role's search_path exists")
            && !out.stderr.contains("invalid argument"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn install_again_by_another_role_reports_it_up_to_date_or_names_the_owner() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .starts_with("fencing installed in schema public of database"),
        "{}",
        out.stdout
    );
    let admin = db.connect().await.unwrap();
    let owner: String = admin
        .query_one("SELECT current_user::text", &[])
        .await
        .unwrap()
        .get(0);
    // No CREATE on public (PostgreSQL 15's default), then CREATE without
    // ownership: up to date either way, nothing to do.
    let (role, url) = login_role(&db, "deployer", "").await;
    for grant in ["", "GRANT CREATE ON SCHEMA public TO $ROLE"] {
        admin
            .batch_execute(&grant.replace("$ROLE", &role))
            .await
            .unwrap();
        let out = run_as(&url, &["lock", "install"]).await;
        assert_eq!(out.code, 0, "{grant:?}: {out:?}");
        assert!(
            out.stdout
                .contains("installed and up to date in schema public")
                && out.stdout.contains(&format!("owned by role {owner}")),
            "{grant:?}: {}",
            out.stdout
        );
    }
    // From an older version (no run log): the owner must upgrade it.
    admin
        .batch_execute("ALTER TABLE eventsource_lock_fences DROP COLUMN last_run_started")
        .await
        .unwrap();
    let out = run_as(&url, &["lock", "install"]).await;
    assert_eq!(out.code, 78, "{out:?}");
    assert!(
        out.stderr.contains("older version")
            && out.stderr.contains(&format!("owned by role {owner}"))
            && out.stderr.contains(&format!("as {owner}")),
        "{}",
        out.stderr
    );
    // The owner's run upgrades it, and the other role's finds it current.
    installed(&db).await;
    let out = run_as(&url, &["lock", "install"]).await;
    assert_eq!(out.code, 0, "{out:?}");
}

#[tokio::test]
async fn doctor_on_a_full_lock_table_fails_the_check() {
    let (_cluster, db) = private_db(&[
        ("max_connections", "8"),
        ("max_locks_per_transaction", "10"),
    ])
    .await;
    // One session takes advisory locks until the shared table is full,
    // then frees a few (room for a connection, not for the checks).
    let filler = db.connect().await.unwrap();
    filler
        .batch_execute(
            "DO $$ BEGIN FOR i IN 1..1000000 LOOP BEGIN PERFORM pg_advisory_lock(i); \
             EXCEPTION WHEN out_of_memory THEN EXIT; END; END LOOP; END $$",
        )
        .await
        .unwrap();
    filler
        .batch_execute(
            "SELECT pg_advisory_unlock(l.objid::int8) FROM pg_locks l \
             WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() \
             ORDER BY l.objid DESC LIMIT 3",
        )
        .await
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("FAILED: the server's shared lock table is full")
            && out.stderr.contains("53200")
            && out.stderr.contains("max_locks_per_transaction"),
        "{}",
        out.stderr
    );
    drop(filler);
}
