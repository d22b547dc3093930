//! `eventsource leader run` and `eventsource leader show`.
//!
//! `leader run NAME -- COMMAND` is `lock run --fence` on the election's key
//! (`election:NAME`, the library's `election_key`), with the fencing token
//! exported as the leader's term: the same acquisition, supervision, loss
//! handling and exit codes, no code of its own. `leader show` asks the
//! library's `Election` who leads, and reads the term from the fence table.

use std::time::Duration;

use futures_util::StreamExt;
use pgcoord::adapters::postgres::PostgresLockManager;
use pgcoord::coordination::{election_key, Election, Leader};
use pgcoord::lock_id_for_key;

use crate::cli::{RunArgs, DEFAULT_WATCHDOG_MS};
use crate::db::{self, Database};
pub use crate::leader_args::{LeaderCommand, LeaderRunArgs, LeaderShowArgs};
use crate::signals::Signals;
use crate::{exit, report};

/// Runs `leader run` or `leader show`; returns the exit code.
pub async fn leader(command: LeaderCommand, db: Database) -> i32 {
    let name = match &command {
        LeaderCommand::Run(a) => &a.name,
        LeaderCommand::Show(a) => &a.name,
    };
    if name.is_empty() {
        report!("an election needs a name (NAME is empty)");
        return exit::USAGE;
    }
    match command {
        LeaderCommand::Run(args) => crate::run::run(run_args(args), db).await,
        LeaderCommand::Show(args) => show(args, db).await,
    }
}

/// `leader run` as the `lock run` it is.
fn run_args(a: LeaderRunArgs) -> RunArgs {
    RunArgs {
        timeout: a.timeout,
        no_wait: a.no_wait,
        holder_id: a.holder_id,
        conflict_exit_code: a.conflict_exit_code,
        lost_exit_code: a.lost_exit_code,
        kill_grace: a.kill_grace,
        allow_standby: false,
        watchdog: a
            .watchdog
            .unwrap_or(Duration::from_millis(DEFAULT_WATCHDOG_MS)),
        fence: true,
        lease: a.lease,
        permits: None,
        shared: false,
        also: Vec::new(),
        key: election_key(&a.name),
        command: a.command,
        extra_env: vec![("EVENTSOURCE_LEADER_NAME", a.name)],
        fence_env: vec!["EVENTSOURCE_LEADER_TERM"],
    }
}

/// The election's latest term from the fence table (the leader's, while
/// one leads); `None` when it has none or the table is not installed.
async fn latest_term(client: &tokio_postgres::Client, key: &str) -> Option<u64> {
    let row = client
        .query_opt(
            "SELECT fence FROM eventsource_lock_fences WHERE lock_id = $1",
            &[&lock_id_for_key(key)],
        )
        .await
        .ok()??;
    u64::try_from(row.get::<_, i64>(0)).ok()
}

fn render(name: &str, leader: &Option<Leader>, term: Option<u64>, json: bool) -> String {
    let term_text = term.map_or_else(|| "-".to_owned(), |t| t.to_string());
    match (leader, json) {
        (Some(l), false) => format!(
            "{name}\tleader\t{}\tpid={}\tterm={term_text}\n",
            l.holder_id.as_deref().unwrap_or("-"),
            l.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
        ),
        (None, false) => format!("{name}\tvacant\t-\t-\tlast_term={term_text}\n"),
        (Some(l), true) => format!(
            "{}\n",
            serde_json::json!({
                "name": name,
                "leader": { "holder_id": l.holder_id, "pid": l.pid, "term": term, "since": l.since },
            })
        ),
        (None, true) => format!(
            "{}\n",
            serde_json::json!({ "name": name, "leader": null, "last_term": term })
        ),
    }
}

async fn show(args: LeaderShowArgs, db: Database) -> i32 {
    let election = Election::new(db.manager_builder().build(), args.name.clone());
    let client = match db.connect().await {
        Ok(c) => c,
        Err(e) => return db::fail("cannot show the leader", Some(&db), &e),
    };
    if !args.watch {
        let leader = match election.leader().await {
            Ok(l) => l,
            Err(e) => return db::fail("cannot show the leader", Some(&db), &e),
        };
        let term = latest_term(&client, election.key()).await;
        return match crate::print_stdout(&render(&args.name, &leader, term, args.json)) {
            Ok(()) => 0,
            Err(code) => code,
        };
    }
    watch(&election, &client, &args).await
}

async fn watch(
    election: &Election<PostgresLockManager>,
    client: &tokio_postgres::Client,
    args: &LeaderShowArgs,
) -> i32 {
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    let mut changes = Box::pin(election.watch(args.every));
    loop {
        tokio::select! {
            sig = signals.recv() => return exit::SIGNAL_BASE + sig as i32,
            next = changes.next() => match next {
                Some(Ok(leader)) => {
                    let term = latest_term(client, election.key()).await;
                    if let Err(code) = crate::print_stdout(&render(&args.name, &leader, term, args.json)) {
                        return code;
                    }
                }
                Some(Err(e)) => report!(
                    "cannot look at election {:?}: {}; trying again",
                    args.name,
                    db::error_chain(&e)
                ),
                None => return exit::SOFTWARE,
            },
        }
    }
}
