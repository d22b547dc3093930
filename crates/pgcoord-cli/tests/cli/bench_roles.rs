//! `lock bench` as the roles of a managed service: one under a
//! CONNECTION LIMIT is told the real cause and how many sessions the
//! bench needs (69, never "invalid argument"), and one that may not write
//! the fence table, or whose sessions are read-only, gets every other
//! figure with the fenced one skipped and said why (0).

use serde_json::Value;

use crate::common::*;

async fn bench(url: &str, json: bool) -> Output {
    let mut cmd = eventsource(None);
    cmd.env("DATABASE_URL", url)
        .args(["lock", "bench", "--seconds", "1"]);
    if json {
        cmd.arg("--json");
    }
    output(&mut cmd).await
}

#[tokio::test]
async fn lock_bench_under_a_connection_limit_names_it_and_exits_69() {
    let db = database().await;
    for limit in [3, 4] {
        let (_, url) = login_role(
            &db,
            &format!("limit{limit}"),
            &format!("ALTER ROLE $ROLE CONNECTION LIMIT {limit}"),
        )
        .await;
        let out = bench(&url, true).await;
        assert_eq!(out.code, 69, "limit {limit}: {out:?}");
        assert_eq!(out.stdout, "", "no figures");
        assert!(
            out.stderr.contains("too many connections for role")
                && out.stderr.contains("53300")
                && out.stderr.contains("up to 6 server sessions at once"),
            "limit {limit}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("invalid argument"), "{}", out.stderr);
    }
}

/// The fence table installed; `url`'s role runs the bench: every figure
/// but the fenced ones, which are null with `why` in their note.
async fn fenced_skipped(url: &str, why: &str) {
    let out = bench(url, true).await;
    assert_eq!(out.code, 0, "{out:?}");
    let v: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
    for field in ["sequential_pairs_per_sec", "handover_p99_us"] {
        assert!(v[field].as_f64().is_some_and(|x| x > 0.0), "{field}: {v}");
    }
    assert!(v["fenced_pairs_per_sec"].is_null(), "{v}");
    assert!(v["fenced_grant_extra_us"].is_null(), "{v}");
    let note = v["fenced_not_measured"].as_str().unwrap_or_default();
    assert!(note.contains(why), "{v}");

    let out = bench(url, false).await;
    assert_eq!(out.code, 0, "{out:?}");
    let fenced = out
        .stdout
        .lines()
        .find(|l| l.starts_with("fenced"))
        .unwrap_or_default();
    assert!(
        fenced.contains("not measured") && fenced.contains(why),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("lock-table room"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_bench_as_a_role_that_may_not_write_the_fence_table_skips_that_figure() {
    let db = database().await;
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    let (_, url) = login_role(&db, "nogrant", "").await;
    fenced_skipped(&url, "SQLSTATE 42501").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_bench_as_a_read_only_role_skips_the_fenced_figure() {
    let db = database().await;
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    let (_, url) = login_role(
        &db,
        "reader",
        "ALTER ROLE $ROLE SET default_transaction_read_only = on; \
         GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO $ROLE",
    )
    .await;
    fenced_skipped(&url, "SQLSTATE 25006").await;
}
