//! A hot standby: `lock doctor` fails with the reason (its advisory locks
//! exclude only its own sessions), `lock run` refuses it unless
//! `--allow-standby`, `lock holders` warns that it shows the standby's own,
//! `projection status` cannot know the runner there, and a URL listing the
//! standby first among several hosts is told to ask for read-write; a
//! server of the kind target_session_attrs does not ask for is told so.
//! The standby is the test kit's `pg_basebackup -R` of a private primary.

use crate::common::*;

/// The tool with `args`, on the server of `url` only.
async fn on(url: &str, args: &[&str]) -> Output {
    output(eventsource(None).env("DATABASE_URL", url).args(args)).await
}

#[tokio::test]
async fn doctor_fails_on_a_hot_standby_with_the_reason() {
    let (cluster, db) = private_db(&[]).await;
    // The fence table first, so that the standby's copy has it
    // (`leader run` needs it before anything else).
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let standby = standby_of(&cluster).await;
    let url = standby.url(db.name());
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the standby accepts connections");
    tokio::spawn(conn);
    let in_recovery: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .unwrap()
        .get(0);
    assert!(in_recovery, "a standby");

    let out = on(&url, &["lock", "doctor"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("FAILED"), "{}", out.stderr);
    assert!(out.stderr.contains("standby"), "{}", out.stderr);
    assert!(out.stderr.contains("pg_is_in_recovery"), "{}", out.stderr);
    // `lock run` refuses it (69, the reason on stderr), unless told.
    let out = on(&url, &["lock", "run", "on-standby", "--", "echo", "ran"]).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("hot standby"), "{}", out.stderr);
    assert!(out.stderr.contains("--allow-standby"), "{}", out.stderr);
    let out = on(
        &url,
        &[
            "lock",
            "run",
            "--allow-standby",
            "on-standby",
            "--",
            "echo",
            "ran",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "ran\n");
    // With --timeout a standby is tried again (it may be promoted), and
    // the end says what answered.
    let out = on(
        &url,
        &[
            "lock",
            "run",
            "--timeout",
            "1s",
            "on-standby",
            "--",
            "echo",
            "ran",
        ],
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr.contains("retrying until --timeout runs out"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("ran out while only a hot standby answered"),
        "{}",
        out.stderr
    );
    // In the tool's words: its flag, not the library's builder option.
    assert!(out.stderr.contains("--allow-standby"), "{}", out.stderr);
    assert!(!out.stderr.contains("allow_standby("), "{}", out.stderr);
    // `leader run` has no --allow-standby to suggest.
    let out = on(&url, &["leader", "run", "on-standby", "--", "echo", "ran"]).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(out.stderr.contains("hot standby"), "{}", out.stderr);
    assert!(!out.stderr.contains("--allow-standby"), "{}", out.stderr);
    // `leader show` there would say "vacant" whoever leads: it warns.
    let out = on(&url, &["leader", "show", "on-standby"]).await;
    assert!(
        out.stderr.contains("hot standby") && out.stderr.contains("\"vacant\" here says nothing"),
        "{out:?}"
    );
    // `lock holders` on the standby lists its own sessions only: it warns.
    let out = on(&url, &["lock", "holders", "on-standby"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("hot standby") && out.stderr.contains("exclude nobody on the primary"),
        "{}",
        out.stderr
    );
    // The primary passes, and its holders come without the warning.
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "on-standby"])).await;
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_status_on_a_standby_cannot_know_the_runner_and_says_so() {
    use pgcoord::{DistributedLock, PostgresLockManager};
    let (cluster, db) = private_db(&[]).await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(crate::projection::SHOP_AT_3)
        .await
        .unwrap();
    let standby = standby_of(&cluster).await;
    let url = standby.url(db.name());
    // A runner holds the projection's lock on the primary.
    let locks = PostgresLockManager::builder(db.config().into())
        .holder_id("shop-runner")
        .build()
        .unwrap();
    let guard = locks.acquire("projection:shop", None).await.unwrap();
    let out = output(eventsource(Some(&db)).args(["projection", "status", "shop"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("runner      shop-runner"), "{out:?}");
    assert!(!out.stderr.contains("standby"), "{out:?}");

    // The standby has the checkpoint, not the lock: no "none holds".
    let out = on(&url, &["projection", "status", "shop"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("checkpoint  3"), "{out:?}");
    assert!(
        out.stdout
            .contains("runner      unknown on a standby (locks live on the primary)"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("none holds"), "{out:?}");
    assert!(
        out.stderr.contains("hot standby")
            && out.stderr.contains("exclude nobody on the primary")
            && out
                .stderr
                .contains("point the URL at the primary to see the runner"),
        "{out:?}"
    );
    let out = on(&url, &["projection", "status", "--json", "shop"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(json["in_recovery"], true, "{json}");
    assert_eq!(json["checkpoint"], 3, "{json}");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn several_hosts_with_a_standby_first_are_told_to_ask_for_read_write() {
    let (cluster, db) = private_db(&[]).await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let standby = standby_of(&cluster).await;
    let hosts = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}",
        standby.port(),
        cluster.port(),
        db.name()
    );
    let out = on(&hosts, &["lock", "run", "several", "--", "echo", "ran"]).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr
            .contains("lists several hosts: add target_session_attrs=read-write"),
        "{out:?}"
    );
    assert!(
        !out.stderr.contains("point the URL at the primary"),
        "{out:?}"
    );
    // The doctor's check fails there too, with the same way out.
    let out = on(&hosts, &["lock", "doctor"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("the server is a standby")
            && out
                .stderr
                .contains("lists several hosts: add target_session_attrs=read-write"),
        "{out:?}"
    );
    // The standby alone, asked for read-write: told it is a standby.
    let alone = format!("{}?target_session_attrs=read-write", standby.url(db.name()));
    let out = on(&alone, &["lock", "holders"]).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr
            .contains("the server is a hot standby or read-only")
            && !out.stderr.contains("that the server runs"),
        "{}",
        out.stderr
    );
    // As told: the primary is found, and the command runs.
    let asked = format!("{hosts}?target_session_attrs=read-write");
    let out = on(&asked, &["lock", "run", "several", "--", "echo", "ran"]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "ran\n"), "{out:?}");
}

/// `target_session_attrs=standby` (or `read-only`) on a URL of a primary:
/// the server runs, so the hint says what is wrong instead of "check ...
/// that the server runs".
#[tokio::test]
async fn a_primary_asked_for_as_a_standby_is_told_so() {
    let db = database().await;
    for attrs in ["standby", "read-only"] {
        let url = format!("{}?target_session_attrs={attrs}", db.url());
        let out = on(&url, &["lock", "holders"]).await;
        assert_eq!(out.code, 69, "{out:?}");
        assert!(
            out.stderr.contains("database is not read only")
                && out.stderr.contains("the server is a primary")
                && out.stderr.contains("target_session_attrs"),
            "{attrs}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("that the server runs"),
            "{}",
            out.stderr
        );
    }
}
