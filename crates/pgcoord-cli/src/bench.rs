//! `eventsource lock bench`: the lock figures of the user's own server, by
//! the workloads of `pgcoord-workloads` (the benchmark crate runs the same).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use pgcoord_workloads::{Figures, Phase};

use crate::db::{self, Database};

pub const BENCH_LONG_ABOUT: &str = "Measure the locks on the server of DATABASE_URL, as the \
connecting role (any role that may connect: advisory locks need no privilege), for --seconds \
each: lock + unlock pairs per second from one task and from 64 tasks (a key each), the \
hand-over latency from a holder's release to a waiter queued in PostgreSQL (p50, p99), and, \
when `eventsource lock install` has run, the cost a fencing token adds to a grant. It also \
reads the lock-table room, max_locks_per_transaction x the backend slots (max_connections, \
autovacuum and background workers, WAL senders, prepared transactions): how many locks the \
whole fleet may hold at once. \n\n\
It leaves nothing behind: its keys are unique to the run and released, its sessions are \
closed, it creates no table (the fenced run uses the one key eventsource/lock-bench/fenced, \
whose row in the fencing table every run reuses). It loads the server for the duration: run \
it where that is acceptable. A line on standard error shows progress when standard error is \
a terminal. It opens up to 6 server sessions at once: a role's CONNECTION LIMIT below that \
fails it (\"too many connections\"). A role that may not write the fence table's rows, or whose \
sessions are read-only, gets every other figure and a note why the fenced one is missing. Exit 0 \
with the figures; 69 when the database cannot be reached or a workload fails.";

/// `eventsource lock bench`
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// How long each workload runs, in seconds (1 to 600).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub seconds: u64,

    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `lock bench`; returns the exit code.
pub async fn bench(args: BenchArgs, db: Database) -> i32 {
    let client = match db.connect().await {
        Ok(c) => c,
        Err(e) => return db::fail("cannot run the benchmark", Some(&db), &e),
    };
    let tty = std::io::stderr().is_terminal();
    let window = Duration::from_secs(args.seconds);
    let progress = |phase: Phase| {
        if tty {
            let _ = write!(
                std::io::stderr(),
                "\r\x1b[2Klock bench: {} ({} s)...",
                phase.describe(),
                args.seconds
            );
        }
    };
    let figures =
        pgcoord_workloads::run_all(|| db.manager_builder(), &client, window, progress).await;
    if tty {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
    let figures = match figures {
        Ok(f) => f,
        Err(e) => return failed(&db, &e),
    };
    let text = if args.json {
        match serde_json::to_string(&figures) {
            Ok(j) => j + "\n",
            Err(e) => {
                crate::report!("cannot encode the figures: {e}");
                return crate::exit::SOFTWARE;
            }
        }
    } else {
        render(&figures, &db.shown())
    };
    match crate::print_stdout(&text) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// Reports a failed run; 69 for every failure of the database, as the
/// help says, whatever the library's error (a waiter that never queued
/// is a server that did not serve it, not a bad argument).
fn failed(db: &Database, e: &pgcoord::Error) -> i32 {
    let mut line = db::describe_failure("the benchmark failed", Some(db), e);
    let too_many = e
        .as_backend()
        .and_then(|b| b.code())
        .is_some_and(|c| c.code() == "53300");
    if too_many {
        line.push_str(&format!(
            " (lock bench opens up to {} server sessions at once: the role's CONNECTION LIMIT, \
             the database's and max_connections must leave room for them)",
            pgcoord_workloads::SESSIONS_AT_ONCE
        ));
    }
    crate::report!("{line}");
    match crate::exit::for_error(e) {
        crate::exit::SOFTWARE => crate::exit::SOFTWARE,
        _ => crate::exit::UNAVAILABLE,
    }
}

fn render(f: &Figures, shown: &str) -> String {
    let room = &f.lock_table;
    let fenced = match (f.fenced_pairs_per_sec, f.fenced_grant_extra_us) {
        (Some(rate), Some(extra)) => {
            format!("{rate:.0} pairs/s, {extra:.0} µs more per grant than unfenced")
        }
        _ => format!(
            "not measured: {}",
            f.fenced_not_measured.as_deref().unwrap_or("no figure")
        ),
    };
    format!(
        "lock bench on {shown}, {secs} s per workload\n\
         sequential (1 task):      {seq:.0} lock+unlock pairs/s\n\
         concurrent (64 tasks):    {conc:.0} lock+unlock pairs/s\n\
         hand-over:                p50 {p50:.0} µs, p99 {p99:.0} µs ({n} hand-overs)\n\
         fenced (1 task):          {fenced}\n\
         lock-table room:          {slots} locks = max_locks_per_transaction {per} x \
         {backends} backend slots (max_connections {conns}, autovacuum and background workers, \
         WAL senders, prepared transactions)\n\
         \x20 every session's held advisory locks, and the table locks of running queries, \
         share these {slots} slots: past them, any session's next lock fails with \"out of \
         shared memory\" (SQLSTATE 53200). Keep what the fleet holds at once well below it; \
         raising max_locks_per_transaction needs a server restart.\n",
        secs = f.seconds_per_workload,
        seq = f.sequential_pairs_per_sec,
        conc = f.concurrent64_pairs_per_sec,
        p50 = f.handover_p50_us,
        p99 = f.handover_p99_us,
        n = f.handovers,
        slots = room.slots,
        per = room.max_locks_per_transaction,
        conns = room.max_connections,
        backends = room.backend_slots,
    )
}
