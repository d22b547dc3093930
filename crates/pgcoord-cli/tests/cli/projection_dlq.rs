//! `projection dlq list|show|replay|drop` on events a real runner parked:
//! text and `--json`, replay marks applied by the running runner through
//! its handler, drop by position and `--all`, and bad input.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::{DeadLetterPolicy, ProjectionRunner, ReadModelProjection, RetryPolicy};
use pgcoord::readmodels::{
    FieldDescriptor, FieldType, ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository,
};
use pgcoord::{
    readmodels::postgres::{PostgresDatabase, PostgresEventTable},
    PostgresLockManager,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use tokio::process::Command;

use crate::common::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Taken {
    #[serde(flatten)]
    meta: ReadModelMeta,
    n: i64,
}

impl ReadModel for Taken {
    const TABLE_NAME: Option<&'static str> = Some("taken");
    fn fields() -> Vec<FieldDescriptor> {
        vec![FieldDescriptor::new("n", FieldType::Integer)]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

/// Refuses events marked `"bad"` until cured.
struct Picky {
    cured: AtomicBool,
}

impl ReadModelHandler for Picky {
    type Model = Taken;
    type Event = Value;

    async fn handle<R: ReadModelRepository<Taken>>(
        &self,
        e: &Value,
        repo: &R,
    ) -> pgcoord::Result<()> {
        let n = e["n"].as_i64().unwrap();
        if e["bad"] == json!(true) && !self.cured.load(Ordering::SeqCst) {
            return Err(pgcoord::Error::InvalidArgument(format!(
                "cannot take event {n}"
            )));
        }
        repo.save(&Taken {
            meta: ReadModelMeta::new_random(),
            n,
        })
        .await?;
        Ok(())
    }
}

type Runner = ProjectionRunner<
    Picky,
    pgcoord::readmodels::postgres::PostgresReadModelRepository<Taken, PostgresDatabase>,
    PostgresEventTable<Value>,
>;

struct Shop {
    db: pgcoord_testkit::pg::TestDatabase,
    pool: PostgresDatabase,
    feed: PostgresEventTable<Value>,
    runner: Arc<Runner>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<pgcoord::Result<pgcoord::readmodels::RunSummary>>,
}

/// Projection `shop` run over events 1..=5, of which 2 and 4 are bad: a
/// runner parks them (two attempts each) and runs on.
async fn parked() -> Shop {
    let db = database().await;
    let pool = PostgresDatabase::connect(&db.url()).await.unwrap();
    let feed = PostgresEventTable::<Value>::new(pool.clone(), "events")
        .unwrap()
        .listen();
    feed.create_table().await.unwrap();
    pool.create_schema::<Taken>().await.unwrap();
    let client = pool.get().await.unwrap();
    for n in 1..=5 {
        feed.append(&*client, &json!({ "n": n, "bad": n % 2 == 0 }))
            .await
            .unwrap();
    }
    let handler = Picky {
        cured: AtomicBool::new(false),
    };
    let retry = RetryPolicy {
        max_attempts: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(1),
        multiplier: 1.0,
    };
    let projection = ReadModelProjection::new(handler, pool.repository::<Taken>())
        .named("shop")
        .with_retry(retry);
    let runner = Arc::new(
        ProjectionRunner::new(projection, feed.clone())
            .idle_interval(None)
            .with_dead_letters(DeadLetterPolicy::new().json_payload()),
    );
    let locks = PostgresLockManager::builder(db.config().into())
        .holder_id("shop-runner")
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let (r, s) = (runner.clone(), stop.clone());
    let task = tokio::spawn(async move { r.run(&locks, &s).await });
    runner
        .progress()
        .wait_for(5, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    Shop {
        db,
        pool,
        feed,
        runner,
        stop,
        task,
    }
}

async fn dlq(db: &pgcoord_testkit::pg::TestDatabase, args: &[&str]) -> Output {
    let mut cmd = eventsource(Some(db));
    cmd.args(["projection", "dlq"]).args(args);
    output(&mut cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_show_the_parked_events_as_text_and_json() {
    let shop = parked().await;
    let out = dlq(&shop.db, &["list", "shop"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let rows: Vec<&str> = out.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{}", out.stdout);
    assert!(
        rows[0].starts_with("2 ") && rows[0].contains("cannot take event 2"),
        "{}",
        out.stdout
    );
    assert!(rows[1].starts_with("4 "), "{}", out.stdout);

    let out = dlq(&shop.db, &["list", "--json", "shop"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let list: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let positions: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["position"].as_i64().unwrap())
        .collect();
    assert_eq!(positions, [2, 4]);
    assert_eq!(list[0]["attempts"], 2);
    assert_eq!(list[0]["payload"], json!({ "n": 2, "bad": true }));

    let out = dlq(&shop.db, &["show", "shop", "4"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("position       4"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("error          invalid argument: cannot take event 4")
            || out.stdout.contains("cannot take event 4"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\"bad\": true"),
        "the payload: {}",
        out.stdout
    );
    let out = dlq(&shop.db, &["show", "--json", "shop", "4"]).await;
    let one: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        (one["position"].as_i64(), one["replay_requested"].as_bool()),
        (Some(4), Some(false))
    );

    let out = dlq(&shop.db, &["show", "shop", "3"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("projection shop has no parked event at position 3"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());

    let status =
        output(eventsource(Some(&shop.db)).args(["projection", "status", "--json", "shop"])).await;
    let status: Value = serde_json::from_str(status.stdout.trim()).unwrap();
    assert_eq!(status["parked"], 2);
    shop.stop.cancel();
    shop.task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_marks_the_events_and_the_running_runner_applies_them_through_its_handler() {
    let shop = parked().await;
    shop.runner
        .projection()
        .handler()
        .cured
        .store(true, Ordering::SeqCst);
    let out = dlq(&shop.db, &["replay", "--json", "shop", "4"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let marked: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        (marked["marked"].as_u64(), marked["runner"].as_bool()),
        (Some(1), Some(true))
    );
    // The runner replays marked events before its next batch: give it one.
    let client = shop.pool.get().await.unwrap();
    shop.feed
        .append(&*client, &json!({ "n": 6, "bad": false }))
        .await
        .unwrap();
    shop.runner
        .progress()
        .wait_for(6, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let out = dlq(&shop.db, &["list", "--json", "shop"]).await;
    let list: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "only 2 is left: {list}");
    assert_eq!(list[0]["position"], 2);
    let taken = client
        .query_one("SELECT count(*) FROM taken WHERE n = 4", &[])
        .await
        .unwrap();
    assert_eq!(
        taken.get::<_, i64>(0),
        1,
        "4 applied once, through the handler"
    );

    let out = dlq(&shop.db, &["replay", "shop", "2", "9"]).await;
    assert_eq!(out.code, 1, "9 is not parked: {out:?}");
    assert!(
        out.stdout
            .contains("marked 1 parked event(s) of projection shop for replay"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("no parked event at position 9"),
        "{}",
        out.stderr
    );
    shop.stop.cancel();
    shop.task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_needs_positions_or_all_and_asks_nothing_without_a_terminal() {
    let shop = parked().await;
    shop.stop.cancel();
    shop.task.await.unwrap().unwrap();
    let out = dlq(&shop.db, &["drop", "shop"]).await;
    assert_eq!(out.code, 2, "neither positions nor --all: {out:?}");
    assert_eq!(
        dlq(&shop.db, &["list", "--json", "shop"])
            .await
            .stdout
            .matches("position")
            .count(),
        2
    );

    let out = dlq(&shop.db, &["drop", "--json", "shop", "2"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let dropped: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(dropped["dropped"], 1);
    let out = dlq(&shop.db, &["drop", "--all", "shop"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("dropped 1 parked event(s) of projection shop"),
        "{}",
        out.stdout
    );
    let out = dlq(&shop.db, &["list", "shop"]).await;
    assert_eq!(out.stdout, "projection shop has no parked events\n");
    let client = shop.pool.get().await.unwrap();
    let taken = client
        .query_one("SELECT count(*) FROM taken", &[])
        .await
        .unwrap();
    assert_eq!(taken.get::<_, i64>(0), 3, "dropped events are not applied");

    let out = dlq(&shop.db, &["show", "shop", "not-a-number"]).await;
    assert_eq!(out.code, 2, "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_asks_on_a_terminal_even_with_standard_error_redirected() {
    let shop = parked().await;
    shop.stop.cancel();
    shop.task.await.unwrap().unwrap();
    // On a pty whose input ends at once: the question is asked (on the
    // terminal, standard error going to a file) and EOF declines it.
    let err = std::env::temp_dir().join(format!("dlq-drop-{}.err", shop.db.name()));
    let command = format!("{BIN} projection dlq drop shop --all 2>{}", err.display());
    let out = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(&command)
        .arg("/dev/null")
        .env("DATABASE_URL", shop.db.url())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(BOUND, out).await.unwrap().unwrap();
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(
        terminal.contains("drop 2 parked event(s) of projection shop without applying them? [y/N]"),
        "the question on the terminal: {terminal:?}"
    );
    assert_eq!(out.status.code(), Some(1), "declined: {out:?}");
    let said = std::fs::read_to_string(&err).unwrap();
    let _ = std::fs::remove_file(&err);
    assert!(said.contains("nothing dropped"), "{said}");
    let listed = dlq(&shop.db, &["list", "--json", "shop"]).await;
    assert_eq!(
        listed.stdout.matches("position").count(),
        2,
        "nothing dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_names_the_projection_first_and_errors_say_what_failed() {
    for sub in ["replay", "drop"] {
        let out = output(eventsource(None).args(["projection", "dlq", sub, "--help"])).await;
        let usage =
            format!("eventsource projection dlq {sub} [OPTIONS] <NAME> <POSITION>...|--all");
        assert!(out.stdout.contains(&usage), "{}", out.stdout);
    }
    let shop = parked().await;
    shop.stop.cancel();
    shop.task.await.unwrap().unwrap();
    let admin = shop.db.connect().await.unwrap();
    let role = format!("nosy_{}", shop.db.name());
    admin
        .batch_execute(&format!("CREATE ROLE {role} LOGIN"))
        .await
        .unwrap();
    let url = format!(
        "postgres://{role}@{}",
        shop.db.url().split_once('@').unwrap().1
    );
    let out = output(
        eventsource(None)
            .args(["projection", "dlq", "list", "shop"])
            .env("DATABASE_URL", &url),
    )
    .await;
    // A privilege the role lacks is the database's setup (78), not a
    // database that cannot be reached (69).
    assert_eq!(out.code, 78, "{out:?}");
    assert!(
        out.stderr
            .contains("cannot list the parked events: database error: permission denied"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("db error"),
        "said once: {}",
        out.stderr
    );

    // Another database: nothing parked there, and the line says where it looked.
    let other = database().await;
    let out = dlq(&other, &["list", "shop"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let note = format!(
        "note: database \"{}\" has no table eventsource_projection_dead_letters",
        other.name()
    );
    assert!(out.stderr.contains(&note), "{}", out.stderr);
}

/// `replay --all` and `drop --all` on a database without the dead-letter
/// table act on nothing and, like `list`, say where they looked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_on_a_database_without_the_table_says_so() {
    let db = database().await;
    let note = format!(
        "note: database \"{}\" has no table eventsource_projection_dead_letters",
        db.name()
    );
    let out = dlq(&db, &["replay", "shop", "--all"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("marked 0 parked event(s)"), "{out:?}");
    assert!(out.stderr.contains(&note), "replay --all: {out:?}");
    let out = dlq(&db, &["drop", "shop", "--all"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("dropped 0 parked event(s)"), "{out:?}");
    assert!(out.stderr.contains(&note), "drop --all: {out:?}");
}
