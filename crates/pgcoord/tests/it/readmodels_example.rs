//! The worked example (`examples/readmodels.rs`) run as a test against
//! SQLite and PostgreSQL: derived model, checkpointed projection, replay,
//! queries.

#[allow(dead_code)]
#[path = "../../examples/readmodels.rs"]
mod example;

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn the_example_runs_on_sqlite() {
    let db = pgcoord::readmodels::connect("sqlite:///:memory:")
        .await
        .unwrap();
    db.create_schema::<example::OrderSummary>().await.unwrap();
    example::demo(db.repository()).await.unwrap();
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn the_example_runs_on_postgres() {
    let test_db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let db = pgcoord::readmodels::connect(&test_db.url()).await.unwrap();
    db.create_schema::<example::OrderSummary>().await.unwrap();
    example::demo(db.repository()).await.unwrap();
}
