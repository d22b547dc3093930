//! A primary and an asynchronous streaming standby behind two relays, and
//! promotions that swap their roles: the URL the workers were given
//! (`host=relay_a,relay_b`, `target_session_attrs=read-write`) stays
//! valid through any number of failovers.

use std::sync::Arc;

use pgcoord_testkit::locks::eventually_async;
use pgcoord_testkit::pg::{StopMode, TestCluster};

use super::relay::Relay;

/// How the old primary leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// Stopped in immediate mode (a crash): its sessions end.
    Killed,
    /// Left running, cut off from every client: nothing tells its sessions.
    CutOff,
}

pub struct Servers {
    pub primary: Arc<TestCluster>,
    pub standby: Arc<TestCluster>,
    /// `relays[front]` reaches the primary, the other one the standby.
    relays: [Relay; 2],
    front: usize,
    /// Old primaries, kept (the cut-off ones running) until the end.
    pub retired: Vec<Arc<TestCluster>>,
}

pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
    tokio::spawn(conn);
    client
}

async fn standby_of(primary: &Arc<TestCluster>) -> Arc<TestCluster> {
    let p = primary.clone();
    Arc::new(
        tokio::task::spawn_blocking(move || p.start_standby())
            .await
            .unwrap()
            .expect("a standby"),
    )
}

impl Servers {
    /// A standby of `primary` (whose databases it copies) and the relays.
    pub async fn start(primary: Arc<TestCluster>) -> Servers {
        let standby = standby_of(&primary).await;
        let relays = [
            Relay::start(primary.port()).await,
            Relay::start(standby.port()).await,
        ];
        Servers {
            primary,
            standby,
            relays,
            front: 0,
            retired: Vec::new(),
        }
    }

    /// The URL a client gives to follow the failovers.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{db}\
             ?target_session_attrs=read-write&connect_timeout=1",
            self.relays[0].port, self.relays[1].port
        )
    }

    /// Stops the standby's WAL receiver: what the primary does from now on
    /// is lost in the promotion, as with an asynchronous standby that lags.
    pub async fn cut_replication(&self, db: &str) {
        let on_standby = connect(&self.standby.url(db)).await;
        on_standby
            .batch_execute("ALTER SYSTEM SET primary_conninfo = ''")
            .await
            .unwrap();
        on_standby
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .unwrap();
        eventually_async("the standby stops receiving", || async {
            on_standby
                .query_one("SELECT count(*) = 0 FROM pg_stat_wal_receiver", &[])
                .await
                .unwrap()
                .get::<_, bool>(0)
        })
        .await;
    }

    /// The old primary leaves (`how`), the standby is promoted, and a new
    /// standby of it is started behind the old primary's relay.
    pub async fn fail_over(&mut self, how: Promotion, db: &str) {
        let old = self.primary.clone();
        match how {
            Promotion::Killed => {
                let p = old.clone();
                tokio::task::spawn_blocking(move || p.stop(StopMode::Immediate))
                    .await
                    .unwrap()
                    .expect("the primary stops");
            }
            Promotion::CutOff => self.relays[self.front].point_to(None),
        }
        let s = self.standby.clone();
        tokio::task::spawn_blocking(move || s.promote())
            .await
            .unwrap()
            .expect("the standby is promoted");
        let promoted = connect(&self.standby.url(db)).await;
        promoted
            .batch_execute("ALTER SYSTEM RESET primary_conninfo")
            .await
            .unwrap();
        promoted
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .unwrap();
        self.primary = self.standby.clone();
        self.standby = standby_of(&self.primary).await;
        self.relays[self.front].point_to(Some(self.standby.port()));
        self.front = 1 - self.front;
        self.retired.push(old);
    }
}
