//! Usage errors read well: a value too long to read back is shortened, one
//! that does not print is escaped, and
//! `--database-url` taken from DATABASE_URL is not shown in the usage line
//! as if the command required it; a bad connection parameter is shown as
//! the README says.

use crate::common::*;

/// `lock holders` with `url` typed on the command line.
async fn holders_with_url(url: &str) -> Output {
    output(eventsource(None).args(["--database-url", url, "lock", "holders"])).await
}

/// A key one byte over what COMMAND's environment takes (131,050 bytes)
/// used to be printed back whole: 131 KB on standard error.
#[tokio::test]
async fn a_too_long_key_or_name_is_quoted_shortened() {
    let key = "k".repeat(131_051);
    for (args, what) in [
        (["lock", "run", key.as_str(), "true"], "KEY"),
        (["leader", "run", key.as_str(), "true"], "NAME"),
    ] {
        let out = output(eventsource(None).args(args)).await;
        assert_eq!(out.code, 2, "{:?}", &args[..2]);
        assert!(out.stderr.len() < 1000, "{} bytes", out.stderr.len());
        let quoted = format!("invalid value '{}… (131051 bytes)'", "k".repeat(60));
        assert!(
            out.stderr.contains(&quoted) && out.stderr.contains(&format!("{what} is 131")),
            "{}",
            out.stderr
        );
    }
}

/// A value clap repeats in a usage error is escaped as the README's "Text
/// others control" says: a newline does not break the line, an escape
/// sequence does not reach the terminal (clap wrote both as they were).
#[tokio::test]
async fn a_value_that_does_not_print_is_escaped() {
    let out =
        output(eventsource(None).args(["leader", "run", "a\nb\u{1b}[31mc", "--", "true"])).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .starts_with("error: invalid value 'a\\nb\\u{1b}[31mc' for '<NAME>'"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
}

/// `--every` (`--interval`) without `--watch`: the usage line names what
/// was given and what is missing, not the URL DATABASE_URL supplied.
#[tokio::test]
async fn an_option_missing_its_watch_shows_no_url_in_the_usage_line() {
    for (args, usage) in [
        (
            &["projection", "status", "orders", "--every", "1s"][..],
            "Usage: eventsource projection status --watch --every <DURATION> <NAME>",
        ),
        (
            &["leader", "show", "e", "--every", "1s"],
            "Usage: eventsource leader show --watch --every <DURATION> <NAME>",
        ),
        (
            &["lock", "holders", "--interval", "1s"],
            "Usage: eventsource lock holders --watch --interval <DURATION> [KEY]...",
        ),
    ] {
        let out = output(
            eventsource(None)
                .env("DATABASE_URL", "postgres://app@127.0.0.1:47999/shop")
                .args(args),
        )
        .await;
        assert_eq!(out.code, 2, "{out:?}");
        assert!(
            out.stderr.contains(&format!("\n{usage}\n")),
            "{}",
            out.stderr
        );
        assert!(!out.stderr.contains("--database-url"), "{}", out.stderr);
    }
    // Typed on the command line, it was given: the usage line keeps it.
    let out = output(eventsource(None).args([
        "projection",
        "status",
        "--database-url",
        "postgres://app@127.0.0.1:47999/shop",
        "orders",
        "--every",
        "1s",
    ]))
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("--database-url <URL>"),
        "{}",
        out.stderr
    );
}

/// What a bad connection parameter's line shows, as the README says: a
/// URL's bad value as typed (the URL is shown, its passwords masked); a
/// `PG*` variable by its name only.
#[tokio::test]
async fn a_bad_url_value_is_shown_in_the_masked_url_and_a_variables_is_not() {
    let out = holders_with_url("postgres://app:s3cr3t-pw@db.invalid/app?connect_timeout=abc").await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .starts_with("eventsource: invalid connection settings: ")
            && out
                .stderr
                .contains("invalid value for connection parameter `connect_timeout`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .trim_end()
            .ends_with("; database URL: postgres://app:***@db.invalid/app?connect_timeout=abc"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("s3cr3t-pw"), "{}", out.stderr);
    // A password parameter that ends the URL is masked and nothing after
    // it is lost: the error itself comes before the URL.
    let out = holders_with_url("postgres://app@db.invalid:99999/app?password=s3cr3t-pw").await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .contains("invalid value for connection parameter `port`")
            && out.stderr.trim_end().ends_with("/app?password=***")
            && !out.stderr.contains("s3cr3t-pw"),
        "{}",
        out.stderr
    );
    let out = output(
        eventsource(None)
            .env("PGPORT", "p0rt-typo")
            .args(["lock", "holders"]),
    )
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("PGPORT"), "{}", out.stderr);
    assert!(!out.stderr.contains("p0rt-typo"), "{}", out.stderr);
}

/// `gssencmode`: `disable` and `prefer` are taken (no GSSAPI encryption:
/// the run goes on to connect), `require` is refused by name (exit 2).
#[tokio::test]
async fn gssencmode_disable_and_prefer_are_taken_and_require_is_refused() {
    for (mode, code) in [("disable", 69), ("prefer", 69), ("require", 2)] {
        let url = format!("postgres://u@127.0.0.1:1/x?gssencmode={mode}");
        let out = holders_with_url(&url).await;
        assert_eq!(out.code, code, "gssencmode={mode}: {out:?}");
        if code == 2 {
            assert!(out.stderr.contains("gssencmode"), "{}", out.stderr);
        } else {
            assert!(
                out.stderr.contains("cannot list lock holders"),
                "{}",
                out.stderr
            );
        }
    }
}

/// A URL with an `@` after its credentials (an unencoded `@` or `/` in a
/// password) is refused before connecting, and its line shows the URL
/// masked to its last `@`, the password's tail with it, as the README and
/// reliability.md say.
#[tokio::test]
async fn a_url_with_a_second_at_is_refused_masked_to_its_last_at() {
    for url in [
        "postgresql://u:s3cr3t@tail-pw@db.invalid/app",
        "postgresql://u:2024/s3cr3t-tail@db.invalid/app",
    ] {
        let out = holders_with_url(url).await;
        assert_eq!(out.code, 2, "{url}: {out:?}");
        assert!(
            out.stderr
                .trim_end()
                .ends_with("; database URL: postgresql://u:***@db.invalid/app"),
            "{}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("s3cr3t") && !out.stderr.contains("tail"),
            "{}",
            out.stderr
        );
    }
}
