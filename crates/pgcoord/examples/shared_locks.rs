//! Readers and a writer of one catalogue, as separate services would be
//! (three managers): two readers hold the key shared at once, the writer
//! waits for both, and a reader that comes after the writer waits behind
//! it. Then the writer publishes and downgrades, so readers get in again
//! while it keeps the key from other writers without a gap.
//!
//! ```text
//! cargo run -p pgcoord --example shared_locks -- postgres://postgres@127.0.0.1/app
//! ```

use std::time::Duration;

use pgcoord::PostgresLockManager;
use pgcoord::{DistributedLock, LockMode, SharedLock};

/// Runs the example on the database at `url`.
pub async fn demo(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let service = |id: &str| -> pgcoord::Result<PostgresLockManager> {
        PostgresLockManager::builder(url.parse()?)
            .holder_id(id)
            .build()
    };
    let (readers, writer, late) = (service("reader")?, service("writer")?, service("late")?);
    let wait = Some(Duration::from_secs(10));
    let key = "catalogue:2026";

    let r1 = readers.acquire_shared(key, wait).await?;
    let r2 = readers.acquire_shared(key, wait).await?;
    println!(
        "two readers hold {key} at once ({} and {})",
        r1.mode(),
        r2.mode()
    );
    assert!(
        writer.try_lock(key).await?.is_none(),
        "no writer while they read"
    );

    // The writer queues; from then on no new reader gets past it.
    let w = {
        let writer = writer.clone();
        tokio::spawn(async move { writer.acquire(key, wait).await })
    };
    while late.try_lock_shared(key).await?.map(drop).is_some() {
        tokio::time::sleep(Duration::from_millis(5)).await; // not queued yet
    }
    println!("the writer waits, and a reader arriving now waits behind it");
    let late_reader = tokio::spawn(async move { late.acquire_shared(key, wait).await });

    r1.release().await?;
    r2.release().await?;
    let w = w.await??;
    println!(
        "the writer has it ({}), the late reader still waits",
        w.mode()
    );

    // Publish, then let readers in while keeping other writers out.
    let w = w.downgrade().await?;
    assert_eq!(w.mode(), LockMode::Shared);
    let lr = late_reader.await??;
    println!("after the downgrade the late reader reads beside the writer");
    assert!(
        readers.try_lock(key).await?.is_none(),
        "still no other writer"
    );
    lr.release().await?;
    w.release().await?;
    Ok(())
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or("usage: shared_locks POSTGRES_URL (or set DATABASE_URL)")?;
    demo(&url).await
}
