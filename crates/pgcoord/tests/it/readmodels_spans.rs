//! The read-model repositories' `tracing` spans: a capturing subscriber
//! checks the span names and the OpenTelemetry-style fields of repository
//! calls on the in-memory, SQLite and PostgreSQL adapters, errors included.

use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{Direction, Query, ReadModel, ReadModelRepository};
use pgcoord_testkit::readmodels::ConformanceItem;

use crate::span_capture;
use span_capture::{Capture, Captured};

fn item() -> ConformanceItem {
    ConformanceItem::new("spans")
}

/// The fields every repository span has, with `system` and `table`.
fn assert_common(span: &Captured, system: &str, op: &str, table: &str) {
    let f = &span.fields;
    assert_eq!(span.name, format!("eventsource.readmodel.{op}"));
    assert_eq!(f["db.system"], system, "{span:?}");
    assert_eq!(f["db.system.name"], system);
    assert_eq!(f["db.operation.name"], op);
    assert_eq!(f["db.collection.name"], table);
    assert_eq!(f["otel.name"], format!("{op} {table}"));
    assert_eq!(f["otel.kind"], "client");
}

#[tokio::test]
async fn memory_repository_calls_run_in_named_spans_and_errors_are_typed() {
    let capture = Capture::default();
    let _guard = capture.install();
    let repo = InMemoryReadModelRepository::<ConformanceItem>::new();
    let saved = repo.save(&item()).await.unwrap();
    assert!(repo.get(saved.meta.id).await.unwrap().is_some());
    let err = repo
        .find(&Query::new().order_by("no_such_field", Direction::Asc))
        .await
        .unwrap_err();
    assert!(err.as_read_model().unwrap().is_invalid_query(), "{err}");

    let table = ConformanceItem::table_name();
    let save = &capture.spans("eventsource.readmodel.save")[0];
    assert_common(save, "memory", "save", &table);
    assert!(!save.fields.contains_key("error.type"), "{save:?}");
    assert_common(
        &capture.spans("eventsource.readmodel.get")[0],
        "memory",
        "get",
        &table,
    );
    let find = &capture.spans("eventsource.readmodel.find")[0];
    assert_common(find, "memory", "find", &table);
    assert_eq!(find.fields["error.type"], "invalid_query");
    assert_eq!(find.fields["otel.status_code"], "ERROR");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_repository_spans_say_sqlite() {
    use pgcoord::readmodels::sqlite::SqliteDatabase;
    let db = SqliteDatabase::open_in_memory().await.unwrap();
    db.create_schema::<ConformanceItem>().await.unwrap();
    let repo = db.repository::<ConformanceItem>();
    let capture = Capture::default();
    let _guard = capture.install();
    let mut stale = repo.save(&item()).await.unwrap();
    repo.save(&stale).await.unwrap();
    stale.meta.version = 1;
    let err = repo.save_with_version_check(&stale).await.unwrap_err();
    assert!(err.as_read_model().unwrap().is_version_conflict(), "{err}");
    let table = ConformanceItem::table_name();
    assert_eq!(capture.spans("eventsource.readmodel.save").len(), 2);
    let check = &capture.spans("eventsource.readmodel.save_with_version_check")[0];
    assert_common(check, "sqlite", "save_with_version_check", &table);
    assert_eq!(check.fields["error.type"], "version_conflict");
    assert!(!check.fields.contains_key("server.address"));
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_repository_spans_name_the_server_and_the_sqlstate() {
    use pgcoord::readmodels::postgres::PostgresDatabase;
    let pg = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let db = PostgresDatabase::builder(pg.config().into())
        .max_size(2)
        .build()
        .unwrap();
    db.create_schema::<ConformanceItem>().await.unwrap();
    let repo = db.repository::<ConformanceItem>();
    let capture = Capture::default();
    let _guard = capture.install();
    let n = repo.count(&Query::new()).await.unwrap();
    assert_eq!(n, 0);
    // A failing statement: the table is gone.
    let client = pg.connect().await.unwrap();
    let table = ConformanceItem::table_name();
    client
        .batch_execute(&format!("DROP TABLE \"{table}\""))
        .await
        .unwrap();
    let err = repo.get(uuid::Uuid::new_v4()).await.unwrap_err();
    assert_eq!(
        err.as_backend().unwrap().code().map(|c| c.code()),
        Some("42P01"),
        "{err}"
    );

    let config = pg.config();
    let count = &capture.spans("eventsource.readmodel.count")[0];
    assert_common(count, "postgresql", "count", &table);
    assert_eq!(
        count.fields["server.port"],
        config.get_ports()[0].to_string()
    );
    assert!(!count.fields["server.address"].is_empty());
    assert_eq!(count.fields["db.namespace"], pg.name());
    let get = &capture.spans("eventsource.readmodel.get")[0];
    assert_common(get, "postgresql", "get", &table);
    assert_eq!(get.fields["error.type"], "42P01");
    assert_eq!(get.fields["db.response.status_code"], "42P01");
}
