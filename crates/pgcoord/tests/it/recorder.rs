//! A Prometheus recorder local to one test's thread, for the tests of the
//! metrics: the test runs on a current-thread runtime inside it, and the
//! rendered text comes back.

use std::future::Future;

/// Runs `test` on a current-thread runtime with a Prometheus recorder local
/// to this thread; the rendered text.
pub fn recorded<F: Future<Output = ()>>(test: impl FnOnce() -> F) -> String {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(test());
    });
    handle.render()
}
