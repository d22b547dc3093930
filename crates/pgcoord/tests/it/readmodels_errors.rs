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
    let source = std::error::Error::source(backend).expect("the driver's error");
    let pg = source
        .downcast_ref::<tokio_postgres::Error>()
        .expect("a tokio-postgres error");
    assert_eq!(
        pg.code(),
        Some(&tokio_postgres::error::SqlState::INVALID_TEXT_REPRESENTATION)
    );
}
