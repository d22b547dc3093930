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
