//! The lock manager's acquisition metrics, through a Prometheus recorder
//! local to the test's thread (a current-thread runtime runs the managers'
//! sessions on it too): every call is counted under `operation` `acquire`
//! or `try_lock` whatever its mode, with or without key prefixes; a key
//! too long and a dropped acquire are counted; a lock `release_all` takes
//! from its guard is not a per-prefix loss; a recorder installed while a
//! prefixed guard is held reads its release as 0, not -1.

use crate::common;
use crate::recorder::recorded;

use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock, LockRegistry, SharedLock, MAX_KEY_LEN};
use pgcoord_testkit::pg::TestDatabase;

/// The sum of the samples of `name` whose labels contain all of `labels`.
fn value(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            n == name && labels.iter().all(|l| rest.contains(l))
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

const ACQUISITIONS: &str = "eventsource_lock_acquisitions_total";

fn keyed(db: &TestDatabase, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(db.config().into())
        .holder_id(holder)
        .metrics_key_prefix(':', 10)
        .build()
        .unwrap()
}

#[test]
fn a_key_too_long_is_counted_as_an_error() {
    let text = recorded(|| async {
        let db = TestDatabase::create().await.unwrap();
        let m = common::manager(&db, "long");
        let long = "x".repeat(MAX_KEY_LEN + 1);
        assert!(m.acquire(&long, None).await.is_err());
        assert!(m.try_lock(&long).await.is_err());
        assert!(m.try_lock_any(&["fine", &long]).await.is_err());
    });
    let error = |op: &str| {
        let op = format!("operation=\"{op}\"");
        value(&text, ACQUISITIONS, &[&op, "outcome=\"error\""])
    };
    assert_eq!(error("acquire"), 1.0, "{text}");
    assert_eq!(error("try_lock"), 2.0, "{text}");
}

/// One granted call of each kind on `m`: two waits, three tries.
async fn one_of_each(m: &PostgresLockManager) {
    let tag = uuid::Uuid::new_v4();
    let shared = m.acquire_shared(&format!("s:{tag}"), None).await.unwrap();
    let tried = m.try_lock_shared(&format!("t:{tag}")).await.unwrap();
    let any = m.try_lock_any(&[&format!("u:{tag}")]).await.unwrap();
    let exclusive = m.acquire(&format!("v:{tag}"), None).await.unwrap();
    let one = m.try_lock(&format!("w:{tag}")).await.unwrap();
    assert!(tried.is_some() && any.is_some() && one.is_some());
    drop((shared, tried, any, exclusive, one));
}

#[test]
fn every_try_is_a_try_lock_and_every_wait_an_acquire_with_or_without_prefixes() {
    for prefixed in [false, true] {
        let text = recorded(|| async move {
            let db = TestDatabase::create().await.unwrap();
            let m = if prefixed {
                keyed(&db, "keyed")
            } else {
                common::manager(&db, "plain")
            };
            one_of_each(&m).await;
        });
        let granted = |op: &str| {
            let op = format!("operation=\"{op}\"");
            value(&text, ACQUISITIONS, &[&op, "outcome=\"granted\""])
        };
        assert_eq!(granted("acquire"), 2.0, "prefixed {prefixed}: {text}");
        assert_eq!(granted("try_lock"), 3.0, "prefixed {prefixed}: {text}");
        let operations: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(ACQUISITIONS))
            .filter_map(|l| l.split("operation=\"").nth(1)?.split('"').next())
            .collect();
        assert!(
            operations
                .iter()
                .all(|o| *o == "acquire" || *o == "try_lock"),
            "prefixed {prefixed}: {operations:?}"
        );
    }
}

#[test]
fn try_lock_any_counts_under_the_prefix_of_the_key_it_took() {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (held, free) = (format!("busy{tag}:1"), format!("free{tag}:1"));
    let text = recorded(|| async {
        let db = TestDatabase::create().await.unwrap();
        let (m, other) = (keyed(&db, "any"), common::manager(&db, "other"));
        let _blocker = other.acquire(&held, None).await.unwrap();
        let (i, _g) = m.try_lock_any(&[&held, &free]).await.unwrap().unwrap();
        assert_eq!(i, 1);
    });
    let granted = |prefix: &str| {
        let p = format!("key_prefix=\"{prefix}{tag}\"");
        let labels = ["operation=\"try_lock\"", "outcome=\"granted\"", &p];
        value(&text, ACQUISITIONS, &labels)
    };
    assert_eq!(granted("free"), 1.0, "{text}");
    assert_eq!(granted("busy"), 0.0, "{text}");
}

#[test]
fn a_dropped_acquire_is_counted_as_abandoned() {
    let text = recorded(|| async {
        let db = TestDatabase::create().await.unwrap();
        let (m, other) = (common::manager(&db, "drops"), common::manager(&db, "other"));
        let key = format!("drops:{}", uuid::Uuid::new_v4());
        let _held = other.acquire(&key, None).await.unwrap();
        let client = db.connect().await.unwrap();
        tokio::select! {
            r = m.acquire(&key, None) => panic!("granted while held elsewhere: {r:?}"),
            () = common::wait_for_waiters(&client, lock_id_for_key(&key), 1) => {}
        }
    });
    let abandoned = ["operation=\"acquire\"", "outcome=\"abandoned\""];
    assert_eq!(value(&text, ACQUISITIONS, &abandoned), 1.0, "{text}");
}

#[test]
fn a_lock_release_all_takes_from_its_guard_is_not_a_prefix_loss() {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let text = recorded(|| async {
        let db = TestDatabase::create().await.unwrap();
        let m = keyed(&db, "all");
        let g = m.acquire(&format!("all{tag}:1"), None).await.unwrap();
        assert_eq!(m.release_all().await.unwrap(), 1);
        assert!(g.is_lost(), "release_all takes the lock from its guard");
        drop(g);
    });
    let p = format!("key_prefix=\"all{tag}\"");
    let hold = "eventsource_lock_prefix_hold_duration_seconds_count";
    assert_eq!(value(&text, hold, &[&p]), 1.0, "{text}");
    let losses = "eventsource_lock_prefix_losses_total";
    assert_eq!(value(&text, losses, &[&p]), 0.0, "{text}");
    assert_eq!(value(&text, "eventsource_lock_losses_total", &[]), 0.0);
}

#[test]
fn a_shared_hold_counts_as_waited_only_when_the_server_made_it_wait() {
    let text = recorded(|| async {
        let db = TestDatabase::create().await.unwrap();
        let (m, other) = (
            common::manager(&db, "readers"),
            common::manager(&db, "writer"),
        );
        let (free, busy) = (
            format!("free:{}", uuid::Uuid::new_v4()),
            format!("busy:{}", uuid::Uuid::new_v4()),
        );
        let at_once = m.acquire_shared(&free, None).await.unwrap();
        let writer = other.acquire(&busy, None).await.unwrap();
        let client = db.connect().await.unwrap();
        let (waited, ()) = tokio::join!(m.acquire_shared(&busy, None), async {
            common::wait_for_waiters(&client, lock_id_for_key(&busy), 1).await;
            writer.release().await.unwrap();
        });
        drop((at_once, waited.unwrap()));
    });
    let granted = |waited: &str| {
        let w = format!("waited=\"{waited}\"");
        let labels = ["operation=\"acquire\"", "outcome=\"granted\"", &w];
        value(&text, ACQUISITIONS, &labels)
    };
    // The free shared hold, and the writer's free exclusive lock.
    assert_eq!(granted("false"), 2.0, "{text}");
    // The shared hold behind the writer.
    assert_eq!(granted("true"), 1.0, "{text}");
}

#[test]
fn a_recorder_installed_while_a_prefixed_guard_is_held_reads_its_release_as_0_not_below() {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Taken before any recorder: the +1 goes nowhere.
    let (db, m, g) = rt.block_on(async {
        let db = TestDatabase::create().await.unwrap();
        let m = keyed(&db, "late");
        let g = m.acquire(&format!("late{tag}:1"), None).await.unwrap();
        (db, m, g)
    });
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let other = m.acquire(&format!("late{tag}:2"), None).await.unwrap();
            g.release().await.unwrap();
            drop(other);
        })
    });
    drop((m, db));
    let text = handle.render();
    let p = format!("key_prefix=\"late{tag}\"");
    assert_eq!(
        value(&text, "eventsource_lock_prefix_held", &[&p]),
        0.0,
        "{text}"
    );
}
