//! Leader election: two candidates, one leads, resigns, the other leads
//! with a later term; an observer sees who leads and the vacancy.
//!
//! ```text
//! cargo run -p pgcoord --example leader_election -- postgres://postgres@127.0.0.1/app
//! ```

use std::time::Duration;

use pgcoord::coordination::Election;
use pgcoord::PostgresLockManager;

/// Runs the example on the database at `url`.
pub async fn demo(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let candidate = |id: &str| -> pgcoord::Result<Election<PostgresLockManager>> {
        let locks = PostgresLockManager::builder(url.parse()?)
            .holder_id(id)
            .fencing(true) // terms are fencing tokens
            .build()?;
        Election::new(locks, "report-scheduler")
    };
    let (a, b) = (candidate("node-a")?, candidate("node-b")?);
    a.locks().install_fencing().await?; // once per database

    let leading = a.campaign(Some(Duration::from_secs(10))).await?;
    println!("node-a leads, term {}", leading.term());
    let seen = b.leader().await?.expect("someone leads");
    println!(
        "node-b sees {:?} leading (pid {:?})",
        seen.holder_id, seen.pid
    );
    assert!(b.try_campaign().await?.is_none());

    let waiting = tokio::spawn(async move { b.campaign(None).await });
    let first_term = leading.term();
    leading.resign().await?;
    let next = waiting.await??;
    println!("node-b leads, term {}", next.term());
    assert!(next.term() > first_term);
    next.resign().await?;
    assert!(a.leader().await?.is_none(), "vacant");
    println!("vacant again");
    Ok(())
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or("pass a postgres:// URL or set DATABASE_URL")?;
    demo(&url).await
}
