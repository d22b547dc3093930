//! `lock key` output and the help texts.

use crate::common::*;

#[tokio::test]
async fn key_prints_key_tab_id_without_a_database() {
    let out = output(eventsource(None).args(["lock", "key", "alpha", "beta", ""])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "alpha\t1068468761257547166\nbeta\t8380746901480884457\n\t7183457195969485844\n"
    );
    assert_eq!(out.stderr, "");
    let out = output(eventsource(None).args(["lock", "key", "a\tb"])).await;
    assert_eq!(
        out.stdout,
        format!("a\\tb\t{}\n", pgcoord::lock_id_for_key("a\tb"))
    );
}

#[tokio::test]
async fn help_texts_are_complete() {
    let top = output(eventsource(None).arg("--help")).await;
    assert_eq!(top.code, 0);
    for needle in [
        "lock",
        "demo",
        "completions",
        "man",
        "--database-url",
        "DATABASE_URL",
        "***",
        // The tool's own example is not a password to mask.
        "postgres://user:pass@host:port/db",
    ] {
        assert!(
            top.stdout.contains(needle),
            "--help lacks {needle}:\n{}",
            top.stdout
        );
    }
    assert!(
        !top.stdout.contains("demo-worker") && !top.stdout.contains("watchdog"),
        "the worker and watchdog modes are hidden"
    );

    let run = output(eventsource(None).args(["lock", "run", "--help"])).await;
    assert_eq!(run.code, 0);
    for needle in [
        "--timeout",
        "--no-wait",
        "--holder-id",
        "--conflict-exit-code",
        "--lost-exit-code",
        "--kill-grace",
        "--watchdog",
        "--allow-standby",
        "process group",
        "SIGUSR1",
        "77",
        "EVENTSOURCE_LOCK_KEY",
        "EVENTSOURCE_LOCK_ID",
        "--also",
        "EVENTSOURCE_LOCK_KEYS",
        "EVENTSOURCE_LOCK_IDS",
        "EVENTSOURCE_LOCK_FENCES",
        "SIGTERM",
        "SIGKILL",
        "128+N",
        "75",
        "76",
        "69",
        "127",
        "cron",
        "deploy",
        "--min-interval",
        "EVENTSOURCE_RUN_STARTED",
        "78",
    ] {
        assert!(
            run.stdout.contains(needle),
            "lock run --help lacks {needle}:\n{}",
            run.stdout
        );
    }
    for (args, needles) in [
        (&["lock", "--help"][..], &["run", "key", "holders"][..]),
        (&["lock", "key", "--help"], &["LOCK_ID", "SHA-256"]),
        (
            &["lock", "holders", "--help"],
            &["--json", "waiting", "pg_terminate_backend"],
        ),
        (
            &["demo", "--help"],
            &["--workers", "--seconds", "--keys", "SIGKILL", "p99"],
        ),
    ] {
        let out = output(eventsource(None).args(args)).await;
        assert_eq!(out.code, 0, "{args:?}");
        for needle in needles {
            assert!(
                out.stdout.contains(needle),
                "{args:?} lacks {needle}:\n{}",
                out.stdout
            );
        }
    }
}

/// Every page a manual page refers to (`eventsource-lock(1)`, then
/// `eventsource-lock-run(1)`, ...) is one `eventsource man` prints, with
/// the command's own options: the pages were referred to, never printed.
#[tokio::test]
async fn man_prints_every_page_the_pages_refer_to() {
    let mut todo = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let out = output(eventsource(None).arg("man").args(&path)).await;
        assert_eq!(out.code, 0, "man {path:?}: {out:?}");
        let name = std::iter::once("eventsource".to_owned())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join("\\-");
        assert!(
            out.stdout.contains(&format!(".SH NAME\n{name} ")),
            "man {path:?}:\n{}",
            out.stdout
        );
        // The title is the page's name; the source the tool and its version.
        let th = format!(
            ".TH {} 1  \"eventsource {}\"",
            name.replace("\\-", "-"),
            env!("CARGO_PKG_VERSION")
        );
        assert!(
            out.stdout.contains(&th),
            "man {path:?}, no {th}:\n{}",
            out.stdout
        );
        seen += 1;
        for line in out.stdout.lines() {
            let Some(page) = line.strip_suffix("(1)") else {
                continue;
            };
            let Some(rest) = page.strip_prefix(&format!("{name}\\-")) else {
                continue;
            };
            let mut next = path.clone();
            next.push(rest.replace("\\-", "-"));
            todo.push(next);
        }
    }
    assert!(seen > 10, "only {seen} pages");
    let run = output(eventsource(None).args(["man", "lock", "run"])).await;
    assert!(run.stdout.contains("kill\\-grace"), "{}", run.stdout);
    let none = output(eventsource(None).args(["man", "nope"])).await;
    assert_eq!(none.code, 2, "{none:?}");
}
