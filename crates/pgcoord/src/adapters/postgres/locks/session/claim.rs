//! A session's claim on its server connection, so that a pooler that
//! hands statements to any of its server connections (PgBouncer in
//! transaction or statement mode) is refused loudly instead of breaking
//! exclusion quietly.
//!
//! Session-level advisory locks belong to a server process. Behind such a
//! pooler, one client's statements run on whichever server connection is
//! free, and two clients' statements on the same one: a try of one lands
//! on the process that holds the other's lock and is granted (a process
//! never conflicts with itself), and an unlock of one releases the
//! other's. So:
//!
//! - when a session opens, its first statement reads the connection's
//!   claim (the placeholder setting `eventsource.lock_session`) and, if nobody claimed it,
//!   writes the session's own random tag there; a connection already
//!   claimed by another session is refused ([`claimed_by_another`]). A
//!   session pooler's reset (`DISCARD ALL`) clears the claim with
//!   everything else, and a direct connection is never shared;
//! - every statement that takes, gives back or waits for a lock, and the
//!   liveness ping, runs only where the claim is the session's own tag
//!   (`WHERE current_setting('eventsource.lock_session', true) = tag`, a condition without
//!   columns, which PostgreSQL checks before the rest of the statement):
//!   elsewhere it does nothing and returns no row ([`not_its_connection`]),
//!   and the session ends.
//!
//! So no two sessions ever run lock functions on one server process, and a
//! session's lock functions run on its own process only: exclusion is the
//! server's, whatever the pooler does.

use crate::ports::error::{BackendError, BackendErrorKind};

/// The placeholder setting that holds a connection's claim (spelled out in
/// the statements' SQL; a test checks them against it).
#[cfg(test)]
pub(super) const SETTING: &str = "eventsource.lock_session";

/// A new session's tag: random, so no two sessions share one.
pub(super) fn new_tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The advice both errors end with.
const ADVICE: &str = "a pooler in transaction or statement mode hands statements to any of its \
     server connections, and a session-mode pool that does not reset its server connections \
     between clients (PgBouncer with an empty server_reset_query; DISCARD ALL is its default) \
     hands a new client the last one's session, locks included; session-level advisory locks \
     cannot be held through either: use the pooler's session mode with its reset, or connect to \
     PostgreSQL directly (`eventsource lock doctor` checks)";

/// Opening found the server connection claimed by another lock session.
pub(super) fn claimed_by_another() -> BackendError {
    BackendError::new(
        BackendErrorKind::NotPostgres,
        format!("this server connection already carries another lock session: {ADVICE}"),
    )
}

/// A statement of the session reached a server connection that is not the
/// one it claimed (and did nothing there).
pub(super) fn not_its_connection() -> BackendError {
    BackendError::new(
        BackendErrorKind::NotPostgres,
        format!("a statement of this lock session reached another server connection: {ADVICE}"),
    )
}

/// Records that `what` of the session reached a server connection not its
/// own: logged, and kept as the reason later requests to the session fail
/// (the session ends). Returns the error for the request at hand.
pub(super) fn ended_by_pooler(mailbox: &super::mailbox::Mailbox, what: &str) -> BackendError {
    tracing::warn!("a lock session's {what} reached another server connection; closing it");
    let e = not_its_connection();
    mailbox.set_open_error(&e);
    // The reason its holders are given, before any that follows from it
    // (a ping that reached another connection also fails the liveness check).
    mailbox.dead.note_why(format!(
        "a statement of the session holding the lock reached another server connection: {ADVICE}"
    ));
    e
}

/// Whether a statement failed because the server connection it reached
/// lacks this session's prepared statements (26000) or has another's of
/// the same name (42P05): statements of several clients mixed on one
/// server connection, which only a pooler does. Nothing ran.
pub(super) fn mixed_statements(e: &tokio_postgres::Error) -> bool {
    e.code()
        .is_some_and(|c| matches!(c.code(), "26000" | "42P05"))
}

/// Whether a claim read when opening leaves the connection free: never
/// set, or reset (`DISCARD ALL` leaves it empty).
pub(super) fn unclaimed(claim: Option<&str>) -> bool {
    claim.is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_differ_and_a_reset_claim_is_free() {
        assert_ne!(new_tag(), new_tag());
        assert!(unclaimed(None) && unclaimed(Some("")));
        assert!(!unclaimed(Some(&new_tag())));
        assert!(not_its_connection().message().contains("session mode"));
    }
}
