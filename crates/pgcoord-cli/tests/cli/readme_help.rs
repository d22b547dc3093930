//! The README's `lock run` synopsis and exit-code table say what
//! `eventsource lock run --help` says: the same options, the same codes;
//! and its `psql` fencing recipe runs as written.

use std::collections::BTreeSet;

use tokio::process::Command;

use crate::common::*;

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));

/// The text of `eventsource lock run --help`.
async fn run_help() -> String {
    let out = output(eventsource(None).args(["lock", "run", "--help"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    out.stdout
}

/// The first column of the README's `### Exit codes` table.
fn readme_exit_codes() -> BTreeSet<String> {
    let section = README
        .split("\n### Exit codes\n")
        .nth(1)
        .expect("the README has an `### Exit codes` section");
    let codes: BTreeSet<String> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its separator
        .map(|l| {
            l.trim_start_matches('|')
                .split('|')
                .next()
                .unwrap()
                .trim()
                .to_string()
        })
        .collect();
    assert!(codes.len() > 5, "{codes:?}");
    codes
}

/// The codes of the `Exit codes:` section of `--help` (rows start with two
/// spaces and the code; continuation lines are indented further).
fn help_exit_codes(help: &str) -> BTreeSet<String> {
    let section = help
        .split("\nExit codes:\n")
        .nth(1)
        .expect("`lock run --help` has an `Exit codes:` section");
    let codes: BTreeSet<String> = section
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.trim().split("  ").next().unwrap().trim().to_string())
        .collect();
    assert!(codes.len() > 5, "{codes:?}");
    codes
}

/// Every `--option` named in `text`.
fn options_in(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

/// The README's synopsis: the first `sh` block after `### Running a command under a lock`.
fn readme_synopsis() -> &'static str {
    let section = README
        .split("\n### Running a command under a lock\n")
        .nth(1)
        .expect("the README has a `### Running a command under a lock` section");
    let block = section.split("```sh\n").nth(1).unwrap();
    let synopsis = block.split("```").next().unwrap();
    assert!(synopsis.starts_with("eventsource lock run "), "{synopsis}");
    synopsis
}

#[tokio::test]
async fn readme_exit_code_table_lists_the_codes_of_lock_run_help() {
    let help = run_help().await;
    assert_eq!(readme_exit_codes(), help_exit_codes(&help));
}

#[tokio::test]
async fn readme_synopsis_names_every_option_of_lock_run_help() {
    let help = run_help().await;
    let options_section = help
        .split("\nOptions:\n")
        .nth(1)
        .expect("`lock run --help` has an `Options:` section");
    // An option's own line: `  -h, --help` or `      --timeout <DURATION>`;
    // its description is indented further.
    let mut in_help: BTreeSet<String> = options_section
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let indent = l.len() - t.len();
            let t = t
                .strip_prefix("-h, ")
                .or_else(|| t.strip_prefix("-V, "))
                .unwrap_or(t);
            (indent <= 6 && t.starts_with("--"))
                .then(|| options_in(t).into_iter().next())
                .flatten()
        })
        .collect();
    in_help.remove("--help");
    in_help.remove("--version");
    assert!(in_help.contains("--timeout"), "{in_help:?}");
    assert_eq!(options_in(readme_synopsis()), in_help);
}

/// The README's `psql` fencing recipe, run as written: the `lock run`
/// command line and the SQL file, against a fresh database.
#[tokio::test]
async fn readme_psql_fencing_recipe_runs_and_a_stale_token_fails_the_job() {
    let which_psql = std::process::Command::new("psql").arg("--version").output();
    if !which_psql.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED: no psql binary for the README's fencing recipe (apt-get install postgresql-client)");
        return;
    }
    let section = README
        .split("#### Fencing and leases")
        .nth(1)
        .expect("the README's fencing section");
    let command = section
        .split("```sh\n")
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("ON_ERROR_STOP"))
        .expect("the psql recipe")
        .trim()
        .to_string();
    let sql = section
        .split("```sql\n")
        .nth(1)
        .expect("the SQL file of the recipe")
        .split("```")
        .next()
        .unwrap()
        .replace(
            "-- ... the protected writes ...",
            "CREATE TABLE IF NOT EXISTS shop (n int); INSERT INTO shop VALUES (1);",
        );
    let db = database().await;
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    let scratch = scratch_dir();
    std::fs::write(scratch.join("migrate-shop.sql"), &sql).unwrap();
    let bin_dir = std::path::Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // As written: the job runs under the lock, its check passes, it writes.
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(&command)
        .current_dir(scratch.join(""))
        .env("PATH", &path)
        .env("DATABASE_URL", db.url())
        .env_remove("EVENTSOURCE_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let out = output(&mut sh).await;
    assert_eq!(out.code, 0, "{command}\n{out:?}");
    let client = db.connect().await.unwrap();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM shop", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);

    // Token 1 is stale once a later holder took token 2: the same SQL with
    // it fails, psql stops at the error and exits 3.
    let out = output(&mut sh).await;
    assert_eq!(out.code, 0, "{out:?}");
    let mut stale = Command::new("psql");
    stale
        .arg(db.url())
        .args([
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            "token=1",
            "-f",
            "migrate-shop.sql",
        ])
        .current_dir(scratch.join(""))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let out = output(&mut stale).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        out.stderr.contains("ESF01") || out.stderr.contains("fenc"),
        "{out:?}"
    );
    let rows: i64 = client
        .query_one("SELECT count(*) FROM shop", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 2, "the stale job's write was rolled back");
}
