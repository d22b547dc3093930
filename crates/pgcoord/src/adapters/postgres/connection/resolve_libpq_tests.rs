//! libpq's rules for deprecated, empty and spaced values (`requiressl`,
//! an empty password or user name), over environments built from maps;
//! an unknown name, which ends the reading.

use super::tests::{err, resolve, Dir};
use crate::adapters::postgres::{LibpqEnv, PasswordSource, SslMode};

#[test]
fn requiressl_1_is_sslmode_require_unless_sslmode_is_given() {
    let none = LibpqEnv::from_vars([("PGSYSCONFDIR", "/nonexistent")]);
    for s in [
        "host=h requiressl=1",
        "postgres://h/db?requiressl=1",
        "host=h requiressl=1x",
    ] {
        assert_eq!(resolve(Some(s), &none).ssl_mode(), SslMode::Require, "{s}");
    }
    // `requiressl=0` means nothing; sslmode wins over requiressl.
    assert_eq!(
        resolve(Some("host=h requiressl=0"), &none).ssl_mode(),
        SslMode::Prefer
    );
    for s in [
        "host=h requiressl=1 sslmode=disable",
        "host=h sslmode=disable requiressl=1",
    ] {
        assert_eq!(resolve(Some(s), &none).ssl_mode(), SslMode::Disable, "{s}");
    }
    // PGREQUIRESSL=1 likewise, below PGSSLMODE and the string's sslmode.
    let env = LibpqEnv::from_vars([("PGREQUIRESSL", "1")]);
    assert_eq!(resolve(Some("host=h"), &env).ssl_mode(), SslMode::Require);
    assert_eq!(
        resolve(Some("host=h sslmode=verify-ca"), &env).ssl_mode(),
        SslMode::VerifyCa
    );
    let both = LibpqEnv::from_vars([("PGREQUIRESSL", "1"), ("PGSSLMODE", "disable")]);
    assert_eq!(resolve(Some("host=h"), &both).ssl_mode(), SslMode::Disable);
    let zero = LibpqEnv::from_vars([("PGREQUIRESSL", "0")]);
    assert_eq!(resolve(Some("host=h"), &zero).ssl_mode(), SslMode::Prefer);
}

#[test]
fn an_empty_password_is_none_and_the_password_file_is_read() {
    let dir = Dir::new("empty-pw");
    let file = dir.write("pgpass", "h:5432:app:plain:from-file\n", 0o600);
    let env = LibpqEnv::from_vars([
        ("PGPASSFILE", file.display().to_string()),
        ("PGPASSWORD", "from-env".to_owned()),
    ]);
    for s in [
        "host=h user=plain dbname=app password=",
        "host=h user=plain dbname=app password=''",
        "postgresql://plain@h/app?password=",
    ] {
        let o = resolve(Some(s), &env);
        assert_eq!(o.config().get_password(), Some(&b"from-file"[..]), "{s}");
        assert_eq!(
            o.password_source(),
            Some(&PasswordSource::PasswordFile(file.clone())),
            "{s}"
        );
    }
    // No line for it: no password at all (PGPASSWORD is not read: the
    // parameter was given), never an empty one.
    let o = resolve(Some("host=other user=plain dbname=app password="), &env);
    assert_eq!(o.config().get_password(), None);
    assert_eq!(o.password_source(), None);
    let o = resolve(Some("host=h user=plain password="), &LibpqEnv::default());
    assert_eq!(o.config().get_password(), None);
}

#[test]
fn an_empty_user_name_is_the_os_users() {
    let env = LibpqEnv::from_vars([("PGUSER", "plain")]).with_os_user("osuser");
    for s in ["host=h user=''", "host=h user=", "postgresql://h?user="] {
        let o = resolve(Some(s), &env);
        assert_eq!(o.config().get_user(), Some("osuser"), "{s}");
        // The database defaults to the user name, as in libpq.
        assert_eq!(o.config().get_dbname(), Some("osuser"), "{s}");
    }
    assert_eq!(
        resolve(Some("host=h"), &env).config().get_user(),
        Some("plain")
    );
}

#[test]
fn ports_are_one_or_one_for_each_host() {
    let env = LibpqEnv::default();
    for (s, want) in [
        (
            "host=127.0.0.1,::1 port=56498,56431,1",
            "could not match 3 port numbers to 2 hosts",
        ),
        (
            "postgresql://h:1/db?port=56431,,",
            "could not match 3 port numbers to 1 hosts",
        ),
        (
            "host=h port=1,2",
            "could not match 2 port numbers to 1 hosts",
        ),
        (
            "hostaddr=127.0.0.1 port=1,2",
            "could not match 2 port numbers to 1 hosts",
        ),
    ] {
        let msg = err(Some(s), &env);
        assert!(msg.contains(want) && msg.contains("`port`"), "{s}: {msg}");
    }
    let o = resolve(Some("host=a,b port=1,2"), &env);
    assert_eq!(o.config().get_ports(), [1, 2]);
    let o = resolve(Some("host=a,b port=7"), &env);
    assert_eq!(o.config().get_ports(), [7]);
    // From PGPORT as well, named.
    let msg = err(Some("host=a"), &LibpqEnv::from_vars([("PGPORT", "1,2")]));
    assert!(msg.contains("from PGPORT"), "{msg}");
}

#[test]
fn numbers_may_have_ascii_spaces_around_them() {
    let env = LibpqEnv::default();
    for s in [
        "host=h port=' 56431'",
        "host=h port='56431 '",
        "postgresql://h/db?port=%2056431",
    ] {
        assert_eq!(resolve(Some(s), &env).config().get_ports(), [56431], "{s}");
    }
    let o = resolve(Some("host=a,b port=' 1, 2 '"), &env);
    assert_eq!(o.config().get_ports(), [1, 2]);
    let o = resolve(Some("host=h"), &LibpqEnv::from_vars([("PGPORT", " 56431")]));
    assert_eq!(o.config().get_ports(), [56431]);
    let o = resolve(Some("host=h connect_timeout=' 5'"), &env);
    assert_eq!(
        o.config().get_connect_timeout(),
        Some(&std::time::Duration::from_secs(5))
    );
    assert!(err(Some("host=h port=' 5 6'"), &env).contains("`port`"));
}

#[test]
fn an_empty_hostaddr_sslsni_or_protocol_version_is_not_given() {
    let env = LibpqEnv::default();
    for s in [
        "postgresql://h/db?hostaddr=",
        "postgresql://h/db?sslsni=",
        "postgresql://h/db?ssl_min_protocol_version=",
        "postgresql://h/db?ssl_max_protocol_version=",
        "host=h hostaddr='' sslsni='' ssl_min_protocol_version=''",
    ] {
        let o = resolve(Some(s), &env);
        assert!(o.config().get_hostaddrs().is_empty(), "{s}");
        assert_eq!(o.config().get_dbname().is_some(), s.contains("/db"), "{s}");
    }
    // An empty hostaddr alone leaves the default host.
    let o = resolve(Some("hostaddr="), &env);
    assert_eq!(o.config().get_hosts().len(), 1);
}

#[test]
fn the_first_unknown_name_is_the_one_refused_however_many_follow() {
    // The first unknown name stops the reading: a string of thousands of
    // them is refused without comparing each with all before it.
    let mut s = String::from("host=h typo_one=1");
    for i in 0..20_000 {
        s.push_str(&format!(" typo{i}=1"));
    }
    s.push_str(" typo_one=2");
    let msg = crate::adapters::postgres::ConnectOptions::parse(&s)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("unknown connection parameter `typo_one`"),
        "{msg}"
    );
}

#[test]
fn sslrootcert_system_is_refused_before_connecting_wherever_it_comes_from() {
    let env = LibpqEnv::from_vars([
        ("PGSYSCONFDIR", "/nonexistent"),
        ("PGSSLROOTCERT", "system"),
    ]);
    for (s, env, origin) in [
        (
            "host=h sslrootcert=system",
            None,
            "in the connection string",
        ),
        (
            "postgres://h/db?sslrootcert=system&sslmode=disable",
            None,
            "in the connection string",
        ),
        ("host=h", Some(&env), "PGSSLROOTCERT"),
    ] {
        let msg = match env {
            None => crate::adapters::postgres::ConnectOptions::parse(s)
                .unwrap_err()
                .to_string(),
            Some(env) => err(Some(s), env),
        };
        assert!(
            msg.contains("`sslrootcert`") && msg.contains(origin),
            "{s}: {msg}"
        );
        assert!(msg.contains("`system` is not supported"), "{s}: {msg}");
    }
}
