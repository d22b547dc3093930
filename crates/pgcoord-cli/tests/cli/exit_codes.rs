//! Exit codes of `lock run`: success, passthrough, signals, conflict, usage,
//! unreachable database; the environment given to the command.

use std::net::TcpListener;

use pgcoord::lock_id_for_key;

use crate::common::*;

#[tokio::test]
async fn success_and_child_codes_pass_through() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    for (command, want) in [
        (&["true"][..], 0),
        (&["sh", "-c", "exit 3"], 3),
        (&["sh", "-c", "exit 255"], 255),
        (&["sh", "-c", "kill -KILL $$"], 128 + 9),
        (&["sh", "-c", "kill -TERM $$"], 128 + 15),
        // Without a terminal, a SIGINT death is an exit code too: the tool
        // dies of it only as a shell's foreground job (`shell_loops_and_leases`).
        (&["sh", "-c", "kill -INT $$"], 128 + 2),
        (&["/nonexistent/command"], 127),
        (&["/dev/null"], 126),
    ] {
        let out = output(
            eventsource(Some(&db))
                .args(["lock", "run", "codes", "--"])
                .args(command),
        )
        .await;
        assert_eq!(out.code, want, "{command:?}: {out:?}");
        assert!(
            is_free(&inspector, "codes").await,
            "released after {command:?}"
        );
    }
}

#[tokio::test]
async fn command_gets_key_and_lock_id() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--no-wait",
        "env:key",
        "--",
        "sh",
        "-c",
        "echo \"$EVENTSOURCE_LOCK_KEY $EVENTSOURCE_LOCK_ID\"",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        format!("env:key {}\n", lock_id_for_key("env:key"))
    );
    assert_eq!(out.stderr, "");
}

#[tokio::test]
async fn conflict_exits_75_and_names_the_holder() {
    let db = database().await;
    let scratch = scratch_dir();
    let marker = scratch.join("ran");
    let holder = session(&db, "eventsource/batch-host:4242").await;
    let id = lock_id_for_key("busy");
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    let touch = format!("touch {}", marker.display());

    let out = output(
        eventsource(Some(&db))
            .args(["lock", "run", "--no-wait", "busy", "--", "sh", "-c"])
            .arg(&touch),
    )
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "one line: {:?}", out.stderr);
    assert!(
        out.stderr.contains("\"busy\"")
            && out.stderr.contains(&id.to_string())
            && out.stderr.contains("batch-host:4242"),
        "{:?}",
        out.stderr
    );
    assert!(!marker.exists(), "the command must not run");

    let out = output(
        eventsource(Some(&db))
            .args([
                "lock",
                "run",
                "--no-wait",
                "--conflict-exit-code",
                "0",
                "busy",
                "--",
            ])
            .args(["sh", "-c", &touch]),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!marker.exists());

    let out = output(
        eventsource(Some(&db))
            .args([
                "lock",
                "run",
                "--timeout",
                "200ms",
                "--conflict-exit-code",
                "9",
                "busy",
            ])
            .args(["--", "sh", "-c", &touch]),
    )
    .await;
    assert_eq!(out.code, 9, "{out:?}");
    assert!(out.stderr.contains("after 200ms"), "{:?}", out.stderr);
    assert!(!marker.exists());
}

#[tokio::test]
async fn bad_usage_exits_2_before_any_connection() {
    // A listener stands in for the server: after each run, nothing may have
    // connected to it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!(
        "postgres://app:hunter2secret@127.0.0.1:{}/app",
        listener.local_addr().unwrap().port()
    );
    let cases: Vec<Vec<&str>> = vec![
        vec!["lock", "run", "--timeout", "-1s", "k", "--", "true"],
        vec!["lock", "run", "--timeout=-1s", "k", "--", "true"],
        vec!["lock", "run", "--timeout", "0s", "k", "--", "true"],
        vec!["lock", "run", "--timeout", "0ms", "k", "--", "true"],
        vec!["lock", "run", "--timeout", "nan", "k", "--", "true"],
        vec!["lock", "run", "--timeout", "NaN", "k", "--", "true"],
        vec!["lock", "run", "--timeout", "soon", "k", "--", "true"],
        vec!["lock", "run", "--timeout", "30", "k", "--", "true"],
        vec!["lock", "run", "--timeout", "1e3s", "k", "--", "true"],
        vec!["lock", "run", "--kill-grace", "-1s", "k", "--", "true"],
        vec!["lock", "run", "--kill-grace", "inf", "k", "--", "true"],
        vec![
            "lock",
            "run",
            "--no-wait",
            "--timeout",
            "1s",
            "k",
            "--",
            "true",
        ],
        vec![
            "lock",
            "run",
            "--conflict-exit-code",
            "300",
            "k",
            "--",
            "true",
        ],
        vec!["lock", "run", "k"],
        vec!["lock", "frobnicate"],
        // An empty label (a script's variable that came out empty).
        vec!["lock", "run", "--holder-id", "", "k", "--", "true"],
        vec!["leader", "run", "--holder-id", "", "n", "--", "true"],
        // An empty KEY (an unset variable), as the key or another of the set.
        vec!["lock", "run", "", "--", "true"],
        vec!["lock", "run", "--also", "", "k", "--", "true"],
        vec!["lock", "holders", ""],
    ];
    for args in &cases {
        let out = output(eventsource(None).arg("--database-url").arg(&url).args(args)).await;
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(
            !out.stderr.contains("hunter2secret"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{args:?} connected to the database"
        );
    }
    // Long keys (up to 1 MiB, which no argument vector can carry) are keys
    // like any other.
    let long = "k".repeat(5000);
    let out = output(eventsource(None).args(["lock", "key", &long])).await;
    assert_eq!(out.code, 0, "{out:?}");
}

#[tokio::test]
async fn missing_or_invalid_url_is_a_usage_error_without_password() {
    // No URL: libpq's environment, whose bad values are usage errors too.
    let out = output(
        eventsource(None)
            .env("PGPORT", "notaport")
            .env("PGPASSWORD", "hunter2secret")
            .args(["lock", "run", "k", "--", "true"]),
    )
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("`port` (from PGPORT)"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2secret"), "{}", out.stderr);

    let out = output(
        eventsource(None)
            .env(
                "DATABASE_URL",
                "postgres://app:hunter2secret@db:notaport/app",
            )
            .args(["lock", "holders"]),
    )
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(!out.stderr.contains("hunter2secret"), "{}", out.stderr);
    assert!(out.stderr.contains("app:***@db"), "{}", out.stderr);

    // Passwords holding a URL's delimiters, quotes or spaces (which need
    // no second mistake to fail the parse, or ride along one): every
    // character of them masked.
    // A `?` or `#` before the `@` is the password's, as libpq reads it:
    // those URLs parse and reach for the (absent) server, exit 69.
    for (url, code) in [
        ("postgres://app:hunter'2secret@127.0.0.1:1/app?sslmode=x", 2),
        ("postgres://app:hunter/2secret@127.0.0.1:1/app", 2),
        ("postgres://app:hunter?2secret@127.0.0.1:1/app", 69),
        ("postgres://app:hunter#2secret@127.0.0.1:1/app", 69),
        ("postgres://app:hunter 2secret@127.0.0.1:1/app?sslmode=x", 2),
        (
            "host=127.0.0.1 port=1 user=app password=hunter\\ 2secret sslmode=x",
            2,
        ),
    ] {
        let out = output(eventsource(None).args(["lock", "holders", "--database-url", url])).await;
        assert_eq!(out.code, code, "{url}: {out:?}");
        assert!(!out.stderr.contains("2secret"), "{}", out.stderr);
        assert!(out.stderr.contains("***"), "{}", out.stderr);
    }

    // A URL where clap does not expect one is echoed by clap's error: masked too.
    let out = output(eventsource(None).args(["postgres://app:hunter2secret@db/app", "lock"])).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(!out.stderr.contains("hunter2secret"), "{}", out.stderr);
    assert!(out.stderr.contains("app:***@db"), "{}", out.stderr);
}

#[tokio::test]
async fn unreachable_database_exits_69_without_password() {
    // A port with nothing behind it: bind, note, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://app:hunter2secret@127.0.0.1:{port}/app?password=hunter2secret");
    for args in [
        &["lock", "run", "--no-wait", "k", "--", "true"][..],
        &["lock", "holders"],
    ] {
        let out = output(eventsource(None).env("DATABASE_URL", &url).args(args)).await;
        assert_eq!(out.code, 69, "{args:?}: {out:?}");
        assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
        assert!(out.stderr.contains("***"), "{}", out.stderr);
    }
}

/// Keys that each fit in COMMAND's environment but together do not (in
/// EVENTSOURCE_LOCK_KEYS): a usage error before anything is taken, not a
/// COMMAND that cannot start (126) once the locks are held.
#[tokio::test]
async fn keys_too_long_together_for_the_environment_are_a_usage_error() {
    let db = database().await;
    let (a, b) = ("a".repeat(70_000), "b".repeat(70_000));
    let out =
        output(eventsource(Some(&db)).args(["lock", "run", &a, "--also", &b, "--", "echo", "ran"]))
            .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("EVENTSOURCE_LOCK_KEYS"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "", "COMMAND ran");
}
