//! The limit on one conformance case: a case that hangs (say, an
//! implementation that waits forever on a positive timeout) fails with its
//! name instead of stalling the test run.

use std::future::Future;
use std::time::Duration;

/// How long one conformance case may run. Far beyond what any case needs
/// on a loaded machine: it turns a hang into a failure and measures
/// nothing.
pub const CASE_LIMIT: Duration = Duration::from_secs(120);

/// Runs `case` and panics, naming it, if it has not finished within
/// `limit`. Every case the conformance macros generate runs under it with
/// [`CASE_LIMIT`]; the factory that builds the managers does not.
///
/// # Cancel safety
///
/// Cancel safe as far as this wrapper goes: dropping it drops `case`.
pub async fn within<F: Future>(name: &str, limit: Duration, case: F) -> F::Output {
    match tokio::time::timeout(limit, case).await {
        Ok(out) => out,
        Err(_) => panic!("conformance case {name} hung: still running after {limit:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    #[should_panic(expected = "conformance case stuck hung")]
    async fn a_hanging_case_fails_with_its_name() {
        within(
            "stuck",
            Duration::from_millis(10),
            std::future::pending::<()>(),
        )
        .await;
    }

    #[tokio::test]
    async fn a_finished_case_returns_its_output() {
        assert_eq!(within("quick", CASE_LIMIT, async { 7 }).await, 7);
    }
}
