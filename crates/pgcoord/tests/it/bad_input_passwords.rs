//! Passwords in the bad-input matrix: a wrong or missing password is a
//! typed error, and no password shows in errors, `Debug` output or log
//! lines (the rest of the matrix is in `bad_input_postgres.rs`).

use crate::fault_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fault_support::*;
use pgcoord::{error::BackendErrorKind, DistributedLock};
use pgcoord::{
    postgres::{LibpqEnv, PasswordSource},
    ConnectOptions, PostgresLockManager,
};

use crate::bad_input_postgres::assert_nothing_held;

const SECS: Duration = Duration::from_secs(30);

/// A `tracing` writer that keeps everything in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_is_a_typed_error_and_passwords_never_show() {
    const RIGHT: &str = "right-Pa55word-1f3a";
    const WRONG: &str = "wrong-Pa55word-9c7e";
    let cluster = private_cluster(&[("password_encryption", "scram-sha-256")]).await;
    let admin = pgcoord_testkit::pg::TestDatabase::create_on(cluster.clone())
        .await
        .unwrap();
    admin
        .connect()
        .await
        .unwrap()
        .batch_execute(&format!("CREATE ROLE app LOGIN PASSWORD '{RIGHT}'"))
        .await
        .unwrap();
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        c.set_hba(
            "local all all trust\n\
             host all app 127.0.0.1/32 scram-sha-256\n\
             host all all 127.0.0.1/32 trust\n",
        )
    })
    .await
    .unwrap()
    .unwrap();

    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);

    let url = |pw: &str| {
        format!(
            "postgres://app:{pw}@127.0.0.1:{}/{}",
            cluster.port(),
            admin.name()
        )
    };
    let mut seen = String::new();

    // Wrong password: a typed connect error with the server's SQLSTATE.
    let m = url(WRONG)
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let builder = PostgresLockManager::builder(url(WRONG).parse().unwrap()).holder_id("pw");
    seen.push_str(&format!("{builder:?} {m:?}"));
    let err = m.acquire("k", Some(SECS)).await.unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(backend.kind(), BackendErrorKind::Connect, "{err:?}");
    assert_eq!(backend.code().map(|c| c.code()), Some("28P01"), "{err:?}");
    // The server's message once: no driver error after it saying it again.
    assert_each_cause_said_once(&err);
    seen.push_str(&format!("{err} {err:?} {backend} {backend:?}"));
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        seen.push_str(&format!(" {s} {s:?}"));
        source = s.source();
    }
    let err = m
        .try_lock("k")
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap_err();
    seen.push_str(&format!("{err} {err:?}"));
    let err = m.holders(&[]).await.unwrap_err();
    seen.push_str(&format!("{err} {err:?}"));
    let err = m.verify().await.unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.code().map(|c| c.code())),
        Some(Some("28P01")),
        "{err:?}"
    );
    seen.push_str(&format!("{err} {err:?}"));
    assert_nothing_held(&m).await;

    // A database and a role that do not exist: the same, with their codes.
    let missing_db = format!(
        "postgres://app:{RIGHT}@127.0.0.1:{}/no_such_db",
        cluster.port()
    );
    let missing_role = format!(
        "postgres://no_such_role@127.0.0.1:{}/{}",
        cluster.port(),
        admin.name()
    );
    for (url, code) in [(missing_db, "3D000"), (missing_role, "28000")] {
        let m = PostgresLockManager::builder(url.parse().unwrap())
            .build()
            .unwrap();
        let err = m.acquire("k", Some(SECS)).await.unwrap_err();
        let backend = err.as_backend().expect("backend error");
        assert_eq!(backend.code().map(|c| c.code()), Some(code), "{err:?}");
        assert!(err
            .to_string()
            .contains(&format!("127.0.0.1:{}", cluster.port())));
        assert_each_cause_said_once(&err);
        assert_each_cause_said_once(&pgcoord::readmodels::connect(&url).await.unwrap_err());
        seen.push_str(&format!("{err} {err:?}"));
    }

    // No password at all: a typed error of its own (the server asked for
    // one), not a connect failure worth retrying.
    let bare = format!(
        "postgres://app@127.0.0.1:{}/{}",
        cluster.port(),
        admin.name()
    );
    let m = PostgresLockManager::builder(bare.parse().unwrap())
        .build()
        .unwrap();
    let err = m.acquire("k", Some(SECS)).await.unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(
        backend.kind(),
        BackendErrorKind::PasswordRequired,
        "{err:?}"
    );
    assert!(
        backend
            .message()
            .ends_with("the server asks for a password and none was given"),
        "{err}"
    );
    assert_nothing_held(&m).await;

    // Right password: authentication is really enforced, and works.
    let m = PostgresLockManager::builder(url(RIGHT).parse().unwrap())
        .holder_id("pw")
        .build()
        .unwrap();
    seen.push_str(&format!("{m:?}"));
    let g = m.acquire("k", Some(SECS)).await.unwrap();
    seen.push_str(&format!("{g:?} {:?}", g.info()));
    g.release().await.unwrap();
    m.close().await.unwrap();

    // The password from a password file (libpq's environment, given as a
    // map): it works, and shows nowhere either; one that others may read
    // is refused with a warning (logged) that holds no password.
    let dir = std::env::temp_dir().join(format!("pgcoord-pgpass-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pgpass = dir.join("pgpass");
    std::fs::write(
        &pgpass,
        format!("127.0.0.1:{}:*:app:{RIGHT}\n", cluster.port()),
    )
    .unwrap();
    let set_mode = |mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set_mode(0o600);
    let env = LibpqEnv::from_vars([("PGPASSFILE", pgpass.display().to_string())]);
    let no_pw = format!(
        "postgres://app@127.0.0.1:{}/{}",
        cluster.port(),
        admin.name()
    );
    let options = ConnectOptions::resolve(Some(&no_pw), &env).unwrap();
    assert_eq!(
        options.password_source(),
        Some(&PasswordSource::PasswordFile(pgpass.clone()))
    );
    seen.push_str(&format!("{options:?}"));
    let m = PostgresLockManager::builder(options)
        .holder_id("pgpass")
        .build()
        .unwrap();
    let g = m.acquire("k", Some(SECS)).await.unwrap();
    g.release().await.unwrap();
    m.close().await.unwrap();
    set_mode(0o644);
    let options = ConnectOptions::resolve(Some(&no_pw), &env).unwrap();
    assert_eq!(options.config().get_password(), None);
    seen.push_str(&format!("{options:?} {:?}", options.warnings()));
    let m = PostgresLockManager::builder(options).build().unwrap();
    let err = m.acquire("k", Some(SECS)).await.unwrap_err();
    seen.push_str(&format!("{err} {err:?}"));
    let _ = std::fs::remove_dir_all(&dir);

    // A URL that fails to parse does not echo its password.
    let err = format!("postgres://app:{WRONG}@h:notaport/db")
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap_err();
    seen.push_str(&format!("{err} {err:?}"));

    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        !logged.is_empty(),
        "nothing was logged: the check would prove nothing"
    );
    assert!(logged.contains("group or world access"), "{logged}");
    for secret in [RIGHT, WRONG] {
        assert!(!seen.contains(secret), "password in output: {seen}");
        assert!(!logged.contains(secret), "password in a log line: {logged}");
    }
}
