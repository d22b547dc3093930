//! The worked examples of `acquire_many` and `Semaphore`
//! (`examples/acquire_many.rs`, `examples/semaphore.rs`) run as tests
//! against PostgreSQL.
#![cfg(feature = "postgres")]

#[allow(dead_code)]
#[path = "../examples/acquire_many.rs"]
mod acquire_many;

#[allow(dead_code)]
#[path = "../examples/semaphore.rs"]
mod semaphore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acquire_many_example_runs() {
    let db = eventsource_testkit::pg::TestDatabase::create()
        .await
        .unwrap();
    acquire_many::demo(&db.url()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_semaphore_example_runs() {
    let db = eventsource_testkit::pg::TestDatabase::create()
        .await
        .unwrap();
    semaphore::demo(&db.url()).await.unwrap();
}
