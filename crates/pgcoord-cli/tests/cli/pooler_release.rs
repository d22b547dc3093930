//! `lock run` behind a stock PgBouncer in transaction mode, when its
//! release's unlock reaches another server connection than the one the
//! lock was granted on. Such a pooler closes server connections (and the
//! locks on them) when clients leave them mid-statement, telling nobody,
//! so the run cannot tell whether the lock was still there: it exits 76
//! (the lock-lost code) and says so, where it used to warn and exit 0
//! while another holder may have run meanwhile.
//!
//! Skipped without the `pgbouncer` binary unless
//! `EVENTSOURCE_REQUIRE_PGBOUNCER=1` (CI sets it).

use std::collections::HashSet;

use pgcoord_testkit::pgbouncer::{pgbouncer_or_skip, Bouncer};

use crate::common::*;

/// Attempts at a run that gets the lock through the pooler (a statement
/// of its session may land on a server connection it did not claim, and
/// the run is then refused with 69).
const ATTEMPTS: usize = 30;

#[tokio::test]
async fn a_release_the_pooler_sends_elsewhere_exits_with_the_lost_code() {
    let Some(bin) = pgbouncer_or_skip() else {
        return;
    };
    let (cluster, db) = private_db(&[]).await;
    let bouncer = Bouncer::start(&bin, cluster.port(), "transaction").unwrap();
    let url = format!("{}?sslmode=disable", bouncer.url(db.name()));
    let direct = db.connect().await.unwrap();
    let scratch = scratch_dir();
    let mut holding = None;
    for attempt in 0..ATTEMPTS {
        let flag = scratch.join(&format!("holding-{attempt}"));
        let script = format!("touch {}; read x", flag.display());
        let mut run = Running::start(eventsource(None).env("DATABASE_URL", &url).args([
            "lock",
            "run",
            "pooled-release",
            "--",
            "sh",
            "-c",
            &script,
        ]));
        let mut ended = false;
        until("the run holding or ended", || {
            ended = run.child.try_wait().unwrap().is_some();
            ended || flag.exists()
        })
        .await;
        if !ended {
            holding = Some(run);
            break;
        }
        let out = run.finish().await;
        assert_eq!(out.code, 69, "refused, naming the pooler: {out:?}");
    }
    let mut run = holding.unwrap_or_else(|| {
        panic!(
            "no run got the lock in {ATTEMPTS} attempts\n{}",
            bouncer.log()
        )
    });
    // Take every server connection the pooler has now, each in a
    // transaction kept open: the release's unlock must go to a new one.
    let before: HashSet<i32> = direct
        .query(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut pinned = HashSet::new();
    let mut pins = Vec::new();
    while !before.is_subset(&pinned) {
        assert!(pins.len() <= before.len() + 4, "could not pin {before:?}");
        let (pin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        // The simple protocol: a named statement of ours could meet the
        // run's own of the same name on its server connection.
        let pid: i32 = pin
            .simple_query("BEGIN; SELECT pg_backend_pid()")
            .await
            .unwrap()
            .iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0)?.parse().ok(),
                _ => None,
            })
            .expect("a pid");
        pinned.insert(pid);
        pins.push(pin);
    }
    run.send_line("").await;
    let out = run.finish().await;
    for pin in &pins {
        pin.batch_execute("COMMIT").await.unwrap();
    }
    assert_eq!(out.code, 76, "{out:?}\n{}", bouncer.log());
    assert!(
        out.stderr.contains("could not be confirmed held") || out.stderr.contains("was lost"),
        "{}",
        out.stderr
    );
}
