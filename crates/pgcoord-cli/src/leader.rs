//! `eventsource leader run` and `eventsource leader show`.
//!
//! `leader run NAME -- COMMAND` is `lock run --fence` on the election's key
//! (`election:NAME`, the library's `election_key`), with the fencing token
//! exported as the leader's term: the same acquisition, supervision, loss
//! handling and exit codes, no code of its own. `leader show` asks the
//! library's `Election` who leads (see `leader_show`).

use std::time::Duration;

use pgcoord::coordination::election_key;

use crate::cli::{RunArgs, DEFAULT_WATCHDOG_MS};
use crate::db::Database;
pub use crate::leader_args::{LeaderCommand, LeaderRunArgs};

/// Runs `leader run` or `leader show`; returns the exit code.
pub async fn leader(command: LeaderCommand, db: Database) -> i32 {
    // NAME was checked by its parser (`names::parse_election_name` for
    // `run`: it fits in COMMAND's environment).
    match command {
        LeaderCommand::Run(args) => crate::run::run(run_args(args), db).await,
        LeaderCommand::Show(args) => crate::leader_show::show(args, db).await,
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
        min_interval: None,
        key: election_key(&a.name),
        command: a.command,
        extra_env: vec![("EVENTSOURCE_LEADER_NAME", a.name)],
        fence_env: vec!["EVENTSOURCE_LEADER_TERM"],
        built_for: Some("leader run"),
    }
}
