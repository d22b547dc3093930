//! What a role's own settings do to every command: a role refused the
//! login to the database (no CONNECT privilege) is a refused login (69),
//! not a missing privilege on our objects (78).

use crate::common::*;

/// A login role of its own for `db`, and `db`'s URL as it.
async fn role(db: &pgcoord_testkit::pg::TestDatabase, name: &str, setup: &str) -> String {
    let role = format!("{name}_{}", db.name());
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN NOSUPERUSER; {}",
            setup.replace("ROLE", &role)
        ))
        .await
        .unwrap();
    format!(
        "postgres://{role}@{}",
        db.url().split_once('@').expect("a URL with a user").1
    )
}

#[tokio::test]
async fn a_login_refused_for_lack_of_connect_exits_69_in_every_command() {
    let db = database().await;
    let name = db.name().to_owned();
    let url = role(
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
    }
}
