//! The bench binary against private clusters, as a user runs it with
//! `DATABASE_URL`: what it leaves in the database, privileges, TLS for
//! every session, and a pooler whose pool is too small.

use std::process::Output;
use std::sync::Arc;

use pgcoord_testkit::pg::{TestCluster, TestDatabase};
use pgcoord_testkit::pgbouncer::{pgbouncer_or_skip, Bouncer};
use rcgen::{CertificateParams, DnType, KeyPair};

async fn cluster() -> Arc<TestCluster> {
    Arc::new(
        tokio::task::spawn_blocking(TestCluster::start)
            .await
            .unwrap()
            .expect("private cluster"),
    )
}

/// Runs the bench binary, quickly, on `url` with `args`.
async fn bench(url: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_pgcoord-bench"))
        .args(["--quick", "--sweep-rounds", "0", "--seconds", "0.2"])
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .await
        .unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The relations and extensions of `db` besides the catalogs and plpgsql.
async fn objects(db: &TestDatabase) -> Vec<String> {
    let c = db.connect().await.unwrap();
    let rows = c
        .query(
            "SELECT relname::text FROM pg_class \
             WHERE relnamespace = 'public'::regnamespace \
             UNION ALL SELECT 'extension ' || extname FROM pg_extension WHERE extname <> 'plpgsql' \
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_leaves_only_the_fencing_table() {
    let db = TestDatabase::create_on(cluster().await).await.unwrap();
    let out = bench(&db.url(), &["--only", "segments,write_plain,write_fenced"]).await;
    assert!(out.status.success(), "{}", said(&out));
    // As a superuser on a server without pg_stat_statements preloaded: the
    // extension was created, found unusable and dropped again.
    let left = objects(&db).await;
    assert!(
        left.iter()
            .all(|o| o.starts_with("eventsource_lock_fences")),
        "left behind: {left:?}"
    );
    assert!(
        left.contains(&"eventsource_lock_fences".to_owned()),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_role_without_create_is_told_what_was_to_be_created() {
    let db = TestDatabase::create_on(cluster().await).await.unwrap();
    db.connect()
        .await
        .unwrap()
        .batch_execute("CREATE ROLE plain LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        .await
        .unwrap();
    let url = db.url().replacen("postgres@", "plain@", 1);
    let out = bench(&url, &["--only", "ours_seq,segments"]).await;
    let text = said(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("segments: needs CREATE on schema public to create bench_segment_tallies"),
        "{text}"
    );
    assert_eq!(
        text.matches("permission denied for schema").count(),
        0,
        "{text}"
    );
    assert!(text.contains("round 1/1 ours_seq"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_role_without_create_runs_the_fenced_scenarios_on_an_installed_table() {
    let db = TestDatabase::create_on(cluster().await).await.unwrap();
    let mut owner = db.connect().await.unwrap();
    // As `eventsource lock install` by a role that may, then a grant.
    pgcoord::postgres::fencing::install(&mut owner)
        .await
        .unwrap();
    owner
        .batch_execute(
            "CREATE ROLE plain LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC; \
             GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO plain",
        )
        .await
        .unwrap();
    let url = db.url().replacen("postgres@", "plain@", 1);
    let out = bench(&url, &["--only", "ours_seq_fenced,raw_seq_fenced"]).await;
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("needs CREATE"), "{text}");
    assert!(text.contains("round 1/1 ours_seq_fenced"), "{text}");
    assert!(text.contains("round 1/1 raw_seq_fenced"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_tls_every_session_uses_it() {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = params.self_signed(&key).unwrap();
    let c = cluster().await;
    let db = TestDatabase::create_on(c.clone()).await.unwrap();
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    let tls = c.clone();
    tokio::task::spawn_blocking(move || {
        tls.enable_tls(&cert_pem, &key_pem)?;
        // A plaintext session over TCP is refused: a run that completes
        // made every session, raw and sqlx included, with TLS.
        tls.set_hba(
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostnossl all all 127.0.0.1/32 reject\n",
        )
    })
    .await
    .unwrap()
    .unwrap();
    let dir = std::env::temp_dir().join(format!("pgcoord-bench-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let only = "raw_seq,raw_seq_actor,ours_seq,sqlx_seq,sqlx_pool64,raw_seq_inline";
    for params in ["?sslmode=require", ""] {
        let json = dir.join("bench.json");
        let url = format!("{}{params}", db.url());
        let out = bench(&url, &["--only", only, "--json", json.to_str().unwrap()]).await;
        let text = said(&out);
        assert!(out.status.success(), "{params}: {text}");
        assert!(text.contains("(DATABASE_URL, TLS)"), "{text}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(report["meta"]["transport"], "TLS");
        for s in [
            "raw_seq",
            "raw_seq_actor",
            "ours_seq",
            "sqlx_seq",
            "sqlx_pool64",
        ] {
            assert!(report["scenarios"].get(s).is_some(), "{s} missing: {text}");
        }
        assert!(report["skipped"].get("raw_seq_inline").is_some(), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_too_small_is_said_before_the_scenarios() {
    let Some(bin) = pgbouncer_or_skip() else {
        return;
    };
    let c = cluster().await;
    let db = TestDatabase::create_on(c.clone()).await.unwrap();
    let bouncer = Bouncer::start_with(&bin, c.port(), "session", "default_pool_size = 3").unwrap();
    until_listening(&bouncer).await;
    let out = bench(&bouncer.url(db.name()), &["--only", "ours_seq,fifo"]).await;
    let text = said(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("a pooler seems to be queueing connections"),
        "{text}"
    );
    assert!(text.contains("fifo: 21"), "{text}");
    assert!(!text.contains("round 1/1"), "no scenario ran: {text}");
    assert!(!text.contains("db error"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multi_host_url_whose_first_host_is_down_reaches_sqlx_too() {
    let db = TestDatabase::create_on(cluster().await).await.unwrap();
    // A port nobody listens on (taken and freed), before the real one.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let url = db.url();
    let (head, rest) = url.split_once('@').unwrap();
    let url = format!("{head}@127.0.0.1:{dead_port},{rest}");
    let out = bench(&url, &["--only", "sqlx_seq,contention_sqlx"]).await;
    let text = said(&out);
    assert!(out.status.success(), "{url}: {text}");
    assert!(text.contains("round 1/1 sqlx_seq"), "{text}");
    assert!(text.contains("round 1/1 contention_sqlx"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn transaction_pooling_is_refused_before_the_scenarios() {
    let Some(bin) = pgbouncer_or_skip() else {
        return;
    };
    let c = cluster().await;
    let db = TestDatabase::create_on(c.clone()).await.unwrap();
    let bouncer = Bouncer::start(&bin, c.port(), "transaction").unwrap();
    until_listening(&bouncer).await;
    let out = bench(&bouncer.url(db.name()), &["--only", "ours_seq,raw_seq"]).await;
    let text = said(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("pool_mode = session"), "{text}");
    assert!(!text.contains("round 1/1"), "no scenario ran: {text}");
    assert!(!text.contains("already exists"), "{text}");
}

/// Waits until `bouncer` accepts connections: PgBouncer gives no other
/// sign that it listens.
async fn until_listening(bouncer: &Bouncer) {
    let addr = format!("127.0.0.1:{}", bouncer.port());
    let mut tries = 0;
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        tries += 1;
        assert!(tries < 200, "pgbouncer does not listen: {}", bouncer.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
