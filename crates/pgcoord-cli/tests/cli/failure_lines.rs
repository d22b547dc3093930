//! The line of a run that could not connect says the wait it was given
//! ("(timeout 1s)", "--timeout 1s ran out", or nothing), never "(no wait)"
//! unless `--no-wait` was passed, and a set's or a semaphore's failure to
//! connect names the set or the semaphore, not one key or slot.

use std::net::TcpListener;

use crate::common::*;

/// A URL whose port has nothing behind it (bound, noted, closed).
fn closed_port_url() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("postgres://app@127.0.0.1:{port}/app")
}

async fn run(args: &[&str]) -> Output {
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", closed_port_url())
            .arg("lock")
            .arg("run")
            .args(args)
            .args(["--", "echo", "ran"]),
    )
    .await;
    assert_eq!(out.code, 69, "{args:?}: {out:?}");
    assert_eq!(out.stdout, "", "{args:?}: the command must not run");
    out
}

#[tokio::test]
async fn a_set_that_cannot_connect_names_the_set_and_its_real_wait() {
    for (args, wait) in [
        (
            &["--timeout", "1s", "a", "--also", "b"][..],
            "--timeout 1s ran out",
        ),
        (&["a", "--also", "b"], ""),
    ] {
        let out = run(args).await;
        assert!(
            !out.stderr.contains("(no wait)"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains("could not acquire locks \"a\" and \"b\": cannot connect"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("lock \"b\""),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains(wait), "{args:?}: {}", out.stderr);
    }
}

#[tokio::test]
async fn a_semaphore_that_cannot_connect_names_the_semaphore_and_its_real_wait() {
    let out = run(&["--permits", "2", "--timeout", "1s", "sp"]).await;
    assert!(!out.stderr.contains("(no wait)"), "{}", out.stderr);
    assert!(!out.stderr.contains("#permit/"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("could not acquire lock \"sp\": cannot connect")
            && !out.stderr.contains("(timeout")
            && out.stderr.contains("retrying until --timeout runs out"),
        "{}",
        out.stderr
    );
    let out = run(&["--permits", "2", "sp"]).await;
    assert!(!out.stderr.contains("(no wait)"), "{}", out.stderr);
    let out = run(&["--permits", "2", "--no-wait", "sp"]).await;
    assert!(out.stderr.contains("(no wait)"), "{}", out.stderr);
}

#[tokio::test]
async fn a_long_timeout_reads_in_days_as_typed() {
    // The first failure is reported at once; the retries would go on for
    // 100 days, so the test ends the tool itself.
    let mut leader = Running::start(
        eventsource(None)
            .env("DATABASE_URL", closed_port_url())
            .args([
                "leader",
                "run",
                "--timeout",
                "100d",
                "nightly",
                "--",
                "echo",
                "ran",
            ]),
    );
    let line = leader
        .expect_stderr("retrying until --timeout runs out")
        .await;
    assert!(!line.contains("(timeout"), "{line}");
    assert!(line.contains("(99d23h59m"), "{line}");
    assert!(!line.contains("8640000s"), "{line}");
    assert!(!line.contains("2399h"), "{line}");
    leader.signal(nix::sys::signal::Signal::SIGTERM);
    let out = leader.finish().await;
    assert_eq!(out.stdout, "", "the command must not run: {out:?}");
}
