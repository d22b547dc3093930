//! The timing loop every scenario pair runs (a warm-up, then ours and raw
//! in alternating slices for a fixed time) and the shape of one round's
//! results.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::Res;

/// Slices per side and round: ours and raw take turns, so that a burst of
/// load elsewhere on the machine falls on both alike instead of on
/// whichever happened to be running.
const SLICES: u32 = 10;

/// Calls of `op` for about `d` (at least one); returns calls and time.
async fn slice<F, Fut>(d: Duration, op: &mut F, next: &mut usize) -> Res<(u64, Duration)>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Res<()>>,
{
    let start = Instant::now();
    let mut n = 0;
    loop {
        op(*next).await?;
        *next += 1;
        n += 1;
        if start.elapsed() >= d {
            return Ok((n, start.elapsed()));
        }
    }
}

/// Runs `ours` and `raw` for `secs` each, in [`SLICES`] alternating slices
/// (which goes first alternates too), after a warm-up of both; pushes
/// their calls per second under `names` onto `out`. Each op gets its own
/// running call number.
pub(super) async fn paired<F, Fut, G, Gut>(
    out: &mut Round,
    names: (&'static str, &'static str),
    secs: Duration,
    mut ours: F,
    mut raw: G,
) -> Res<()>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Res<()>>,
    G: FnMut(usize) -> Gut,
    Gut: Future<Output = Res<()>>,
{
    // Warm-up: statement caches, pages.
    for i in 0..50 {
        ours(i).await?;
        raw(i).await?;
    }
    let d = secs / SLICES;
    let (mut next_ours, mut next_raw) = (50, 50);
    let (mut n_ours, mut t_ours) = (0, Duration::ZERO);
    let (mut n_raw, mut t_raw) = (0, Duration::ZERO);
    for s in 0..SLICES {
        let order = if s % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for ours_now in order {
            if ours_now {
                let (n, t) = slice(d, &mut ours, &mut next_ours).await?;
                (n_ours, t_ours) = (n_ours + n, t_ours + t);
            } else {
                let (n, t) = slice(d, &mut raw, &mut next_raw).await?;
                (n_raw, t_raw) = (n_raw + n, t_raw + t);
            }
        }
    }
    out.push((names.0, n_ours as f64 / t_ours.as_secs_f64()));
    out.push((names.1, n_raw as f64 / t_raw.as_secs_f64()));
    Ok(())
}

/// One round's ops/s per scenario, in run order.
pub(super) type Round = Vec<(&'static str, f64)>;
