//! What a batched session does after a failed batch statement: session
//! locks survive a statement error, so the server is asked what the
//! session holds.

use std::collections::HashSet;

use super::batch_form::batch_item;
use super::state::SessionState;

/// After a failed batch: session locks survive a statement error, so ask
/// the server what this session holds, give back locks taken for requests
/// reported as failed, and return per-item "done" flags (for unlocks: true
/// when the lock is gone). `None` if that failed too.
pub(super) async fn reconcile(
    s: &SessionState,
    ids: &[i64],
    is_lock: &[bool],
) -> Option<Vec<bool>> {
    let (client, st) = (&s.client, &s.statements);
    let rows = client.query(&st.held_ids, &[]).await.ok()?;
    let on_server: HashSet<i64> = rows.iter().map(|r| r.get::<_, i64>(0)).collect();
    // Locks taken for failed requests, and unlocks still held: unlock both.
    let unlock: Vec<i64> = ids
        .iter()
        .filter(|id| on_server.contains(id))
        .map(|&id| batch_item(id, false))
        .collect();
    if !unlock.is_empty() {
        // None where the statement reached another server connection.
        client
            .query_opt(&st.batch, &[&unlock, &st.tag])
            .await
            .ok()??;
    }
    Some(is_lock.iter().map(|lock| !*lock).collect())
}
