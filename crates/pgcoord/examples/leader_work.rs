//! A leader that runs work: `Election::run_while_leading` campaigns, hands
//! each term to the work, and cancels the work's token when leadership is
//! lost. Every write of the work is fenced with its term inside its own
//! transaction (`fencing::check_token`), so a deposed leader's write can
//! never land after the next leader's.
//!
//! Here node-a leads and writes; in the middle of its second write (its
//! transaction open, the row not yet committed) its lock session is
//! terminated from outside, as a crashed connection or an operator's
//! `pg_terminate_backend` would. node-a's work sees its token cancelled
//! and rolls back; node-b, waiting, leads with a later term; a write still
//! carrying node-a's old term is refused.
//!
//! ```text
//! cargo run -p pgcoord --example leader_work -- postgres://postgres@127.0.0.1/app
//! ```

use std::sync::Arc;
use std::time::Duration;

use pgcoord::coordination::{Election, LeaderTerm};
use pgcoord::tokio_util::sync::CancellationToken;
use pgcoord::{postgres::fencing, tokio_postgres, PostgresLockManager};
use tokio::sync::{mpsc, Mutex};

/// What node-a's work reports.
#[derive(Debug, PartialEq)]
enum Report {
    /// A write committed under this term.
    Wrote(u64),
    /// A write is open (checked, inserted, not committed) under this term.
    MidWrite(u64),
    /// The leadership was lost with the write open: rolled back.
    LostMidWrite(u64),
    /// The work failed (and stopped the loop).
    Failed(String),
}

/// One leader's work: a committed write, then a write left open until the
/// term ends (a real leader would commit it; here the term ends first).
async fn work(
    term: LeaderTerm,
    db: Arc<Mutex<tokio_postgres::Client>>,
    report: mpsc::UnboundedSender<Report>,
) -> Result<(), pgcoord::Error> {
    let key = term.info().key.clone();
    let mut db = db.lock().await;
    let backend = |e| pgcoord::Error::InvalidArgument(format!("the example's table: {e}"));
    for n in 0i64.. {
        let tx = db.transaction().await.map_err(backend)?;
        fencing::check_token(&tx, &key, term.term()).await?; // refused once deposed
        tx.execute(
            "INSERT INTO leader_report (term, n) VALUES ($1, $2)",
            &[&(term.term() as i64), &n],
        )
        .await
        .map_err(backend)?;
        if n == 0 {
            tx.commit().await.map_err(backend)?;
            let _ = report.send(Report::Wrote(term.term()));
            continue;
        }
        let _ = report.send(Report::MidWrite(term.term()));
        // ... more of the write; the term ends before it commits.
        term.token().cancelled().await;
        tx.rollback().await.map_err(backend)?;
        let _ = report.send(Report::LostMidWrite(term.term()));
        break;
    }
    Ok(())
}

/// Runs the example on the database at `url`.
pub async fn demo(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let candidate = |id: &str| -> pgcoord::Result<Election<PostgresLockManager>> {
        let locks = PostgresLockManager::builder(url.parse()?)
            .holder_id(id)
            .fencing(true) // terms are fencing tokens
            .build()?;
        Election::new(locks, "report-writer")
    };
    let (a, b) = (candidate("node-a")?, candidate("node-b")?);
    a.locks().install_fencing().await?; // once per database

    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS leader_report (term int8, n int8)")
        .await?;
    let db = Arc::new(Mutex::new(client));
    let (admin, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);

    // node-a leads and runs its work, term after term, until stopped.
    let stop = CancellationToken::new();
    let (report, mut reports) = mpsc::unbounded_channel();
    let node_a = tokio::spawn({
        let (a, stop, db) = (a.clone(), stop.clone(), db.clone());
        async move {
            a.run_while_leading(&stop, |term| {
                let (db, report, stop) = (db.clone(), report.clone(), stop.clone());
                async move {
                    if let Err(e) = work(term, db, report.clone()).await {
                        let _ = report.send(Report::Failed(e.to_string()));
                        stop.cancel();
                    }
                }
            })
            .await
        }
    });
    let term_a = match reports.recv().await {
        Some(Report::Wrote(term)) => term,
        other => return Err(format!("node-a did not write: {other:?}").into()),
    };
    println!("node-a leads with term {term_a} and wrote under it");
    assert_eq!(reports.recv().await, Some(Report::MidWrite(term_a)));
    println!("node-a is in the middle of its second write");

    // node-b waits to lead; node-a's lock session is terminated.
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.campaign(None).await }
    });
    while b
        .locks()
        .holders(&[b.key()])
        .await?
        .first()
        .map_or(0, |l| l.waiters.len())
        == 0
    {
        tokio::time::sleep(Duration::from_millis(5)).await; // until node-b is queued
    }
    let pid = b
        .leader()
        .await?
        .and_then(|l| l.pid)
        .ok_or("nobody leads")?;
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await?;
    assert_eq!(reports.recv().await, Some(Report::LostMidWrite(term_a)));
    println!("node-a lost its leadership mid-write and rolled the write back");

    let leading_b = tokio::time::timeout(Duration::from_secs(30), waiting).await???;
    assert!(leading_b.term() > term_a);
    println!("node-b leads with term {}", leading_b.term());

    // A late write under node-a's old term is refused.
    {
        let mut db = db.lock().await;
        let tx = db.transaction().await?;
        let err = fencing::check_token(&tx, a.key(), term_a)
            .await
            .expect_err("a deposed term is refused");
        assert!(err.is_fenced(), "{err}");
        println!("a write with node-a's old term is refused: {err}");
    }

    stop.cancel(); // node-a campaigns behind node-b: stops at once
    node_a.await??;
    leading_b.resign().await?;
    let rows: Vec<(i64, i64)> = db
        .lock()
        .await
        .query("SELECT term, n FROM leader_report ORDER BY term, n", &[])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, [(term_a as i64, 0)], "only node-a's committed write");
    println!("the table holds node-a's committed write only: {rows:?}");
    Ok(())
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or("pass a postgres:// URL or set DATABASE_URL")?;
    demo(&url).await
}
