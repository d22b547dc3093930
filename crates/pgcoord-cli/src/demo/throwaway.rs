//! The demo's own PostgreSQL when no database is given: started with
//! `initdb` and `pg_ctl`, removed however the demo ends (an interrupted
//! start included).

use pgcoord_cluster::TestCluster;

use crate::db::{self, Database};
use crate::exit;
use crate::signals::Signals;

/// Writes a progress line to stderr; a closed stderr (`2>&1 | head`) is no
/// reason to stop, and the standard macro would panic on it (twice, in a
/// drop, which aborts).
pub(super) fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A throwaway server, removed when dropped.
#[derive(Debug)]
pub(super) struct Throwaway {
    pub(super) cluster: Option<TestCluster>,
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        if let Some(cluster) = self.cluster.take() {
            // Dropping the cluster stops the server and removes its directory.
            drop(cluster);
            say("demo: stopped and removed the throwaway PostgreSQL");
        }
    }
}

/// The demo's own server, once `TestCluster::start` has given it: its
/// database, and the guard that removes it.
fn throwaway_database(cluster: TestCluster) -> Result<(Database, Throwaway), pgcoord::Error> {
    say(&format!(
        "demo: PostgreSQL listening on 127.0.0.1:{} in {}",
        cluster.port(),
        cluster.dir().display()
    ));
    let throwaway = Throwaway {
        cluster: Some(cluster),
    };
    // The cluster is the demo's alone: its `postgres` database will do.
    let url = throwaway.cluster.as_ref().map(|c| c.url("postgres"));
    let db = Database::parse(&url.unwrap_or_default()).map_err(pgcoord::Error::InvalidArgument)?;
    Ok((db, throwaway))
}

/// Starts the throwaway server, unless a signal comes first: then the
/// start (initdb, pg_ctl) is let finish, or fail, so that what it made is
/// removed before the demo exits (`Err`: the exit code).
pub(super) async fn boot_throwaway(signals: &mut Signals) -> Result<(Database, Throwaway), i32> {
    say("demo: no database URL given; starting a throwaway PostgreSQL (initdb, pg_ctl) ...");
    let mut start = tokio::task::spawn_blocking(TestCluster::start);
    let started = tokio::select! {
        started = &mut start => started,
        sig = signals.recv() => {
            say("demo: interrupted while the throwaway PostgreSQL starts; it is removed once its start ends");
            if let Ok(Ok(cluster)) = start.await {
                drop(Throwaway { cluster: Some(cluster) });
            }
            return Err(exit::SIGNAL_BASE + sig as i32);
        }
    };
    let started = started
        .map_err(|e| pgcoord::Error::InvalidArgument(e.to_string()))
        .and_then(|r| r);
    started.and_then(throwaway_database).map_err(|e| {
        db::fail(
            "cannot start a throwaway PostgreSQL (or give the demo a database with \
             --database-url or DATABASE_URL)",
            None,
            &e,
        )
    })
}
