//! `HoldersQuery::with_fences`: the fencing table, found through the
//! `search_path` once, joined so that each lock shows its current token;
//! missing or unreadable tables are left out.

use pgcoord::inspect::{query_holders, FenceTable, HoldersQuery};
use pgcoord::lock_id_for_key;
use pgcoord::postgres::fencing::FENCE_TABLE;
use pgcoord_testkit::pg::TestDatabase;
use tokio_postgres::{Client, NoTls};

async fn session(db: &TestDatabase, application_name: &str) -> Client {
    let mut config = db.config();
    config.application_name(application_name);
    let (client, conn) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

#[tokio::test]
async fn the_fencing_table_is_found_through_the_search_path_and_joined() {
    let db = TestDatabase::create().await.unwrap();
    let admin = db.connect().await.unwrap();
    let holder = session(&db, "fenced-holder").await;
    let (fenced, named, plain) = ("fence:a", "fence:b", "fence:c");
    for key in [fenced, named, plain] {
        holder
            .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key(key)])
            .await
            .unwrap();
    }
    // No table: nothing joined, and `query_holders` never looks.
    let missing = HoldersQuery::all().with_fences(&admin).await.unwrap();
    assert_eq!(missing.fences(), &FenceTable::Missing);
    assert!(missing
        .run(&admin)
        .await
        .unwrap()
        .iter()
        .all(|l| l.fence.is_none()));

    // In a schema outside the search_path: still missing.
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA fencing; \
             CREATE TABLE fencing.{FENCE_TABLE} (lock_id bigint PRIMARY KEY, key text, fence bigint NOT NULL)"
        ))
        .await
        .unwrap();
    for (key, fence) in [(fenced, 7_i64), (named, 9)] {
        admin
            .execute(
                &format!("INSERT INTO fencing.{FENCE_TABLE} VALUES ($1, $2, $3)"),
                &[&lock_id_for_key(key), &key, &fence],
            )
            .await
            .unwrap();
    }
    let query = HoldersQuery::all().with_fences(&admin).await.unwrap();
    assert_eq!(query.fences(), &FenceTable::Missing);

    admin
        .batch_execute("SET search_path = fencing, public")
        .await
        .unwrap();
    let query = HoldersQuery::all().with_fences(&admin).await.unwrap();
    assert_eq!(
        query.fences(),
        &FenceTable::Joined {
            table: format!("fencing.{FENCE_TABLE}")
        }
    );
    let locks = query.run(&admin).await.unwrap();
    let find = |key: &str| {
        locks
            .iter()
            .find(|l| l.lock_id == lock_id_for_key(key))
            .unwrap_or_else(|| panic!("{key} listed: {locks:?}"))
    };
    assert_eq!(find(fenced).fence, Some(7));
    assert_eq!(
        find(fenced).key.as_deref(),
        Some(fenced),
        "the table names it"
    );
    assert_eq!(find(plain).fence, None);
    assert_eq!(find(plain).key, None);
    let json = serde_json::to_value(find(fenced)).unwrap();
    assert_eq!(json["fence"], 7);

    // Asked by key: the key given, and the token.
    let by_key = HoldersQuery::keys(&[named])
        .with_fences(&admin)
        .await
        .unwrap()
        .run(&admin)
        .await
        .unwrap();
    assert_eq!(by_key.len(), 1);
    assert_eq!(
        (by_key[0].key.as_deref(), by_key[0].fence),
        (Some(named), Some(9))
    );
    // The plain call reads no tokens.
    let plain_call = query_holders(&admin, &[named]).await.unwrap();
    assert_eq!(plain_call[0].fence, None);
}

#[tokio::test]
async fn a_fencing_table_the_role_may_not_read_is_left_out() {
    let db = TestDatabase::create().await.unwrap();
    let admin = db.connect().await.unwrap();
    let role = format!("{}_reader", db.name());
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; \
             CREATE TABLE public.{FENCE_TABLE} (lock_id bigint PRIMARY KEY, key text, fence bigint NOT NULL); \
             REVOKE ALL ON public.{FENCE_TABLE} FROM PUBLIC"
        ))
        .await
        .unwrap();
    let mut config = db.config();
    config.user(&role);
    let (reader, conn) = config.connect(NoTls).await.expect("connect as the reader");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let holder = session(&db, "unfenced").await;
    holder
        .execute("SELECT pg_advisory_lock(11)", &[])
        .await
        .unwrap();
    let query = HoldersQuery::all().with_fences(&reader).await.unwrap();
    assert_eq!(
        query.fences(),
        &FenceTable::Unreadable {
            table: format!("public.{FENCE_TABLE}")
        }
    );
    let locks = query.run(&reader).await.expect("runs without the table");
    assert_eq!(locks.len(), 1);
    assert_eq!((locks[0].lock_id, locks[0].fence), (11, None));
    drop(reader);
    admin
        .batch_execute(&format!(
            "DROP TABLE public.{FENCE_TABLE}; DROP ROLE {role}"
        ))
        .await
        .unwrap();
}
