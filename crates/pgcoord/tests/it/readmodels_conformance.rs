//! The read-model conformance suite, one test per case, on each backend:
//! in memory, SQLite in memory, and PostgreSQL with a fresh database per
//! case (the suite creates the table).

mod memory {
    use pgcoord::readmodels::InMemoryReadModelRepository;
    use pgcoord_testkit::readmodels::ConformanceItem;

    pgcoord_testkit::readmodel_conformance_tests!(repository: || async {
        (InMemoryReadModelRepository::<ConformanceItem>::new(), ())
    });
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use pgcoord::readmodels::sqlite::SqliteDatabase;

    pgcoord_testkit::readmodel_conformance_tests!(database: || async {
        (SqliteDatabase::open_in_memory().await.unwrap(), ())
    });
}

#[cfg(feature = "postgres")]
mod postgres {
    use pgcoord::readmodels::postgres::PostgresDatabase;
    use pgcoord_testkit::pg::TestDatabase;

    pgcoord_testkit::readmodel_conformance_tests!(database: || async {
        let db = TestDatabase::create().await.unwrap();
        let pool = PostgresDatabase::connect(&db.url()).await.unwrap();
        (pool, db)
    });
}

#[test]
fn the_macro_runs_every_case() {
    // The macro and CASES are generated from one list; this pins the count.
    assert_eq!(pgcoord_testkit::readmodels::CASES.len(), 52);
}
