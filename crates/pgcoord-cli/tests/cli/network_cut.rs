//! A real network cut: the tool runs in a network namespace of its own,
//! reaching the server (a private cluster in the test's namespace) through
//! a router namespace whose routes are then blackholed, so that packets
//! are dropped without a FIN or an RST, as on a real network. Without the
//! TCP timeouts every session sets on the server's side
//! (`connection/tcp_timeouts.rs`), the server kept a cut-off holder's lock
//! and a cut-off waiter's queued wait for the kernel's two hours.
//!
//! Needs root and `ip netns` (iproute2); skipped with a note otherwise.

use std::process::Command as StdCommand;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::common::*;
use crate::stamps::StampLogs;

/// Three namespaces' worth of plumbing: the test's own (the server), a
/// router, and the client's; removed on drop.
struct Net {
    client_ns: String,
    router_ns: String,
    server_link: String,
    /// The server's address as the client reaches it.
    server_addr: String,
    client_addr: String,
}

fn ip(args: &[&str]) -> bool {
    StdCommand::new("ip")
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Net {
    fn new() -> Option<Self> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let (pid, n) = (std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let tag = format!("{}{n}", pid % 100_000);
        let (a, b) = (20 + pid % 200, (n * 2) % 250);
        let net = Self {
            client_ns: format!("esc{tag}"),
            router_ns: format!("esr{tag}"),
            server_link: format!("ess{tag}"),
            server_addr: format!("10.{a}.{b}.1"),
            client_addr: format!("10.{a}.{}.2", b + 1),
        };
        let (c, r, s) = (
            net.client_ns.as_str(),
            net.router_ns.as_str(),
            net.server_link.as_str(),
        );
        let (rs, rc, cl) = (
            format!("esa{tag}"),
            format!("esb{tag}"),
            format!("esd{tag}"),
        );
        let (rs, rc, cl) = (rs.as_str(), rc.as_str(), cl.as_str());
        let router_server_side = format!("10.{a}.{b}.2");
        let router_client_side = format!("10.{a}.{}.1", b + 1);
        let server_cidr = format!("{}/24", net.server_addr);
        let client_cidr = format!("{}/24", net.client_addr);
        let router_server_cidr = format!("{router_server_side}/24");
        let router_client_cidr = format!("{router_client_side}/24");
        let client_net = format!("10.{a}.{}.0/24", b + 1);
        let steps: [&[&str]; 18] = [
            &["netns", "add", c],
            &["netns", "add", r],
            &["-n", c, "link", "set", "lo", "up"],
            &["link", "add", s, "type", "veth", "peer", "name", rs],
            &["link", "set", rs, "netns", r],
            &["link", "add", cl, "type", "veth", "peer", "name", rc],
            &["link", "set", cl, "netns", c],
            &["link", "set", rc, "netns", r],
            &["addr", "add", &server_cidr, "dev", s],
            &["link", "set", s, "up"],
            &["-n", r, "addr", "add", &router_server_cidr, "dev", rs],
            &["-n", r, "addr", "add", &router_client_cidr, "dev", rc],
            &["-n", r, "link", "set", rs, "up"],
            &["-n", r, "link", "set", rc, "up"],
            &["-n", c, "addr", "add", &client_cidr, "dev", cl],
            &["-n", c, "link", "set", cl, "up"],
            &[
                "-n",
                c,
                "route",
                "add",
                "default",
                "via",
                &router_client_side,
            ],
            &["route", "add", &client_net, "via", &router_server_side],
        ];
        for step in steps {
            if !ip(step) {
                println!(
                    "SKIPPED: `ip {}` failed (needs root and iproute2)",
                    step.join(" ")
                );
                return None;
            }
        }
        let forward = StdCommand::new("ip")
            .args(["netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(forward, "cannot turn forwarding on in the router namespace");
        Some(net)
    }

    /// Drops every packet between the two, silently, both ways.
    fn cut(&self) {
        for addr in [&self.server_addr, &self.client_addr] {
            let blackhole = format!("{addr}/32");
            assert!(ip(&[
                "-n",
                &self.router_ns,
                "route",
                "add",
                "blackhole",
                &blackhole
            ]));
        }
    }

    /// The tool, run in the client's namespace.
    fn eventsource(&self) -> tokio::process::Command {
        eventsource_under(&["ip", "netns", "exec", &self.client_ns], None)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its ends of the veth pairs, and so
        // the pairs; the server's end goes with its peer.
        ip(&["netns", "del", &self.client_ns]);
        ip(&["netns", "del", &self.router_ns]);
        ip(&["link", "del", &self.server_link]);
    }
}

/// A private cluster that also listens on `net`'s server address and lets
/// the client's subnet in.
async fn cluster_on(
    net: &Net,
) -> (
    std::sync::Arc<pgcoord_testkit::pg::TestCluster>,
    pgcoord_testkit::pg::TestDatabase,
) {
    let listen = format!("127.0.0.1,{}", net.server_addr);
    let (cluster, db) = private_db(&[("listen_addresses", &listen)]).await;
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        c.set_hba(
            "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all 10.0.0.0/8 trust\n",
        )
    })
    .await
    .unwrap()
    .expect("pg_hba.conf");
    (cluster, db)
}

/// The URL of `db` through the network, for the client's namespace.
fn url_through(net: &Net, cluster: &pgcoord_testkit::pg::TestCluster, db: &str) -> String {
    format!(
        "postgres://postgres@{}:{}/{db}",
        net.server_addr,
        cluster.port()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_holders_lock_goes_to_the_next_holder_after_its_command_is_killed() {
    let Some(net) = Net::new() else { return };
    let (cluster, db) = cluster_on(&net).await;
    // COMMAND ignores SIGTERM and writes a time stamp every 50 ms.
    let logs = StampLogs::new(&format!("network-cut-{}", db.name()));
    let mut holder = Running::start(
        net.eventsource()
            .env("DATABASE_URL", url_through(&net, &cluster, db.name()))
            .args(["lock", "run", "cut-holder", "--", "sh", "-c"])
            .arg(logs.stubborn_holder()),
    );
    holder.expect_line("ready").await;
    net.cut();

    // While the cut lasts, the server gives up on the silent session and
    // a waiter on its side gets the lock (before: not for two hours).
    let waiter = output(
        eventsource(Some(&db))
            .args(["lock", "run", "--timeout", "100s", "cut-holder", "--"])
            .args(["sh", "-c"])
            .arg(logs.next_holder()),
    )
    .await;
    assert_eq!(waiter.code, 0, "the waiter gets the lock: {waiter:?}");

    let out = holder.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    logs.assert_no_overlap(&out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_waiters_wait_leaves_the_servers_queue() {
    let Some(net) = Net::new() else { return };
    let (cluster, db) = cluster_on(&net).await;
    let lock_id = pgcoord::lock_id_for_key("cut-waiter");
    let mut holder = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "cut-waiter",
        "--",
        "sh",
        "-c",
        "echo ready; exec sleep 600",
    ]));
    holder.expect_line("ready").await;
    let waiter = Running::start(
        net.eventsource()
            .env("DATABASE_URL", url_through(&net, &cluster, db.name()))
            .args(["lock", "run", "cut-waiter", "--", "true"]),
    );
    let admin = db.connect().await.unwrap();
    let queued = || async {
        let row = admin
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
                 AND ((classid::bigint << 32) | objid::bigint) = $1",
                &[&lock_id],
            )
            .await
            .unwrap();
        row.get::<_, i64>(0)
    };
    let deadline = tokio::time::Instant::now() + BOUND;
    while queued().await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the waiter never queued"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    net.cut();

    // Without --timeout, the tool gives up once its session stops
    // answering; its wait, without a lock_timeout on the server, would stay
    // queued there until the server's TCP timeouts end the session.
    let out = waiter.finish().await;
    assert_eq!(out.code, 69, "the server did not answer: {out:?}");
    // Its session's connection timed out, and it says so (before: the
    // session "ended", as if the server had ended it).
    assert!(
        out.stderr.contains("connection timed out") && out.stderr.contains("os error 110"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("held elsewhere"), "{}", out.stderr);
    // The abandoned wait leaves the queue while the cut lasts, so that it
    // can never be granted to a client long gone (before: it stayed for
    // two hours, and took the lock when the holder let go).
    while queued().await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cut-off waiter's wait is still queued on the server"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    holder.signal(nix::sys::signal::Signal::SIGTERM);
    let out = holder.finish().await;
    assert_eq!(out.code, 143, "{out:?}");
}

/// The settings docs/reliability.md gives for PgBouncer: behind a pooler,
/// the server's TCP timeouts (which the manager lowers) watch the pooler's
/// connection, not the client's, and PgBouncer's own client sockets keep
/// the kernel's keepalive (2 h) unless these are set.
const PGBOUNCER_CUT_SETTINGS: &str = "tcp_keepalive = 1\ntcp_keepidle = 5\n\
                                      tcp_keepintvl = 2\ntcp_keepcnt = 5\n\
                                      tcp_user_timeout = 15000\n";

/// A holder connected through PgBouncer (session mode, with the settings
/// the docs give) is cut off: PgBouncer drops its client within about
/// 15 s and resets the server connection (`DISCARD ALL`), which frees the
/// lock, after the holder's COMMAND was killed. With PgBouncer's defaults
/// the lock stayed held for about 2 hours (the waiter below exits 75).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_from_a_tuned_pgbouncer_loses_its_lock_to_the_next() {
    let Some(net) = Net::new() else { return };
    let Some(bin) = pgcoord_testkit::pgbouncer::pgbouncer_or_skip() else {
        return;
    };
    let (cluster, db) = cluster_on(&net).await;
    let listen = format!(
        "listen_addr = {}\n{PGBOUNCER_CUT_SETTINGS}",
        net.server_addr
    );
    let bouncer =
        pgcoord_testkit::pgbouncer::Bouncer::start_with(&bin, cluster.port(), "session", &listen)
            .expect("pgbouncer starts");
    // Started, not yet listening, maybe.
    let deadline = tokio::time::Instant::now() + BOUND;
    let listening = format!("{}:{}", net.server_addr, bouncer.port());
    while tokio::net::TcpStream::connect(&listening).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "{}", bouncer.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let through_bouncer = format!(
        "postgres://postgres@{}:{}/{}",
        net.server_addr,
        bouncer.port(),
        db.name()
    );
    let logs = StampLogs::new(&format!("pgbouncer-cut-{}", db.name()));
    let mut holder = Running::start(
        net.eventsource()
            .env("DATABASE_URL", &through_bouncer)
            .args(["lock", "run", "bouncer-holder", "--", "sh", "-c"])
            .arg(logs.stubborn_holder()),
    );
    holder.expect_line("ready").await;
    net.cut();

    let waiter = output(
        eventsource(Some(&db))
            .args(["lock", "run", "--timeout", "100s", "bouncer-holder", "--"])
            .args(["sh", "-c"])
            .arg(logs.next_holder()),
    )
    .await;
    assert_eq!(
        waiter.code,
        0,
        "the waiter gets the lock: {waiter:?}\n{}",
        bouncer.log()
    );
    let out = holder.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    logs.assert_no_overlap(&out.stderr);
}
