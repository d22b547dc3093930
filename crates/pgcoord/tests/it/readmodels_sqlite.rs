//! The SQLite read-model adapter: the conformance suite on an in-memory and
//! a file database, pragmas, transactions, and schema migration.

use pgcoord::readmodels::schema;
use pgcoord::readmodels::sqlite::SqliteDatabase;
use pgcoord::readmodels::Dialect;
use pgcoord::{
    error::ReadModelError,
    readmodels::{
        DefaultValue, FieldDescriptor, FieldType, Filter, Query, ReadModel, ReadModelMeta,
        ReadModelRepository,
    },
};
use pgcoord_testkit::readmodels::{run_conformance, ConformanceItem};
use serde::{Deserialize, Serialize};

async fn memory_db() -> SqliteDatabase {
    let db = SqliteDatabase::open_in_memory().await.unwrap();
    db.create_schema::<ConformanceItem>().await.unwrap();
    db
}

#[tokio::test]
async fn file_sqlite_passes_the_conformance_suite_and_uses_wal() {
    let dir = tempdir();
    let db = SqliteDatabase::open(dir.join("rm.db")).await.unwrap();
    assert_eq!(db.pragma("journal_mode").await.unwrap(), "wal");
    assert_eq!(db.pragma("foreign_keys").await.unwrap(), "1");
    assert_eq!(db.pragma("busy_timeout").await.unwrap(), "5000");
    db.create_schema::<ConformanceItem>().await.unwrap();
    run_conformance(&db.repository::<ConformanceItem>())
        .await
        .assert_passed();
    drop(db);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn in_memory_database_is_one_shared_connection() {
    let db = memory_db().await;
    assert_eq!(db.pragma("journal_mode").await.unwrap(), "memory");
    let clone = db.clone();
    clone
        .repository::<ConformanceItem>()
        .save(&ConformanceItem::new("shared"))
        .await
        .unwrap();
    assert_eq!(
        db.repository::<ConformanceItem>()
            .count(&Query::new())
            .await
            .unwrap(),
        1
    );
}

#[tokio::test]
async fn transaction_repository_commits_or_rolls_back() {
    let db = memory_db().await;
    let repo = db.repository::<ConformanceItem>();

    let tx = db.transaction().await.unwrap();
    tx.repository::<ConformanceItem>()
        .save(&ConformanceItem::new("rolled back"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(repo.count(&Query::new()).await.unwrap(), 0);

    let tx = db.transaction().await.unwrap();
    let in_tx = tx.repository::<ConformanceItem>();
    in_tx.save(&ConformanceItem::new("kept")).await.unwrap();
    assert_eq!(in_tx.count(&Query::new()).await.unwrap(), 1);
    tx.commit().await.unwrap();
    assert_eq!(repo.count(&Query::new()).await.unwrap(), 1);
    // The repository bound to the finished transaction refuses to run.
    assert!(in_tx.count(&Query::new()).await.is_err());

    // Dropping an open transaction rolls it back.
    {
        let tx = db.transaction().await.unwrap();
        tx.repository::<ConformanceItem>()
            .save(&ConformanceItem::new("dropped"))
            .await
            .unwrap();
    }
    assert_eq!(repo.count(&Query::new()).await.unwrap(), 1);
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Widget {
    #[serde(flatten)]
    meta: ReadModelMeta,
    name: String,
}

impl ReadModel for Widget {
    fn fields() -> Vec<FieldDescriptor> {
        vec![FieldDescriptor::new("name", FieldType::Text)]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

/// The same table, one release later: two new columns.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct WidgetV2 {
    #[serde(flatten)]
    meta: ReadModelMeta,
    name: String,
    colour: Option<String>,
    weight: i64,
}

impl ReadModel for WidgetV2 {
    const TABLE_NAME: Option<&'static str> = Some("widgets");
    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("name", FieldType::Text),
            FieldDescriptor::new("colour", FieldType::Text).nullable(),
            FieldDescriptor::new("weight", FieldType::Integer)
                .with_default(DefaultValue::Integer(10)),
        ]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

/// A release that adds a NOT NULL column without a default: not migratable.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct WidgetBroken {
    #[serde(flatten)]
    meta: ReadModelMeta,
    name: String,
    serial: i64,
}

impl ReadModel for WidgetBroken {
    const TABLE_NAME: Option<&'static str> = Some("widgets");
    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("name", FieldType::Text),
            FieldDescriptor::new("serial", FieldType::Integer),
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
async fn additive_migration_keeps_rows_and_refuses_unfillable_columns() {
    assert_eq!(Widget::table_name(), "widgets");
    let db = SqliteDatabase::open_in_memory().await.unwrap();
    let created = db.migrate_schema::<Widget>().await.unwrap();
    assert_eq!(
        created,
        vec![schema::full_schema::<Widget>(Dialect::Sqlite)]
    );
    let old = Widget {
        meta: ReadModelMeta::new_random(),
        name: "w".into(),
    };
    db.repository::<Widget>().save(&old).await.unwrap();

    match db.migrate_schema::<WidgetBroken>().await {
        Err(pgcoord::Error::ReadModel(ReadModelError::SchemaMismatch {
            table, column, ..
        })) => {
            assert_eq!((table.as_str(), column.as_str()), ("widgets", "serial"));
        }
        other => panic!("expected a schema mismatch, got {other:?}"),
    }

    let ran = db.migrate_schema::<WidgetV2>().await.unwrap();
    assert!(ran[0].contains(r#"ADD COLUMN "colour" TEXT"#), "{ran:?}");
    assert!(
        ran[1].contains(r#"ADD COLUMN "weight" INTEGER NOT NULL DEFAULT 10"#),
        "{ran:?}"
    );
    let cols = db.columns("widgets").await.unwrap();
    assert!(cols.contains(&"colour".to_string()) && cols.contains(&"weight".to_string()));
    let migrated = db
        .repository::<WidgetV2>()
        .get(old.meta.id)
        .await
        .unwrap()
        .expect("old row survives the migration");
    assert_eq!(
        (migrated.name.as_str(), migrated.colour, migrated.weight),
        ("w", None, 10)
    );
    // Running it again adds nothing.
    let again = db.migrate_schema::<WidgetV2>().await.unwrap();
    assert!(
        again.iter().all(|s| !s.contains("ALTER TABLE")),
        "{again:?}"
    );
}

/// SQLite would take `"colour"`, naming no column, as the text `'colour'`
/// (double-quoted string literals): a model read before `migrate_schema`
/// added its column got the column's name as the value. It is an error, as
/// on PostgreSQL, that names the column and the way out.
#[tokio::test]
async fn a_missing_column_is_an_error_not_its_own_name() {
    let db = SqliteDatabase::open_in_memory().await.unwrap();
    db.migrate_schema::<Widget>().await.unwrap();
    let old = Widget {
        meta: ReadModelMeta::new_random(),
        name: "w".into(),
    };
    db.repository::<Widget>().save(&old).await.unwrap();
    let v2 = db.repository::<WidgetV2>();
    let missing = |what: &str, r: pgcoord::Result<String>| match r {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains(r#"column "colour" does not exist"#)
                    && text.contains("migrate_schema"),
                "{what}: {text}"
            );
        }
        Ok(got) => panic!("{what} before migrate_schema succeeded: {got}"),
    };
    missing(
        "find",
        v2.find(&Query::new()).await.map(|r| format!("{r:?}")),
    );
    let by_name = Query::new().filter(Filter::eq("colour", "colour"));
    missing("count", v2.count(&by_name).await.map(|n| n.to_string()));
    // A statement of the caller's own is held to it too.
    let raw = db
        .call(|c| {
            Ok(c.query_row(r#"SELECT "nope" FROM widgets"#, [], |r| {
                r.get::<_, String>(0)
            })?)
        })
        .await;
    assert!(raw.is_err(), "{raw:?}");
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("eventsource-rm-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "mixed_case")]
struct MixedCase {
    #[serde(flatten)]
    meta: ReadModelMeta,
    note: Option<String>,
    extra: Option<i64>,
}

#[tokio::test]
async fn additive_migration_matches_column_names_as_sqlite_does() {
    let db = SqliteDatabase::open_in_memory().await.unwrap();
    // A table made elsewhere, its column spelled `Note`: the same column as
    // `note` to SQLite, so the migration must not add it again.
    db.execute_batch(
        r#"CREATE TABLE "mixed_case" ("ID" TEXT PRIMARY KEY, "Created_At" TEXT NOT NULL,
           "UPDATED_AT" TEXT NOT NULL, "Version" INTEGER NOT NULL DEFAULT 1,
           "Deleted_At" TEXT, "Note" TEXT)"#,
    )
    .await
    .unwrap();
    let run = db.migrate_schema::<MixedCase>().await.unwrap();
    let added: Vec<&String> = run.iter().filter(|s| s.contains("ADD COLUMN")).collect();
    assert_eq!(added.len(), 1, "{run:?}");
    assert!(added[0].contains(r#""extra""#), "{run:?}");
    let repo = db.repository::<MixedCase>();
    let m = MixedCase {
        meta: ReadModelMeta::new_random(),
        note: Some("kept".into()),
        extra: Some(3),
    };
    repo.save(&m).await.unwrap();
    let got = repo.get(m.meta.id).await.unwrap().unwrap();
    assert_eq!((got.note, got.extra), (Some("kept".into()), Some(3)));
    // A second run has nothing left to add.
    let again = db.migrate_schema::<MixedCase>().await.unwrap();
    assert!(again.iter().all(|s| !s.contains("ADD COLUMN")), "{again:?}");
}
