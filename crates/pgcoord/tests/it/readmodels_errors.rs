//! Read-model errors keep their causes: serde's error under a
//! `Serialization`, the driver's (with its typed SQLSTATE) under a backend
//! error.

use pgcoord::readmodels::storage::Record;
use pgcoord::{
    error::ReadModelError,
    readmodels::{FieldDescriptor, FieldType, ReadModel, ReadModelMeta, Value},
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manual {
    #[serde(flatten)]
    meta: ReadModelMeta,
    count: u8,
}

impl ReadModel for Manual {
    const TABLE_NAME: Option<&'static str> = Some("manuals");
    fn fields() -> Vec<FieldDescriptor> {
        vec![FieldDescriptor::new("count", FieldType::Integer)]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

#[test]
fn a_serde_failure_keeps_serdes_error() {
    let record = Record {
        meta: ReadModelMeta::new_random(),
        values: vec![Value::Integer(1_000)], // does not fit a u8
    };
    let err = record.into_model::<Manual>(&Manual::fields()).unwrap_err();
    assert!(err.is_serialization(), "{err}");
    let source = std::error::Error::source(&err).expect("a source");
    assert!(
        source.downcast_ref::<serde_json::Error>().is_some(),
        "{source:?}"
    );
    assert!(matches!(
        err,
        ReadModelError::Serialization {
            model: "Manual",
            ..
        }
    ));
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_read_the_server_refuses_keeps_the_drivers_error() {
    use pgcoord::readmodels::postgres::PostgresDatabase;
    use pgcoord::readmodels::ReadModelRepository;
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let pool = PostgresDatabase::connect(&db.url()).await.unwrap();
    pool.create_schema::<Manual>().await.unwrap();
    let repo = pool.repository::<Manual>();
    let m = Manual {
        meta: ReadModelMeta::new_random(),
        count: 3,
    };
    repo.save(&m).await.unwrap();
    // The column changes type under the model, to values that do not cast
    // back: the server refuses the read, and the driver's error is kept.
    pool.get()
        .await
        .unwrap()
        .batch_execute(r#"ALTER TABLE manuals ALTER COLUMN "count" TYPE text; UPDATE manuals SET "count" = 'many'"#)
        .await
        .unwrap();
    let err = repo.get(m.meta.id).await.unwrap_err();
    let backend = err.as_backend().expect("a backend error");
    assert_eq!(backend.code().map(|c| c.code()), Some("22P02"), "{err}");
    let source = backend.driver_error().expect("the driver's error");
    let pg = source
        .downcast_ref::<tokio_postgres::Error>()
        .expect("a tokio-postgres error");
    assert_eq!(
        pg.code(),
        Some(&tokio_postgres::error::SqlState::INVALID_TEXT_REPRESENTATION)
    );
}

#[cfg(all(feature = "postgres", feature = "sqlite"))]
#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "chain_customers", unique_index(email))]
struct Customer {
    #[serde(flatten)]
    meta: ReadModelMeta,
    email: String,
}

/// A unique violation says the server's (or SQLite's) message once, its
/// DETAIL after it; the driver's error stays reachable.
#[cfg(all(feature = "postgres", feature = "sqlite"))]
#[tokio::test]
async fn a_unique_violation_says_each_cause_once() {
    use pgcoord::readmodels::ReadModelRepository;
    use pgcoord::readmodels::{postgres::PostgresDatabase, sqlite::SqliteDatabase};
    let twice = |n| Customer {
        meta: ReadModelMeta::new_random(),
        email: format!("dup-{n}@example.com"),
    };
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let pg = PostgresDatabase::connect(&db.url()).await.unwrap();
    pg.create_schema::<Customer>().await.unwrap();
    let repo = pg.repository::<Customer>();
    repo.save(&twice(1)).await.unwrap();
    let err = repo.save(&twice(1)).await.unwrap_err();
    let backend = err.as_backend().expect("a backend error");
    assert_eq!(backend.code().map(|c| c.code()), Some("23505"), "{err}");
    crate::fault_support::assert_each_cause_said_once(&err);
    let cause = std::error::Error::source(&err).expect("the server's DETAIL");
    assert!(
        cause.to_string().starts_with("DETAIL: Key (email)"),
        "{cause}"
    );
    assert!(backend
        .driver_error()
        .is_some_and(|d| d.is::<tokio_postgres::Error>()));

    let lite = SqliteDatabase::open_in_memory().await.unwrap();
    lite.create_schema::<Customer>().await.unwrap();
    let repo = lite.repository::<Customer>();
    repo.save(&twice(2)).await.unwrap();
    let err = repo.save(&twice(2)).await.unwrap_err();
    assert!(
        err.to_string().contains("UNIQUE constraint failed"),
        "{err}"
    );
    crate::fault_support::assert_each_cause_said_once(&err);
    assert!(err
        .as_backend()
        .and_then(|b| b.driver_error())
        .is_some_and(|d| d.is::<rusqlite::Error>()));
}
