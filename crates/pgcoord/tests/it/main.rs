//! The library's integration tests: one test binary, one module per
//! concern (building and linking one binary instead of one per file is most
//! of what a clean build of the tests costs). A new test file goes in this
//! folder, with a `mod` line below (and the `#[cfg(feature = ...)]` it needs).
//!
//! Child processes: a test that needs another process runs this binary
//! again on one `#[ignore]`d worker test, by its full name
//! ([`common::worker_args`]); a worker never runs in a normal run, and fails
//! when started without the environment its parent gives it.

// What several modules share.
#[cfg(feature = "postgres")]
mod checker_support;
#[cfg(feature = "postgres")]
mod common;
#[cfg(feature = "postgres")]
mod counting_proxy;
#[cfg(feature = "postgres")]
mod election_support;
#[cfg(feature = "postgres")]
mod failover_support;
#[cfg(feature = "postgres")]
mod fault_support;
mod span_capture;
#[cfg(feature = "postgres")]
mod tls_support;

// The tests.
#[cfg(feature = "postgres")]
mod bad_input_passwords;
mod bad_input_postgres;
#[cfg(feature = "postgres")]
mod batched_routing;
#[cfg(feature = "postgres")]
mod chaos_checker;
#[cfg(feature = "postgres")]
mod coordination_checker;
#[cfg(feature = "postgres")]
mod coordination_crash;
#[cfg(feature = "postgres")]
mod coordination_examples;
mod coordination_memory;
#[cfg(feature = "postgres")]
mod coordination_postgres;
#[cfg(feature = "postgres")]
mod election_chaos;
#[cfg(feature = "postgres")]
mod election_soak;
mod elections_memory;
#[cfg(feature = "postgres")]
mod elections_postgres;
#[cfg(feature = "postgres")]
mod exclusion_checker;
#[cfg(feature = "postgres")]
mod failover_chaos;
#[cfg(feature = "postgres")]
mod failover_fencing;
#[cfg(feature = "postgres")]
mod failover_follow;
#[cfg(feature = "postgres")]
mod failover_hosts;
#[cfg(feature = "postgres")]
mod failover_lease;
#[cfg(feature = "postgres")]
mod faults_batch;
#[cfg(feature = "postgres")]
mod faults_limits;
#[cfg(feature = "postgres")]
mod faults_process;
#[cfg(feature = "postgres")]
mod faults_restart;
#[cfg(feature = "postgres")]
mod faults_silent;
#[cfg(feature = "postgres")]
mod faults_terminate;
#[cfg(feature = "postgres")]
mod fencing;
#[cfg(feature = "postgres")]
mod harness;
#[cfg(feature = "postgres")]
mod holders;
#[cfg(feature = "postgres")]
mod holders_fences;
#[cfg(feature = "postgres")]
mod lease;
#[cfg(all(feature = "postgres", feature = "metrics"))]
mod lock_metrics;
#[cfg(feature = "postgres")]
mod lock_spans;
mod locks_memory;
#[cfg(feature = "postgres")]
mod locks_postgres;
#[cfg(feature = "postgres")]
mod locks_postgres_failures;
#[cfg(feature = "postgres")]
mod locks_postgres_fenced;
#[cfg(feature = "postgres")]
mod long_timeouts;
#[cfg(all(feature = "postgres", feature = "metrics"))]
mod metrics_prometheus;
#[cfg(feature = "postgres")]
mod once_per;
#[cfg(feature = "postgres")]
mod pgbouncer_pipelining;
#[cfg(feature = "postgres")]
mod pgbouncer_stock;
#[cfg(feature = "postgres")]
mod primitives_examples;
mod projections;
mod readmodels_atomic;
mod readmodels_cancellation;
mod readmodels_checkpoint_names;
mod readmodels_checkpoint_stops;
mod readmodels_checkpoints;
mod readmodels_conformance;
mod readmodels_derive;
mod readmodels_errors;
mod readmodels_example;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod readmodels_factory;
mod readmodels_index_names;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod readmodels_inline;
mod readmodels_memory;
#[cfg(feature = "postgres")]
mod readmodels_postgres;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod readmodels_projection;
mod readmodels_proptest;
mod readmodels_spans;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod readmodels_spawn;
#[cfg(feature = "sqlite")]
mod readmodels_sqlite;
#[cfg(feature = "sqlite")]
mod readmodels_sqlite_close;
#[cfg(feature = "sqlite")]
mod readmodels_sqlite_thread;
#[cfg(feature = "postgres")]
mod readmodels_tls;
#[cfg(feature = "metrics")]
mod recorder;
#[cfg(feature = "postgres")]
mod shared_locks_checker;
mod shared_locks_memory;
#[cfg(feature = "postgres")]
mod shared_locks_postgres;
#[cfg(feature = "postgres")]
mod short_deadlines;
#[cfg(feature = "postgres")]
mod stalled_process;
#[cfg(feature = "postgres")]
mod standby;
#[cfg(feature = "postgres")]
mod tcp_timeouts;
#[cfg(feature = "postgres")]
mod tls_postgres;
#[cfg(feature = "postgres")]
mod tls_v1;
#[cfg(all(feature = "postgres", feature = "readmodels", unix))]
mod unix_socket;
#[cfg(feature = "postgres")]
mod verify_postgres;
#[cfg(feature = "postgres")]
mod verify_replication;
#[cfg(feature = "postgres")]
mod wait_lines;
#[cfg(feature = "postgres")]
mod wait_turns;
#[cfg(feature = "postgres")]
mod xact_locks;
