//! A `LISTEN` session of its own, outside the pool: raises a
//! [`FeedSignal`] on each matching notification, and on every (re)connect
//! (notifications sent while it was away are lost, so whoever waits should
//! look again). Reconnects with backoff until dropped.

use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::pool::PostgresDatabase;
use crate::adapters::sql::quote_ident;
use crate::ports::readmodels::FeedSignal;

/// Which notifications raise the signal: `(channel, payload) -> bool`.
pub(crate) type NotificationFilter = Box<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The running `LISTEN` task; stops when dropped.
#[derive(Debug)]
pub(crate) struct Listener {
    _stop: DropGuard,
}

/// Listens on `channels` and raises `signal` as described above.
pub(crate) fn spawn_listener(
    db: &PostgresDatabase,
    channels: Vec<String>,
    filter: NotificationFilter,
    signal: FeedSignal,
) -> Listener {
    let stop = CancellationToken::new();
    let (config, tls) = db.direct();
    let (config, tls) = (config.clone(), tls.clone());
    let token = stop.clone();
    let script: String = channels
        .iter()
        .map(|c| format!("LISTEN {};", quote_ident(c)))
        .collect();
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(200);
        loop {
            let session = async {
                let (client, mut conn) = match config.connect(tls.clone()).await {
                    Ok(pair) => pair,
                    Err(e) => {
                        tracing::warn!(error = %e, "LISTEN session: cannot connect");
                        return false;
                    }
                };
                let mut messages =
                    futures_util::stream::poll_fn(move |cx| conn.poll_message(cx)).boxed();
                let listening = tokio::select! {
                    r = client.batch_execute(&script) => r,
                    _ = messages.next() => return false, // nothing comes before our LISTEN: the session ended
                };
                if let Err(e) = listening {
                    tracing::warn!(error = %e, "LISTEN session: LISTEN failed");
                    return false;
                }
                signal.notify(); // anything sent while we were away is lost: look again
                while let Some(message) = messages.next().await {
                    match message {
                        Ok(AsyncMessage::Notification(n)) => {
                            if filter(n.channel(), n.payload()) {
                                signal.notify();
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN session ended");
                            break;
                        }
                    }
                }
                drop(client);
                true
            };
            let connected = tokio::select! {
                c = session => c,
                _ = token.cancelled() => return,
            };
            backoff = if connected {
                Duration::from_millis(200)
            } else {
                (backoff * 2).min(Duration::from_secs(5))
            };
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = token.cancelled() => return,
            }
        }
    });
    Listener {
        _stop: stop.drop_guard(),
    }
}
