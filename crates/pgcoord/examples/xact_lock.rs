//! A transaction-scoped advisory lock: one migration step per tenant at a
//! time, its lock released by the step's own commit.
//!
//! ```text
//! cargo run -p pgcoord --example xact_lock -- postgres://postgres@127.0.0.1/app
//! ```

use std::time::Duration;

use pgcoord::postgres::{acquire_xact, try_acquire_xact};
use pgcoord::tokio_postgres;

/// Runs the example on the database at `url`.
pub async fn demo(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let (mut client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let (mut other, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);

    let tx = client.transaction().await?;
    let lock = acquire_xact(&tx, "migrate:tenant-42", Some(Duration::from_secs(5))).await?;
    println!(
        "locked {:?} (lock id {}) in a transaction",
        lock.key, lock.lock_id
    );

    // Another transaction cannot have it meanwhile, and survives asking.
    let other_tx = other.transaction().await?;
    assert!(try_acquire_xact(&other_tx, "migrate:tenant-42")
        .await?
        .is_none());
    let err = acquire_xact(
        &other_tx,
        "migrate:tenant-42",
        Some(Duration::from_millis(100)),
    )
    .await
    .unwrap_err();
    assert!(err.is_timeout());
    other_tx.batch_execute("SELECT 1").await?; // still usable
    println!("a second transaction was refused and is still usable");

    tx.commit().await?; // releases the lock
    assert!(try_acquire_xact(&other_tx, "migrate:tenant-42")
        .await?
        .is_some());
    other_tx.rollback().await?;
    println!("after the commit the second transaction got it");
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
