//! The projection runner: tailing a feed, one runner per projection,
//! shutdown and lock loss, the PostgreSQL event table's out-of-order
//! commits, runners killed mid-batch, read-your-writes and status,
//! segmented projections shared by several runners.

mod support;

mod memory;
#[cfg(feature = "metrics")]
mod metrics;

#[cfg(feature = "postgres")]
mod batch_idle;
#[cfg(feature = "postgres")]
mod checkpoint_watch;
#[cfg(feature = "postgres")]
mod crash;
#[cfg(feature = "postgres")]
mod dead_letters;
#[cfg(feature = "postgres")]
mod dead_letters_replay;
#[cfg(feature = "postgres")]
mod event_table_gaps;
#[cfg(feature = "postgres")]
mod failover;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod rebuild;
#[cfg(feature = "postgres")]
mod rebuild_crash;
#[cfg(feature = "postgres")]
mod rebuild_failure;
#[cfg(feature = "postgres")]
mod rebuild_grants;
#[cfg(feature = "postgres")]
mod rebuild_parked;
#[cfg(feature = "postgres")]
mod rebuild_support;
#[cfg(feature = "postgres")]
mod restart;
#[cfg(feature = "postgres")]
mod segments;
#[cfg(feature = "postgres")]
mod segments_count;
#[cfg(feature = "postgres")]
mod segments_crash;
#[cfg(feature = "postgres")]
mod status;
