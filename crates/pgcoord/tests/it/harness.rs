//! The throwaway-PostgreSQL harness itself.

use pgcoord_testkit::pg::TestDatabase;

#[tokio::test]
async fn each_test_database_is_fresh_and_distinct() {
    let a = TestDatabase::create().await.expect("database a");
    let b = TestDatabase::create().await.expect("database b");
    assert_ne!(a.name(), b.name());
    let client = a.connect().await.unwrap();
    let row = client
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap();
    let name: String = row.get(0);
    assert_eq!(name, a.name());
}
