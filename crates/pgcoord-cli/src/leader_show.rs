//! `eventsource leader show [--watch]`: who leads an election (the
//! library's `Election::leader`) and its term, read from the fence table,
//! where `leader run` records each term.
//!
//! `--watch` looks every `--every` and prints a line, with the time of the
//! look, whenever the leader or the term changed. Terms are compared, not
//! only leaders: a term that began and ended between two looks is reported
//! as skipped, so a short leadership is never silently missed.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use pgcoord::coordination::{Election, Leader};
use pgcoord::inspect::query_holders;
use pgcoord::lock_id_for_key;
use pgcoord::postgres::fencing;
use tokio::time::MissedTickBehavior;
use tokio_postgres::error::SqlState;

use crate::db::{self, Database};
use crate::duration::format_duration;
use crate::leader_args::LeaderShowArgs;
use crate::printable::printable;
use crate::signals::Signals;
use crate::{exit, report};

/// Why the term could not be read.
enum TermError {
    /// No fence table: `lock install` has not run.
    NotInstalled,
    Other(tokio_postgres::Error),
}

/// The election's latest term from the fence table (the leader's, while
/// one leads); `None` when it has had none.
async fn latest_term(client: &tokio_postgres::Client, key: &str) -> Result<Option<u64>, TermError> {
    let row = client
        .query_opt(
            "SELECT fence FROM eventsource_lock_fences WHERE lock_id = $1",
            &[&lock_id_for_key(key)],
        )
        .await
        .map_err(|e| match e.code() {
            Some(c) if *c == SqlState::UNDEFINED_TABLE => TermError::NotInstalled,
            _ => TermError::Other(e),
        })?;
    // Fence 0: a row with no term handed out yet.
    Ok(row.and_then(|r| u64::try_from(r.get::<_, i64>(0)).ok().filter(|t| *t > 0)))
}

/// Why a look failed.
enum LookError {
    /// A new session could not be opened (or its first query not answered).
    Open(pgcoord::Error),
    Leader(pgcoord::Error),
    Term(TermError),
}

/// Who holds the election's lock, from the same session as the term (one
/// session per `leader show`, named as the tool's others: `PGAPPNAME`,
/// else `pgcoord-cli`).
async fn leader_on(client: &tokio_postgres::Client, key: &str) -> pgcoord::Result<Option<Leader>> {
    let locks = query_holders(client, &[key]).await?;
    let Some(lock) = locks.into_iter().find(|l| l.key.as_deref() == Some(key)) else {
        return Ok(None);
    };
    Ok(lock.holders.into_iter().next().map(|h| Leader {
        holder_id: h.holder_id,
        pid: Some(h.pid),
        since: h.since.or(h.backend_start),
        term: None,
    }))
}

/// The leader and the term as one look. They are two reads, and a term that
/// moved between them would pair a vacancy with the new leader's term, so
/// the term is read before and after the leader, and the look is taken
/// again (a few times) until both reads agree. Each look is given `limit`
/// ([`db::ANSWER_WITHIN`], or a watch's [`db::refresh_within`]).
async fn look(
    client: &tokio_postgres::Client,
    key: &str,
    limit: Duration,
) -> Result<(Option<Leader>, Option<u64>), LookError> {
    let looking = async {
        let mut before = latest_term(client, key).await.map_err(LookError::Term)?;
        let mut tries = 0;
        loop {
            let leader = leader_on(client, key).await.map_err(LookError::Leader)?;
            let after = latest_term(client, key).await.map_err(LookError::Term)?;
            tries += 1;
            if after == before || tries == 4 {
                return Ok((leader, after));
            }
            before = after;
        }
    };
    match db::answered_within(limit, async { Ok(looking.await) }).await {
        Ok(seen) => seen,
        Err(e) => Err(LookError::Leader(e)),
    }
}

fn not_installed(db: &Database) -> i32 {
    report!(
        "cannot show the leader: election terms live in the fence table, {}",
        crate::messages::no_fence_table(&db.shown())
    );
    exit::CONFIG
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// One line; `at` (the look's time) in `--watch` output only.
fn render(
    name: &str,
    leader: &Option<Leader>,
    term: Option<u64>,
    json: bool,
    at: Option<DateTime<Utc>>,
) -> String {
    let term_text = term.map_or_else(|| "-".to_owned(), |t| t.to_string());
    let time = at.map(|t| format!("{}\t", stamp(t))).unwrap_or_default();
    // The text line escapes what does not print; JSON has it as it is.
    let shown = printable(name);
    let mut value = match leader {
        // `server_pid`: the pid of the leader's session on the server, not
        // of its tool (which HOLDER_ID's `host:pid` default names).
        Some(l) if !json => {
            return format!(
                "{time}{shown}\tleader\t{}\tserver_pid={}\tterm={term_text}\n",
                l.holder_id.as_deref().map_or("-".to_owned(), printable),
                l.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
            )
        }
        None if !json => return format!("{time}{shown}\tvacant\t-\t-\tlast_term={term_text}\n"),
        Some(l) => serde_json::json!({
            "name": name,
            "leader": { "holder_id": l.holder_id, "pid": l.pid, "term": term, "since": l.since },
        }),
        None => serde_json::json!({ "name": name, "leader": null, "last_term": term }),
    };
    if let Some(at) = at {
        value["at"] = serde_json::Value::String(stamp(at));
    }
    format!("{value}\n")
}

/// The line for terms `first..=last` that began and ended between looks.
fn render_skipped(args: &LeaderShowArgs, first: u64, last: u64, at: DateTime<Utc>) -> String {
    if args.json {
        let value = serde_json::json!({
            "at": stamp(at), "name": args.name,
            "skipped_terms": { "first": first, "last": last },
        });
        return format!("{value}\n");
    }
    let terms = if first == last {
        format!("term={first}")
    } else {
        format!("terms={first}..{last}")
    };
    format!(
        "{}\t{}\tskipped\t{terms}\tbegan and ended between two looks (--every {})\n",
        stamp(at),
        printable(&args.name),
        format_duration(args.every)
    )
}

/// Runs `leader show`; returns the exit code.
pub async fn show(args: LeaderShowArgs, db: Database) -> i32 {
    // The election gives the key of its lock (and checks the name); it is
    // built on a manager that fences, which does no I/O and is never used.
    let locks = match db.manager_builder().fencing(true).build() {
        Ok(l) => l,
        Err(e) => return db::fail("cannot show the leader", Some(&db), &e),
    };
    let election = match Election::new(locks, args.name.clone()) {
        Ok(e) => e,
        Err(e) => return db::fail("cannot show the leader", Some(&db), &e),
    };
    let client = match open(&db, db::ANSWER_WITHIN).await {
        Ok(c) => c,
        Err(e) => return db::fail("cannot show the leader", Some(&db), &e),
    };
    if args.watch {
        return watch(election.key(), client, &args, &db).await;
    }
    let (leader, term) = match look(&client, election.key(), db::ANSWER_WITHIN).await {
        Ok(seen) => seen,
        Err(LookError::Term(TermError::NotInstalled)) => return not_installed(&db),
        // As every other failure: the code and hint its SQLSTATE calls
        // for (a statement_timeout, a privilege on the fence table).
        Err(LookError::Term(TermError::Other(e))) => {
            return db::fail(
                "cannot show the leader",
                Some(&db),
                &pgcoord::Error::from(e),
            )
        }
        Err(LookError::Leader(e) | LookError::Open(e)) => {
            return db::fail("cannot show the leader", Some(&db), &e)
        }
    };
    match crate::print_stdout(&render(&args.name, &leader, term, args.json, None)) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// The session of the looks, with a warning when its server is a hot
/// standby (whose advisory locks are its own: "vacant" there says nothing
/// about the primary); its standby check is answered within `limit`.
async fn open(db: &Database, limit: Duration) -> pgcoord::Result<tokio_postgres::Client> {
    let client = db.connect().await?;
    db::answered_within(limit, db::warn_if_standby(&client, "\"vacant\"")).await?;
    Ok(client)
}

/// What one look saw, as compared between looks.
type Seen = (Option<(Option<String>, Option<i32>)>, Option<u64>);

async fn watch(
    key: &str,
    client: tokio_postgres::Client,
    args: &LeaderShowArgs,
    db: &Database,
) -> i32 {
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    // Each look (a new session's too) fails if not answered within this,
    // so an outage is said within about one --every, and looked past.
    let limit = db::refresh_within(args.every);
    let mut looks = tokio::time::interval(args.every);
    looks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last: Option<Seen> = None;
    // The session of the looks; `None` after it ended (a server restart, a
    // terminated backend, no answer): the next look opens another.
    let mut session = Some(client);
    // Looks fail in a row (an outage): said once, and once when it ends.
    let mut failing = false;
    let fail = |failing: &mut bool, why: String| {
        if !std::mem::replace(failing, true) {
            report!(
                "cannot look at election {:?}: {why}; trying again every {}",
                args.name,
                format_duration(args.every)
            );
        }
    };
    loop {
        tokio::select! {
            sig = signals.recv() => return exit::watch_ended_by(sig),
            _ = looks.tick() => {}
        }
        if crate::reader_gone::stdout_reader_gone() {
            // The reader left (`| head -n 1`): noticed without waiting for
            // a change to write.
            return 0;
        }
        if session.as_ref().is_some_and(|c| c.is_closed()) {
            // Its server ended it (a terminated backend, a restart): said
            // once, and once more when a look succeeds on the next one.
            session = None;
            fail(
                &mut failing,
                "its session ended (a terminated backend, a server restart)".to_owned(),
            );
        }
        let looking = async {
            let client = match session.take().filter(|c| !c.is_closed()) {
                Some(c) => session.insert(c),
                None => session.insert(open(db, limit).await.map_err(LookError::Open)?),
            };
            look(client, key, limit).await
        };
        // A signal ends the watch at once, even while a look waits for
        // a silent server.
        let looked = tokio::select! {
            sig = signals.recv() => return exit::watch_ended_by(sig),
            looked = looking => looked,
        };
        let (leader, term) = match looked {
            Ok(seen) => seen,
            Err(LookError::Open(e)) => {
                fail(&mut failing, db::describe_failure("", Some(db), &e));
                continue;
            }
            Err(LookError::Term(TermError::NotInstalled)) => return not_installed(db),
            Err(LookError::Leader(e)) => {
                fail(&mut failing, db::error_chain(&e));
                // A silent session is not used again.
                session = None;
                continue;
            }
            Err(LookError::Term(TermError::Other(e))) => {
                fail(
                    &mut failing,
                    format!("cannot read its term: {}", db::error_chain(&e)),
                );
                continue;
            }
        };
        if std::mem::take(&mut failing) {
            report!("looking at election {:?} again", args.name);
        }
        let at = Utc::now();
        let seen: Seen = (leader.as_ref().map(|l| (l.holder_id.clone(), l.pid)), term);
        if last.as_ref() == Some(&seen) {
            continue;
        }
        let mut out = String::new();
        if let (Some((_, Some(before))), Some(now)) = (&last, term) {
            if now < *before {
                // Terms only grow, across a failover too: a smaller one is
                // another server's count (split brain, a restore).
                report!(
                    "warning: election {:?}'s term went back from {before} to {now}: this server \
                     did not hand out the last term seen (an old primary back as a primary, \
                     or a restored backup); two servers that both accept writes each elect \
                     a leader",
                    args.name
                );
            }
        }
        if let (Some((_, before)), Some(now)) = (&last, term) {
            // Terms begun since the last look; the current leader's is shown.
            // Counted within the current term's epoch (the timeline in its
            // high bits): a failover starts the terms of a new epoch, and
            // the tokens between the two epochs were never handed out.
            let epoch_first = (fencing::epoch_of(now) << fencing::EPOCH_SHIFT) + 1;
            let first = (before.unwrap_or(0) + 1).max(epoch_first);
            let unseen_last = if leader.is_some() { now - 1 } else { now };
            if first <= unseen_last {
                out.push_str(&render_skipped(args, first, unseen_last, at));
            }
        }
        out.push_str(&render(&args.name, &leader, term, args.json, Some(at)));
        if let Err(code) = crate::print_stdout(&out) {
            return code;
        }
        last = Some(seen);
    }
}
