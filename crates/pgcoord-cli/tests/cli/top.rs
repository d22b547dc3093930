//! `lock top` as a person sees it: the real binary in a tmux pane, a
//! contended key (one `lock run` holding, one waiting), the pane captured
//! and read; `q` quits and gives the terminal back. Without a terminal it
//! prints one listing. Bad input is a usage error.

use crate::common::*;
use crate::tmux::{tmux_or_skip, Tmux};

/// The screen line that contains `needle`.
fn line_with<'a>(screen: &'a str, needle: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.contains(needle))
}

/// `lock run --holder-id ID KEY` holding until a line arrives on its stdin.
pub(crate) async fn holding(
    db: &pgcoord_testkit::pg::TestDatabase,
    id: &str,
    key: &str,
) -> Running {
    let mut run = Running::start(eventsource(Some(db)).args([
        "lock",
        "run",
        "--holder-id",
        id,
        key,
        "--",
        "sh",
        "-c",
        "echo ready; read x",
    ]));
    run.expect_line("ready").await;
    run
}

#[tokio::test]
async fn top_shows_holder_and_waiter_by_key_name_and_q_gives_the_terminal_back() {
    if !tmux_or_skip("`lock top`") {
        return;
    }
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let key = "top:nightly-report";
    let mut holder = holding(&db, "top-holder", key).await;
    let mut waiter = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "top-waiter",
        key,
        "--",
        "sh",
        "-c",
        "echo ready; read x",
    ]));
    wait_for(&inspector, key, "the waiter", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    // A lock nobody named shows by its id.
    let raw = session(&db, "raw-psql").await;
    raw.execute("SELECT pg_advisory_lock(4242)", &[])
        .await
        .unwrap();
    let dir = scratch_dir();
    let keys = dir.join("keys.txt");
    std::fs::write(&keys, format!("other:key\n\n{key}\n")).unwrap();

    let tmux = Tmux::start(
        &db,
        &format!(
            "echo before-top; {BIN} lock top --interval 200ms --key-file {}; \
             echo \"top exited $?\"; stty -a; echo stty-done; sleep 600",
            keys.display()
        ),
    )
    .await;
    let screen = tmux
        .until("the holder and the waiter", |s| {
            s.contains("top-holder") && s.contains("top-waiter") && s.contains("raw-psql")
        })
        .await;
    assert!(screen.contains("q quits"), "{screen}");
    assert!(
        !screen.contains("before-top"),
        "the alternate screen: {screen}"
    );
    let held = line_with(&screen, "top-holder").unwrap();
    assert!(
        held.starts_with(key) && held.contains(" held ") && held.contains("127.0.0.1"),
        "{screen}"
    );
    let waiting = line_with(&screen, "top-waiter").unwrap();
    assert!(waiting.contains(" waiting "), "{screen}");
    let holder_pid = wait_for(&inspector, key, "the holder", |l| l.is_some())
        .await
        .unwrap()
        .holders[0]
        .pid;
    assert!(
        waiting.trim_end().ends_with(&holder_pid.to_string()),
        "BLOCKED BY names the holder's pid {holder_pid}: {screen}"
    );
    assert!(
        line_with(&screen, "raw-psql").unwrap().starts_with("4242 "),
        "{screen}"
    );
    assert!(screen.contains("2 locks: 2 held, 1 waiting"), "{screen}");
    // Locks with waiters come first.
    assert!(
        screen.find("top-holder") < screen.find("raw-psql"),
        "{screen}"
    );

    // The holder lets go: the waiter holds, for a time this view saw begin.
    holder.send_line("").await;
    assert_eq!(holder.finish().await.code, 0);
    waiter.expect_line("ready").await;
    let screen = tmux
        .until("the waiter holding", |s| {
            !s.contains("top-holder")
                && line_with(s, "top-waiter").is_some_and(|l| l.contains(" held "))
        })
        .await;
    let now_held = line_with(&screen, "top-waiter").unwrap();
    assert!(!now_held.contains("<="), "a grant seen: {screen}");
    assert!(screen.contains("0 waiting"), "{screen}");

    tmux.press("q").await;
    let screen = tmux
        .until("top's exit and stty", |s| s.contains("stty-done"))
        .await;
    assert!(screen.contains("top exited 0"), "{screen}");
    assert!(
        screen.contains("before-top"),
        "the screen is given back: {screen}"
    );
    assert!(!screen.contains("top-waiter"), "{screen}");
    let words: Vec<&str> = screen.split_whitespace().collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(words.contains(&mode), "{mode} restored: {screen}");
    }
    waiter.send_line("").await;
    assert_eq!(waiter.finish().await.code, 0);
}

#[tokio::test]
async fn ctrl_c_quits_top_too() {
    if !tmux_or_skip("`lock top`") {
        return;
    }
    let db = database().await;
    let tmux = Tmux::start(
        &db,
        &format!("{BIN} lock top; echo \"top exited $?\"; sleep 600"),
    )
    .await;
    tmux.until("the view", |s| s.contains("no advisory locks are held"))
        .await;
    tmux.press("C-c").await;
    let screen = tmux.until("top's exit", |s| s.contains("top exited")).await;
    assert!(screen.contains("top exited 0"), "{screen}");
}

#[tokio::test]
async fn without_a_terminal_top_prints_one_listing() {
    let db = database().await;
    let key = "top:plain";
    let mut holder = holding(&db, "plain-holder", key).await;
    let out = output(eventsource(Some(&db)).args(["lock", "top", "--key", key])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !out.stdout.contains('\x1b'),
        "no escape codes: {:?}",
        out.stdout
    );
    assert!(!out.stdout.contains("q quits"), "{}", out.stdout);
    assert!(
        out.stdout.starts_with("eventsource lock top - "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("1 lock: 1 held, 0 waiting"),
        "{}",
        out.stdout
    );
    let row = line_with(&out.stdout, "plain-holder").unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(row.starts_with(key) && row.contains(" held "), "{row}");
    assert!(row.contains("<="), "held before top started: {row}");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    holder.send_line("").await;
    assert_eq!(holder.finish().await.code, 0);

    let out = output(eventsource(Some(&db)).args(["lock", "top"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("no advisory locks are held"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn bad_intervals_and_key_files_are_usage_errors() {
    let db = database().await;
    let dir = scratch_dir();
    let long = dir.join("long.txt");
    std::fs::write(&long, "x".repeat(pgcoord::MAX_KEY_LEN + 1)).unwrap();
    let binary = dir.join("binary.txt");
    std::fs::write(&binary, [0xff, 0xfe, b'\n']).unwrap();
    let missing = dir.join("missing.txt");
    let file = |p: &std::path::Path| vec!["--key-file".to_owned(), p.display().to_string()];
    let interval = |v: &str| vec!["--interval".to_owned(), v.to_owned()];
    // (arguments, what stderr says, whether it is our one line or clap's usage)
    let cases: Vec<(Vec<String>, &str, bool)> = vec![
        (interval("0s"), "too short a refresh interval", false),
        (interval("50ms"), "too short a refresh interval", false),
        (interval("-1s"), "--interval", false),
        (interval("soon"), "--interval", false),
        (interval("5"), "--interval", false),
        (file(&missing), "cannot read key file", true),
        (file(dir.join("").as_path()), "cannot read key file", true),
        (file(&long), "bytes long", true),
        (file(&binary), "is not UTF-8", true),
        // A file with no end is read up to a cap, not until memory runs out.
        (
            file(std::path::Path::new("/dev/zero")),
            "cannot read key file /dev/zero: it holds more than 16 MiB",
            true,
        ),
    ];
    for (args, message, one_line) in cases {
        let out = output(eventsource(Some(&db)).args(["lock", "top"]).args(&args)).await;
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains(message), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        if one_line {
            assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
            assert!(out.stderr.starts_with("eventsource: "), "{}", out.stderr);
        }
    }
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--interval", "1s"])).await;
    assert_eq!(out.code, 2, "--interval needs --watch: {out:?}");
    assert!(out.stderr.contains("--watch"), "{}", out.stderr);
    let out = output(
        eventsource(None)
            .env("PGSSLMODE", "sometimes")
            .args(["lock", "top"]),
    )
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("PGSSLMODE"), "{}", out.stderr);
}

#[tokio::test]
async fn an_unreachable_database_exits_69_before_touching_the_terminal() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://app:hunter2secret@127.0.0.1:{port}/app");
    for args in [&["lock", "top"][..], &["lock", "holders", "--watch"]] {
        let out = output(eventsource(None).env("DATABASE_URL", &url).args(args)).await;
        assert_eq!(out.code, 69, "{args:?}: {out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("cannot list lock holders"),
            "{}",
            out.stderr
        );
        assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
}

#[tokio::test]
async fn help_and_completions_know_the_live_views() {
    let out = output(eventsource(None).args(["lock", "top", "--help"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    for word in [
        "--interval",
        "--key-file",
        "--key <KEY>",
        "BLOCKED BY",
        "FENCE",
        "q, Esc",
    ] {
        assert!(out.stdout.contains(word), "{word}: {}", out.stdout);
    }
    let out = output(eventsource(None).args(["lock", "holders", "--help"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    for word in ["--watch", "--interval", "abandoned", "granted", "FENCE"] {
        assert!(out.stdout.contains(word), "{word}: {}", out.stdout);
    }
    let out = output(eventsource(None).args(["completions", "bash"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("eventsource__subcmd__lock__subcmd__top")
            && out.stdout.contains("--key-file"),
        "{}",
        out.stdout
    );
    let out = output(eventsource(None).args(["man"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with(".ie"), "roff: {}", &out.stdout[..40]);
}
