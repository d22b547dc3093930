//! On a terminal (a pty from `script`): the job gets the terminal, so it
//! reads typed input and a typed Ctrl-C reaches it; log lines are coloured
//! unless NO_COLOR is set.

use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::common::*;

/// `eventsource ARGS` on a new pty, through `script`.
fn on_terminal(db: &pgcoord_testkit::pg::TestDatabase, args: &str, env: &[(&str, &str)]) -> Child {
    let mut c = Command::new("script");
    c.args(["-q", "-e", "-c"])
        .arg(format!("{BIN} {args}"))
        .arg("/dev/null")
        .env("DATABASE_URL", db.url())
        .env_remove("EVENTSOURCE_LOG")
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("script runs")
}

/// Reads the pty's output until it contains `want`; returns all so far.
async fn read_until(child: &mut Child, seen: &mut String, want: &str) {
    let out = child.stdout.as_mut().unwrap();
    let mut buf = [0u8; 4096];
    while !seen.contains(want) {
        let n = tokio::time::timeout(BOUND, out.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no {want:?} on the terminal: {seen:?}"))
            .unwrap();
        assert!(n > 0, "the terminal closed before {want:?}: {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

async fn type_text(child: &mut Child, text: &[u8]) {
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(text).await.unwrap();
    stdin.flush().await.unwrap();
}

async fn exit_status(mut child: Child) -> i32 {
    let status = tokio::time::timeout(BOUND, child.wait())
        .await
        .expect("script exits")
        .unwrap();
    exit_code(status)
}

#[tokio::test]
async fn the_job_owns_the_terminal_for_input_and_ctrl_c() {
    let db = database().await;
    let mut seen = String::new();
    let mut child = on_terminal(
        &db,
        "lock run tty-key -- sh -c 'echo ready; read x; echo \"got $x\"; \
         trap \"echo got-INT; exit 3\" INT; echo waiting; read y; echo not-interrupted'",
        &[],
    );
    read_until(&mut child, &mut seen, "ready").await;
    // A background process group reading the terminal would be stopped
    // (SIGTTIN): the job reads it because it is the foreground.
    type_text(&mut child, b"hello\n").await;
    read_until(&mut child, &mut seen, "got hello").await;
    read_until(&mut child, &mut seen, "waiting").await;
    type_text(&mut child, b"\x03").await;
    read_until(&mut child, &mut seen, "got-INT").await;
    assert_eq!(exit_status(child).await, 3, "{seen:?}");
    assert!(!seen.contains("not-interrupted"), "{seen:?}");
}

#[tokio::test]
async fn log_lines_are_coloured_on_a_terminal_unless_no_color() {
    let db = database().await;
    for (env, coloured) in [(&[][..], true), (&[("NO_COLOR", "1")][..], false)] {
        let mut env = env.to_vec();
        env.push(("EVENTSOURCE_LOG", "info"));
        let mut child = on_terminal(&db, "lock run --no-wait colour-key -- echo done", &env);
        let mut seen = String::new();
        read_until(&mut child, &mut seen, "done").await;
        assert_eq!(exit_status(child).await, 0, "{seen:?}");
        assert!(seen.contains("info"), "{seen:?}");
        assert_eq!(seen.contains('\x1b'), coloured, "{env:?}: {seen:?}");
    }
}
