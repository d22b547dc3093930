//! A rebuilt version takes over the grants of the table it replaces: a
//! reader role with only SELECT (one on the table, one on a column) still
//! reads after the switch, and a live runner under a role with only DML
//! rights goes on writing to the new table.

use pgcoord::readmodels::ReadModelProjection;
use pgcoord::{
    readmodels::postgres::{PostgresDatabase, PostgresEventTable},
    PostgresLockManager,
};
use tokio_postgres::error::SqlState;
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup, Setup};
use super::rebuild::{marked, reach_live, spawn_live, texts};
use super::rebuild_support::*;
use super::support::*;

/// The grants on `table` to roles other than its owner: (grantee,
/// privilege, column or "" for the table).
async fn grants(s: &Setup, table: &str) -> Vec<(String, String, String)> {
    let client = s.db.get().await.unwrap();
    let rows = client
        .query(
            "SELECT grantee::text, privilege_type::text, '' FROM information_schema.role_table_grants
               WHERE table_name::text = $1 AND grantee::text <> current_user
             UNION ALL
             SELECT grantee::text, privilege_type::text, column_name::text
               FROM information_schema.column_privileges
               WHERE table_name::text = $1 AND grantee::text <> current_user
                 AND grantee::text NOT IN (SELECT grantee::text FROM information_schema.role_table_grants
                                           WHERE table_name::text = $1)
             ORDER BY 1, 3, 2",
            &[&table],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// A login role `{prefix}_{random}` (roles are the cluster's) with
/// password `pw`, given `grants` (with `{role}` for its name).
async fn role(
    s: &Setup,
    prefix: &str,
    grants: &str,
) -> (String, PostgresDatabase, tokio_postgres::Config) {
    let role = format!(
        "{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let admin = s.test_db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'pw'; GRANT USAGE ON SCHEMA public TO {role};\n{}",
            grants.replace("{role}", &role)
        ))
        .await
        .unwrap();
    let mut config = s.test_db.config();
    config.user(&role).password("pw");
    let db = PostgresDatabase::builder(config.clone().into())
        .max_size(2)
        .build()
        .unwrap();
    (role, db, config)
}

async fn read(db: &PostgresDatabase, sql: &str) -> Result<i64, tokio_postgres::Error> {
    let client = db.get().await.unwrap();
    client.query_one(sql, &[]).await.map(|r| r.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rebuilt_table_keeps_the_grants_of_the_one_it_replaces() {
    let s = setup().await;
    ReadModelProjection::new(Marked::new("owner"), s.db.repository::<Seen>())
        .prepare()
        .await
        .unwrap();
    let admin = s.test_db.connect().await.unwrap();
    admin
        .batch_execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        .await
        .unwrap();
    let (reader, reader_db, _) = role(&s, "reader", "GRANT SELECT ON seen TO {role};").await;
    let (column, column_db, _) = role(
        &s,
        "colreader",
        "GRANT SELECT (position) ON seen TO {role};",
    )
    .await;
    let (writer, writer_db, writer_config) = role(
        &s,
        "writer",
        "GRANT SELECT, INSERT, UPDATE ON events, seen, eventsource_projection_checkpoints,
             eventsource_projection_progress TO {role};
         GRANT USAGE, SELECT ON SEQUENCE events_position_seq TO {role};",
    )
    .await;
    let before = grants(&s, "seen").await;
    assert!(before.iter().any(|g| g.0 == reader && g.1 == "SELECT"));
    assert!(before.iter().any(|g| g.0 == writer && g.1 == "INSERT"));

    // The live runner runs as the writer, the rebuild as the owner.
    append_committed(&s.db, &s.feed, 1, 10).await;
    let feed = PostgresEventTable::<Ev>::new(writer_db.clone(), "events")
        .unwrap()
        .listen();
    let live = live_runner(&writer_db, &feed);
    let writer_locks = PostgresLockManager::builder(writer_config.into())
        .holder_id("writer-runner")
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&writer_locks, &live, &stop);
    reach_live(&live, &mut live_task, 10).await;
    let rebuild = rebuild_with(&s.db, &s.feed, Marked::new("rebuilt"));
    let summary = rebuild
        .run(&s.locks, &CancellationToken::new())
        .await
        .unwrap();
    assert!(summary.switched, "{summary:?}");

    assert_eq!(grants(&s, "seen").await, before, "the new version's grants");
    assert_eq!(
        grants(&s, "seen_v1").await,
        before,
        "the retired one keeps its own"
    );
    assert_eq!(
        read(&reader_db, "SELECT count(*) FROM seen").await.unwrap(),
        10
    );
    assert_eq!(
        read(&column_db, "SELECT max(position) FROM seen")
            .await
            .unwrap(),
        10
    );
    let denied = read(&column_db, "SELECT count(text) FROM seen")
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE));
    let denied = read(
        &reader_db,
        "INSERT INTO seen (position) VALUES (0) RETURNING 1",
    )
    .await
    .unwrap_err();
    assert_eq!(
        denied.code(),
        Some(&SqlState::INSUFFICIENT_PRIVILEGE),
        "no more than before"
    );

    // The live runner, under the writer role, writes to the new table.
    append_committed(&s.db, &s.feed, 11, 15).await;
    reach_live(&live, &mut live_task, 15).await;
    stop.cancel();
    live_task.await.unwrap().unwrap();
    let mut expected = marked("rebuilt", 1, 10);
    expected.extend(marked("live", 11, 15));
    assert_eq!(texts(&s).await, expected);
    assert_each_applied_once(&s.db.repository::<Seen>(), 15).await;
    for role in [reader, column, writer] {
        admin
            .batch_execute(&format!("DROP OWNED BY {role}"))
            .await
            .unwrap();
    }
}
