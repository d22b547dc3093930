//! More of `lock run` under an interactive bash (see `shell_job_control`):
//! a Ctrl-Z under `--lease` says the lock is kept only for the lease, and
//! `fg` after a longer stop ends the run as for any lost lock.

use crate::common::*;
use crate::shell_job_control::{
    at_prompt, cat_of, ends_with, reading_with_terminal, setup, stat_fields, stopped,
    stopped_reports,
};

#[tokio::test]
async fn a_ctrl_z_under_a_lease_keeps_the_lock_only_for_the_lease_and_says_so() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    tmux.type_line("$E lock run --lease 1s jc-lease -- cat")
        .await;
    let cat = cat_of("jc-lease").await;
    reading_with_terminal(cat).await;
    tmux.press("C-z").await;
    let screen = tmux.until("the stop", |s| stopped_reports(s, 1)).await;
    let said = screen
        .lines()
        .find(|l| l.contains("the command (pgid"))
        .unwrap_or_default();
    assert!(
        said.contains("cannot renew its lease")
            && said.contains("keeps lock \"jc-lease\" only for the lease (1s)")
            && !said.contains("while it is stopped"),
        "{screen}"
    );
    let tool: i32 = stat_fields(cat).unwrap()[1].parse().unwrap();
    stopped(tool).await;
    // Nobody terminates anything: the lease runs out while the tool is
    // stopped, and the server frees the lock.
    wait_for(
        &inspector,
        "jc-lease",
        "the lock freed by the server",
        |l| l.is_none(),
    )
    .await;

    tmux.type_line("fg").await;
    let screen = tmux
        .until("the loss handled", |s| {
            s.contains("exiting with 76") && at_prompt(s)
        })
        .await;
    assert!(
        screen.contains("its lease has run out")
            && screen.contains("lock \"jc-lease\" was lost while the command was stopped")
            && !screen.contains("while the command ran"),
        "{screen}"
    );
    ends_with(&tmux, &inspector, "jc-lease", 76).await;
}
