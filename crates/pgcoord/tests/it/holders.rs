//! `query_holders`: the inspection of advisory locks through `pg_locks`,
//! against a real PostgreSQL with raw sessions holding and waiting.

use std::future::Future;
use std::time::Duration;

use pgcoord::error::BackendErrorKind;
use pgcoord::lock_id_for_key;
use pgcoord::{
    inspect::{connect_for_inspection, query_holders, AdvisoryLock, HoldersQuery},
    postgres::SslMode,
    ConnectOptions,
};
use pgcoord_testkit::pg::TestDatabase;
use tokio_postgres::{Client, NoTls};

async fn session(db: &TestDatabase, application_name: &str) -> Client {
    let mut config = db.config();
    config.application_name(application_name);
    let (client, conn) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// Polls until `query_holders` shows `waiters` sessions waiting for `key`
/// (there is no event for "a session started waiting"); bounded at 30 s.
async fn wait_for_waiters(client: &Client, key: &str, waiters: usize) -> Vec<AdvisoryLock> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let locks = query_holders(client, &[key]).await.expect("query_holders");
        if locks.first().map(|l| l.waiters.len()) == Some(waiters) {
            return locks;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw {waiters} waiters on {key}: {locks:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn shows_holder_and_waiters_in_queue_order() {
    let db = TestDatabase::create().await.expect("database");
    let key = "holders:report";
    let id = lock_id_for_key(key);
    let holder = session(&db, "eventsource/host-a:101").await;
    let first = session(&db, "eventsource/host-b:202").await;
    let second = session(&db, "psql").await;
    let inspector = db.connect().await.expect("inspector");
    let holder_pid: i32 = holder
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();

    let first_wait = tokio::spawn(async move {
        first
            .execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
        first
    });
    wait_for_waiters(&inspector, key, 1).await;
    let second_wait = tokio::spawn(async move {
        second
            .execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
        second
    });
    let locks = wait_for_waiters(&inspector, key, 2).await;

    assert_eq!(locks.len(), 1, "{locks:?}");
    let lock = &locks[0];
    assert_eq!(lock.lock_id, id);
    assert_eq!(lock.key.as_deref(), Some(key));
    assert_eq!(lock.holders.len(), 1);
    let h = &lock.holders[0];
    assert_eq!(h.pid, holder_pid);
    assert!(h.granted);
    assert_eq!(h.mode, "ExclusiveLock");
    assert_eq!(
        h.application_name.as_deref(),
        Some("eventsource/host-a:101")
    );
    assert_eq!(h.holder_id.as_deref(), Some("host-a:101"));
    assert_eq!(h.client_addr.as_deref(), Some("127.0.0.1"));
    assert!(h.backend_start.is_some() && h.since.is_some());

    let w: Vec<(Option<&str>, Option<&str>)> = lock
        .waiters
        .iter()
        .map(|w| (w.holder_id.as_deref(), w.application_name.as_deref()))
        .collect();
    assert_eq!(
        w,
        vec![
            (Some("host-b:202"), Some("eventsource/host-b:202")),
            (None, Some("psql"))
        ],
        "waiters in arrival order"
    );
    assert!(lock.waiters.iter().all(|w| !w.granted && w.since.is_some()));
    assert!(lock.waiters[0].since <= lock.waiters[1].since);

    // Unnamed listing: the same lock, without its key.
    let all = query_holders(&inspector, &[]).await.unwrap();
    let same = all.iter().find(|l| l.lock_id == id).expect("listed");
    assert_eq!(same.key, None);
    assert_eq!(same.holders.len(), 1);
    assert_eq!(same.waiters.len(), 2);

    // The JSON form names every field.
    let json = serde_json::to_value(lock).unwrap();
    assert_eq!(json["lock_id"], serde_json::json!(id));
    assert_eq!(json["holders"][0]["holder_id"], "host-a:101");
    assert_eq!(json["waiters"][1]["application_name"], "psql");

    // The queue moves on: after the unlock, the first waiter holds it.
    holder
        .execute("SELECT pg_advisory_unlock($1)", &[&id])
        .await
        .unwrap();
    let first = first_wait.await.unwrap();
    let locks = wait_for_waiters(&inspector, key, 1).await;
    assert_eq!(locks[0].holders[0].holder_id.as_deref(), Some("host-b:202"));
    first
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    let second = second_wait.await.unwrap();
    second
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
}

#[tokio::test]
async fn keys_filter_and_ids_of_all_signs_map_back() {
    let db = TestDatabase::create().await.expect("database");
    let a = session(&db, "eventsource/a").await;
    let inspector = db.connect().await.unwrap();
    // A key nobody holds is simply absent.
    assert!(query_holders(&inspector, &["nobody"])
        .await
        .unwrap()
        .is_empty());

    // Raw ids chosen to exercise the high/low 32-bit split, including
    // negative ones that other software may use.
    let ids: [i64; 4] = [1, 0x7FFF_FFFF_FFFF_FFFF, -1, i64::MIN + 5];
    for id in ids {
        a.execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
    }
    // The (int, int) form is a different lock space, listed after the
    // bigint locks with its pair.
    a.execute("SELECT pg_advisory_lock(7, 8)", &[])
        .await
        .unwrap();
    let keyed = lock_id_for_key("keyed");
    a.execute("SELECT pg_advisory_lock($1)", &[&keyed])
        .await
        .unwrap();

    let all = query_holders(&inspector, &[]).await.unwrap();
    assert_eq!(all.last().and_then(|l| l.int_pair), Some((7, 8)));
    let mut listed: Vec<i64> = all
        .iter()
        .filter(|l| l.int_pair.is_none())
        .map(|l| l.lock_id)
        .collect();
    listed.sort();
    let mut expected = ids.to_vec();
    expected.push(keyed);
    expected.sort();
    assert_eq!(listed, expected);

    let only = query_holders(&inspector, &["keyed", "nobody"])
        .await
        .unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].key.as_deref(), Some("keyed"));
    assert_eq!(only[0].holders[0].holder_id.as_deref(), Some("a"));
}

#[tokio::test]
async fn other_databases_are_not_listed() {
    let db = TestDatabase::create().await.expect("database");
    let other = TestDatabase::create().await.expect("other database");
    let holder = other.connect().await.unwrap();
    let id = lock_id_for_key("elsewhere");
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    let inspector = db.connect().await.unwrap();
    assert!(query_holders(&inspector, &["elsewhere"])
        .await
        .unwrap()
        .is_empty());
    let there = other.connect().await.unwrap();
    assert_eq!(
        query_holders(&there, &["elsewhere"]).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_closed_session_is_a_backend_error() {
    let db = TestDatabase::create().await.expect("database");
    let victim = db.connect().await.unwrap();
    let killer = db.connect().await.unwrap();
    let pid: i32 = victim
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    // With a timeout, pg_terminate_backend waits until the backend is gone.
    killer
        .execute("SELECT pg_terminate_backend($1, 30000)", &[&pid])
        .await
        .unwrap();
    let err = query_holders(&victim, &[])
        .await
        .expect_err("session is gone");
    assert!(err.as_backend().is_some(), "{err:?}");
}

#[tokio::test]
async fn two_int_locks_are_listed_apart_from_bigint_locks_with_the_same_bits() {
    let db = TestDatabase::create().await.unwrap();
    let inspector = session(&db, "inspector").await;
    let pair = session(&db, "pair-holder").await;
    let big = session(&db, "bigint-holder").await;
    // (1, -2) as two ints and (1 << 32) | 0xFFFF_FFFE as one bigint have the
    // same classid/objid in pg_locks, but they are different locks.
    pair.execute("SELECT pg_advisory_lock(1, -2)", &[])
        .await
        .unwrap();
    let same_bits: i64 = (1_i64 << 32) | 0xFFFF_FFFE;
    big.execute("SELECT pg_advisory_lock($1)", &[&same_bits])
        .await
        .unwrap();
    let locks = query_holders(&inspector, &[]).await.unwrap();
    assert_eq!(locks.len(), 2, "{locks:?}");
    assert_eq!(locks[0].int_pair, None);
    assert_eq!(locks[0].lock_id, same_bits);
    assert_eq!(
        locks[0].holders[0].application_name.as_deref(),
        Some("bigint-holder")
    );
    assert_eq!(locks[1].int_pair, Some((1, -2)));
    assert_eq!(
        locks[1].holders[0].application_name.as_deref(),
        Some("pair-holder")
    );
    // Asking by key lists bigint locks only.
    let by_key = query_holders(&inspector, &["nobody-holds-this"])
        .await
        .unwrap();
    assert!(by_key.is_empty(), "{by_key:?}");
}

#[tokio::test]
async fn waiters_name_the_sessions_they_wait_behind() {
    let db = TestDatabase::create().await.unwrap();
    let inspector = db.connect().await.unwrap();
    let key = "holders:blocked";
    let id = lock_id_for_key(key);
    let pid = |c: Client| async move {
        let p: i32 = c
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        (c, p)
    };
    let (holder, holder_pid) = pid(session(&db, "holder").await).await;
    let (first, first_pid) = pid(session(&db, "first").await).await;
    let (second, _) = pid(session(&db, "second").await).await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    let first_wait = tokio::spawn(async move {
        first
            .execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
        first
    });
    wait_for_waiters(&inspector, key, 1).await;
    let second_wait = tokio::spawn(async move {
        second
            .execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
        second
    });
    let locks = wait_for_waiters(&inspector, key, 2).await;
    let lock = &locks[0];
    assert!(lock.holders[0].blocked_by.is_empty(), "{lock:?}");
    assert_eq!(lock.waiters[0].blocked_by, vec![holder_pid]);
    let mut behind = lock.waiters[1].blocked_by.clone();
    behind.sort();
    let mut expected = vec![holder_pid, first_pid];
    expected.sort();
    assert_eq!(behind, expected, "the holder and the waiter ahead");
    let json = serde_json::to_value(lock).unwrap();
    assert_eq!(
        json["waiters"][0]["blocked_by"],
        serde_json::json!([holder_pid])
    );
    assert!(json.get("fence").is_none(), "no fencing table: {json}");

    holder
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    let first = first_wait.await.unwrap();
    first
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    let second = second_wait.await.unwrap();
    second
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
}

/// `run` is cancel safe: a call dropped after its statement went out leaves
/// the session as it was, and the next call answers in full.
#[tokio::test]
async fn a_dropped_run_leaves_the_session_usable() {
    let db = TestDatabase::create().await.unwrap();
    let client = db.connect().await.unwrap();
    let holder = session(&db, "dropped-run").await;
    holder
        .execute("SELECT pg_advisory_lock(5)", &[])
        .await
        .unwrap();
    let query = HoldersQuery::all().with_fences(&client).await.unwrap();
    {
        let run = query.run(&client);
        tokio::pin!(run);
        let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(run.as_mut().poll(cx))).await;
        assert!(
            polled.is_pending(),
            "a round trip cannot be done in one poll"
        );
    }
    let locks = query.run(&client).await.unwrap();
    assert_eq!(locks.len(), 1, "{locks:?}");
    assert_eq!(locks[0].lock_id, 5);
    // `since` is the holder's last change of state, which the end of its
    // own statement (the server goes idle after the client has its answer)
    // may still move between two listings: everything else must match.
    let settled = |mut locks: Vec<AdvisoryLock>| {
        for s in locks.iter_mut().flat_map(|l| l.holders.iter_mut()) {
            s.since = None;
        }
        locks
    };
    assert_eq!(settled(query.run(&client).await.unwrap()), settled(locks));
}

/// `connect_for_inspection`: a session with the URL's TLS settings that
/// lists locks; its end shows as `is_closed`; a server that is not there is
/// a connect error; dropped while connecting, it leaves no session.
#[tokio::test]
async fn an_inspection_session_lists_locks_and_shows_its_end() {
    let db = TestDatabase::create().await.unwrap();
    let admin = db.connect().await.unwrap();
    let mut config = db.config();
    config.application_name("inspection-test");
    let options = ConnectOptions::from_config(config.clone()).with_ssl_mode(SslMode::Disable);
    let client = connect_for_inspection(options.clone(), Duration::from_secs(30))
        .await
        .expect("connects");
    admin
        .execute("SELECT pg_advisory_lock(99)", &[])
        .await
        .unwrap();
    let locks = HoldersQuery::all().run(&client).await.unwrap();
    assert_eq!(locks.len(), 1);
    assert_eq!(locks[0].lock_id, 99);

    admin
        .execute(
            "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity \
             WHERE application_name = 'inspection-test'",
            &[],
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !client.is_closed() {
        assert!(tokio::time::Instant::now() < deadline, "never saw the end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(HoldersQuery::all().run(&client).await.is_err());

    // Dropped while connecting: no session stays behind.
    {
        let connecting = connect_for_inspection(options.clone(), Duration::from_secs(30));
        tokio::pin!(connecting);
        let polled =
            std::future::poll_fn(|cx| std::task::Poll::Ready(connecting.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'inspection-test'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if n == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{n} sessions left");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Nothing listening: a connect error.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    config.port(port);
    let err = connect_for_inspection(ConnectOptions::from_config(config), Duration::from_secs(30))
        .await
        .expect_err("nothing there");
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::Connect),
        "{err:?}"
    );
}
