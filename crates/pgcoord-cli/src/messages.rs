//! The lines `lock run` prints about its outcome: exit statuses, the
//! "not acquired" line, session names.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use pgcoord::inspect::{AdvisoryLock, LockSession};

use crate::duration::format_duration;
use crate::exit;
use crate::printable::printable;

/// The child's exit code, or 128+N when it died of signal N.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => exit::SIGNAL_BASE + sig,
        (None, None) => exit::SOFTWARE,
    }
}

/// "exited with code 3", "died of signal 15 (SIGTERM)".
pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("died of signal {sig} ({})", s.as_str()),
            Err(_) => format!("died of signal {sig}"),
        },
        (None, None) => "ended".to_owned(),
    }
}

/// Names a session for messages: its holder id (escaped, see
/// [`printable`]), else its application name (quoted).
pub fn session_name(s: &LockSession) -> String {
    match (&s.holder_id, &s.application_name) {
        (Some(id), _) => printable(id),
        (None, Some(app)) if !app.is_empty() => format!("application {app:?}"),
        _ => "a session".to_owned(),
    }
}

/// A session's CLIENT cell: its address; `-` for a Unix socket; `?` when
/// the server hides it (another role's session, without
/// `pg_read_all_stats`: its connection time is hidden too, where a Unix
/// socket's is shown).
pub fn client_cell(s: &LockSession) -> String {
    match (&s.client_addr, s.backend_start) {
        (Some(addr), _) => addr.clone(),
        (None, Some(_)) => "-".to_owned(),
        (None, None) => "?".to_owned(),
    }
}

/// The one-line "not acquired" message: key, id, and who holds it when visible.
pub fn conflict_message(
    key: &str,
    timeout: Option<Duration>,
    holders: Option<&[AdvisoryLock]>,
) -> String {
    let lock_id = pgcoord::lock_id_for_key(key);
    let why = match timeout {
        Some(t) if t.is_zero() => "it is held elsewhere (--no-wait)".to_owned(),
        Some(t) => format!("still held elsewhere after {}", format_duration(t)),
        None => "it is held elsewhere".to_owned(),
    };
    let mut line = format!("lock {key:?} (id {lock_id}) not acquired: {why}");
    let lock = holders.and_then(|locks| {
        locks
            .iter()
            .find(|l| l.lock_id == lock_id && l.int_pair.is_none())
    });
    if let Some(lock) = lock {
        let who: Vec<String> = lock
            .holders
            .iter()
            .map(|h| {
                let mut details = vec![format!("pid {}", h.pid)];
                if h.mode == "ShareLock" {
                    details.push("shared".to_owned());
                }
                if let Some(addr) = &h.client_addr {
                    details.push(format!("client {addr}"));
                }
                // Not its last activity (`since`): a lock manager's
                // liveness statement moves that twice a second. The lock
                // was granted at or after the session connected.
                if let Some(start) = h.backend_start {
                    details.push(format!("connected {}", start.format("%Y-%m-%dT%H:%M:%SZ")));
                }
                format!("{} ({})", session_name(h), details.join(", "))
            })
            .collect();
        if !who.is_empty() {
            line.push_str(&format!("; held by {}", who.join(" and ")));
        }
        if !lock.waiters.is_empty() {
            line.push_str(&format!("; {} waiting", lock.waiters.len()));
        }
    }
    line
}

/// Where a statement on the fence table found none (`FencingNotInstalled`):
/// the database may not have one yet, or have it in a schema the role's
/// search_path does not name; both remedies. One wording for `--fence`,
/// `--min-interval`, `leader run` and `leader show`.
pub fn no_fence_table(database: &str) -> String {
    format!(
        "which database {database} does not have yet, or not in a schema of this role's \
         search_path: run `eventsource lock install` once, or put the schema that holds \
         eventsource_lock_fences in the role's search_path"
    )
}

/// What a prepared statement lost (`26000`) or met twice (`42P05`) means,
/// as `lock doctor` says it: the line of such a failure begins with it.
pub const POOLER_MIX_UP: &str = "a pooler in transaction or statement mode (such as PgBouncer \
                                 with pool_mode = transaction) served this connection's \
                                 statements on different server connections, or a session-mode \
                                 pool that does not reset its server connections between clients \
                                 (an empty server_reset_query) kept another client's, mixing \
                                 prepared statements between clients";

/// Whether `err` is a prepared statement lost or met twice: a pooler in
/// transaction or statement mode in between.
pub fn is_pooler_mix_up(err: &pgcoord::Error) -> bool {
    err.as_backend()
        .and_then(|b| b.code())
        .is_some_and(|c| matches!(c.code(), "42P05" | "26000"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn a_prepared_statement_lost_or_met_twice_is_a_pooler_mix_up() {
        use pgcoord::error::{BackendError, BackendErrorKind};
        for (code, mix_up) in [("42P05", true), ("26000", true), ("42P01", false)] {
            let e: pgcoord::Error =
                BackendError::new(BackendErrorKind::Query, "prepared statement")
                    .with_code(code)
                    .into();
            assert_eq!(is_pooler_mix_up(&e), mix_up, "{code}");
        }
    }

    fn session(pid: i32, app: Option<&str>, granted: bool) -> LockSession {
        LockSession {
            pid,
            mode: "ExclusiveLock".into(),
            granted,
            application_name: app.map(str::to_owned),
            holder_id: app
                .and_then(|a| a.strip_prefix("eventsource/"))
                .map(str::to_owned),
            client_addr: Some("10.1.2.3".into()),
            backend_start: None,
            since: Some(Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, 0).unwrap()),
            blocked_by: Vec::new(),
        }
    }

    #[test]
    fn client_cell_tells_a_unix_socket_from_a_hidden_session() {
        let mut s = session(1, Some("psql"), true);
        assert_eq!(client_cell(&s), "10.1.2.3");
        s.client_addr = None;
        assert_eq!(client_cell(&s), "?", "hidden: no connection time either");
        s.backend_start = Some(Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap());
        assert_eq!(client_cell(&s), "-", "a Unix socket");
    }

    #[test]
    fn exit_codes_pass_through_and_map_signals() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
        assert_eq!(
            describe_status(ExitStatus::from_raw(15)),
            "died of signal 15 (SIGTERM)"
        );
        assert_eq!(
            describe_status(ExitStatus::from_raw(1 << 8)),
            "exited with code 1"
        );
    }

    #[test]
    fn conflict_message_names_key_and_holder() {
        let id = pgcoord::lock_id_for_key("nightly");
        let locks = vec![AdvisoryLock {
            lock_id: id,
            int_pair: None,
            key: Some("nightly".into()),
            fence: None,
            holders: vec![session(4242, Some("eventsource/host-a:17"), true)],
            waiters: vec![session(4343, Some("psql"), false)],
        }];
        let mut locks = locks;
        locks[0].holders[0].backend_start =
            Some(Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap());
        let line = conflict_message("nightly", Some(Duration::ZERO), Some(&locks));
        assert_eq!(
            line,
            format!(
                "lock \"nightly\" (id {id}) not acquired: it is held elsewhere (--no-wait); \
                 held by host-a:17 (pid 4242, client 10.1.2.3, connected 2026-11-30T08:00:00Z); \
                 1 waiting"
            )
        );
        let mut reader = session(4444, Some("eventsource/host-b:9"), true);
        reader.mode = "ShareLock".into();
        let shared = [AdvisoryLock {
            holders: vec![reader],
            waiters: vec![],
            ..locks[0].clone()
        }];
        let line = conflict_message("nightly", None, Some(&shared));
        assert!(
            line.contains("held by host-b:9 (pid 4444, shared, client"),
            "{line}"
        );
        let line = conflict_message("nightly", Some(Duration::from_secs(30)), None);
        assert!(line.ends_with("still held elsewhere after 30s"), "{line}");
        assert!(!line.contains('\n'));
    }
}
