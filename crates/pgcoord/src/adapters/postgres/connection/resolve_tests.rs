//! libpq's precedence, over environments built from maps (the process's
//! own environment is never read or changed).

use std::path::{Path, PathBuf};

use tokio_postgres::config::{Host, TargetSessionAttrs};

use crate::adapters::postgres::{ConnectOptions, LibpqEnv, PasswordSource, SslMode};

pub(super) fn resolve(s: Option<&str>, env: &LibpqEnv) -> ConnectOptions {
    ConnectOptions::resolve(s, env).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

pub(super) fn err(s: Option<&str>, env: &LibpqEnv) -> String {
    match ConnectOptions::resolve(s, env) {
        Ok(o) => panic!("{s:?} resolved: {o:?}"),
        Err(e) => e.to_string(),
    }
}

pub(super) fn tcp_hosts(o: &ConnectOptions) -> Vec<String> {
    o.config()
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(h) => h.clone(),
            Host::Unix(p) => p.display().to_string(),
        })
        .collect()
}

/// A scratch directory, removed on drop.
pub(super) struct Dir(PathBuf);

impl Dir {
    pub(super) fn new(name: &str) -> Self {
        // Unique: the unit tests of one process run at the same time, and
        // another module's test may use the same name.
        let dir = std::env::temp_dir().join(format!("pgcoord-{name}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub(super) fn write(&self, name: &str, text: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_string_wins_over_the_environment_which_wins_over_the_defaults() {
    let env = LibpqEnv::from_vars([
        ("PGHOST", "env-host"),
        ("PGPORT", "6001"),
        ("PGUSER", "env-user"),
        ("PGDATABASE", "env-db"),
    ])
    .with_os_user("os-user");
    let o = resolve(Some("postgres://url-user@url-host/url-db"), &env);
    assert_eq!(tcp_hosts(&o), ["url-host"]);
    assert_eq!(o.config().get_ports(), [6001], "PGPORT fills the URL's gap");
    assert_eq!(o.config().get_user(), Some("url-user"));
    assert_eq!(o.config().get_dbname(), Some("url-db"));
    let o = resolve(None, &env);
    assert_eq!(tcp_hosts(&o), ["env-host"]);
    assert_eq!(o.config().get_user(), Some("env-user"));
    assert_eq!(o.config().get_dbname(), Some("env-db"));
    // Defaults: localhost (no server socket here), 5432, the OS user, and
    // the user's name as the database.
    let o = resolve(
        None,
        &LibpqEnv::from_vars::<&str, &str>([]).with_os_user("alice"),
    );
    assert_eq!(tcp_hosts(&o), ["localhost"]);
    assert_eq!(o.config().get_ports(), [5432]);
    assert_eq!(o.config().get_user(), Some("alice"));
    assert_eq!(o.config().get_dbname(), Some("alice"));
    let o = resolve(
        Some("user=bob"),
        &LibpqEnv::from_vars::<&str, &str>([]).with_os_user("alice"),
    );
    assert_eq!(
        o.config().get_dbname(),
        Some("bob"),
        "the database defaults to the user given"
    );
    // `parse` reads the string alone (no user from the OS), and gives a
    // string without a host libpq's one default host.
    let o = ConnectOptions::parse("dbname=x").unwrap();
    assert_eq!(
        (o.config().get_user(), o.config().get_hosts().len()),
        (None, 1)
    );
    for s in ["service=ops", "postgres://h/db?passfile=%2Ftmp%2Fp"] {
        let msg = ConnectOptions::parse(s).unwrap_err().to_string();
        assert!(msg.contains("parse_with_env"), "{s}: {msg}");
    }
}

#[test]
fn a_server_socket_in_a_socket_directory_is_the_default_host() {
    let dir = Dir::new("sockdir");
    std::fs::write(dir.path().join(".s.PGSQL.6002"), "").unwrap();
    let env = LibpqEnv::from_vars([("PGPORT", "6002")])
        .with_os_user("u")
        .with_socket_dirs([PathBuf::from("/nonexistent"), dir.path().to_owned()]);
    let o = resolve(None, &env);
    assert!(
        matches!(o.config().get_hosts(), [Host::Unix(p)] if p == dir.path()),
        "{o:?}"
    );
}

#[test]
fn every_variable_supplies_its_parameter() {
    let env = LibpqEnv::from_vars([
        ("PGHOST", "h"),
        ("PGUSER", "u"),
        ("PGPASSWORD", "from-env"),
        ("PGAPPNAME", "nightly-report"),
        ("PGCONNECT_TIMEOUT", "7"),
        ("PGSSLMODE", "verify-full"),
        ("PGSSLROOTCERT", "/etc/ca.pem"),
        ("PGOPTIONS", "-c search_path=ops"),
        ("PGTARGETSESSIONATTRS", "primary"),
    ]);
    let o = resolve(None, &env);
    let c = o.config();
    assert_eq!(c.get_password(), Some(&b"from-env"[..]));
    assert_eq!(o.password_source(), Some(&PasswordSource::Environment));
    assert_eq!(c.get_application_name(), Some("nightly-report"));
    assert_eq!(
        c.get_connect_timeout(),
        Some(&std::time::Duration::from_secs(7))
    );
    assert_eq!(o.ssl_mode(), SslMode::VerifyFull);
    assert_eq!(o.ssl_root_cert(), Some(Path::new("/etc/ca.pem")));
    assert_eq!(c.get_options(), Some("-c search_path=ops"));
    assert_eq!(c.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
    // The string's own value wins over each of them.
    let o = resolve(
        Some("password=from-string application_name=mine sslmode=disable"),
        &env,
    );
    assert_eq!(o.config().get_password(), Some(&b"from-string"[..]));
    assert_eq!(o.password_source(), Some(&PasswordSource::ConnectionString));
    assert_eq!(o.config().get_application_name(), Some("mine"));
    assert_eq!(o.ssl_mode(), SslMode::Disable);
}

#[test]
fn a_service_fills_what_the_string_leaves_and_wins_over_the_environment() {
    let dir = Dir::new("service");
    let file = dir.write(
        "services.conf",
        "[ops]\nhost=svc-host\nport=6003\nuser=svc-user\ndbname=svc-db\npassword=svc-pw\n",
        0o644,
    );
    let env = LibpqEnv::from_vars([
        ("PGSERVICEFILE", file.display().to_string()),
        ("PGSYSCONFDIR", "/nonexistent".to_owned()),
        ("PGHOST", "env-host".to_owned()),
        ("PGAPPNAME", "env-app".to_owned()),
    ]);
    let o = resolve(Some("service=ops dbname=mine"), &env);
    assert_eq!(tcp_hosts(&o), ["svc-host"]);
    assert_eq!(o.config().get_ports(), [6003]);
    assert_eq!(o.config().get_user(), Some("svc-user"));
    assert_eq!(o.config().get_dbname(), Some("mine"));
    assert_eq!(o.config().get_application_name(), Some("env-app"));
    assert_eq!(
        o.password_source(),
        Some(&PasswordSource::ServiceFile(file.clone()))
    );
    // PGSERVICE names it as well, and a URL can carry it.
    let with_var = LibpqEnv::from_vars([
        ("PGSERVICEFILE", file.display().to_string()),
        ("PGSYSCONFDIR", "/nonexistent".to_owned()),
        ("PGSERVICE", "ops".to_owned()),
    ]);
    let o = resolve(None, &with_var);
    assert_eq!(o.config().get_dbname(), Some("svc-db"));
    let o = resolve(Some("postgres:///url-db?service=ops"), &env);
    assert_eq!(o.config().get_dbname(), Some("url-db"));
    assert_eq!(tcp_hosts(&o), ["svc-host"]);
    let msg = err(Some("service=nope"), &env);
    assert!(
        msg.contains("definition of service \"nope\" not found"),
        "{msg}"
    );
}

#[test]
fn the_password_file_fills_a_missing_password_unless_others_may_read_it() {
    let dir = Dir::new("pgpass");
    let file = dir.write(
        "pgpass",
        "other:*:*:*:wrong\nlocalhost:5432:app:app:pw-for-socket\ndb.internal:6004:*:app:pgpass-S3cret\n",
        0o600,
    );
    let env = LibpqEnv::from_vars([("PGPASSFILE", file.display().to_string())]);
    let o = resolve(Some("postgres://app@db.internal:6004/app"), &env);
    assert_eq!(o.config().get_password(), Some(&b"pgpass-S3cret"[..]));
    assert_eq!(
        o.password_source(),
        Some(&PasswordSource::PasswordFile(file.clone()))
    );
    assert!(o.warnings().is_empty());
    // No host: `localhost` in the file matches.
    let o = resolve(Some("user=app dbname=app"), &env);
    assert_eq!(o.config().get_password(), Some(&b"pw-for-socket"[..]));
    // A password given anywhere else wins.
    let o = resolve(Some("postgres://app:given@db.internal:6004/app"), &env);
    assert_eq!(o.config().get_password(), Some(&b"given"[..]));
    // ~/.pgpass when PGPASSFILE is not set.
    let home = LibpqEnv::from_vars([("HOME", dir.path().display().to_string())]);
    std::fs::rename(&file, dir.path().join(".pgpass")).unwrap();
    let o = resolve(Some("postgres://app@db.internal:6004/app"), &home);
    assert_eq!(o.config().get_password(), Some(&b"pgpass-S3cret"[..]));
    // Readable by others: ignored, with a warning that holds no password.
    let open = dir.write(".pgpass", "*:*:*:*:pgpass-S3cret\n", 0o644);
    let o = resolve(Some("postgres://app@db.internal:6004/app"), &home);
    assert_eq!(o.config().get_password(), None);
    assert_eq!(o.password_source(), None);
    assert_eq!(o.warnings().len(), 1);
    assert!(o.warnings()[0].contains(&open.display().to_string()));
    assert!(o.warnings()[0].contains("0600"));
    assert!(!o.warnings()[0].contains("S3cret"));
}

#[test]
fn every_target_session_attrs_of_libpq_14_is_accepted() {
    let env = LibpqEnv::from_vars([("PGUSER", "u"), ("PGHOST", "h")]);
    for (value, want) in [
        ("any", TargetSessionAttrs::Any),
        ("read-write", TargetSessionAttrs::ReadWrite),
        ("primary", TargetSessionAttrs::ReadWrite),
        ("read-only", TargetSessionAttrs::ReadOnly),
        ("standby", TargetSessionAttrs::ReadOnly),
        ("prefer-standby", TargetSessionAttrs::Any),
    ] {
        let s = format!("postgres://u@h/db?target_session_attrs={value}");
        assert_eq!(
            ConnectOptions::parse(&s)
                .unwrap()
                .config()
                .get_target_session_attrs(),
            want
        );
        let o = resolve(Some(&format!("target_session_attrs={value}")), &env);
        assert_eq!(o.config().get_target_session_attrs(), want, "{value}");
    }
    let msg = err(Some("host=a,b target_session_attrs=prefer-standby"), &env);
    assert!(
        msg.contains("`target_session_attrs`") && msg.contains("several hosts"),
        "{msg}"
    );
    let msg = err(Some("target_session_attrs=primary-ish"), &env);
    assert!(
        msg.contains("`target_session_attrs` (in the connection string)"),
        "{msg}"
    );
}

#[test]
fn errors_name_the_parameter_and_its_source_never_a_value() {
    let env = LibpqEnv::from_vars([("PGPORT", "not-a-port"), ("PGPASSWORD", "hunter2")]);
    let msg = err(Some("host=h user=u"), &env);
    assert!(msg.contains("`port` (from PGPORT)"), "{msg}");
    assert!(
        !msg.contains("not-a-port") && !msg.contains("hunter2"),
        "{msg}"
    );
    let env = LibpqEnv::from_vars([("PGSSLMODE", "hunter2")]);
    let msg = err(None, &env);
    assert!(
        msg.contains("`sslmode` (from PGSSLMODE)") && !msg.contains("hunter2"),
        "{msg}"
    );
    for (s, want) in [
        (
            "host=h password = hunter2 port=x",
            "`port` (in the connection string)",
        ),
        (
            "postgres://u:hunter2@h/db?pasword=hunter2",
            "unknown connection parameter `pasword`",
        ),
        ("postgres://u:hunter2@h/db?sslmode=hunter2", "`sslmode`"),
        (
            "postgres://u:hunter2@h/db?connect_timeout=soon",
            "`connect_timeout`",
        ),
    ] {
        let msg = ConnectOptions::parse(s).unwrap_err().to_string();
        assert!(msg.contains(want), "{s}: {msg}");
        assert!(!msg.contains("hunter2"), "{s}: {msg}");
    }
}

#[test]
fn bad_percent_encoding_and_a_password_that_ends_libpqs_credentials_early_are_refused_unrepeated() {
    for (s, want) in [
        (
            "postgres://u:a%zzhunter2@h/db",
            "not followed by two hex digits",
        ),
        (
            "postgres://u:hunter2%@h/db",
            "not followed by two hex digits",
        ),
        ("postgres://u:hunter2%00@h/db", "%00"),
        (
            "postgres://h/db?application_name=a%4",
            "not followed by two hex digits",
        ),
        // A `/` ends libpq's credentials early: the password's tail is
        // read as the database and a query.
        ("postgres://u:x/y?hunter2@h/db", "%2F or %40"),
    ] {
        let msg = ConnectOptions::parse(s).unwrap_err().to_string();
        assert!(msg.contains(want), "{s}: {msg}");
        assert!(!msg.contains("hunter2"), "{s}: {msg}");
    }
    // Well-formed escapes still decode.
    let o = ConnectOptions::parse("postgres://u:a%3Fb%25@h/db").unwrap();
    assert_eq!(o.config().get_password(), Some(&b"a?b%"[..]));
    // Unencoded, a `?` or `#` before the `@` is the password's, as in libpq.
    let o = ConnectOptions::parse("postgres://u:x?hunter2#@h/db").unwrap();
    assert_eq!(o.config().get_password(), Some(&b"x?hunter2#"[..]));
}

#[test]
fn several_hosts_and_ipv6_from_a_url() {
    let o = ConnectOptions::parse("postgres://u@h1:5432,[::1]:5433,h3/db").unwrap();
    assert_eq!(tcp_hosts(&o), ["h1", "::1", "h3"]);
    assert_eq!(o.config().get_ports(), [5432, 5433, 5432]);
}

#[test]
fn revocation_lists_come_from_the_string_or_the_environment() {
    let env = LibpqEnv::from_vars([("PGSSLCRL", "/env.crl"), ("PGSSLCRLDIR", "/env-crls")]);
    let (_, tls) = resolve(Some("host=h sslmode=verify-full"), &env).into_parts();
    assert_eq!(tls.crl.as_deref(), Some(Path::new("/env.crl")));
    assert_eq!(tls.crl_dir.as_deref(), Some(Path::new("/env-crls")));
    let (_, tls) = resolve(Some("host=h sslcrl=/mine.crl sslcrldir=''"), &env).into_parts();
    assert_eq!(tls.crl.as_deref(), Some(Path::new("/mine.crl")));
    // Empty is unset, as in libpq (and it still wins over the variable).
    assert_eq!(tls.crl_dir, None);
    let (_, tls) = ConnectOptions::parse("postgres://h/db?sslcrl=%2Fa%20b.crl")
        .unwrap()
        .into_parts();
    assert_eq!(tls.crl.as_deref(), Some(Path::new("/a b.crl")));
}

#[test]
fn libpq_settings_this_client_cannot_honour_are_refused_by_name() {
    for (s, want) in [
        (
            "host=h sslpassword=hunter2",
            "`sslpassword` is not supported",
        ),
        (
            "postgres://h/db?require_auth=scram-sha-256",
            "`require_auth` is not supported",
        ),
        (
            "host=h sslcertmode=disable",
            "`sslcertmode` is not supported",
        ),
    ] {
        let msg = ConnectOptions::parse(s).unwrap_err().to_string();
        assert!(msg.contains(want), "{s}: {msg}");
        assert!(!msg.contains("hunter2"), "{s}: {msg}");
    }
    // From the environment too: a restriction libpq would enforce is
    // never dropped silently.
    let env = LibpqEnv::from_vars([("PGHOST", "h"), ("PGREQUIREAUTH", "scram-sha-256")]);
    let msg = err(None, &env);
    assert!(msg.contains("PGREQUIREAUTH is set"), "{msg}");
    let env = LibpqEnv::from_vars([("PGHOST", "h"), ("PGREQUIREAUTH", "")]);
    resolve(None, &env);
}
