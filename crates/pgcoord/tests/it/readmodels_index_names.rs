//! Generated index names: two declared indexes never share a name (column
//! lists that join alike, names past PostgreSQL's 63 bytes), so a unique
//! index is enforced on every backend; and a migration from `index(x)` to
//! `unique_index(x)` makes the unique index, or says why it cannot.

use pgcoord::readmodels::{Database, InMemoryReadModelRepository};
use pgcoord::readmodels::{ReadModel, ReadModelMeta, ReadModelRepository};
use pgcoord::Result;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "ix_clash", index(order_date), unique_index(order, date))]
struct Clash {
    #[serde(flatten)]
    meta: ReadModelMeta,
    order_date: String,
    order: String,
    date: String,
}

impl Clash {
    fn new() -> Self {
        let s = |v: &str| v.to_owned();
        Self {
            meta: ReadModelMeta::new_random(),
            order_date: s("x"),
            order: s("o"),
            date: s("d"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(
    table = "ix_customer_loyalty_program_membership_snapshots_long",
    index(region_code_primary),
    unique_index(region_code_secondary)
)]
struct Long {
    #[serde(flatten)]
    meta: ReadModelMeta,
    region_code_primary: String,
    region_code_secondary: String,
}

impl Long {
    fn new() -> Self {
        let s = |v: &str| v.to_owned();
        Self {
            meta: ReadModelMeta::new_random(),
            region_code_primary: s("a"),
            region_code_secondary: s("b"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "ix_evo", index(email))]
struct EvoV1 {
    #[serde(flatten)]
    meta: ReadModelMeta,
    email: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "ix_evo", unique_index(email))]
struct EvoV2 {
    #[serde(flatten)]
    meta: ReadModelMeta,
    email: String,
}

fn evo2(email: &str) -> EvoV2 {
    EvoV2 {
        meta: ReadModelMeta::new_random(),
        email: email.to_owned(),
    }
}

fn evo1(email: &str) -> EvoV1 {
    EvoV1 {
        meta: ReadModelMeta::new_random(),
        email: email.to_owned(),
    }
}

/// The second of two rows with one unique key is refused.
async fn twins_refused<M: ReadModel, R: ReadModelRepository<M>>(repo: &R, a: M, b: M, what: &str) {
    repo.save(&a).await.unwrap();
    let second: Result<_> = repo.save(&b).await;
    assert!(second.is_err(), "{what}: a duplicate unique key was saved");
}

#[tokio::test]
async fn in_memory_enforces_both_unique_indexes() {
    twins_refused(
        &InMemoryReadModelRepository::new(),
        Clash::new(),
        Clash::new(),
        "memory clash",
    )
    .await;
    twins_refused(
        &InMemoryReadModelRepository::new(),
        Long::new(),
        Long::new(),
        "memory long",
    )
    .await;
}

async fn on_database(db: &Database, what: &str) {
    db.create_schema::<Clash>().await.unwrap();
    twins_refused(&db.repository(), Clash::new(), Clash::new(), what).await;
    db.create_schema::<Long>().await.unwrap();
    twins_refused(&db.repository(), Long::new(), Long::new(), what).await;

    // index(email) -> unique_index(email), while a duplicate exists: the
    // migration fails and says the duplicates are why.
    db.create_schema::<EvoV1>().await.unwrap();
    let v1 = db.repository::<EvoV1>();
    v1.save(&evo1("a@x")).await.unwrap();
    let dup = evo1("a@x");
    v1.save(&dup).await.unwrap();
    let err = db.migrate_schema::<EvoV2>().await.unwrap_err().to_string();
    assert!(
        err.contains("unique") || err.contains("UNIQUE"),
        "{what}: {err}"
    );
    assert!(v1.delete(dup.meta.id).await.unwrap());

    // Without duplicates, the migration makes the unique index.
    let ran = db.migrate_schema::<EvoV2>().await.unwrap();
    assert!(
        ran.iter().any(|s| s.contains("CREATE UNIQUE INDEX")),
        "{ran:?}"
    );
    twins_refused(&db.repository(), evo2("b@x"), evo2("b@x"), what).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_enforces_unique_indexes_and_migrates_to_unique() {
    let db = pgcoord::readmodels::connect("sqlite://").await.unwrap();
    on_database(&db, "sqlite").await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_enforces_unique_indexes_and_migrates_to_unique() {
    let test_db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let db = pgcoord::readmodels::connect(&test_db.url()).await.unwrap();
    on_database(&db, "postgres").await;
    // The plain index `index(email)` made is gone; the unique one and
    // `deleted_at`'s remain.
    let client = test_db.connect().await.unwrap();
    let indexes = |client: tokio_postgres::Client| async move {
        let rows = client
            .query(
                "SELECT indexname::text FROM pg_indexes WHERE tablename = 'ix_evo' ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        (client, names)
    };
    let unique = EvoV2::indexes()[0].name_on("ix_evo");
    let expected = vec![
        "idx_ix_evo_deleted_at".to_owned(),
        unique,
        "ix_evo_pkey".to_owned(),
    ];
    let (client, names) = indexes(client).await;
    assert_eq!(names, expected);

    // An index an earlier release made under the old name is dropped by
    // the migration.
    client
        .batch_execute(r#"CREATE INDEX "idx_ix_evo_email" ON "ix_evo" ("email")"#)
        .await
        .unwrap();
    db.migrate_schema::<EvoV2>().await.unwrap();
    let (_, names) = indexes(client).await;
    assert_eq!(names, expected);
}
