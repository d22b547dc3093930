//! `eventsource leader run` and `eventsource leader show`.
//!
//! `leader run NAME -- COMMAND` is `lock run --fence` on the election's key
//! (`election:NAME`, the library's `election_key`), with the fencing token
//! exported as the leader's term: the same acquisition, supervision, loss
//! handling and exit codes, no code of its own. `leader show` asks the
//! library's `Election` who leads, and reads the term from the fence table.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Subcommand};
use eventsource::adapters::postgres::PostgresLockManager;
use eventsource::coordination::{election_key, Election, Leader};
use eventsource::lock_id_for_key;
use futures_util::StreamExt;

use crate::cli::{RunArgs, DEFAULT_WATCHDOG};
use crate::db::{self, Database};
use crate::duration::{parse_duration, parse_lease, parse_timeout, parse_watchdog};
use crate::signals::Signals;
use crate::{exit, report};

/// `eventsource leader ...`
#[derive(Debug, Subcommand)]
pub enum LeaderCommand {
    /// Run COMMAND while leading election NAME; stop it if leadership is lost.
    #[command(
        long_about = RUN_LONG_ABOUT,
        override_usage = "eventsource leader run [OPTIONS] <NAME> -- <COMMAND> [ARGS]..."
    )]
    Run(LeaderRunArgs),

    /// Show who leads election NAME (with --watch: every change, vacancies included).
    Show(LeaderShowArgs),
}

const RUN_LONG_ABOUT: &str = "Campaign in election NAME and run COMMAND while leading it. \
Candidates wait in arrival order; when the leader resigns (its COMMAND exits) or dies, the next \
one leads within milliseconds. COMMAND gets EVENTSOURCE_LEADER_NAME and EVENTSOURCE_LEADER_TERM \
(the term: a fencing token strictly greater than every earlier leader's, also exported as \
EVENTSOURCE_LOCK_FENCE). If leadership is lost while COMMAND runs, COMMAND's process group is \
stopped as in `lock run` and the tool exits with the lock-lost code (76). Needs `eventsource \
lock install` once per database (the fence table). The election is the advisory lock of key \
`election:NAME`; see docs/primitives.md for taking part from other languages.";

/// `eventsource leader run`
#[derive(Debug, Args)]
pub struct LeaderRunArgs {
    /// Give up after waiting DURATION to lead; without it, wait as long as it takes.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, conflicts_with = "no_wait")]
    pub timeout: Option<Duration>,

    /// One attempt: if someone else leads, exit at once with the conflict code.
    #[arg(long)]
    pub no_wait: bool,

    /// A label for this candidate, shown by `leader show` [default: HOSTNAME:PID].
    #[arg(long, value_name = "ID")]
    pub holder_id: Option<String>,

    /// Exit code when leadership is not won.
    #[arg(long, value_name = "N", default_value_t = exit::CONFLICT,
          value_parser = clap::value_parser!(i32).range(0..=255))]
    pub conflict_exit_code: i32,

    /// Exit code when leadership is lost while COMMAND runs.
    #[arg(long, value_name = "N", default_value_t = exit::LOCK_LOST,
          value_parser = clap::value_parser!(i32).range(0..=255))]
    pub lost_exit_code: i32,

    /// After a loss, how long COMMAND's process group has between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub kill_grace: Duration,

    /// As `lock run --watchdog`.
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_WATCHDOG, value_parser = parse_watchdog)]
    pub watchdog: Duration,

    /// As `lock run --lease`: a frozen or cut-off leader loses leadership
    /// about DURATION after its last word with the server.
    #[arg(long, value_name = "DURATION", value_parser = parse_lease)]
    pub lease: Option<Duration>,

    /// The election's name.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// The command to run while leading, and its arguments (after `--`).
    #[arg(value_name = "COMMAND", required = true, num_args = 1.., trailing_var_arg = true,
          allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// `eventsource leader show`
#[derive(Debug, Args)]
pub struct LeaderShowArgs {
    /// Keep looking, and print a line at every change (a new leader, or vacant).
    #[arg(long)]
    pub watch: bool,

    /// How often --watch looks.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = parse_duration)]
    pub every: Duration,

    /// Print JSON objects (one per line with --watch).
    #[arg(long)]
    pub json: bool,

    /// The election's name.
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// Runs `leader run` or `leader show`; returns the exit code.
pub async fn leader(command: LeaderCommand, db: Database) -> i32 {
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
        watchdog: a.watchdog,
        fence: true,
        lease: a.lease,
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
