//! What the tool prints: stdout write failures (74), one line format on
//! stderr without colour when it is not a terminal, masking of passwords
//! that are common words, completions, the man page and --version; an
//! invalid EVENTSOURCE_LOG is said.

use std::net::TcpListener;
use std::process::Stdio;

use crate::common::*;

fn dev_full() -> Stdio {
    Stdio::from(
        std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    )
}

#[tokio::test]
async fn a_failed_stdout_write_says_so_and_exits_74() {
    let db = database().await;
    for args in [
        &["lock", "key", "foo"][..],
        &["lock", "holders"],
        &["lock", "doctor"],
        &["completions", "bash"],
        &["man"],
        &["--help"],
    ] {
        let child = eventsource(Some(&db))
            .args(args)
            .stdout(dev_full())
            .spawn()
            .unwrap();
        let done = tokio::time::timeout(BOUND, child.wait_with_output())
            .await
            .expect("eventsource did not finish")
            .unwrap();
        let out = Output {
            code: exit_code(done.status),
            stdout: String::new(),
            stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
        };
        assert_eq!(out.code, 74, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("cannot write to standard output"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

#[tokio::test]
async fn log_lines_share_the_tools_format_and_have_no_colour_in_a_pipe() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).env("EVENTSOURCE_LOG", "info").args([
        "lock",
        "run",
        "--no-wait",
        "logged",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("eventsource: info: acquiring"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);
    for line in out.stderr.lines() {
        assert!(line.starts_with("eventsource: "), "{line:?}");
    }
}

#[tokio::test]
async fn passwords_that_are_common_words_garble_nothing_else() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (url, shown) in [
        (
            format!("postgres://common:postgres@127.0.0.1:{port}/postgres"),
            format!("postgres://common:***@127.0.0.1:{port}/postgres"),
        ),
        (
            format!("postgres://u:e@127.0.0.1:{port}/evident"),
            format!("postgres://u:***@127.0.0.1:{port}/evident"),
        ),
    ] {
        let out = output(eventsource(None).env("DATABASE_URL", &url).args([
            "lock",
            "run",
            "--no-wait",
            "k",
            "--",
            "true",
        ]))
        .await;
        assert_eq!(out.code, 69, "{out:?}");
        assert!(out.stderr.contains(&shown), "{}", out.stderr);
        assert!(out.stderr.starts_with("eventsource: "), "{}", out.stderr);
        assert!(out.stderr.contains("connect"), "{}", out.stderr);
        assert!(!out.stderr.contains(":postgres@") && !out.stderr.contains(":e@"));
    }
}

#[tokio::test]
async fn completions_man_page_and_version() {
    for (shell, marker) in [
        ("bash", "_eventsource()"),
        ("zsh", "#compdef eventsource"),
        ("fish", "complete -c eventsource"),
    ] {
        let out = output(eventsource(None).args(["completions", shell])).await;
        assert_eq!(out.code, 0, "{out:?}");
        assert!(out.stdout.contains(marker), "{shell}: {}", out.stdout);
        assert!(out.stdout.contains("holders"), "{shell}");
    }
    let out = output(eventsource(None).arg("man")).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.starts_with(".ie") || out.stdout.contains(".TH eventsource"),
        "{}",
        out.stdout
    );
    let out = output(eventsource(None).arg("--version")).await;
    assert_eq!(out.code, 0, "{out:?}");
    let want = format!("eventsource {}", env!("CARGO_PKG_VERSION"));
    assert!(out.stdout.starts_with(&want), "{}", out.stdout);
    // Built from this git checkout: the commit is named.
    assert!(out.stdout.contains("(git "), "{}", out.stdout);
}

/// A mistyped EVENTSOURCE_LOG used to be ignored without a word: the user
/// took the silence for "nothing to log". It is said once, and the
/// command runs with the default filter.
#[tokio::test]
async fn an_invalid_log_filter_is_said_once() {
    let out = output(
        eventsource(None)
            .env("EVENTSOURCE_LOG", "pgcoord=verbose")
            .args(["lock", "key", "k"]),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("k\t"), "{}", out.stdout);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(
            "eventsource: warning: EVENTSOURCE_LOG=\"pgcoord=verbose\" is not a valid tracing filter"
        ) && out.stderr.contains("using \"warn\" instead"),
        "{}",
        out.stderr
    );
    let out = output(
        eventsource(None)
            .env("EVENTSOURCE_LOG", "pgcoord=debug")
            .args(["lock", "key", "k"]),
    )
    .await;
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
}
