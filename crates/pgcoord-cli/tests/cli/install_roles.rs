//! `lock install` by one role, locking by another, as on a managed
//! service: the role without its grants is told so (78), the grants of
//! docs/fencing.md are enough, and an install from a connection whose
//! current schema differs refuses to make a second fence table.

use crate::common::*;

fn fenced_run(url: &str) -> tokio::process::Command {
    let mut cmd = eventsource(None);
    cmd.env("DATABASE_URL", url)
        .args(["lock", "run", "--fence", "managed-job", "--", "sh", "-c"])
        .arg("echo \"fence=$EVENTSOURCE_LOCK_FENCE\"");
    cmd
}

#[tokio::test]
async fn a_role_without_its_grants_exits_78_and_the_documented_grants_suffice() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let (role, url) = login_role(&db, "locker", "").await;

    let out = output(&mut fenced_run(&url)).await;
    assert_eq!(out.code, 78, "{out:?}");
    assert!(out.stderr.contains("permission denied"), "{}", out.stderr);
    assert_eq!(out.stdout, "", "the command must not run");

    // The grants docs/fencing.md gives.
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO {role}"
        ))
        .await
        .unwrap();
    let out = output(&mut fenced_run(&url)).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("fence="), "{}", out.stdout);
}

#[tokio::test]
async fn install_with_another_current_schema_refuses_a_second_fence_table() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    // PostgreSQL 15's advice: a schema per user, first in its search_path.
    let (role, url) = login_role(&db, "owner", "").await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA {role} AUTHORIZATION {role}; \
             GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO {role}"
        ))
        .await
        .unwrap();
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "install"]),
    )
    .await;
    assert_eq!(out.code, 78, "{out:?}");
    assert!(
        out.stderr.contains("exists already in schema public"),
        "{}",
        out.stderr
    );
    let tables: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_class WHERE relname = 'eventsource_lock_fences'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "a second fence table was made");
}
