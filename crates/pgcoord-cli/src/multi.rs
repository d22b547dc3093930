//! `lock run KEY --also KEY2 ...`: COMMAND runs holding every key at once,
//! taken by `pgcoord::coordination::acquire_many` (all or none, one
//! deadline for the set, canonical order so that runs with overlapping sets
//! never deadlock). The rest of `lock run` sees the set through
//! `held::Held::Set`.
//!
//! COMMAND's environment for a set, besides `EVENTSOURCE_LOCK_KEY` and
//! `EVENTSOURCE_LOCK_ID` (KEY's, as for one key):
//! - [`KEYS_ENV`]: every key held, as a JSON array of strings, in the order
//!   they were taken (by lock id), without duplicates;
//! - [`IDS_ENV`]: their lock ids, decimal, space-separated, in that order;
//! - with `--fence`, [`FENCES_ENV`]: a JSON object of key to fencing token,
//!   and `EVENTSOURCE_LOCK_FENCE` KEY's token.

use pgcoord::coordination::MultiLockGuard;
use pgcoord::error::{AcquireFailure, BackendErrorKind, LockAcquisitionError};
use pgcoord::Error;

use crate::cli::RunArgs;

/// Every key of the set, as a JSON array.
pub const KEYS_ENV: &str = "EVENTSOURCE_LOCK_KEYS";
/// Every lock id of the set, space-separated.
pub const IDS_ENV: &str = "EVENTSOURCE_LOCK_IDS";
/// Each key's fencing token, as a JSON object (with `--fence`).
pub const FENCES_ENV: &str = "EVENTSOURCE_LOCK_FENCES";

/// The keys a run asks for: KEY, then each `--also`, as given (duplicates
/// are left to `acquire_many`, which takes each lock id once).
pub fn keys(args: &RunArgs) -> Vec<&str> {
    std::iter::once(args.key.as_str())
        .chain(args.also.iter().map(String::as_str))
        .collect()
}

/// Whether the run takes a set (`--also` given).
pub fn is_set(args: &RunArgs) -> bool {
    !args.also.is_empty()
}

/// A set's failure to connect, no longer attributed to the key whose try
/// happened to report it (the keys are tried together, on one session):
/// the bare database error, which messages prefix with the whole set.
/// Other failures (a conflict, a session that ended while it waited for
/// one key) keep their key.
pub fn unattributed(e: Error) -> Error {
    match e {
        Error::LockAcquisition(LockAcquisitionError {
            reason: AcquireFailure::Backend(b),
            ..
        }) if matches!(
            b.kind(),
            BackendErrorKind::Connect
                | BackendErrorKind::PasswordRequired
                | BackendErrorKind::Tls
                | BackendErrorKind::NotPostgres
        ) =>
        {
            Error::Backend(b)
        }
        other => other,
    }
}

/// The context of a failure's line: none when the error names its key,
/// else `could not acquire WHAT` (a set's failure to connect).
pub fn failed(what: &str, e: &Error) -> String {
    match e.as_lock_acquisition() {
        Some(_) => String::new(),
        None => format!("could not acquire {what}"),
    }
}

/// How messages name what a run takes: `lock "k"` for one key, `locks "a"
/// and "b"`, `locks "a", "b" and "c"` for more (duplicates left out).
pub fn describe(keys: &[&str]) -> String {
    let mut unique: Vec<&str> = Vec::with_capacity(keys.len());
    for key in keys {
        if !unique.contains(key) {
            unique.push(key);
        }
    }
    let quoted: Vec<String> = unique.iter().map(|k| format!("{k:?}")).collect();
    match quoted.as_slice() {
        [] => "no lock".to_owned(),
        [one] => format!("lock {one}"),
        [rest @ .., last] => format!("locks {} and {last}", rest.join(", ")),
    }
}

/// Checks, before anything is taken, that COMMAND can be given the set's
/// environment: Linux passes at most 128 KiB per environment string, and
/// [`KEYS_ENV`] (with `--fence`, [`FENCES_ENV`]) holds every key. Each key
/// fits alone (its parser checks); several long ones together may not,
/// and COMMAND would then fail to start (126) after the locks were taken.
pub fn check_env_fits(args: &RunArgs) -> Result<(), String> {
    use crate::names::ENV_STRING_MAX;
    if !is_set(args) {
        return Ok(());
    }
    let mut unique: Vec<&str> = keys(args);
    unique.sort_unstable();
    unique.dedup();
    let listed = serde_json::to_string(&unique).expect("strings encode as JSON");
    // `NAME=value` and the NUL that ends it: Linux counts all of it.
    let mut longest = (KEYS_ENV, KEYS_ENV.len() + 1 + listed.len() + 1);
    if args.fence {
        // The largest token a fence can carry.
        let fences: serde_json::Map<String, serde_json::Value> = unique
            .iter()
            .map(|k| ((*k).to_owned(), u64::MAX.into()))
            .collect();
        let size = FENCES_ENV.len() + 1 + serde_json::Value::Object(fences).to_string().len() + 1;
        if size > longest.1 {
            longest = (FENCES_ENV, size);
        }
    }
    match longest {
        (name, size) if size > ENV_STRING_MAX => Err(format!(
            "the keys together are too long for COMMAND's environment: {name} would be \
             {size} bytes, and Linux passes at most {ENV_STRING_MAX} bytes of one \
             environment variable; take fewer or shorter keys"
        )),
        _ => Ok(()),
    }
}

/// The environment COMMAND gets for a set (see the module docs).
pub fn env(set: &MultiLockGuard) -> Vec<(&'static str, String)> {
    let keys: Vec<&str> = set.keys().collect();
    let ids: Vec<String> = set
        .guards()
        .iter()
        .map(|g| g.lock_id().to_string())
        .collect();
    let mut env = vec![
        (
            KEYS_ENV,
            serde_json::to_string(&keys).expect("strings encode as JSON"),
        ),
        (IDS_ENV, ids.join(" ")),
    ];
    let fences: serde_json::Map<String, serde_json::Value> = set
        .guards()
        .iter()
        .filter_map(|g| Some((g.key().to_owned(), g.fence()?.into())))
        .collect();
    if !fences.is_empty() {
        env.push((FENCES_ENV, serde_json::Value::Object(fences).to_string()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_is_named_as_before_and_sets_by_all_their_keys() {
        assert_eq!(describe(&["nightly"]), "lock \"nightly\"");
        assert_eq!(describe(&["a", "b"]), "locks \"a\" and \"b\"");
        assert_eq!(
            describe(&["a", "b", "a", "c d"]),
            "locks \"a\", \"b\" and \"c d\""
        );
        assert_eq!(describe(&["x", "x"]), "lock \"x\"");
    }

    fn set_with(also: &str) -> RunArgs {
        let argv = ["eventsource", "lock", "run", "a", "--also", also, "true"];
        match crate::cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Lock(crate::cli::LockCommand::Run(r)) => r,
            _ => unreachable!("a lock run"),
        }
    }

    /// Linux counts the NUL that ends `NAME=value`: a set one byte over
    /// with it used to be taken, and COMMAND then failed to start (126).
    #[test]
    fn the_environment_cap_counts_the_final_nul() {
        let around = "EVENTSOURCE_LOCK_KEYS=".len() + r#"["a",""]"#.len() + 1;
        let fits = "y".repeat(128 * 1024 - around);
        assert!(check_env_fits(&set_with(&fits)).is_ok());
        let over = "y".repeat(128 * 1024 - around + 1);
        let refused = check_env_fits(&set_with(&over)).unwrap_err();
        assert!(refused.contains("would be 131073 bytes"), "{refused}");
        assert!(
            !refused.contains("  "),
            "one space between words: {refused}"
        );
    }
}
