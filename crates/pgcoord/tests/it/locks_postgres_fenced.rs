//! The whole lock conformance suite again, with fencing on: every grant
//! path (batched-session batches, waits on dedicated sessions, cancels at
//! every poll) must behave the same while it also bumps the fence table.

use pgcoord::PostgresLockManager;
use pgcoord_testkit::locks::Fencing;
use pgcoord_testkit::pg::TestDatabase;

fn fenced(db: &TestDatabase, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(db.config().into())
        .holder_id(holder)
        .fencing(true)
        .build()
        .unwrap()
}

pgcoord_testkit::lock_conformance_tests!(fencing: Fencing::Tokens, || async {
    let db = TestDatabase::create().await.expect("test database");
    let primary = fenced(&db, "primary");
    primary.install_fencing().await.expect("install fencing");
    (primary, fenced(&db, "observer"), db)
});
