//! A SQLite file database is closed when the drop of its last clone
//! returns: the WAL is checkpointed into the `.db` file and removed, so a
//! program that exits right after the drop leaves a complete file (the
//! thread that closes it would be killed by the exit otherwise).

use std::path::{Path, PathBuf};

use pgcoord::readmodels::{connect, ReadModel, ReadModelMeta, ReadModelRepository};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "closed_rows")]
struct Row {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    n: i64,
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventsource-close-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Opens a file database, writes a row, drops everything, and checks at
/// once (no wait) that the `.db` file alone holds the table and the row.
async fn the_last_drop_leaves_a_complete_database_file() {
    let dir = tempdir();
    let path = dir.join("closed.db");
    let wal = with_suffix(&path, "-wal");
    let db = connect(&format!("sqlite:///{}", path.display()))
        .await
        .unwrap();
    db.create_schema::<Row>().await.unwrap();
    let repo = db.repository::<Row>();
    repo.save(&Row {
        meta: ReadModelMeta::new_random(),
        n: 7,
    })
    .await
    .unwrap();
    assert!(
        std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0),
        "the write went to the WAL first"
    );

    drop(repo);
    drop(db);
    assert!(!wal.exists(), "the WAL was merged and removed by the close");
    assert!(!with_suffix(&path, "-shm").exists());

    // The `.db` file alone, copied where no `-wal` could be found.
    let copy = dir.join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    let conn =
        rusqlite::Connection::open_with_flags(&copy, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let n: i64 = conn
        .query_row(r#"SELECT "n" FROM "closed_rows""#, [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 7);
    drop(conn);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime_the_last_drop_closes_the_file() {
    the_last_drop_leaves_a_complete_database_file().await;
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_current_thread_runtime_the_last_drop_closes_the_file() {
    the_last_drop_leaves_a_complete_database_file().await;
}
