//! The parent's side of the failover checker: the faults it counts, the
//! backend terminations between its steps, and the file that stops the
//! workers.

use std::time::Duration;

use crate::checker_support::{now_ns, Rng};

#[derive(Debug, Default)]
pub struct Faults {
    pub terminated: i64,
    pub restarts: u32,
    pub killed_promotions: u32,
    pub cut_off_promotions: u32,
}

/// Terminates a random worker backend on the primary every 20-120 ms, for `d`.
pub async fn terminations(primary_url: &str, d: Duration, rng: &mut Rng, f: &mut Faults) {
    let until = now_ns() + d.as_nanos();
    while now_ns() < until {
        tokio::time::sleep(Duration::from_millis(20 + rng.next() % 100)).await;
        let Ok((client, conn)) = tokio_postgres::connect(primary_url, tokio_postgres::NoTls).await
        else {
            continue;
        };
        tokio::spawn(conn);
        let row = client
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity \
                 WHERE application_name LIKE 'eventsource/fx-%' ORDER BY random() LIMIT 1) t",
                &[],
            )
            .await;
        f.terminated += row.map(|r| r.get::<_, i64>(0)).unwrap_or(0);
    }
}

/// Tells the workers to stop when dropped (also when the test panics).
pub struct StopFile(pub std::path::PathBuf);
impl Drop for StopFile {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "");
    }
}
