//! `lock doctor`: passes on PostgreSQL, names the cause on a database whose
//! advisory functions lock nothing, exit 69 when unreachable.

use crate::common::*;

#[tokio::test]
async fn doctor_passes_on_postgres() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("ok:"), "{out:?}");
    assert!(out.stdout.contains("server version:"), "{out:?}");
    assert!(out.stdout.contains("idle_session_timeout"), "{out:?}");
}

#[tokio::test]
async fn doctor_fails_with_the_cause_on_no_op_advisory_functions() {
    let db = database().await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA fake; \
             CREATE FUNCTION fake.pg_try_advisory_lock(bigint) RETURNS boolean \
               LANGUAGE sql AS 'SELECT true'; \
             CREATE FUNCTION fake.pg_advisory_unlock(bigint) RETURNS boolean \
               LANGUAGE sql AS 'SELECT true'; \
             ALTER DATABASE {} SET search_path = fake, pg_catalog, public",
            db.name()
        ))
        .await
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("FAILED"), "{out:?}");
    assert!(out.stderr.contains("do nothing on this server"), "{out:?}");
}

#[tokio::test]
async fn doctor_on_an_unreachable_server_exits_69_without_the_password() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let out = output(
        eventsource(None)
            .args(["lock", "doctor", "--database-url"])
            .arg(format!("postgres://u:doctor-secret-77@127.0.0.1:{port}/x")),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(!out.stderr.contains("doctor-secret-77"), "{out:?}");
    assert!(out.stderr.contains("cannot check the database"), "{out:?}");
}
