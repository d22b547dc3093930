//! The worked examples of `acquire_many`, `Semaphore` and shared locks
//! (`examples/acquire_many.rs`, `examples/semaphore.rs`,
//! `examples/shared_locks.rs`) and of a leader that runs work
//! (`examples/leader_work.rs`) run as tests against PostgreSQL.

#[allow(dead_code)]
#[path = "../../examples/acquire_many.rs"]
mod acquire_many;

#[allow(dead_code)]
#[path = "../../examples/leader_work.rs"]
mod leader_work;

#[allow(dead_code)]
#[path = "../../examples/semaphore.rs"]
mod semaphore;

#[allow(dead_code)]
#[path = "../../examples/shared_locks.rs"]
mod shared_locks;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acquire_many_example_runs() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    acquire_many::demo(&db.url()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_semaphore_example_runs() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    semaphore::demo(&db.url()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_locks_example_runs() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    shared_locks::demo(&db.url()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_work_example_runs() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    leader_work::demo(&db.url()).await.unwrap();
}
