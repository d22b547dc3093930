//! The read-model conformance suite against the in-memory repository, and
//! the in-memory projection backend.

use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord::Result;
use pgcoord_testkit::readmodels::{run_conformance, ConformanceItem};
use uuid::Uuid;

/// A repository with two planted bugs: `find` ignores the offset and
/// `count` ignores the filters. The suite must catch both, and only where
/// they matter.
struct Buggy(InMemoryReadModelRepository<ConformanceItem>);

impl ReadModelRepository<ConformanceItem> for Buggy {
    async fn get(&self, id: Uuid) -> Result<Option<ConformanceItem>> {
        self.0.get(id).await
    }
    async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<ConformanceItem>> {
        self.0.get_many(ids).await
    }
    async fn save(&self, model: &ConformanceItem) -> Result<ConformanceItem> {
        self.0.save(model).await
    }
    async fn save_many(&self, models: &[ConformanceItem]) -> Result<Vec<ConformanceItem>> {
        self.0.save_many(models).await
    }
    async fn delete(&self, id: Uuid) -> Result<bool> {
        self.0.delete(id).await
    }
    async fn soft_delete(&self, id: Uuid) -> Result<bool> {
        self.0.soft_delete(id).await
    }
    async fn restore(&self, id: Uuid) -> Result<bool> {
        self.0.restore(id).await
    }
    async fn get_deleted(&self, id: Uuid) -> Result<Option<ConformanceItem>> {
        self.0.get_deleted(id).await
    }
    async fn find_deleted(&self, query: &Query) -> Result<Vec<ConformanceItem>> {
        self.0.find_deleted(query).await
    }
    async fn exists(&self, id: Uuid) -> Result<bool> {
        self.0.exists(id).await
    }
    async fn find(&self, query: &Query) -> Result<Vec<ConformanceItem>> {
        self.0.find(&query.clone().offset(0)).await
    }
    async fn find_one(&self, query: &Query) -> Result<Option<ConformanceItem>> {
        self.0.find_one(query).await
    }
    async fn count(&self, query: &Query) -> Result<u64> {
        self.0
            .count(&Query::new().include_deleted(query.include_deleted))
            .await
    }
    async fn truncate(&self) -> Result<u64> {
        self.0.truncate().await
    }
    async fn save_with_version_check(&self, model: &ConformanceItem) -> Result<ConformanceItem> {
        self.0.save_with_version_check(model).await
    }
}

#[tokio::test]
async fn the_suite_catches_planted_bugs() {
    let report = run_conformance(&Buggy(InMemoryReadModelRepository::new())).await;
    let failed: Vec<&str> = report.failed.iter().map(|(name, _)| *name).collect();
    for expected in [
        "offset_skips_rows",
        "count_with_and_without_filters",
        "empty_in_matches_nothing",
    ] {
        assert!(
            failed.contains(&expected),
            "{expected} not caught: {report}"
        );
    }
    assert!(report.passed.contains(&"filter_eq"), "{report}");
    assert!(report
        .passed
        .contains(&"version_check_rejects_stale_version"));
    let panicked = std::panic::catch_unwind(|| report.assert_passed());
    assert!(panicked.is_err());
}
