//! The real `eventsource` binary against a real PostgreSQL (a fresh database
//! per test from the throwaway-PostgreSQL harness). One test binary, one
//! module per concern.

mod bench;
mod common;
mod connections;
mod demo;
mod doctor;
mod exclusion;
mod exit_codes;
mod failover;
mod failure_lines;
mod fence;
mod holders;
mod holders_shared;
mod install_roles;
mod job;
mod job_control;
mod key_and_help;
mod leader;
mod lease_cut;
mod libpq_env;
mod lock_loss;
mod min_interval;
mod multi_key;
mod output;
mod permits;
mod projection;
mod projection_dlq;
mod projection_rebuild;
mod readme_help;
mod relay;
mod role_settings;
mod server_faults;
mod shared;
mod short_deadlines;
mod signals;
mod standby;
mod terminal;
mod tls;
mod tls_client_cert;
mod tls_hosts;
mod top;
mod unix_socket;
mod watch;
mod watch_fence;
mod watchdog;
