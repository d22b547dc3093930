//! The primitives' worked examples (`examples/xact_lock.rs`,
//! `examples/leader_election.rs`) run as tests against PostgreSQL.

#[allow(dead_code)]
#[path = "../../examples/xact_lock.rs"]
mod xact_lock;

#[allow(dead_code)]
#[path = "../../examples/leader_election.rs"]
mod leader_election;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transaction_lock_example_runs() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    xact_lock::demo(&db.url()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_election_example_runs() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    leader_election::demo(&db.url()).await.unwrap();
}
