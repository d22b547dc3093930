//! `eventsource demo` without a URL: boots its own PostgreSQL, runs, checks.

use pgcoord_testkit::pg::TestDatabase;
use tokio::process::Command;

use crate::common::*;

#[tokio::test]
async fn demo_runs_on_a_throwaway_server_and_finds_no_overlap() {
    let out = output(eventsource(None).args(["demo", "--workers", "3", "--seconds", "3"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("overlapping critical sections:  0 "),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("acquisitions:"), "{}", out.stdout);
    assert!(out.stdout.contains("hand-over latency:"), "{}", out.stdout);
    assert!(
        out.stdout.contains("was SIGKILLed holding") && out.stdout.contains("entered"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("throwaway PostgreSQL"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("stopped and removed"), "{}", out.stderr);
}

/// A demo worker with the given run time on `db`, its record in `scratch`.
fn demo_worker(db: &TestDatabase, record: &std::path::Path, prefix: &str, millis: u64) -> Command {
    std::fs::write(record, b"").unwrap();
    let mut cmd = eventsource(Some(db));
    cmd.arg("demo-worker")
        .args(["--id", "1", "--prefix", prefix, "--keys", "1"])
        .arg("--millis")
        .arg(millis.to_string())
        .arg("--record")
        .arg(record);
    cmd
}

#[tokio::test]
async fn demo_worker_starts_nothing_in_the_last_moments_of_its_run() {
    // A run shorter than the last-call margin: the worker must not try at
    // all (a try with a sub-millisecond deadline could only end in a
    // misleading failure), and exits 0 having entered nothing.
    let db = database().await;
    let scratch = scratch_dir();
    let record = scratch.join("record");
    let out = output(&mut demo_worker(&db, &record, "demo:lastcall:k", 30)).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "done 0\n", "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        "",
        "no wait recorded"
    );
}

#[tokio::test]
async fn demo_worker_whose_wait_is_cut_short_by_the_end_of_its_run_exits_0() {
    // The only key is held elsewhere for the whole run: the worker's one
    // wait ends at the end of its run, which ends the loop, not the worker.
    let db = database().await;
    let holder = session(&db, "demo-test-holder").await;
    let key = "demo:cutshort:k0";
    holder
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[&pgcoord::lock_id_for_key(key)],
        )
        .await
        .unwrap();
    let scratch = scratch_dir();
    let record = scratch.join("record");
    let out = output(&mut demo_worker(&db, &record, "demo:cutshort:k", 1500)).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "done 0\n", "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert!(
        recorded.contains("wait") && !recorded.contains("enter"),
        "{recorded}"
    );
}

#[tokio::test]
async fn demo_as_root_finds_runuser_outside_a_minimal_path() {
    // cron's PATH: runuser lives in /usr/sbin or /sbin, which it leaves out.
    if !pgcoord_testkit::pg::is_root() {
        eprintln!("skipped: not running as root (the demo then needs no runuser)");
        return;
    }
    let out = output(eventsource(None).env("PATH", "/usr/bin:/bin").args([
        "demo",
        "--workers",
        "2",
        "--seconds",
        "2",
    ]))
    .await;
    assert!(!out.stderr.contains("runuser"), "{out:?}");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("stopped and removed"), "{}", out.stderr);
}

#[tokio::test]
async fn a_sigkilled_demo_leaves_no_record_behind() {
    let mut demo = Running::start(eventsource(None).args(["demo", "--seconds", "60"]));
    let listening = demo.expect_stderr("PostgreSQL listening on").await;
    let dir = std::path::PathBuf::from(
        listening
            .split_once(" in ")
            .map(|(_, dir)| dir.trim())
            .expect("the line names the server's directory"),
    );
    // The record exists once the workers are announced.
    demo.expect_stderr("workers contend").await;
    let records = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("eventsource-demo-"))
            })
            .collect()
    };
    let inside = records(&dir);
    assert_eq!(inside.len(), 1, "the record in {}", dir.display());
    let pid = demo.pid();
    demo.signal(nix::sys::signal::Signal::SIGKILL);
    // Reaped, so that its pid is gone (a zombie would keep the reaper waiting).
    let status = tokio::time::timeout(BOUND, demo.child.wait())
        .await
        .expect("the demo ends")
        .unwrap();
    assert_eq!(exit_code(status), 128 + 9);
    // The reaper (a process of its own) notices the demo's end, stops the
    // server and removes its directory, the record with it.
    until("the reaper removing the server's directory", || {
        !dir.exists()
    })
    .await;
    assert!(!inside[0].exists(), "{}", inside[0].display());
    let prefix = format!("eventsource-demo-{pid}-");
    let in_tmp: Vec<_> = records(&std::env::temp_dir())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&prefix))
        .collect();
    assert!(in_tmp.is_empty(), "{in_tmp:?}");
}

/// SIGTERM while the throwaway server starts (initdb runs for most of a
/// second after the first line): the start is let end, and what it made
/// is removed before the demo exits 143; it used to exit at once, leaving
/// initdb running on as an orphan and its cluster in the temporary
/// directory.
#[tokio::test]
async fn a_demo_stopped_while_its_server_starts_removes_it() {
    let mut demo = Running::start(eventsource(None).args(["demo", "--seconds", "60"]));
    demo.expect_stderr("starting a throwaway PostgreSQL").await;
    let pid = demo.pid();
    demo.signal(nix::sys::signal::Signal::SIGTERM);
    let out = demo.finish().await;
    assert_eq!(out.code, 143, "{out:?}");
    assert!(out.stderr.contains("stopped and removed"), "{}", out.stderr);
    let prefix = format!("eventsource-pg-{pid}-");
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A closed stderr (`2>&1 | head -1`) does not stop the demo (it used to
/// panic, then abort in the server's cleanup), and a failed write of its
/// summary is said and exits 74, as for every other command.
#[tokio::test]
async fn a_demo_whose_stderr_closes_runs_on_and_a_failed_summary_exits_74() {
    let mut child = eventsource(None)
        .args(["demo", "--workers", "2", "--seconds", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = tokio::time::timeout(BOUND, child.wait())
        .await
        .expect("the demo ends")
        .unwrap();
    assert_eq!(exit_code(status), 0, "a closed stderr is no failure");

    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let child = eventsource(None)
        .args(["demo", "--workers", "2", "--seconds", "2"])
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("the demo ends")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit_code(out.status), 74, "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
}
