//! A semaphore of two permits shared by three workers (three managers,
//! as three processes would have): two hold a permit, the third waits and
//! gets the permit the first gives back.
//!
//! ```text
//! cargo run -p pgcoord --example semaphore -- postgres://postgres@127.0.0.1/app
//! ```

use std::time::Duration;

use pgcoord::coordination::Semaphore;
use pgcoord::PostgresLockManager;

/// Runs the example on the database at `url`.
pub async fn demo(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let worker = |id: &str| -> pgcoord::Result<Semaphore<PostgresLockManager>> {
        let locks = PostgresLockManager::builder(url.parse()?)
            .holder_id(id)
            .build()?;
        // Every participant passes the same name and count.
        Semaphore::new(locks, "nightly-exports", 2)
    };
    let (a, b, c) = (
        worker("worker-a")?,
        worker("worker-b")?,
        worker("worker-c")?,
    );
    let wait = Some(Duration::from_secs(10));
    let pa = a.acquire(wait).await?;
    let pb = b.acquire(wait).await?;
    println!("worker-a holds permit {} ({})", pa.slot(), pa.key());
    println!("worker-b holds permit {} ({})", pb.slot(), pb.key());
    assert!(c.try_acquire().await?.is_none(), "only two at once");

    let waiting = tokio::spawn(async move { c.acquire(None).await });
    let freed = pa.slot();
    pa.release().await?;
    let pc = waiting.await??;
    println!(
        "worker-c got permit {} once worker-a gave it back",
        pc.slot()
    );
    assert_eq!(pc.slot(), freed);
    pb.release().await?;
    pc.release().await?;
    Ok(())
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or("usage: semaphore POSTGRES_URL (or set DATABASE_URL)")?;
    demo(&url).await
}
