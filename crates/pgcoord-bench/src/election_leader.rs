//! The leader process of the `election_failover` scenario
//! (`--election-leader`, its spec in `PGCOORD_BENCH_SPEC`): wins the election, prints one JSON line
//! (its term and pid), then leads until the bench kills it (or closes its
//! stdin, or the leadership is lost).

use std::time::Duration;

use pgcoord::coordination::Election;
use pgcoord::PostgresLockManager;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use crate::Res;

/// How long the leader may wait to win (the election is vacant when it starts).
const CAMPAIGN_LIMIT: Duration = Duration::from_secs(10);

/// What the leader process is told.
#[derive(Debug, Serialize, Deserialize)]
pub struct LeaderSpec {
    pub url: String,
    /// The run's transport (the leader pins the URL's `sslmode` to it).
    pub transport: crate::transport::Transport,
    pub election: String,
    pub holder_id: String,
    pub batched_sessions: Option<usize>,
}

/// What it prints once it leads.
#[derive(Debug, Serialize, Deserialize)]
pub struct Leading {
    pub term: u64,
    pub pid: u32,
}

pub async fn run(spec_json: &str) -> Res<()> {
    let spec: LeaderSpec = serde_json::from_str(spec_json)?;
    let options = crate::transport::pin(crate::ctx::user_options(&spec.url)?, spec.transport);
    let mut b = PostgresLockManager::builder(options)
        .holder_id(spec.holder_id)
        .fencing(true);
    if let Some(n) = spec.batched_sessions {
        b = b.batched_sessions(n);
    }
    let mgr = b.build()?;
    let election = Election::new(mgr.clone(), spec.election).expect("a fencing lock manager");
    let leading = election.campaign(Some(CAMPAIGN_LIMIT)).await?;
    let line = Leading {
        term: leading.term(),
        pid: std::process::id(),
    };
    println!("{}", serde_json::to_string(&line)?);
    let mut stdin = tokio::io::stdin();
    let mut sink = Vec::new();
    tokio::select! {
        _ = stdin.read_to_end(&mut sink) => {}
        () = leading.lost() => return Err("the leader lost its leadership".into()),
    }
    leading.resign().await?;
    mgr.close().await?;
    Ok(())
}
