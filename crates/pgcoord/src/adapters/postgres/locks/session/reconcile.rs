//! What a batched session does after a failed batch statement: session
//! locks survive a statement error, so the server is asked what the
//! session holds.

use std::collections::HashSet;

use tokio_postgres::types::ToSql;

use super::answer::{self, Kind};
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
    let on_server = held_ids(s).await?;
    // Locks taken for failed requests, and unlocks still held: unlock both.
    let unlock: Vec<i64> = ids
        .iter()
        .filter(|id| on_server.contains(id))
        .map(|&id| batch_item(id, false))
        .collect();
    if !unlock.is_empty() {
        // None where the statement reached another server connection.
        let stamp = st.stamps.next(Kind::Batch);
        let params: [&(dyn ToSql + Sync); 3] = [&unlock, &st.tag, &stamp.sent];
        answer::one(client, &st.batch, &params, stamp)
            .await
            .ok()??;
    }
    Some(is_lock.iter().map(|lock| !*lock).collect())
}

/// The ids of the advisory locks the session's server process holds;
/// `None` when that could not be established (an error, or an answer from
/// another server connection or another request).
pub(super) async fn held_ids(s: &SessionState) -> Option<HashSet<i64>> {
    let st = &s.statements;
    let stamp = st.stamps.next(Kind::HeldIds);
    let params: [&(dyn ToSql + Sync); 2] = [&st.tag, &stamp.sent];
    let rows = answer::rows(&s.client, &st.held_ids, &params, stamp)
        .await
        .ok()??;
    // The row without an id is there to tell "nothing held" from "another
    // server connection's".
    Some(
        rows.iter()
            .filter_map(|r| r.get::<_, Option<i64>>(0))
            .collect(),
    )
}
