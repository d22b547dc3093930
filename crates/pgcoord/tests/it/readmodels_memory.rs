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

/// The probe's model: one unique column. PostgreSQL refuses a second
/// `ada@example.com` with 23505 on `idx_widgets_email_{hash}`; so does memory,
/// in every write path, including an event applied in a projection's
/// transaction.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, pgcoord::readmodels::ReadModel)]
#[read_model(unique_index(email))]
struct Widget {
    #[serde(flatten)]
    meta: pgcoord::readmodels::ReadModelMeta,
    email: String,
}

fn widget(email: &str) -> Widget {
    Widget {
        meta: pgcoord::readmodels::ReadModelMeta::new_random(),
        email: email.into(),
    }
}

fn assert_unique_violation<T: std::fmt::Debug>(result: Result<T>) {
    let err = result.expect_err("a duplicate key was accepted");
    let backend = err.as_backend().expect("a backend error");
    assert_eq!(backend.kind(), pgcoord::error::BackendErrorKind::Query);
    assert_eq!(
        backend.code(),
        Some(&pgcoord::error::SqlState::UNIQUE_VIOLATION)
    );
    let index = pgcoord::readmodels::IndexDescriptor::on(["email"])
        .unique()
        .name_on("widgets");
    assert!(index.starts_with("idx_widgets_email_"), "{index}");
    assert_eq!(
        backend.message(),
        format!(
            r#"duplicate key value violates unique constraint "{index}": key (email)=("ada@example.com") already exists in widgets"#
        )
    );
}

#[tokio::test]
async fn unique_indexes_hold_on_every_write_path() {
    let repo = InMemoryReadModelRepository::<Widget>::new();
    repo.save(&widget("ada@example.com")).await.unwrap();
    assert_unique_violation(repo.save(&widget("ada@example.com")).await);
    assert_unique_violation(
        repo.save_many(&[widget("bob@example.com"), widget("ada@example.com")])
            .await,
    );
    assert_eq!(repo.len(), 1, "a refused batch wrote nothing");

    // In a projection's transaction the refusal fails the event, and the
    // copy it ran on is thrown away.
    struct SaveTwice;
    impl pgcoord::readmodels::ReadModelHandler for SaveTwice {
        type Model = Widget;
        type Event = &'static str;
        async fn handle<R: ReadModelRepository<Widget>>(
            &self,
            email: &&'static str,
            repo: &R,
        ) -> Result<()> {
            repo.save(&widget("carol@example.com")).await?;
            repo.save(&widget(email)).await?;
            Ok(())
        }
    }
    use pgcoord::readmodels::TransactionalReadModels;
    assert_unique_violation(repo.apply(&SaveTwice, &"ada@example.com").await);
    assert_eq!(repo.len(), 1);
    repo.apply(&SaveTwice, &"dan@example.com").await.unwrap();
    assert_eq!(repo.len(), 3);
}
