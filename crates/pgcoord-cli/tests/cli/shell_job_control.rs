//! `lock run` under an interactive bash with job control, in a tmux pane,
//! as a person types it: Ctrl-Z gives the prompt back with the lock still
//! held, `fg` resumes the command with the terminal, `bg` lets it run
//! until it reads the terminal, `fg` of a run that still runs hands it the
//! terminal (also with stdin a pipe), a job stopped only in part is
//! supervised (neither stopped with the tool nor killed), and a lock lost
//! while stopped ends the run on `fg`.

use crate::common::*;
use crate::tmux::{tmux_or_skip, Tmux};

/// The fields of `/proc/PID/stat` after the command name: state, ppid,
/// pgrp, session, tty_nr, tpgid (the terminal's foreground group), ...
pub(crate) fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_owned).collect())
}

/// The pid of the `cat` that `lock run KEY -- cat` started (the process
/// named cat whose environment has `EVENTSOURCE_LOCK_KEY=KEY`).
pub(crate) async fn cat_of(key: &str) -> i32 {
    process_of(key, "cat").await
}

/// The pid of the process named `name` whose environment has
/// `EVENTSOURCE_LOCK_KEY=KEY` (a process of `lock run KEY`'s job).
pub(crate) async fn process_of(key: &str, name: &str) -> i32 {
    process_named(key, &[name]).await
}

/// [`process_of`], with any of `names` (a process that may be seen before
/// or after an `exec`).
pub(crate) async fn process_named(key: &str, names: &[&str]) -> i32 {
    let wanted = format!("EVENTSOURCE_LOCK_KEY={key}");
    let mut found = 0;
    until(&format!("the {} of {key}", names.join(" or ")), || {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return false;
        };
        found = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .find(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"));
                let env = std::fs::read(format!("/proc/{pid}/environ"));
                comm.is_ok_and(|c| names.contains(&c.trim()))
                    && env.is_ok_and(|e| e.split(|b| *b == 0).any(|v| v == wanted.as_bytes()))
            })
            .unwrap_or(0);
        found > 0
    })
    .await;
    found
}

/// Waits until `cat` has the terminal and sleeps in its read of it: what
/// is typed now reaches it, and is echoed by the terminal.
pub(crate) async fn reading_with_terminal(cat: i32) {
    until(
        &format!("cat {cat} reading the terminal in its foreground"),
        || stat_fields(cat).is_some_and(|f| f[0] == "S" && f[5] == f[2]),
    )
    .await;
}

/// Waits until process `pid` is stopped.
pub(crate) async fn stopped(pid: i32) {
    until(&format!("process {pid} stopped"), || {
        stat_fields(pid).is_some_and(|f| f[0] == "T")
    })
    .await;
}

/// Whether bash waits at a fresh prompt: the last line written is `jc> `
/// (the pane shows it without its trailing space).
pub(crate) fn at_prompt(screen: &str) -> bool {
    let last = screen.lines().rev().find(|l| !l.trim().is_empty());
    last.is_some_and(|l| l.trim_end() == "jc>")
}

/// Whether bash has said "Stopped" `n` times, and printed a prompt since.
pub(crate) fn stopped_reports(screen: &str, n: usize) -> bool {
    screen.matches("Stopped").count() == n
        && screen
            .rsplit_once("Stopped")
            .is_some_and(|(_, after)| after.lines().any(|l| l.starts_with("jc>")))
}

/// An interactive bash (job control on) in a tmux pane, its prompt `jc> `
/// and the tool's path in `$E`.
async fn shell(db: &pgcoord_testkit::pg::TestDatabase) -> Tmux {
    let tmux = Tmux::start(db, "HISTFILE=/dev/null bash --norc --noprofile -i")
        .await
        .with_history();
    tmux.type_line(&format!("PS1='jc> '; E={BIN}")).await;
    tmux.until("the prompt", at_prompt).await;
    tmux
}

/// A fresh database, a session to inspect it, and the shell; `None` (the
/// test skips) without tmux.
pub(crate) async fn setup() -> Option<(
    pgcoord_testkit::pg::TestDatabase,
    tokio_postgres::Client,
    Tmux,
)> {
    if !tmux_or_skip("an interactive bash") {
        return None;
    }
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let tmux = shell(&db).await;
    Some((db, inspector, tmux))
}

/// Another run of `key` with --no-wait: 75 while it is held, 0 once free.
pub(crate) async fn other_run(db: &pgcoord_testkit::pg::TestDatabase, key: &str) -> Output {
    output(eventsource(Some(db)).args(["lock", "run", "--no-wait", key, "--", "true"])).await
}

/// Types `line` to the resumed cat and waits for it twice on the screen
/// (the terminal's echo, then cat's copy).
async fn echoed(tmux: &Tmux, cat: i32, line: &str) {
    reading_with_terminal(cat).await;
    let before = tmux.screen().await.matches(line).count();
    tmux.type_line(line).await;
    tmux.until(&format!("{line:?} echoed by cat"), |s| {
        s.matches(line).count() >= before + 2
    })
    .await;
}

/// Once the run has ended (bash at its prompt), checks its exit code and
/// that the key is free.
pub(crate) async fn ends_with(
    tmux: &Tmux,
    inspector: &tokio_postgres::Client,
    key: &str,
    code: i32,
) {
    tmux.until("the prompt after the run", at_prompt).await;
    tmux.type_line("echo \"run exited $?\"").await;
    let screen = tmux
        .until("the run's exit code", |s| {
            s.lines().any(|l| l.starts_with("run exited "))
        })
        .await;
    assert!(
        screen.lines().any(|l| l == format!("run exited {code}")),
        "{screen}"
    );
    assert!(is_free(inspector, key).await, "{screen}");
}

#[tokio::test]
async fn ctrl_z_gives_the_prompt_back_holding_the_lock_and_fg_resumes_the_command() {
    let Some((db, inspector, tmux)) = setup().await else {
        return;
    };
    // The watchdog says (at debug level) when it spares the stopped job.
    tmux.type_line(
        "EVENTSOURCE_LOG=eventsource::watchdog=debug $E lock run --watchdog 100ms jc-fg -- cat",
    )
    .await;
    let cat = cat_of("jc-fg").await;
    echoed(&tmux, cat, "first-line").await;

    tmux.press("C-z").await;
    let screen = tmux
        .until("bash's report of the stopped run", |s| {
            stopped_reports(s, 1)
        })
        .await;
    let said: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("the command (pgid"))
        .collect();
    assert_eq!(said.len(), 1, "{screen}");
    assert!(
        said[0].starts_with("eventsource: the command (pgid ")
            && said[0].contains("(SIGTSTP)")
            && said[0].contains("keeps lock \"jc-fg\""),
        "{screen}"
    );
    // Both stopped: the command, and the tool (so that bash took over).
    stopped(cat).await;
    let tool: i32 = stat_fields(cat).unwrap()[1].parse().unwrap();
    stopped(tool).await;
    assert_eq!(
        other_run(&db, "jc-fg").await.code,
        75,
        "the lock is still held"
    );
    // The watchdog's bound passes with the tool stopped: it spares the
    // stopped job rather than kill it.
    tmux.until("the watchdog sparing the job", |s| {
        s.contains("is stopped too: it is spared")
    })
    .await;
    assert!(!has_ended(cat));

    tmux.type_line("fg").await;
    echoed(&tmux, cat, "after-fg").await;
    tmux.press("C-d").await;
    ends_with(&tmux, &inspector, "jc-fg", 0).await;
    let screen = tmux.screen().await;
    assert!(!screen.contains("SIGKILL"), "{screen}");
}

#[tokio::test]
async fn bg_runs_the_command_until_it_reads_the_terminal_and_fg_resumes_it() {
    let Some((db, inspector, tmux)) = setup().await else {
        return;
    };
    tmux.type_line("$E lock run jc-bg -- cat").await;
    let cat = cat_of("jc-bg").await;
    reading_with_terminal(cat).await;
    tmux.press("C-z").await;
    tmux.until("the first stop", |s| stopped_reports(s, 1))
        .await;

    // In the background cat reads the terminal, which stops it (SIGTTIN),
    // and the tool stops in turn.
    tmux.type_line("bg").await;
    tmux.until("the stop on terminal input", |s| {
        s.contains("is stopped (SIGTTIN); this run keeps lock \"jc-bg\"")
    })
    .await;
    let tool: i32 = stat_fields(cat).unwrap()[1].parse().unwrap();
    stopped(tool).await;
    stopped(cat).await;
    // bash tells of a background job's stop at its next prompt.
    tmux.press("Enter").await;
    tmux.until("bash's report of the second stop", |s| {
        stopped_reports(s, 2)
    })
    .await;
    assert_eq!(
        other_run(&db, "jc-bg").await.code,
        75,
        "the lock is still held"
    );

    tmux.type_line("fg").await;
    echoed(&tmux, cat, "after-bg-fg").await;
    tmux.press("C-d").await;
    ends_with(&tmux, &inspector, "jc-bg", 0).await;
}

#[tokio::test]
async fn a_lock_lost_while_stopped_ends_the_command_on_fg() {
    let Some((db, inspector, tmux)) = setup().await else {
        return;
    };
    tmux.type_line("$E lock run --holder-id jc-lost-holder jc-lost -- cat")
        .await;
    let cat = cat_of("jc-lost").await;
    reading_with_terminal(cat).await;
    tmux.press("C-z").await;
    tmux.until("the stop", |s| stopped_reports(s, 1)).await;
    let tool: i32 = stat_fields(cat).unwrap()[1].parse().unwrap();
    stopped(tool).await;
    // The stopped tool's session ends (an operator, idle_session_timeout).
    terminate_holder(&db, "jc-lost-holder").await;
    wait_for(&inspector, "jc-lost", "the lock freed", |l| l.is_none()).await;

    tmux.type_line("fg").await;
    let screen = tmux
        .until("the loss handled", |s| {
            s.contains("exiting with 76") && at_prompt(s)
        })
        .await;
    assert!(
        screen.contains("lock \"jc-lost\" was lost")
            && screen.contains("the command died of signal 15 (SIGTERM)"),
        "{screen}"
    );
    ends_with(&tmux, &inspector, "jc-lost", 76).await;
}

#[tokio::test]
async fn fg_of_a_run_started_in_the_background_hands_the_command_the_terminal() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    let gate = std::env::temp_dir().join(format!("jc-amp-gate-{}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    // The command touches the terminal only once the gate exists, so that
    // `fg` finds it running: bash then sends no SIGCONT.
    tmux.type_line(&format!(
        "$E lock run jc-amp -- sh -c 'while [ ! -e {} ]; do sleep 0.02; done; exec cat' &",
        gate.display()
    ))
    .await;
    tmux.until("the prompt after &", |s| s.contains("[1] ") && at_prompt(s))
        .await;
    let sh = process_of("jc-amp", "sh").await;
    let tool: i32 = stat_fields(sh).unwrap()[1].parse().unwrap();
    tmux.type_line("fg").await;
    until("the tool in the terminal's foreground", || {
        let tool_pgrp = stat_fields(tool).map(|f| f[2].clone());
        stat_fields(sh).is_some_and(|f| Some(&f[5]) == tool_pgrp.as_ref())
    })
    .await;
    std::fs::write(&gate, b"").unwrap();
    let cat = cat_of("jc-amp").await;
    echoed(&tmux, cat, "after-amp-fg").await;
    tmux.press("C-d").await;
    ends_with(&tmux, &inspector, "jc-amp", 0).await;
    let _ = std::fs::remove_file(&gate);
    let screen = tmux.screen().await;
    assert!(!screen.contains("Stopped"), "{screen}");
}

#[tokio::test]
async fn a_job_stopped_only_in_part_is_supervised_not_stopped_with_the_tool() {
    let Some((db, inspector, tmux)) = setup().await else {
        return;
    };
    // A process that ignores SIGTSTP keeps running after a Ctrl-Z. Had the
    // tool stopped, the watchdog (100 ms) would kill the whole job.
    tmux.type_line(
        "$E lock run --watchdog 100ms jc-part -- \
         sh -c '(trap \"\" TSTP; while :; do sleep 0.02; done) & exec cat'",
    )
    .await;
    let cat = cat_of("jc-part").await;
    reading_with_terminal(cat).await;
    tmux.press("C-z").await;
    tmux.until("the tool's line on a partial stop", |s| {
        s.contains("but other processes of its group still run; this run keeps lock \"jc-part\"")
    })
    .await;
    stopped(cat).await;
    let tool: i32 = stat_fields(cat).unwrap()[1].parse().unwrap();
    assert_ne!(
        stat_fields(tool).unwrap()[0],
        "T",
        "the tool stopped itself"
    );
    assert_eq!(other_run(&db, "jc-part").await.code, 75);
    // Resumed as the line says; the loop is ended by hand after cat.
    let group = nix::unistd::Pid::from_raw(cat);
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGCONT).unwrap();
    echoed(&tmux, cat, "after-partial").await;
    tmux.press("C-d").await;
    until("cat ended", || has_ended(cat)).await;
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM).unwrap();
    ends_with(&tmux, &inspector, "jc-part", 0).await;
    let screen = tmux.screen().await;
    assert!(
        !screen.contains("Stopped") && !screen.contains("SIGKILL"),
        "{screen}"
    );
}

#[tokio::test]
async fn a_run_whose_stdin_is_a_pipe_still_hands_the_command_the_terminal() {
    let Some((_db, inspector, tmux)) = setup().await else {
        return;
    };
    // What `sudo` or `ssh` do in a pipeline: read the terminal, not stdin.
    tmux.type_line("echo x | $E lock run jc-pipe -- sh -c 'read -r _; exec cat </dev/tty'")
        .await;
    let cat = cat_of("jc-pipe").await;
    echoed(&tmux, cat, "from-the-tty").await;
    tmux.press("C-d").await;
    ends_with(&tmux, &inspector, "jc-pipe", 0).await;
    let screen = tmux.screen().await;
    assert!(!screen.contains("Stopped"), "{screen}");
}
