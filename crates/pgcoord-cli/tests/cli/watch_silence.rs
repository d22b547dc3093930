//! `lock holders --watch` and a server that goes silent (a relay cut as a
//! network that drops every packet): the look is given up, said once, and
//! the watch goes on with a new session; behind a multi-host URL whose
//! first host goes silent (a failover behind a network cut), with the
//! next host. Each look
//! is given `--interval` (at least 2 s), but a new session spends the
//! silent host's whole `connect_timeout` first; the tool used to give up
//! on the attempt with the look, and so tried the silent host again at
//! every look and never reached the next one. A next host that is another
//! server altogether is said to be one, and nothing is compared across.

use nix::sys::signal::Signal;

use crate::common::*;
use crate::relay::CuttableRelay;
use crate::watch::{get, parse};
use pgcoord_testkit::pg::TestDatabase;

#[tokio::test]
async fn a_watch_whose_first_host_goes_silent_reaches_the_next_host() {
    let db = database().await;
    let Some((relay, through_relay)) = CuttableRelay::for_database(&db).await else {
        return;
    };
    // The relay first, then the database itself; each host's connect
    // bounded by 3 s, longer than a look's 2 s.
    let config = db.config();
    let Some(tokio_postgres::config::Host::Tcp(host)) = config.get_hosts().first().cloned() else {
        unreachable!("the relay exists only for a database reached over TCP");
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let (relay_at, name) = through_relay
        .rsplit_once('/')
        .expect("the relay's URL names its database");
    let url = format!("{relay_at},{host}:{port}/{name}?connect_timeout=3");

    let (holder, mut watch) = watching_a_holder(&db, &url, "next-host-holder", 43).await;

    // The relay stays cut: only the second host answers from now on.
    relay.cut();
    watch.expect_stderr("did not answer within 2s").await;
    watch.expect_stderr("listing lock holders again").await;
    holder
        .execute("SELECT pg_advisory_unlock(43)", &[])
        .await
        .unwrap();
    let (event, f) = parse(&watch.next_line().await);
    assert_eq!(
        (event.as_str(), get(&f, "app")),
        ("released", Some("next-host-holder"))
    );
    watch.signal(Signal::SIGINT);
    assert_eq!(watch.finish().await.code, 0);
}

/// A session named `app` holding lock `id` of `db`, and `lock holders
/// --watch` on `url` (every 100 ms), its first line (the hold) read.
async fn watching_a_holder(
    db: &TestDatabase,
    url: &str,
    app: &str,
    id: i64,
) -> (tokio_postgres::Client, Running) {
    let holder = session(db, app).await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    let mut watch = Running::start(eventsource(None).env("DATABASE_URL", url).args([
        "lock",
        "holders",
        "--watch",
        "--interval",
        "100ms",
    ]));
    let (event, f) = parse(&watch.next_line().await);
    assert_eq!((event.as_str(), get(&f, "app")), ("held", Some(app)));
    (holder, watch)
}

#[tokio::test]
async fn a_silent_server_is_reported_and_the_watch_goes_on_on_a_new_session() {
    let db = database().await;
    let Some((relay, url)) = CuttableRelay::for_database(&db).await else {
        return;
    };
    let (holder, mut watch) = watching_a_holder(&db, &url, "silent-holder", 41).await;

    // The watch's session stays open and silent: its look is given up
    // after the bound (--interval, at least 2s), said once, and the next
    // look opens a new session.
    relay.cut();
    let error = watch.expect_stderr("did not answer within 2s").await;
    assert!(error.contains("cannot list lock holders"), "{error}");
    assert!(
        error.contains("(silent, a pooler with no server connection free, or the query waits"),
        "{error}"
    );
    relay.mend();
    watch.expect_stderr("listing lock holders again").await;
    holder
        .execute("SELECT pg_advisory_unlock(41)", &[])
        .await
        .unwrap();
    let (event, f) = parse(&watch.next_line().await);
    assert_eq!(
        (event.as_str(), get(&f, "app")),
        ("released", Some("silent-holder"))
    );
    watch.signal(Signal::SIGINT);
    assert_eq!(watch.finish().await.code, 0);
}

/// A watch whose URL's first server dies and whose next host is another
/// server altogether (not a standby of it: a failover to a server with
/// other sessions): the watch says it now lists another server, and infers
/// nothing across the two (the first server's holder is not "released",
/// the second's not "acquired"): it lists the new server's state afresh.
#[tokio::test]
async fn a_watch_that_reaches_another_server_says_so_and_compares_nothing_across() {
    use pgcoord_testkit::pg::StopMode;
    let (first, db) = private_db(&[]).await;
    let (second, other) = private_db(&[]).await;
    // The same database name on the second server.
    other
        .connect()
        .await
        .unwrap()
        .batch_execute(&format!("CREATE DATABASE \"{}\"", db.name()))
        .await
        .unwrap();
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?connect_timeout=3",
        first.port(),
        second.port(),
        db.name()
    );
    let (_holder, mut watch) = watching_a_holder(&db, &url, "first-holder", 51).await;
    let _on_second = holding_on(second.port(), db.name(), "second-holder", 52).await;

    tokio::task::spawn_blocking(move || first.stop(StopMode::Immediate))
        .await
        .unwrap()
        .unwrap();
    let note = watch.expect_stderr("now comes from another server").await;
    assert!(note.contains(&format!(":{}", second.port())), "{note}");
    let (event, f) = parse(&watch.next_line().await);
    assert_eq!(
        (event.as_str(), get(&f, "app")),
        ("held", Some("second-holder")),
        "the new server's state, listed afresh"
    );
    watch.signal(Signal::SIGINT);
    let out = watch.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains("released"), "{}", out.stdout);
}
