//! `eventsource lock holders`: who holds which lock, who waits; and the
//! inspection session that it, `--watch` and `lock top` share.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;
use eventsource::adapters::postgres::{
    AdvisoryLock, ConnectOptions, FenceTable, HoldersQuery, LockSession, PostgresDatabase,
};

use crate::cli::HoldersArgs;
use crate::db::{self, Database};
use crate::key::printable_key;
use crate::messages::session_name;
use crate::{exit, report};

/// Runs `lock holders` (and `--watch`); returns the exit code.
pub async fn holders(args: HoldersArgs, db: Database) -> i32 {
    let names = match KeyNames::from_keys(args.keys.iter().cloned()) {
        Ok(n) => n,
        Err(code) => return code,
    };
    let inspector = match Inspector::open(&db, HoldersQuery::keys(&args.keys)).await {
        Ok(i) => i,
        Err(code) => return code,
    };
    if args.watch {
        return crate::watch::watch(&db, &inspector, &names, args.json, args.interval).await;
    }
    let locks = match inspector.snapshot(&names).await {
        Ok(l) => l,
        Err(e) => return db::fail("cannot list lock holders", Some(&db), &e),
    };
    let out = if args.json {
        match serde_json::to_string_pretty(&locks) {
            Ok(mut s) => {
                s.push('\n');
                s
            }
            Err(e) => {
                report!("cannot encode JSON: {e}");
                return exit::SOFTWARE;
            }
        }
    } else {
        render_table(&locks, &args.keys, inspector.fences_joined(), Utc::now())
    };
    match crate::print_stdout(&out) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// The shortest `--interval`: the views run one query per refresh, which
/// reads the server's whole lock table.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Parses `--interval`: a DURATION of at least [`MIN_INTERVAL`].
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = crate::duration::parse_duration(text)?;
    if d < MIN_INTERVAL {
        return Err(format!(
            "{text:?} is too short a refresh interval: at least {}",
            crate::duration::format_duration(MIN_INTERVAL)
        ));
    }
    Ok(d)
}

/// `--key NAME` and `--key-file FILE`: names for lock ids in the views.
#[derive(Debug, Args)]
pub struct KeyNameArgs {
    /// Show the lock of KEY by its name (repeatable); other locks show by
    /// id. Keys the fencing table records are named too.
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,

    /// Like --key, for every line of FILE (one key per line; empty lines
    /// are skipped).
    #[arg(long, value_name = "FILE")]
    pub key_file: Vec<PathBuf>,
}

/// Lock ids mapped back to the keys the operator named.
#[derive(Debug, Default)]
pub struct KeyNames(HashMap<i64, String>);

impl KeyNames {
    /// From `--key` and `--key-file`; an unreadable file or a key too long
    /// to lock is a usage error (reported; returns the exit code).
    pub fn load(args: &KeyNameArgs) -> Result<Self, i32> {
        let mut keys = args.keys.clone();
        for path in &args.key_file {
            let text = std::fs::read(path).map_err(|e| {
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
            if key.len() > eventsource::MAX_KEY_LEN {
                let shown: String = key.chars().take(40).collect();
                report!(
                    "key {shown:?}… is {} bytes long; lock keys are at most {} bytes",
                    key.len(),
                    eventsource::MAX_KEY_LEN
                );
                return Err(exit::USAGE);
            }
            names.insert(eventsource::lock_id_for_key(&key), key);
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
/// and the query it runs, with the fencing table looked up once.
#[derive(Debug)]
pub struct Inspector {
    pool: PostgresDatabase,
    query: HoldersQuery,
}

impl Inspector {
    /// Connects, looks the fencing table up, and warns when it cannot be
    /// read. Failures are reported; returns the exit code.
    pub async fn open(db: &Database, query: HoldersQuery) -> Result<Self, i32> {
        let mut config = db.config.clone();
        config.application_name("eventsource-cli");
        config.connect_timeout(db::CONNECT_TIMEOUT);
        let mut options = ConnectOptions::from_config(config);
        if let Some(mode) = db.ssl.mode {
            options = options.with_ssl_mode(mode);
        }
        if let Some(root) = &db.ssl.root_cert {
            options = options.with_ssl_root_cert(root);
        }
        let fail = |e: &eventsource::Error| db::fail("cannot list lock holders", Some(db), e);
        let pool = PostgresDatabase::builder(options)
            .max_size(1)
            .create_timeout(db::CONNECT_TIMEOUT)
            .build()
            .map_err(|e| fail(&e))?;
        let client = pool.get().await.map_err(|e| fail(&e))?;
        let query = query.with_fences(&client).await.map_err(|e| fail(&e))?;
        if let FenceTable::Unreadable { table } = query.fences() {
            report!(
                "warning: this role may not read the fencing table {table} \
                 (no SELECT privilege): fence tokens are not shown"
            );
        }
        drop(client);
        Ok(Self { pool, query })
    }

    /// The fencing table joined, if any.
    pub fn fence_table(&self) -> Option<&str> {
        match self.query.fences() {
            FenceTable::Joined { table } => Some(table),
            _ => None,
        }
    }

    /// Whether fence tokens are shown.
    pub fn fences_joined(&self) -> bool {
        self.fence_table().is_some()
    }

    /// One listing (one statement), keys named from `names`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; a dropped call gives its session back
    /// to the pool (or closes it).
    pub async fn snapshot(&self, names: &KeyNames) -> eventsource::Result<Vec<AdvisoryLock>> {
        let client = self.pool.get().await?;
        let mut locks = self.query.run(&client).await?;
        names.apply(&mut locks);
        Ok(locks)
    }
}

/// The shown name of a lock: its key, else its id (or `(K1,K2)`).
pub fn lock_label(lock: &AdvisoryLock) -> String {
    match (&lock.key, lock.int_pair) {
        (_, Some((k1, k2))) => format!("({k1},{k2})"),
        (Some(key), None) => printable_key(key),
        (None, None) => lock.lock_id.to_string(),
    }
}

fn since_text(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match since {
        None => "-".to_owned(),
        Some(t) => {
            let age = (now - t).to_std().unwrap_or_default();
            format!(
                "{} ({} ago)",
                t.format("%Y-%m-%dT%H:%M:%SZ"),
                crate::duration::format_duration(Duration::from_secs(age.as_secs()))
            )
        }
    }
}

fn row(lock_cells: Vec<String>, s: &LockSession, now: DateTime<Utc>) -> Vec<String> {
    let mut cells = lock_cells;
    cells.extend([
        if s.granted { "held" } else { "waiting" }.to_owned(),
        s.mode.clone(),
        s.pid.to_string(),
        session_name(s),
        s.client_addr.clone().unwrap_or_else(|| "-".to_owned()),
        since_text(s.since, now),
    ]);
    cells
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

/// The text table: one row per session, holders first, then waiters in
/// queue order; the lock id, key (and fence token, with `fences`) only on a
/// lock's first row.
pub fn render_table(
    locks: &[AdvisoryLock],
    asked: &[String],
    fences: bool,
    now: DateTime<Utc>,
) -> String {
    let mut out = String::new();
    if locks.is_empty() {
        if asked.is_empty() {
            out.push_str("no advisory locks are held or awaited in this database\n");
        }
    } else {
        let mut header: Vec<String> = ["LOCK ID", "KEY"].map(str::to_owned).to_vec();
        if fences {
            header.push("FENCE".into());
        }
        header.extend(["STATE", "MODE", "PID", "HOLDER", "CLIENT", "SINCE"].map(str::to_owned));
        let mut rows = vec![header];
        for lock in locks {
            let mut first = true;
            for s in lock.holders.iter().chain(lock.waiters.iter()) {
                let mut cells = Vec::new();
                if first {
                    cells.push(match lock.int_pair {
                        Some((k1, k2)) => format!("({k1},{k2})"),
                        None => lock.lock_id.to_string(),
                    });
                    cells.push(lock.key.as_deref().map_or("-".into(), printable_key));
                    if fences {
                        cells.push(lock.fence.map_or("-".into(), |f| f.to_string()));
                    }
                } else {
                    cells.resize(if fences { 3 } else { 2 }, String::new());
                }
                first = false;
                rows.push(row(cells, s, now));
            }
        }
        for line in columns(&rows) {
            out.push_str(&line);
            out.push('\n');
        }
        if locks.iter().any(|l| l.int_pair.is_some()) {
            out.push_str(
                "(K1,K2): a two-int advisory lock, pg_advisory_lock(int, int); \
                 eventsource takes bigint ones (LOCK ID)\n",
            );
        }
    }
    for key in asked {
        let id = eventsource::lock_id_for_key(key);
        if !locks
            .iter()
            .any(|l| l.lock_id == id && l.int_pair.is_none())
        {
            out.push_str(&format!(
                "{} (id {id}): not held, no one waiting\n",
                printable_key(key)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn session(pid: i32, app: &str, granted: bool, secs: u32) -> LockSession {
        LockSession {
            pid,
            mode: "ExclusiveLock".into(),
            granted,
            application_name: Some(app.into()),
            holder_id: app.strip_prefix("eventsource/").map(str::to_owned),
            client_addr: if granted {
                Some("127.0.0.1".into())
            } else {
                None
            },
            backend_start: None,
            since: Some(Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, secs).unwrap()),
            blocked_by: if granted { vec![] } else { vec![10] },
        }
    }

    fn alpha(fence: Option<i64>) -> Vec<AdvisoryLock> {
        vec![AdvisoryLock {
            lock_id: 1068468761257547166,
            int_pair: None,
            key: Some("alpha".into()),
            fence,
            holders: vec![session(10, "eventsource/host-a:1", true, 0)],
            waiters: vec![session(11, "psql", false, 30)],
        }]
    }

    #[test]
    fn table_lists_holders_then_waiters() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let text = render_table(&alpha(None), &["alpha".into(), "beta".into()], false, now);
        let expected = "\
LOCK ID              KEY    STATE    MODE           PID  HOLDER              CLIENT     SINCE
1068468761257547166  alpha  held     ExclusiveLock  10   host-a:1            127.0.0.1  2026-11-30T09:00:00Z (3m ago)
                            waiting  ExclusiveLock  11   application \"psql\"  -          2026-11-30T09:00:30Z (2m30s ago)
beta (id 8380746901480884457): not held, no one waiting
";
        assert_eq!(text, expected);
    }

    #[test]
    fn table_shows_the_fence_token_when_the_fencing_table_is_joined() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let text = render_table(&alpha(Some(42)), &[], true, now);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("LOCK ID              KEY    FENCE  STATE"));
        assert!(lines[1].starts_with("1068468761257547166  alpha  42     held"));
        assert!(lines[2].starts_with("                                   waiting"));
        let none = render_table(&alpha(None), &[], true, now);
        assert!(none.lines().nth(1).unwrap().contains("alpha  -      held"));
    }

    #[test]
    fn empty_listing_says_so() {
        let now = Utc::now();
        assert_eq!(
            render_table(&[], &[], false, now),
            "no advisory locks are held or awaited in this database\n"
        );
    }

    #[test]
    fn intervals_below_the_minimum_or_malformed_are_refused() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["0s", "50ms", "-1s", "1", "soon", ""] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn named_ids_get_their_key_and_others_keep_theirs() {
        let names = KeyNames::from_keys(["alpha".to_owned()]).unwrap();
        let mut locks = alpha(None);
        locks[0].key = None;
        locks.push(AdvisoryLock {
            lock_id: 5,
            int_pair: None,
            key: None,
            fence: None,
            holders: vec![],
            waiters: vec![],
        });
        names.apply(&mut locks);
        assert_eq!(locks[0].key.as_deref(), Some("alpha"));
        assert_eq!(lock_label(&locks[0]), "alpha");
        assert_eq!(lock_label(&locks[1]), "5");
    }
}
