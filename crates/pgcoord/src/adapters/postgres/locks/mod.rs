//! The PostgreSQL lock engine: [`PostgresLockManager`](manager::PostgresLockManager)
//! and everything below it.

// Layers, top to bottom (each imports only from those below it):
//   config (builder), lock_ports -> registry_ports, shared_lock_ports, xact_lock
//   -> lock_settle -> manager
//   -> holders, inspection, inspection_connect, verify, leader_observer, run_log
//   -> acquirer -> wait_line -> session/* -> holdings -> held_lock -> hold_token
//   -> settings, metrics, metrics_gauges, metrics_per_key, lock_span, fencing
//   (and below all of them: ../connection)
mod acquirer;
mod co_poll;
pub(crate) mod config;
pub mod fencing;
mod held_lock;
mod hold_token;
pub(crate) mod holders;
mod holdings;
mod id_map;
mod inspection;
pub(crate) mod inspection_connect;
mod leader_observer;
mod lock_ports;
mod lock_settle;
mod lock_span;
pub(crate) mod manager;
mod metrics;
mod metrics_gauges;
mod metrics_per_key;
mod registry_ports;
pub(crate) mod run_log;
mod session;
mod settings;
mod shared_lock_ports;
mod silence;
pub(crate) mod verify;
mod wait_line;
pub(crate) mod xact_lock;
mod xact_savepoint;
