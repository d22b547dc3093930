//! How soon the server gives up on a client it cannot reach, set on every
//! session this crate opens, and read back as a bound.
//!
//! A client cut off by the network sends no FIN and no RST: the server
//! learns that it is gone only from its TCP timeouts, which default to the
//! kernel's (keepalive after 2 hours, retransmissions for about 15
//! minutes). Until then the cut-off session keeps its advisory locks, and
//! a wait it had queued stays queued and may later be *granted* to a
//! client that has long given up. Each session therefore lowers its own
//! `tcp_user_timeout` and keepalives (settings any role may change) to
//! about 15 s (keepalives after 5 s idle, every 2 s, 5 of them), keeping any value the server already has that
//! is shorter. A session's own liveness check finds a cut within about
//! 2.5 s, well before.
//!
//! The server cannot free a silent session's locks before the shortest of
//! its timeouts has run since it last heard from the client: that is the
//! bound read back ([`silence_bound`]), which a holder that must stop
//! touching the protected resource in time (the tool's SIGKILL) can use.
//! Over a Unix socket there is no such timeout, and no bound.

use std::time::Duration;

use tokio_postgres::{Client, SimpleQueryMessage};

/// Lowers the four settings where the server's are longer (or the
/// kernel's, shown as 0), then reads the shortest time after which the
/// server may end a silent session, in milliseconds: `tcp_user_timeout`
/// (data or keepalives unacknowledged that long, on Linux), and the
/// keepalives' idle time plus their interval times their count (where
/// `tcp_user_timeout` does not exist). NULL over a Unix socket, where the
/// settings read 0. Two statements, one round trip.
const SET_AND_READ: &str = "\
SELECT set_config(s.name, w.v::text, false) \
  FROM pg_settings s \
  JOIN (VALUES ('tcp_user_timeout', 15000), ('tcp_keepalives_idle', 5), \
               ('tcp_keepalives_interval', 2), ('tcp_keepalives_count', 5)) AS w (name, v) \
    USING (name) \
 WHERE s.setting::bigint = 0 OR s.setting::bigint > w.v; \
SELECT least( \
         nullif(max(setting::bigint) FILTER (WHERE name = 'tcp_user_timeout'), 0), \
         nullif(max(setting::bigint) FILTER (WHERE name = 'tcp_keepalives_idle') \
                + max(setting::bigint) FILTER (WHERE name = 'tcp_keepalives_interval') \
                  * max(setting::bigint) FILTER (WHERE name = 'tcp_keepalives_count'), 0) \
           * 1000)::text \
  FROM pg_settings \
 WHERE name IN ('tcp_user_timeout', 'tcp_keepalives_idle', 'tcp_keepalives_interval', \
                'tcp_keepalives_count')";

/// Applies the timeouts to `client`'s session and gives back the bound:
/// `None` over a Unix socket, or when the settings cannot be read (the
/// session then works as before, with the server's own timeouts).
pub(crate) async fn apply(client: &Client) -> Option<Duration> {
    match client.simple_query(SET_AND_READ).await {
        Ok(messages) => silence_bound(&messages),
        Err(e) => {
            tracing::debug!(error = %e, "cannot set the session's TCP timeouts");
            None
        }
    }
}

/// The bound in `messages`, the answer to [`SET_AND_READ`]: the value of
/// the last row (the second statement's only row).
fn silence_bound(messages: &[SimpleQueryMessage]) -> Option<Duration> {
    let last = messages.iter().rev().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    })?;
    let ms: u64 = last.get(0)?.parse().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}
