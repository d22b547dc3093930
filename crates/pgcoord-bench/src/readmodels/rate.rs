//! The timing loop every scenario pair runs (a warm-up, then calls for a
//! fixed time) and the shape of one round's results.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::Res;

/// Calls `op` for `secs`; returns calls per second.
pub(super) async fn rate<F, Fut>(secs: Duration, mut op: F) -> Res<f64>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Res<()>>,
{
    // Warm-up: statement caches, pages.
    for i in 0..50 {
        op(i).await?;
    }
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < secs {
        op(n).await?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// One round's ops/s per scenario, in run order.
pub(super) type Round = Vec<(&'static str, f64)>;
