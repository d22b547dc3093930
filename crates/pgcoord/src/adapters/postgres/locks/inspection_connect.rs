//! [`connect_for_inspection`]: a plain session for looking at locks (it
//! takes none), for callers without a lock manager (the `eventsource`
//! tool's `lock holders`, its watches, `leader show`).

use std::time::Duration;

use tokio_postgres::Client;

use crate::adapters::postgres::connection::connect::connect_any_host;
use crate::adapters::postgres::connection::options::ConnectOptions;
use crate::adapters::postgres::connection::tcp_timeouts;
use crate::adapters::postgres::connection::tls::MakeRustls;
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};

/// Opens a session to inspect the locks on (it takes none), with the TLS of
/// `options` (`sslmode`, `sslrootcert`, as the lock managers' sessions),
/// within `timeout`. Its connection runs in a background task; when that
/// ends (the server restarted, the network failed, the session was
/// terminated), [`Client::is_closed`] turns true and a new one is needed.
/// The end is logged at debug level only, so a live view on a terminal is
/// not written over. Fails with [`BackendErrorKind::Connect`] when no
/// session could be opened in time, and with [`BackendErrorKind::NoAnswer`]
/// when its first statement got no answer within `timeout`.
///
/// # Cancel safety
///
/// Cancel safe: dropped before it returns, the half-open connection is
/// closed and nothing is left behind.
pub async fn connect_for_inspection(options: ConnectOptions, timeout: Duration) -> Result<Client> {
    let (mut config, tls) = options.into_parts();
    config.connect_timeout(timeout);
    // Host by host, as the lock sessions connect: a failure names every
    // host of a multi-host URL, not only the last one tried.
    let (client, connection) = connect_any_host(&config, &MakeRustls::new(tls), timeout)
        .await
        .map_err(Error::Backend)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "inspection session ended with an error");
        }
    });
    // A watcher cut off by the network must not leave its session behind
    // for hours (see `tcp_timeouts`). A server that does not answer this
    // within the connect timeout would not answer the next statement
    // either (it queues behind this one): a pooler that accepted the
    // connection but cannot reach its server, say. That is said now,
    // rather than after the caller's own bound on its query.
    if tokio::time::timeout(timeout, tcp_timeouts::apply(&client))
        .await
        .is_err()
    {
        return Err(Error::Backend(BackendError::new(
            BackendErrorKind::NoAnswer,
            format!(
                "the new session's first statement got no answer within {timeout:?} \
                 (a pooler that cannot reach its server, or a server that stopped answering)"
            ),
        )));
    }
    Ok(client)
}
