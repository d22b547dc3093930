//! Transfers between accounts: each transfer locks both accounts with
//! `acquire_many`. Two services run opposite transfers (7 -> 3 and 3 -> 7)
//! at the same time, over and over; the canonical order keeps them from
//! deadlocking, and no account is ever in two transfers at once.
//!
//! ```text
//! cargo run -p pgcoord --example acquire_many -- postgres://postgres@127.0.0.1/app
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgcoord::coordination::acquire_many;
use pgcoord::PostgresLockManager;

/// Runs the example on the database at `url`.
pub async fn demo(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let busy = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let mut services = Vec::new();
    for (id, accounts) in [
        ("service-a", ["account:7", "account:3"]),
        ("service-b", ["account:3", "account:7"]),
    ] {
        let locks = PostgresLockManager::builder(url.parse()?)
            .holder_id(id)
            .build()?;
        let busy = busy.clone();
        services.push(tokio::spawn(async move {
            for _ in 0..50 {
                let both = acquire_many(&locks, &accounts, Some(Duration::from_secs(10))).await?;
                for b in busy.iter() {
                    assert!(
                        !b.swap(true, Ordering::SeqCst),
                        "an account in two transfers"
                    );
                }
                // ... move the money ...
                for b in busy.iter() {
                    b.store(false, Ordering::SeqCst);
                }
                both.release().await?;
            }
            Ok::<(), pgcoord::Error>(())
        }));
    }
    for s in services {
        s.await??;
    }
    println!("100 transfers in opposite directions, none deadlocked");
    Ok(())
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or("usage: acquire_many POSTGRES_URL (or set DATABASE_URL)")?;
    demo(&url).await
}
