//! The open-file limit: below the tool's minimum it says so before doing
//! anything (it used to panic in tokio's signal handling, exit 101, or
//! fail to connect and blame the server, exit 69, retrying until
//! --timeout); with room, it runs.

use crate::common::*;

/// `lock run --timeout 3s KEY --also KEY2 -- true` under `ulimit -n n`.
async fn run_under_open_file_limit(db: &pgcoord_testkit::pg::TestDatabase, n: u32) -> Output {
    let script = format!("ulimit -n {n} && exec \"$0\" \"$@\"");
    output(eventsource_under(&["sh", "-c", &script], Some(db)).args([
        "lock",
        "run",
        "--timeout",
        "3s",
        "ulimit:a",
        "--also",
        "ulimit:b",
        "--",
        "true",
    ]))
    .await
}

#[tokio::test]
async fn below_the_minimum_the_limit_is_named_and_nothing_is_tried() {
    let db = database().await;
    for n in [6, 9, 15] {
        let out = run_under_open_file_limit(&db, n).await;
        assert_eq!(out.code, 70, "ulimit -n {n}: {out:?}");
        assert!(
            out.stderr.contains(&format!(
                "the open-file limit of this process is {n} (ulimit -n); the tool needs at least 16"
            )),
            "{}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        assert!(!out.stderr.contains("server runs"), "{}", out.stderr);
    }
    let out = run_under_open_file_limit(&db, 24).await;
    assert_eq!(out.code, 0, "{out:?}");
}
