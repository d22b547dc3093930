//! More of `lock run` under an interactive bash (see `shell_job_control`):
//! a Ctrl-Z under `--lease` says the lock is kept only for the lease, and
//! `fg` after a longer stop ends the run as for any lost lock; a Ctrl-C
//! ends a loop around the run, as it ends a loop around any command.

use pgcoord::lock_id_for_key;

use crate::common::*;
use crate::shell_job_control::{
    at_prompt, cat_of, ends_with, reading_with_terminal, setup, stat_fields, stopped,
    stopped_reports,
};
use crate::tmux::Tmux;

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

/// After a Ctrl-C in `for i in 1 2; do echo round-$i; RUN; done`: waits
/// for the prompt, or for a second round, and asserts that none started
/// and that bash says 130 of the loop.
async fn loop_ended(tmux: &Tmux) {
    let screen = tmux
        .until("the prompt, or a second round", |s| {
            s.contains("round-2") || at_prompt(s)
        })
        .await;
    assert!(!screen.contains("round-2"), "the loop went on:\n{screen}");
    tmux.type_line("echo \"loop exited $?\"").await;
    let screen = tmux
        .until("the loop's exit code", |s| {
            s.lines().any(|l| l.starts_with("loop exited "))
        })
        .await;
    assert!(screen.lines().any(|l| l == "loop exited 130"), "{screen}");
}

#[tokio::test]
async fn ctrl_c_ends_a_loop_around_the_run_as_around_any_command() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    tmux.type_line("for i in 1 2; do echo \"round-$i\"; $E lock run jc-loop -- cat; done")
        .await;
    let cat = cat_of("jc-loop").await;
    reading_with_terminal(cat).await;
    // cat has the terminal: the Ctrl-C reaches it, and it dies of SIGINT.
    tmux.press("C-c").await;
    loop_ended(&tmux).await;
    assert!(is_free(&inspector, "jc-loop").await);
    let screen = tmux.screen().await;
    assert!(!screen.contains("eventsource: "), "{screen}");
}

#[tokio::test]
async fn ctrl_c_while_the_run_waits_for_the_lock_ends_a_loop_around_it() {
    let Some((db, inspector, tmux)) = setup().await else {
        return;
    };
    let holder = session(&db, "eventsource/elsewhere").await;
    holder
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[&lock_id_for_key("jc-wait")],
        )
        .await
        .unwrap();
    tmux.type_line("for i in 1 2; do echo \"round-$i\"; $E lock run jc-wait -- true; done")
        .await;
    wait_for(&inspector, "jc-wait", "the run waiting", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    // The tool has the terminal while it waits: the Ctrl-C reaches it.
    tmux.press("C-c").await;
    loop_ended(&tmux).await;
    let screen = tmux.screen().await;
    assert!(screen.contains("SIGINT"), "the tool said why:\n{screen}");
    wait_for(&inspector, "jc-wait", "the wait gone", |l| {
        l.is_some_and(|l| l.waiters.is_empty())
    })
    .await;
}
