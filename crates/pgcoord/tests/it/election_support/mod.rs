//! What the election checkers share: the leader's fenced write, the
//! tables it writes to, and the audit of what they hold afterwards.
//!
//! Every accepted write takes the next number of a one-row counter
//! (`el_head`, row-locked by the `UPDATE`, so numbers follow commit
//! order) and logs `(n, term, writer)` in `el_writes`. Along `n`, terms
//! must never go down: a decrease is a write of a deposed leader accepted
//! after its successor's (**a stale write accepted**).
#![allow(dead_code)] // each checker uses its part

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use pgcoord::coordination::election_key;
use pgcoord::lock_id_for_key;
use pgcoord::postgres::fencing;

use crate::checker_support::now_ns;

/// The election the candidates campaign for.
pub const ELECTION: &str = "el-chaos";

/// The tables of the checker, created once per database.
pub const SCHEMA: &str = "CREATE TABLE el_head (n bigint NOT NULL); \
     INSERT INTO el_head VALUES (0); \
     CREATE TABLE el_writes (n bigint PRIMARY KEY, term bigint NOT NULL, writer text NOT NULL)";

/// What became of one write attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    /// `fencing::check_token` found a later term: rolled back.
    Refused,
    /// A connection or server failure: rolled back (or never committed).
    Error,
}

/// One write of the leader of term `term`: in one transaction, the term
/// checked against the election key's fence (held `FOR SHARE` until the
/// end, so the next leader's grant waits for it), the next number taken,
/// the row logged. `fenced = false` leaves the check out (the control).
pub async fn fenced_write(
    data: &mut tokio_postgres::Client,
    key: &str,
    term: u64,
    writer: &str,
    work: Duration,
    fenced: bool,
) -> Outcome {
    let Ok(tx) = data.transaction().await else {
        return Outcome::Error;
    };
    if fenced {
        match fencing::check_token(&tx, key, term).await {
            Ok(_) => {}
            Err(e) if e.is_fenced() => return Outcome::Refused,
            Err(_) => return Outcome::Error,
        }
    }
    let write = async {
        let n: i64 = tx
            .query_one("UPDATE el_head SET n = n + 1 RETURNING n", &[])
            .await?
            .get(0);
        tokio::time::sleep(work).await; // widen the window a deposed leader would need
        tx.execute(
            "INSERT INTO el_writes (n, term, writer) VALUES ($1, $2, $3)",
            &[&n, &(term as i64), &writer],
        )
        .await?;
        tx.commit().await
    };
    match write.await {
        Ok(()) => Outcome::Committed,
        Err(_) => Outcome::Error,
    }
}

/// What the database says about the accepted writes.
#[derive(Debug, Default)]
pub struct Audit {
    pub writes: usize,
    /// Distinct terms with an accepted write.
    pub terms: usize,
    /// Places along `n` where the term went down: deposed leaders' writes
    /// accepted after a later leader's.
    pub stale: usize,
    /// Terms whose writes came from more than one writer.
    pub shared_terms: usize,
    /// The counter minus the rows (0 unless a numbered write went missing).
    pub missing: i64,
    /// The terms in the order their writes were accepted, each once.
    pub order: Vec<i64>,
}

pub async fn audit(client: &tokio_postgres::Client) -> Audit {
    let rows = client
        .query("SELECT n, term, writer FROM el_writes ORDER BY n", &[])
        .await
        .unwrap();
    let mut a = Audit {
        writes: rows.len(),
        ..Audit::default()
    };
    let mut writers: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    let mut last: Option<i64> = None;
    for r in &rows {
        let (term, writer): (i64, String) = (r.get(1), r.get(2));
        match last {
            Some(t) if term < t => a.stale += 1,
            Some(t) if term == t => {}
            _ => a.order.push(term),
        }
        last = Some(last.map_or(term, |t| t.max(term)));
        writers.entry(term).or_default().insert(writer);
    }
    a.terms = writers.len();
    a.shared_terms = writers.values().filter(|w| w.len() > 1).count();
    let head: i64 = client
        .query_one("SELECT n FROM el_head", &[])
        .await
        .unwrap()
        .get(0);
    a.missing = head - rows.len() as i64;
    a
}

impl Audit {
    /// True when the terms of accepted writes strictly increase.
    pub fn strictly_increasing(&self) -> bool {
        self.order.windows(2).all(|w| w[0] < w[1])
    }
}

/// Opens a data connection, retrying while the server restarts.
/// Its commits are durable when acknowledged (`synchronous_commit = on`,
/// whatever the test server's default), so an acknowledged write must be
/// in the audit even after an immediate restart.
pub async fn data_client(url: &str, until: u128) -> Option<tokio_postgres::Client> {
    while now_ns() < until {
        if let Ok((client, conn)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            if client
                .batch_execute("SET synchronous_commit = on")
                .await
                .is_ok()
            {
                return Some(client);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// The leader's backend and its worker's name, from `pg_locks`.
pub async fn leader(db: &pgcoord_testkit::pg::TestDatabase) -> Option<(i32, String)> {
    let client = db.connect().await.ok()?;
    let row = client
        .query_opt(
            "SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
             WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted \
             AND ((l.classid::int8 << 32) | l.objid::int8) = $1",
            &[&lock_id_for_key(&election_key(ELECTION))],
        )
        .await
        .ok()??;
    let app: String = row.get(1);
    Some((row.get(0), app.strip_prefix("eventsource/el-")?.to_owned()))
}

/// Tenures from the log: (task, term) per line; the terms must be distinct.
pub fn tenures(log: &str) -> Vec<(String, i64)> {
    log.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_owned(), f[5].parse().unwrap())
        })
        .collect()
}
