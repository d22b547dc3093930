//! How this crate reaches PostgreSQL, for the lock engine and the read
//! models alike: connection options and libpq's environment conventions
//! (`PG*` variables, the service file, `.pgpass`), TLS, and opening a
//! session with its cancel token.

// Layers, top to bottom (each imports only from those below it):
//   connect -> hosts, tls_failure; options -> resolve -> known_params, driver_params, libpq_env, passfile,
//   service_file, connstring -> conninfo, tls_options -> tls -> tls_verifier,
//   tls_client_cert, tls_channel_binding -> tls_v1 (X.509 version 1
//   certificates); tls_failure (which connect failures are TLS's, and
//   their words) -> tls, tls_v1
mod application_name;
pub(crate) use application_name::decode_holder_id;
pub(crate) mod connect;
mod conninfo;
pub(crate) mod connstring;
pub(crate) mod driver_error;
mod driver_params;
mod host_failures;
pub(crate) mod hosts;
mod known_params;
pub(crate) mod libpq_env;
pub(crate) mod options;
mod passfile;
pub(crate) mod resolve;
mod service_file;
pub(crate) mod tcp_timeouts;
pub(crate) mod tls;
mod tls_channel_binding;
mod tls_client_cert;
mod tls_failure;
mod tls_options;
mod tls_trust;
mod tls_v1;
mod tls_verifier;
