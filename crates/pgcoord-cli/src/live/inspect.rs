//! What the live views and `lock holders` share: the inspection session,
//! names for lock ids, and how a lock and a table of cells are shown.

use std::collections::HashMap;
use std::time::Duration;

use super::args::KeyNameArgs;
use crate::db::{self, Database};
use crate::printable::{printable, shortened, SHOWN_KEY_WIDTH};
use crate::watch_session::WatchSession;
use crate::{exit, report};
use pgcoord::{
    inspect::{connect_for_inspection, AdvisoryLock, FenceTable, HoldersQuery},
    ConnectOptions,
};

/// The most of a key file read (`--key-file /dev/zero` must not fill
/// memory): many keys, each at most `MAX_KEY_LEN` (1 MiB).
const KEY_FILE_MAX: u64 = 16 << 20;

/// Lock ids mapped back to the keys the operator named.
#[derive(Debug, Default)]
pub struct KeyNames(HashMap<i64, String>);

impl KeyNames {
    /// From `keys` (given on the command line), `--key` and `--key-file`;
    /// an unreadable file or a key too long to lock is a usage error
    /// (reported; returns the exit code).
    pub fn load(keys: &[String], args: &KeyNameArgs) -> Result<Self, i32> {
        let mut keys = keys.to_vec();
        keys.extend(args.keys.iter().cloned());
        for path in &args.key_file {
            let text = crate::capped_read::read_capped(path, KEY_FILE_MAX).map_err(|e| {
                report!("cannot read key file {}: {e}", path.display());
                exit::USAGE
            })?;
            let text = String::from_utf8(text).map_err(|_| {
                report!("key file {} is not UTF-8 text", path.display());
                exit::USAGE
            })?;
            keys.extend(
                text.lines()
                    .map(|l| l.strip_suffix('\r').unwrap_or(l))
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned),
            );
        }
        Self::from_keys(keys)
    }

    /// From keys given on the command line.
    pub fn from_keys(keys: impl IntoIterator<Item = String>) -> Result<Self, i32> {
        let mut names = HashMap::new();
        for key in keys {
            if key.len() > pgcoord::MAX_KEY_LEN {
                let shown: String = key.chars().take(40).collect();
                report!(
                    "key {shown:?}… is {} bytes long; lock keys are at most {} bytes",
                    key.len(),
                    pgcoord::MAX_KEY_LEN
                );
                return Err(exit::USAGE);
            }
            names.insert(pgcoord::lock_id_for_key(&key), key);
        }
        Ok(Self(names))
    }

    /// Fills in the key of each bigint lock whose id was named.
    pub fn apply(&self, locks: &mut [AdvisoryLock]) {
        for lock in locks.iter_mut().filter(|l| l.int_pair.is_none()) {
            if let Some(name) = self.0.get(&lock.lock_id) {
                lock.key = Some(name.clone());
            }
        }
    }
}

/// One inspection session (with the URL's TLS, reconnected after a loss)
/// and the query it runs, with the fencing table looked up again for each
/// new session (another server, after a failover, may lack it) and after
/// the listing found it gone (SQLSTATE 42P01: dropped under the view).
#[derive(Debug)]
pub struct Inspector {
    options: ConnectOptions,
    session: tokio::sync::Mutex<WatchSession>,
    query: std::sync::Mutex<HoldersQuery>,
    /// How many open sessions were found ended ([`Inspector::sessions_ended`]).
    ended: std::sync::atomic::AtomicU64,
    /// The server the last session reached, and how many times a new
    /// session reached another one ([`Inspector::server_changes`]).
    server: std::sync::Mutex<(Option<String>, u64)>,
}

/// The server `client` is on, as `address:port` (for a watch to notice
/// that a new session reached another server); `None` when it cannot say.
async fn server_of(client: &tokio_postgres::Client) -> Option<String> {
    let row = client
        .query_one(
            "SELECT coalesce(host(inet_server_addr()), 'local socket'), inet_server_port()",
            &[],
        )
        .await
        .ok()?;
    let (addr, port): (String, Option<i32>) = (row.get(0), row.get(1));
    Some(match port {
        Some(port) => format!("{addr}:{port}"),
        None => addr,
    })
}

impl Inspector {
    /// Connects, looks the fencing table up, and warns when it cannot be
    /// read. Failures are reported; returns the exit code.
    pub async fn open(db: &Database, query: HoldersQuery) -> Result<Self, i32> {
        let options = db.inspection_options();
        let fail = |e: &pgcoord::Error| db::fail("cannot list lock holders", Some(db), e);
        let client = connect_for_inspection(options.clone(), db.connect_timeout())
            .await
            .map_err(|e| fail(&e))?;
        let query = db::answered(query.with_fences(&client))
            .await
            .map_err(|e| fail(&e))?;
        if let FenceTable::Unreadable { table } = query.fences() {
            report!(
                "warning: this role may not read the fencing table {} \
                 (no SELECT privilege): fence tokens are not shown",
                printable(table)
            );
        }
        db::warn_if_standby(&client, "\"not held\"")
            .await
            .map_err(|e| fail(&e))?;
        let server = server_of(&client).await;
        Ok(Self {
            options,
            session: tokio::sync::Mutex::new(WatchSession::Open(client)),
            query: std::sync::Mutex::new(query),
            ended: std::sync::atomic::AtomicU64::new(0),
            server: std::sync::Mutex::new((server, 0)),
        })
    }

    /// How many times a new session reached another server than the one
    /// before (a failover, a multi-host URL's next host), and the server
    /// of the last session: a watch compares listings of one server only.
    pub fn server_changes(&self) -> (u64, Option<String>) {
        let (server, changes) = self
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        (changes, server)
    }

    /// How many times the open session was found ended (a terminated
    /// backend, a server restart) and another opened in its place.
    pub fn sessions_ended(&self) -> u64 {
        self.ended.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn query(&self) -> HoldersQuery {
        self.query.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The fencing table joined by the last listing's query, if any.
    pub fn fence_table(&self) -> Option<String> {
        match self.query().fences() {
            FenceTable::Joined { table } => Some(table.clone()),
            _ => None,
        }
    }

    /// Whether fence tokens are shown.
    pub fn fences_joined(&self) -> bool {
        self.fence_table().is_some()
    }

    /// One listing (one statement), keys named from `names`, answered
    /// within [`db::ANSWER_WITHIN`].
    pub async fn snapshot(&self, names: &KeyNames) -> pgcoord::Result<Vec<AdvisoryLock>> {
        self.snapshot_within(names, db::ANSWER_WITHIN).await
    }

    /// One listing, or a [`NoAnswer`](pgcoord::error::BackendErrorKind::NoAnswer) error once `limit`
    /// has passed, whether connecting or querying. A session that did not
    /// answer is dropped (it ends when the server answers its query, or
    /// at once when the server is gone) and a later call opens another,
    /// so a frozen server leaves at most one such session behind. A new
    /// session is opened in a task of its own that outlives a call that
    /// runs out of time ([`WatchSession`]): behind a multi-host URL whose
    /// first host is silent, later calls reach the next host.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; a session being opened when the call is
    /// dropped goes on being opened, and the next call waits for it; an
    /// open session is kept.
    pub async fn snapshot_within(
        &self,
        names: &KeyNames,
        limit: Duration,
    ) -> pgcoord::Result<Vec<AdvisoryLock>> {
        let mut slot = self.session.lock().await;
        let looked = tokio::time::timeout(limit, self.look(&mut slot, None)).await;
        let mut locks = match looked {
            Ok(Ok(locks)) => locks,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                // Silent: a later look opens another session.
                slot.forget_open();
                return Err(db::no_answer(limit));
            }
        };
        names.apply(&mut locks);
        Ok(locks)
    }

    /// The locks of `keys` alone (no fence tokens), on the same session,
    /// answered within [`db::ANSWER_WITHIN`].
    pub async fn snapshot_keys(&self, keys: &[String]) -> pgcoord::Result<Vec<AdvisoryLock>> {
        let query = HoldersQuery::keys(keys);
        let mut slot = self.session.lock().await;
        db::answered(self.look(&mut slot, Some(&query))).await
    }

    /// Runs the inspector's query, or `other`.
    async fn look(
        &self,
        slot: &mut WatchSession,
        other: Option<&HoldersQuery>,
    ) -> pgcoord::Result<Vec<AdvisoryLock>> {
        let options = self.options.clone();
        let timeout =
            (options.config().get_connect_timeout().copied()).unwrap_or(db::CONNECT_TIMEOUT);
        if slot.has_ended() {
            self.ended
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let (client, fresh) = slot
            .get(move || connect_for_inspection(options, timeout))
            .await?;
        if fresh {
            // A multi-host URL may now reach another server: a standby
            // that a failover left, say so again.
            db::warn_if_standby(client, "\"not held\"").await?;
            if let Some(now) = server_of(client).await {
                let mut server = self.server.lock().unwrap_or_else(|e| e.into_inner());
                if server.0.as_ref().is_some_and(|before| *before != now) {
                    server.1 += 1;
                }
                server.0 = Some(now);
            }
            // Another server (or the same one, later) may have the
            // fencing table or not: look it up again.
            self.look_up_fences(client).await?;
        }
        if let Some(other) = other {
            return other.run(client).await;
        }
        match self.query().run(client).await {
            Err(e) if is_undefined_table(&e) && self.query().fences() != &FenceTable::Missing => {
                // The fencing table was dropped under the view: list
                // without it (or with it, if it is back under its name).
                self.look_up_fences(client).await?;
                self.query().run(client).await
            }
            listed => listed,
        }
    }

    async fn look_up_fences(&self, client: &tokio_postgres::Client) -> pgcoord::Result<()> {
        let query = self.query().with_fences(client).await?;
        *self.query.lock().unwrap_or_else(|e| e.into_inner()) = query;
        Ok(())
    }
}

/// Whether `e` is the server's "relation does not exist" (42P01).
fn is_undefined_table(e: &pgcoord::Error) -> bool {
    e.as_backend()
        .and_then(|b| b.code())
        .is_some_and(|code| code.code() == "42P01")
}

/// The shown name of a lock in a table: its key (escaped, at most
/// [`SHOWN_KEY_WIDTH`] characters), else its id (or `(K1,K2)`).
pub fn lock_label(lock: &AdvisoryLock) -> String {
    match (&lock.key, lock.int_pair) {
        (_, Some((k1, k2))) => format!("({k1},{k2})"),
        (Some(key), None) => shortened(key, SHOWN_KEY_WIDTH),
        (None, None) => lock.lock_id.to_string(),
    }
}

/// Lays out rows of cells in columns two spaces apart (no trailing blanks).
pub fn columns(rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = Vec::new();
    for r in rows {
        widths.resize(widths.len().max(r.len()), 0);
        for (w, cell) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (i, cell) in r.iter().enumerate() {
                line.push_str(cell);
                if i + 1 < r.len() {
                    line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
                }
            }
            line.trim_end().to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(id: i64) -> AdvisoryLock {
        AdvisoryLock {
            lock_id: id,
            int_pair: None,
            key: None,
            fence: None,
            holders: vec![],
            waiters: vec![],
        }
    }

    #[test]
    fn named_ids_get_their_key_and_others_keep_theirs() {
        let names = KeyNames::from_keys(["alpha".to_owned()]).unwrap();
        let alpha = pgcoord::lock_id_for_key("alpha");
        let mut locks = vec![lock(alpha), lock(5)];
        let mut pair = lock(alpha);
        pair.int_pair = Some((1, 2));
        locks.push(pair);
        names.apply(&mut locks);
        assert_eq!(locks[0].key.as_deref(), Some("alpha"));
        assert_eq!(lock_label(&locks[0]), "alpha");
        assert_eq!(lock_label(&locks[1]), "5");
        let mut long = lock(7);
        long.key = Some(format!("tenant:{}", "x".repeat(250)));
        let label = lock_label(&long);
        assert_eq!(label.chars().count(), SHOWN_KEY_WIDTH, "{label}");
        assert!(
            label.starts_with("tenant:xxx") && label.ends_with('…'),
            "{label}"
        );
        assert_eq!(
            lock_label(&locks[2]),
            "(1,2)",
            "a two-int lock is never named"
        );
    }

    #[test]
    fn cells_line_up_in_columns_without_trailing_blanks() {
        let rows = vec![
            vec!["KEY".to_owned(), "STATE".into(), "PID".into()],
            vec!["long-key".into(), "held".into(), String::new()],
        ];
        assert_eq!(columns(&rows), ["KEY       STATE  PID", "long-key  held"]);
    }
}
