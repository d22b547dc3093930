//! Tests of `acquire.rs`: which failures are retried.

use super::*;
use pgcoord::error::BackendError;

fn backend(kind: BackendErrorKind, code: Option<&str>) -> Error {
    let e = BackendError::new(kind, "x");
    match code {
        Some(c) => e.with_code(c).into(),
        None => e.into(),
    }
}

#[test]
fn silence_before_the_timeout_runs_out_is_retried_and_after_it_is_not() {
    let silent = backend(BackendErrorKind::NoAnswer, None);
    assert!(worth_retrying(&silent, true));
    assert!(!worth_retrying(&silent, false));
    let refused = backend(BackendErrorKind::Connect, None);
    assert!(worth_retrying(&refused, true) && worth_retrying(&refused, false));
    let password = backend(BackendErrorKind::Connect, Some("28P01"));
    assert!(!worth_retrying(&password, true));
}

/// PgBouncer's refusal of a client beyond `max_client_conn` (08P01 with
/// its words) is retried as the server's 53300 is; another 08P01 is not.
#[test]
fn a_pooler_out_of_client_slots_is_retried() {
    let full: Error = BackendError::new(
        BackendErrorKind::Connect,
        "no more connections allowed (max_client_conn)",
    )
    .with_code("08P01")
    .into();
    assert!(worth_retrying(&full, true));
    let server_full = backend(BackendErrorKind::Connect, Some("53300"));
    assert!(worth_retrying(&server_full, true));
    let violation: Error =
        BackendError::new(BackendErrorKind::Connect, "unsupported startup parameter")
            .with_code("08P01")
            .into();
    assert!(!worth_retrying(&violation, true));
}
