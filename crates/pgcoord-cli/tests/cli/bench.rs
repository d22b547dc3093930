//! `lock bench` as an ordinary role: figures that exist and are positive,
//! the fenced figure only once `lock install` has run, and nothing left
//! behind (no lock held, no session left, no table created).

use serde_json::Value;

use crate::common::*;

/// An ordinary role (no superuser, no grants but the fence table's rows),
/// and the database URL as that role.
async fn ordinary_role(db: &pgcoord_testkit::pg::TestDatabase) -> String {
    let role = format!("bench_{}", db.name());
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!("CREATE ROLE {role} LOGIN NOSUPERUSER"))
        .await
        .unwrap();
    let url = db.url();
    let as_role = url.replacen("://postgres@", &format!("://{role}@"), 1);
    assert_ne!(url, as_role, "a URL of the test harness's form");
    as_role
}

/// What a run could leave behind: advisory locks of this database, the
/// bench's sessions, tables outside the catalogs.
async fn traces(admin: &tokio_postgres::Client) -> (i64, i64, i64) {
    let row = admin
        .query_one(
            "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())), \
                    (SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'eventsource/lock-bench%'), \
                    (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                      WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema'))",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

fn positive(v: &Value, field: &str) -> f64 {
    let x = v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing: {v}"));
    assert!(x > 0.0, "{field} = {x}");
    x
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_bench_as_an_ordinary_role_measures_and_leaves_nothing() {
    let db = database().await;
    let admin = db.connect().await.unwrap();
    let url = ordinary_role(&db).await;

    // Before `lock install`: no fenced figure, and the text says why.
    let before = traces(&admin).await;
    let out = output(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "bench",
        "--seconds",
        "1",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("pairs/s"), "{}", out.stdout);
    assert!(out.stdout.contains("lock-table room"), "{}", out.stdout);
    assert!(out.stdout.contains("not installed"), "{}", out.stdout);
    assert_eq!(out.stderr, "", "no progress line off a terminal");
    assert_eq!(traces(&admin).await.2, before.2, "no table created");

    // After it (the role may write the fence table's rows): all figures.
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    let role = format!("bench_{}", db.name());
    admin
        .batch_execute(&format!(
            "GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO {role}"
        ))
        .await
        .unwrap();
    let before = traces(&admin).await;
    let out = output(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "bench",
        "--seconds",
        "1",
        "--json",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    let v: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
    for field in [
        "seconds_per_workload",
        "sequential_pairs_per_sec",
        "concurrent64_pairs_per_sec",
        "handovers",
        "handover_p50_us",
        "handover_p99_us",
        "fenced_pairs_per_sec",
    ] {
        positive(&v, field);
    }
    assert!(v["handover_p99_us"].as_f64() >= v["handover_p50_us"].as_f64());
    assert!(v["fenced_grant_extra_us"].is_number(), "{v}");
    let room = &v["lock_table"];
    let slots = positive(room, "slots");
    let backends = positive(room, "backend_slots");
    assert!(backends > positive(room, "max_connections"), "{room}");
    assert_eq!(
        slots,
        positive(room, "max_locks_per_transaction") * backends,
        "{room}"
    );

    // The tool has exited; the server ends its backends as their sockets
    // close (no event announces it, so this looks, bounded).
    let deadline = tokio::time::Instant::now() + BOUND;
    while traces(&admin).await.1 != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a session of the bench left"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (locks, _, tables) = traces(&admin).await;
    assert_eq!(locks, 0, "an advisory lock left held");
    assert_eq!(tables, before.2, "no table created");
    let rows: i64 = admin
        .query_one("SELECT count(*) FROM eventsource_lock_fences", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "one fence row, for the fixed key");
}

#[tokio::test]
async fn lock_bench_without_a_database_exits_69() {
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
            .args(["lock", "bench", "--seconds", "1", "--json"]),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert_eq!(out.stdout, "", "no figures");
    assert!(
        out.stderr.contains("cannot run the benchmark"),
        "{}",
        out.stderr
    );
}
