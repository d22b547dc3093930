//! Every lock statement's answer names the request it answers, so that an
//! answer is never taken for another's.
//!
//! The claim (`claim.rs`) makes a statement do nothing on a server
//! connection that is not the session's own. That protects the server's
//! side; it cannot protect the client's reading of the answers. A pooler
//! in transaction mode that does not follow pipelined statements
//! (PgBouncer 1.18, Debian 12's, drops the answers that come in after it
//! has handed the server connection back: "got packet 'Z' from server when
//! not linked") leaves the driver matching answers to requests out of step:
//! the answer to a ping, read as the answer to a wait, is a grant nobody
//! made. And a statement of one client may run under the name of another
//! client's statement on a server connection they both prepared on.
//!
//! So every statement takes one more parameter, a number new for each
//! request (a [`Stamp`]), and returns it, plus a constant of its own
//! statement ([`Kind`]), as its last column. An answer is believed only
//! when that column is what the request expects; anything else is treated
//! as a statement that reached another server connection, and the session
//! ends (it cannot tell what it holds). Through a direct connection or a
//! session pooler the check always passes; its cost is one `int8`
//! parameter and one column a statement.

use std::sync::atomic::{AtomicI64, Ordering};

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error, Row, Statement};

/// Which statement an answer comes from: added to the request's number by
/// the statement itself (the literal in its SQL), so the same number
/// answered by another statement does not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    TryOne = 1,
    UnlockOne = 2,
    Batch = 3,
    TryFirst = 4,
    Lock = 5,
    SetLockTimeout = 6,
    UnlockAll = 7,
    Ping = 8,
    HeldIds = 9,
    LockShared = 10,
    TryShared = 11,
    UnlockShared = 12,
    Downgrade = 13,
    BatchFenced = 14,
    TryOneFenced = 15,
    LockFenced = 16,
    Identify = 17,
    FirstToken = 18,
}

/// Request numbers step by this much, so that the kinds (below it) never
/// make one request's expected answer equal another's.
const STEP: i64 = 32;

/// A session's request numbers: from a random start, one step each.
#[derive(Debug)]
pub(super) struct Stamps {
    next: AtomicI64,
}

impl Stamps {
    pub(super) fn new() -> Self {
        // 40 random bits, times the step: far from overflow for any
        // number of requests a session will make.
        let start = (uuid::Uuid::new_v4().as_u64_pair().0 >> 24) as i64;
        Self {
            next: AtomicI64::new(start * STEP),
        }
    }

    /// The number for one request of statement `kind`.
    pub(super) fn next(&self, kind: Kind) -> Stamp {
        let sent = self.next.fetch_add(STEP, Ordering::Relaxed);
        Stamp { sent, kind }
    }
}

/// One request's number: sent as the statement's last parameter, expected
/// back (plus its kind) as the last column of every row of the answer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stamp {
    pub(super) sent: i64,
    kind: Kind,
}

impl Stamp {
    /// Whether `row` is this request's answer.
    pub(super) fn answers(&self, row: &Row) -> bool {
        let Some(last) = row.len().checked_sub(1) else {
            return false;
        };
        row.try_get::<_, i64>(last).ok() == Some(self.sent + self.kind as i64)
    }

    /// [`answers`](Self::answers), with a warning when it is not: a row
    /// came back, but another request's.
    fn answered_by(&self, row: &Row) -> bool {
        let ours = self.answers(row);
        if !ours {
            tracing::warn!(
                statement = ?self.kind,
                "a lock statement's answer was not its own request's; closing the session"
            );
        }
        ours
    }
}

/// `query_opt` of a statement stamped with `stamp` (its last parameter in
/// `params`): `None` when no row came back (the statement reached a server
/// connection not the session's own) or when the row is not this request's
/// answer.
pub(super) async fn one(
    client: &Client,
    statement: &Statement,
    params: &[&(dyn ToSql + Sync)],
    stamp: Stamp,
) -> Result<Option<Row>, Error> {
    let row = client.query_opt(statement, params).await?;
    Ok(row.filter(|r| stamp.answered_by(r)))
}

/// `query` of a statement stamped with `stamp`, for statements that
/// return a row per item: `None` when no row came back or any row is not
/// this request's answer.
pub(super) async fn rows(
    client: &Client,
    statement: &Statement,
    params: &[&(dyn ToSql + Sync)],
    stamp: Stamp,
) -> Result<Option<Vec<Row>>, Error> {
    let rows = client.query(statement, params).await?;
    let all_ours = !rows.is_empty() && rows.iter().all(|r| stamp.answered_by(r));
    Ok(all_ours.then_some(rows))
}

/// Whether `statement`'s result columns are `columns`, in order.
pub(super) fn shaped(statement: &Statement, columns: &[Type]) -> bool {
    statement.columns().len() == columns.len()
        && statement
            .columns()
            .iter()
            .zip(columns)
            .all(|(c, t)| c.type_() == t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_step_past_every_kind() {
        let stamps = Stamps::new();
        let a = stamps.next(Kind::Lock);
        let b = stamps.next(Kind::Ping);
        assert_eq!(b.sent - a.sent, STEP);
        assert_eq!(a.sent % STEP, 0);
        // No kind reaches the next request's number.
        assert!((Kind::FirstToken as i64) < STEP);
    }
}
