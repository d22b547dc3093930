//! `lock run` inside a script or a pipeline, under an interactive bash in
//! a tmux pane (see `shell_job_control`): a Ctrl-C that ends the command
//! holding the terminal also reaches the script's shell (which then stops)
//! and the other stages; in a pipeline the terminal stays with the
//! pipeline, so a neighbour reads it and a Ctrl-C reaches every stage; a
//! neighbour that reads the terminal in the background stops the run as a
//! whole (no watchdog kill, no lock loss).

use crate::common::*;
use crate::shell_job_control::{
    at_prompt, cat_of, other_run, process_named, process_of, reading_with_terminal, setup,
    stat_fields, stopped, stopped_reports,
};
use crate::tmux::Tmux;

/// Whether a line of the screen is exactly `line`.
fn has_line(screen: &str, line: &str) -> bool {
    screen.lines().any(|l| l.trim_end() == line)
}

/// Whether a line of the screen ends with `text` (after a `^C` echo).
fn line_ends_with(screen: &str, text: &str) -> bool {
    screen.lines().any(|l| l.trim_end().ends_with(text))
}

/// Once bash is back at its prompt: asks it for the last pipeline's
/// statuses and asserts them (`want`, e.g. "130 0").
async fn statuses(tmux: &Tmux, want: &str) {
    statuses_among(tmux, &[want]).await;
}

/// [`statuses`], any of `wants`.
async fn statuses_among(tmux: &Tmux, wants: &[&str]) {
    tmux.until("the prompt after the run", at_prompt).await;
    tmux.type_line("echo \"statuses ${PIPESTATUS[*]}\"").await;
    let screen = tmux
        .until("the statuses", |s| {
            s.lines().any(|l| l.starts_with("statuses "))
        })
        .await;
    assert!(
        wants
            .iter()
            .any(|want| has_line(&screen, &format!("statuses {want}"))),
        "{screen}"
    );
}

#[tokio::test]
async fn ctrl_c_to_the_command_holding_the_terminal_ends_the_script_around_it() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    // A shell without job control, as a script's: the tool runs in its
    // process group, which is not the one the Ctrl-C reaches.
    tmux.type_line(
        "bash -c 'for i in 1 2; do echo \"round-$i\"; \"$0\" lock run jc-script -- cat; done; \
         echo script-end' $E",
    )
    .await;
    let cat = cat_of("jc-script").await;
    reading_with_terminal(cat).await;
    tmux.press("C-c").await;
    let screen = tmux
        .until("the prompt, or a second round", |s| {
            line_ends_with(s, "round-2") || at_prompt(s)
        })
        .await;
    assert!(
        !line_ends_with(&screen, "round-2"),
        "the script went on:\n{screen}"
    );
    assert!(!line_ends_with(&screen, "script-end"), "{screen}");
    statuses(&tmux, "130").await;
    assert!(is_free(&inspector, "jc-script").await);
}

#[tokio::test]
async fn sigint_sent_to_the_tool_alone_leaves_the_script_around_it_running() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    tmux.type_line(
        "bash -c 'for i in 1 2; do \"$0\" lock run jc-kill -- cat; echo \"rc-$i=$?\"; done' $E",
    )
    .await;
    let cat = cat_of("jc-kill").await;
    reading_with_terminal(cat).await;
    let tool: i32 = stat_fields(cat).unwrap()[1].parse().unwrap();
    // Not the terminal's: forwarded by the tool, which dies of it alone.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(tool),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    tmux.until("the first round's code", |s| has_line(s, "rc-1=130"))
        .await;
    let cat = cat_of("jc-kill").await;
    reading_with_terminal(cat).await;
    tmux.press("C-d").await;
    tmux.until("the second round's code", |s| has_line(s, "rc-2=0"))
        .await;
    statuses(&tmux, "0").await;
    assert!(is_free(&inspector, "jc-kill").await);
}

#[tokio::test]
async fn a_pipeline_neighbour_reads_the_terminal_and_ctrl_c_reaches_every_stage() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    // The neighbour is found by a variable the test gives it.
    tmux.type_line(
        "$E lock run jc-pager -- sh -c 'echo job-ready >&2; exec sleep 600' \
         | EVENTSOURCE_LOCK_KEY=jc-pager-neighbour sh -c 'read x </dev/tty; echo \"neighbour read $x\"'",
    )
    .await;
    tmux.until("the job", |s| has_line(s, "job-ready")).await;
    let neighbour = process_of("jc-pager-neighbour", "sh").await;
    // Had the job the terminal, the neighbour's read would stop it, and
    // the tool with it (SIGTTIN).
    reading_with_terminal(neighbour).await;
    tmux.type_line("hello").await;
    tmux.until("the neighbour's line", |s| {
        has_line(s, "neighbour read hello")
    })
    .await;
    // The tool is a stage in the terminal's foreground: it gets the
    // Ctrl-C, and forwards it to the job.
    tmux.press("C-c").await;
    statuses(&tmux, "130 0").await;
    assert!(is_free(&inspector, "jc-pager").await);
    let screen = tmux.screen().await;
    assert!(
        !screen.contains("Stopped") && !screen.contains("eventsource: "),
        "{screen}"
    );
}

#[tokio::test]
async fn ctrl_c_reaches_a_stage_before_the_run() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    tmux.type_line("sleep 600 | $E lock run jc-upstream -- cat")
        .await;
    let cat = cat_of("jc-upstream").await;
    until("cat reading its pipe", || {
        stat_fields(cat).is_some_and(|f| f[0] == "S")
    })
    .await;
    // Had cat the terminal, the Ctrl-C would end it and the run, and
    // leave `sleep 600` (and the prompt) waiting. The tool forwards the
    // Ctrl-C to cat, which may see its pipe's end first (`sleep` died) and
    // exit 0: either way the stage before the run got it.
    tmux.press("C-c").await;
    statuses_among(&tmux, &["130 130", "130 0"]).await;
    assert!(is_free(&inspector, "jc-upstream").await);
}

#[tokio::test]
async fn a_neighbour_reading_the_terminal_in_the_background_stops_the_run_as_a_whole() {
    let Some((db, inspector, tmux)) = setup().await else {
        return;
    };
    let gate = scratch_dir();
    let gate = gate.join("job-runs");
    // The neighbour reads only once the job runs (the tool then catches
    // SIGTTIN). Had the tool stopped alone, the watchdog (100 ms) would
    // kill the job, and the run would end as for a lost lock.
    tmux.type_line(&format!(
        "$E lock run --watchdog 100ms jc-bgpipe -- sh -c 'touch {g}; exec sleep 600' \
         | EVENTSOURCE_LOCK_KEY=jc-bgpipe-neighbour \
         sh -c 'while [ ! -e {g} ]; do sleep 0.02; done; read x </dev/tty; echo \"neighbour read $x\"' &",
        g = gate.display()
    ))
    .await;
    tmux.until("the tool's line on the stop", |s| {
        s.contains("is stopped (SIGTTIN); this run keeps lock \"jc-bgpipe\"")
    })
    .await;
    // The job stopped, and the tool with it: neither runs on alone.
    // One process: `sh` until its `exec sleep`, `sleep` after (a stop may
    // come between the two).
    let sleep = process_named("jc-bgpipe", &["sh", "sleep"]).await;
    let tool: i32 = stat_fields(sleep).unwrap()[1].parse().unwrap();
    stopped(tool).await;
    stopped(sleep).await;
    // bash reports a background job's stop before its next prompt.
    tmux.press("Enter").await;
    tmux.until("bash's report of the stop", |s| stopped_reports(s, 1))
        .await;
    assert_eq!(other_run(&db, "jc-bgpipe").await.code, 75);
    let neighbour = process_of("jc-bgpipe-neighbour", "sh").await;
    tmux.type_line("fg").await;
    reading_with_terminal(neighbour).await;
    tmux.type_line("hello").await;
    tmux.until("the neighbour's line", |s| {
        has_line(s, "neighbour read hello")
    })
    .await;
    tmux.press("C-c").await;
    // Run by bash once the pipeline is over (`^Cjc> ` is no fresh prompt).
    tmux.type_line("echo run-over").await;
    tmux.until("the end of the run", |s| has_line(s, "run-over"))
        .await;
    assert!(is_free(&inspector, "jc-bgpipe").await);
    let screen = tmux.screen().await;
    assert!(
        !screen.contains("SIGKILL") && !screen.contains("lock-lost"),
        "{screen}"
    );
}
