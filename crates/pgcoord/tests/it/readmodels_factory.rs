//! The connection factory: URLs to databases, SQLite pragmas, the shared
//! in-memory connection, and the errors for bad URLs or unreachable servers.
// Some imports serve only the cases of one backend feature.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(unused_imports)
)]

use pgcoord::readmodels::{connect, Database, Dialect};
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord::{error::BackendErrorKind, Error};

#[tokio::test]
async fn unknown_schemes_are_invalid_arguments() {
    for url in ["mysql://localhost/db", "nonsense", "postgres:no-slashes"] {
        match connect(url).await {
            // Says what is expected, and never echoes the URL (it may
            // carry a password).
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.starts_with("unsupported database URL"), "{msg}");
                assert!(!msg.contains(url), "{msg}");
            }
            other => panic!("{url}: expected InvalidArgument, got {other:?}"),
        }
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn unreachable_postgres_is_a_connect_error() {
    // Port 1 on loopback: nothing listens there.
    let err = connect("postgres://postgres@127.0.0.1:1/db?connect_timeout=5")
        .await
        .unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::Connect),
        "{err}"
    );
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use pgcoord_testkit::readmodels::ConformanceItem;

    fn sqlite(db: &Database) -> &pgcoord::readmodels::sqlite::SqliteDatabase {
        match db {
            Database::Sqlite(db) => db,
            other => panic!("expected SQLite, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn file_urls_get_wal_foreign_keys_and_busy_timeout() {
        let dir =
            std::env::temp_dir().join(format!("eventsource-factory-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.db");
        // sqlite:////abs/path: four slashes for an absolute path.
        let db = connect(&format!("sqlite:///{}", path.display()))
            .await
            .unwrap();
        assert_eq!(db.dialect(), Dialect::Sqlite);
        let lite = sqlite(&db);
        assert_eq!(lite.path(), Some(path.as_path()));
        assert_eq!(lite.pragma("journal_mode").await.unwrap(), "wal");
        assert_eq!(lite.pragma("foreign_keys").await.unwrap(), "1");
        assert_eq!(lite.pragma("busy_timeout").await.unwrap(), "5000");
        db.create_schema::<ConformanceItem>().await.unwrap();
        db.repository::<ConformanceItem>()
            .save(&ConformanceItem::new("persisted"))
            .await
            .unwrap();
        drop(db);
        // A second connection to the same file sees the committed row.
        let again = connect(&format!("sqlite:{}", path.display()))
            .await
            .unwrap();
        assert_eq!(
            again
                .repository::<ConformanceItem>()
                .count(&Query::new())
                .await
                .unwrap(),
            1
        );
        drop(again);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn three_slashes_name_a_file_relative_to_the_working_directory() {
        let name = format!("eventsource-relative-{}.db", uuid::Uuid::new_v4());
        let db = connect(&format!("sqlite+aiosqlite:///{name}"))
            .await
            .unwrap();
        assert_eq!(sqlite(&db).path(), Some(std::path::Path::new(&name)));
        db.create_schema::<ConformanceItem>().await.unwrap();
        drop(db);
        let cwd = std::env::current_dir().unwrap();
        assert!(
            cwd.join(&name).is_file(),
            "not created under {}",
            cwd.display()
        );
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(cwd.join(format!("{name}{suffix}")));
        }
    }

    #[tokio::test]
    async fn memory_urls_share_one_connection_without_wal() {
        for url in [
            "sqlite://",
            "sqlite:///:memory:",
            "sqlite+aiosqlite:///:memory:",
            "sqlite::memory:",
            "sqlite://:memory:",
        ] {
            let db = connect(url).await.unwrap();
            let lite = sqlite(&db);
            assert!(lite.is_memory());
            assert_eq!(lite.pragma("journal_mode").await.unwrap(), "memory");
            assert_eq!(lite.pragma("foreign_keys").await.unwrap(), "1");
            assert_eq!(lite.pragma("busy_timeout").await.unwrap(), "5000");
            db.create_schema::<ConformanceItem>().await.unwrap();
            // Two repositories (and a clone of the database) see one database.
            let writer = db.repository::<ConformanceItem>();
            let reader = db.clone().repository::<ConformanceItem>();
            writer.save(&ConformanceItem::new("shared")).await.unwrap();
            assert_eq!(reader.count(&Query::new()).await.unwrap(), 1, "{url}");
        }
    }

    #[tokio::test]
    async fn unopenable_file_is_a_connect_error() {
        let err = connect("sqlite:////nonexistent-dir-for-eventsource-tests/x.db")
            .await
            .unwrap_err();
        assert_eq!(
            err.as_backend().map(|b| b.kind()),
            Some(BackendErrorKind::Connect),
            "{err}"
        );
    }
}
