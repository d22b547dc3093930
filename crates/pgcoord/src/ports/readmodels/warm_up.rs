//! [`warming_up`]: whether the handler runs for a version that readers do
//! not see yet (a rebuild), so that its side effects (mail, calls to other
//! services) are to be left out.

tokio::task_local! {
    static WARMING_UP: bool;
}

/// True while the handler runs inside a rebuild (the events were already
/// handled by the live version: leave out side effects outside the read
/// model); false in a live runner and anywhere else.
///
/// ```
/// assert!(!pgcoord::readmodels::warming_up());
/// ```
pub fn warming_up() -> bool {
    WARMING_UP.try_with(|w| *w).unwrap_or(false)
}

/// Runs `work` with [`warming_up`] true.
pub(crate) async fn during_warm_up<T>(work: impl std::future::Future<Output = T>) -> T {
    WARMING_UP.scope(true, work).await
}
