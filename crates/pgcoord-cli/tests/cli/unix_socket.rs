//! A server reached through its Unix-domain socket, as libpq reaches one
//! (`PGHOST=/run/postgresql`, or libpq's default where no host is given):
//! every `sslmode` connects there without TLS, and `verify-full` needs no
//! CA file, as with `psql`.
//!
//! Which database a run reached is proved by a conflict: a lock held in
//! the test's database makes a `--no-wait` run there exit 75.

use pgcoord::lock_id_for_key;

use crate::common::*;

#[tokio::test]
async fn a_socket_directory_as_host_works_with_every_sslmode() {
    let (cluster, db) = private_db(&[]).await;
    let holder = session(&db, "eventsource/socket-holder").await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key("sock")])
        .await
        .unwrap();
    let socket_dir = cluster.dir().display().to_string();
    let port = cluster.port().to_string();
    for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
        let env_run = |key: &str| {
            let mut cmd = eventsource(None);
            cmd.env("PGHOST", &socket_dir)
                .env("PGPORT", &port)
                .env("PGUSER", "postgres")
                .env("PGDATABASE", db.name())
                .env("PGSSLMODE", mode)
                .env("PGSSLROOTCERT", "/nonexistent/root.crt")
                .args(["lock", "run", "--no-wait", key, "--", "true"]);
            cmd
        };
        let out = output(&mut env_run("sock")).await;
        assert_eq!(out.code, 75, "{mode}: held in PGDATABASE: {out:?}");
        assert!(
            out.stderr.contains("socket-holder"),
            "{mode}: {}",
            out.stderr
        );
        let out = output(&mut env_run("sock-free")).await;
        assert_eq!(out.code, 0, "{mode}: {out:?}");
    }
    // The same in a URL, the socket directory percent-encoded as the host.
    let url = format!(
        "postgresql://postgres@{}:{port}/{}?sslmode=require",
        socket_dir.replace('/', "%2F"),
        db.name()
    );
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "holders", "sock"]),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("socket-holder"), "{}", out.stdout);
}
