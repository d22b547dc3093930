//! Tests of the command line's definition and parsing (`cli.rs`).

use std::time::Duration;

use super::*;
use clap::CommandFactory;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    try_parse_from(std::iter::once("eventsource").chain(args.iter().copied()))
}

fn run_args(args: &[&str]) -> RunArgs {
    match parse(args).unwrap().command {
        Command::Lock(LockCommand::Run(r)) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn definition_is_consistent() {
    Cli::command().debug_assert();
    command().debug_assert();
}

#[test]
fn the_demo_says_what_it_does_without_a_url_and_still_takes_one() {
    let mut cmd = command();
    cmd.build();
    let url_help = |path: &[&str]| {
        let mut c = &cmd;
        for name in path {
            c = c.find_subcommand(name).unwrap();
        }
        let arg = c.get_arguments().find(|a| a.get_id() == "database_url");
        let arg = arg.unwrap();
        arg.get_long_help().or(arg.get_help()).unwrap().to_string()
    };
    let demo = url_help(&["demo"]);
    assert!(
        demo.contains("Without one the demo starts a throwaway PostgreSQL"),
        "{demo}"
    );
    let holders = url_help(&["lock", "holders"]);
    assert!(
        holders.contains("else libpq's environment alone"),
        "{holders}"
    );
    assert!(!demo.contains("else libpq's environment alone"), "{demo}");
    for args in [
        &["demo", "--database-url", "postgres://x@h/d"][..],
        &["--database-url", "postgres://x@h/d", "demo"],
    ] {
        let cli = parse(args).unwrap();
        assert_eq!(
            cli.database_url.as_deref(),
            Some("postgres://x@h/d"),
            "{args:?}"
        );
        assert!(matches!(cli.command, Command::Demo(_)), "{args:?}");
    }
}

#[test]
fn run_takes_command_after_double_dash_or_directly() {
    let r = run_args(&[
        "lock",
        "run",
        "--timeout",
        "30s",
        "k",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(r.key, "k");
    assert_eq!(r.timeout, Some(Duration::from_secs(30)));
    assert_eq!(r.command, vec!["sh", "-c", "exit 3"]);
    let r = run_args(&["lock", "run", "k", "ls", "-l", "--timeout", "1s"]);
    assert_eq!(r.timeout, None, "options after COMMAND belong to COMMAND");
    assert_eq!(r.command, vec!["ls", "-l", "--timeout", "1s"]);
    assert_eq!(r.conflict_exit_code, 75);
    assert_eq!(r.lost_exit_code, 76);
    assert_eq!(r.kill_grace, Duration::from_secs(10));
}

#[test]
fn bad_values_are_usage_errors() {
    for args in [
        &["lock", "run", "--timeout", "-1s", "k", "--", "true"][..],
        &["lock", "run", "--timeout=-1s", "k", "--", "true"],
        &["lock", "run", "--timeout", "0s", "k", "--", "true"],
        &["lock", "run", "--timeout", "nan", "k", "--", "true"],
        &["lock", "run", "--timeout", "ten", "k", "--", "true"],
        &["lock", "run", "--timeout", "30", "k", "--", "true"],
        &["lock", "run", "--kill-grace", "-5s", "k", "--", "true"],
        &["lock", "run", "--watchdog", "0s", "k", "--", "true"],
        &["lock", "run", "--watchdog", "50ms", "k", "--", "true"],
        &[
            "lock",
            "run",
            "--no-wait",
            "--timeout",
            "1s",
            "k",
            "--",
            "true",
        ],
        &[
            "lock",
            "run",
            "--conflict-exit-code",
            "256",
            "k",
            "--",
            "true",
        ],
        &[
            "lock",
            "run",
            "--conflict-exit-code",
            "-1",
            "k",
            "--",
            "true",
        ],
        &["lock", "run", "k"],
        &["lock", "key"],
        &["demo", "--workers", "1"],
    ] {
        let err = parse(args).expect_err(&format!("{args:?}"));
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
    }
    let r = run_args(&["lock", "run", "k", "--", "true"]);
    assert_eq!(r.watchdog.as_millis() as u64, DEFAULT_WATCHDOG_MS);
    let r = run_args(&["lock", "run", "--kill-grace", "0s", "k", "--", "true"]);
    assert_eq!(r.kill_grace, Duration::ZERO);
}

#[test]
fn database_url_is_global() {
    let cli = parse(&["lock", "holders", "--database-url", "postgres://x@h/d"]).unwrap();
    assert_eq!(cli.database_url.as_deref(), Some("postgres://x@h/d"));
    let cli = parse(&["--database-url", "postgres://y@h/d", "lock", "holders"]).unwrap();
    assert_eq!(cli.database_url.as_deref(), Some("postgres://y@h/d"));
}

#[test]
fn a_key_written_after_a_separator_keeps_commands_program() {
    // `lock run -- -key -- echo hi`: KEY `-key`, COMMAND `echo hi`, not a
    // program called `--`.
    let r = run_args(&["lock", "run", "--", "-key", "--", "echo", "hi"]);
    assert_eq!(
        (r.key.as_str(), r.command.clone()),
        ("-key", vec!["echo".into(), "hi".into()])
    );
    let r = run_args(&["lock", "run", "k", "--", "echo", "--"]);
    assert_eq!(
        r.command,
        vec![std::ffi::OsString::from("echo"), "--".into()]
    );
    match parse(&["leader", "run", "--", "-name", "--", "true"])
        .unwrap()
        .command
    {
        Command::Leader(crate::leader_args::LeaderCommand::Run(a)) => {
            assert_eq!(a.command, vec![std::ffi::OsString::from("true")])
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_help_names_every_libpq_variable_the_readme_says_is_read() {
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
    let section = readme
        .split("\n### Connection\n")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .expect("the README has a `### Connection` section");
    let vars: std::collections::BTreeSet<&str> = section
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|w| w.starts_with("PG") && w.len() > 2)
        .collect();
    assert!(vars.contains("PGHOSTADDR") && vars.len() > 20, "{vars:?}");
    let missing: Vec<_> = vars
        .iter()
        .filter(|v| {
            !crate::help::AFTER_HELP
                .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                .any(|w| w == **v)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "`eventsource --help` leaves out {missing:?}"
    );
}
