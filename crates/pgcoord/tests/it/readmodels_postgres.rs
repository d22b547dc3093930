//! The PostgreSQL read-model adapter on a fresh database per test: the
//! conformance suite on the pool, on a plain client and inside a caller's
//! transaction; schema creation and migration.

use pgcoord::readmodels::postgres::{PostgresDatabase, PostgresReadModelRepository};
use pgcoord::{
    error::ReadModelError,
    readmodels::{
        DefaultValue, FieldDescriptor, FieldType, Filter, Query, ReadModel, ReadModelMeta,
        ReadModelRepository,
    },
};
use pgcoord_testkit::pg::TestDatabase;
use pgcoord_testkit::readmodels::{
    run_cases, run_conformance, ConformanceItem, CASES, STATEMENT_ERROR_CASES,
};
use serde::{Deserialize, Serialize};

async fn pool(db: &TestDatabase) -> PostgresDatabase {
    let pool = PostgresDatabase::connect(&db.url()).await.expect("pool");
    pool.create_schema::<ConformanceItem>()
        .await
        .expect("schema");
    pool
}

#[tokio::test]
async fn mutex_client_repository_passes_the_conformance_suite() {
    let db = TestDatabase::create().await.unwrap();
    pool(&db).await;
    let client = db.connect().await.unwrap();
    let repo =
        PostgresReadModelRepository::<ConformanceItem, _>::new(tokio::sync::Mutex::new(client));
    run_conformance(&repo).await.assert_passed();
}

#[tokio::test]
async fn repository_inside_a_caller_transaction_never_commits() {
    let db = TestDatabase::create().await.unwrap();
    let pool = pool(&db).await;
    let mut client = db.connect().await.unwrap();
    let tx = client.transaction().await.unwrap();
    {
        let repo = PostgresReadModelRepository::<ConformanceItem, _>::new(&tx);
        // A refused statement would abort the caller's transaction.
        let cases: Vec<&'static str> = CASES
            .iter()
            .copied()
            .filter(|c| !STATEMENT_ERROR_CASES.contains(c))
            .collect();
        assert!(cases.len() < CASES.len());
        run_cases(&repo, &cases).await.assert_passed();
        repo.truncate().await.unwrap();
        repo.save(&ConformanceItem::new("uncommitted"))
            .await
            .unwrap();
        assert_eq!(repo.count(&Query::new()).await.unwrap(), 1);
    }
    // Another session does not see the transaction's rows...
    let outside = pool.repository::<ConformanceItem>();
    assert_eq!(outside.count(&Query::new()).await.unwrap(), 0);
    // ...and after a rollback nothing of it remains.
    tx.rollback().await.unwrap();
    assert_eq!(
        outside
            .count(&Query::new().include_deleted(true))
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn text_comparisons_are_byte_wise_even_with_a_linguistic_collation() {
    let db = TestDatabase::create().await.unwrap();
    let pool = pool(&db).await;
    let client = pool.get().await.unwrap();
    // Give the column a collation that sorts case-insensitively, if the
    // server has one; the repository must still order byte-wise.
    let has_icu = client
        .query_opt(
            "SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu'",
            &[],
        )
        .await
        .unwrap()
        .is_some();
    if has_icu {
        client
            .batch_execute(
                r#"ALTER TABLE conformance_items ALTER COLUMN name TYPE TEXT COLLATE "und-x-icu""#,
            )
            .await
            .unwrap();
    }
    drop(client);
    let repo = pool.repository::<ConformanceItem>();
    for name in ["b", "B", "a", "A"] {
        repo.save(&ConformanceItem::new(name)).await.unwrap();
    }
    let got: Vec<String> = repo
        .find(&Query::new().order_by("name", pgcoord::readmodels::Direction::Asc))
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(got, ["A", "B", "a", "b"]);
    assert_eq!(
        repo.count(&Query::new().filter(Filter::lt("name", "a")))
            .await
            .unwrap(),
        2
    );
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Invoice {
    #[serde(flatten)]
    meta: ReadModelMeta,
    number: String,
    amount: String,
    paid: bool,
    data: Vec<u8>,
}

impl ReadModel for Invoice {
    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("number", FieldType::Text).with_postgres_type("VARCHAR(20)"),
            FieldDescriptor::new("amount", FieldType::Decimal).with_postgres_type("NUMERIC(12,2)"),
            FieldDescriptor::new("paid", FieldType::Bool).with_default(DefaultValue::Bool(false)),
            FieldDescriptor::new("data", FieldType::Bytes),
        ]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct InvoiceV2 {
    #[serde(flatten)]
    meta: ReadModelMeta,
    number: String,
    amount: String,
    paid: bool,
    data: Vec<u8>,
    note: Option<String>,
    currency: String,
}

impl ReadModel for InvoiceV2 {
    const TABLE_NAME: Option<&'static str> = Some("invoices");
    fn fields() -> Vec<FieldDescriptor> {
        let mut fields = Invoice::fields();
        fields.push(FieldDescriptor::new("note", FieldType::Text).nullable());
        fields.push(
            FieldDescriptor::new("currency", FieldType::Text)
                .with_default(DefaultValue::Text("EUR".into())),
        );
        fields
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct InvoiceBroken {
    #[serde(flatten)]
    meta: ReadModelMeta,
    number: String,
    customer: String,
}

impl ReadModel for InvoiceBroken {
    const TABLE_NAME: Option<&'static str> = Some("invoices");
    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("number", FieldType::Text),
            FieldDescriptor::new("customer", FieldType::Text),
        ]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

#[tokio::test]
async fn overrides_decimals_bytes_and_additive_migration() {
    let db = TestDatabase::create().await.unwrap();
    let pool = PostgresDatabase::connect(&db.url()).await.unwrap();
    pool.migrate_schema::<Invoice>().await.unwrap();
    let repo = pool.repository::<Invoice>();
    let inv = Invoice {
        meta: ReadModelMeta::new_random(),
        number: "INV-1".into(),
        amount: "1234.50".into(),
        paid: true,
        data: vec![0, 1, 2, 255],
    };
    repo.save(&inv).await.unwrap();
    let got = repo.get(inv.meta.id).await.unwrap().unwrap();
    assert_eq!(got.amount, "1234.50");
    assert_eq!(got.data, inv.data);
    assert_eq!(
        repo.count(&Query::new().filter(Filter::gt("amount", "1000")))
            .await
            .unwrap(),
        1
    );

    match pool.migrate_schema::<InvoiceBroken>().await {
        Err(pgcoord::Error::ReadModel(ReadModelError::SchemaMismatch { column, .. })) => {
            assert_eq!(column, "customer")
        }
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
    let ran = pool.migrate_schema::<InvoiceV2>().await.unwrap();
    assert_eq!(
        ran.iter().filter(|s| s.contains("ADD COLUMN")).count(),
        2,
        "{ran:?}"
    );
    let v2 = pool
        .repository::<InvoiceV2>()
        .get(inv.meta.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((v2.note, v2.currency.as_str()), (None, "EUR"));
    let again = pool.migrate_schema::<InvoiceV2>().await.unwrap();
    assert!(again.iter().all(|s| !s.contains("ADD COLUMN")), "{again:?}");
}
