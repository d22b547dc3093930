//! TLS or plaintext: one transport for every session of a run.
//!
//! The library's sessions follow the URL's `sslmode` (libpq's rules:
//! `prefer` by default, which takes TLS whenever the server offers it).
//! The baselines must use the same transport, or every ours/raw and
//! ours/sqlx ratio compares TLS with plaintext. So the run resolves the
//! transport once ([`resolve`]) and pins it: `prefer` becomes `require`
//! where the server offers TLS and `disable` where it does not, and every
//! connection the bench makes (the library's managers, raw tokio-postgres
//! through the library's own TLS connector, sqlx with its rustls, the
//! monitor) is made from the pinned settings.

use std::path::PathBuf;
use std::time::Duration;

use pgcoord::inspect::connect_for_inspection;
use pgcoord::postgres::SslMode;
use pgcoord::ConnectOptions;
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::ConnectOptions as _;
use tokio_postgres::config::Host;

use crate::Res;

/// How long a new session may take to connect, and then to answer its
/// first statement, before the bench says why (a pooler queueing it).
pub const SESSION_LIMIT: Duration = Duration::from_secs(10);

/// The transport of every session of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transport {
    Tls,
    Plaintext,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tls => "TLS",
            Transport::Plaintext => "plaintext",
        }
    }
}

/// Whether every host of `options` is a Unix-domain socket (no TLS there).
fn sockets_only(options: &ConnectOptions) -> bool {
    let hosts = options.config().get_hosts();
    !hosts.is_empty() && hosts.iter().all(|h| !matches!(h, Host::Tcp(_)))
}

/// Decides the run's transport from the URL's `sslmode`, as the library
/// would, and returns the options pinned to it. For `prefer` (the default)
/// it asks the server: a session with `sslmode=require` that connects
/// means the library's sessions take TLS too.
pub async fn resolve(options: ConnectOptions) -> Res<(ConnectOptions, Transport)> {
    if sockets_only(&options) {
        return Ok((options, Transport::Plaintext));
    }
    let t = match options.ssl_mode() {
        SslMode::Disable => Transport::Plaintext,
        SslMode::Prefer => {
            let tls = options
                .clone()
                .with_application_name("bench/tls-check")
                .with_ssl_mode(SslMode::Require);
            match connect_for_inspection(tls, SESSION_LIMIT).await {
                Ok(_client) => Transport::Tls,
                Err(_) => Transport::Plaintext,
            }
        }
        _ => Transport::Tls,
    };
    Ok((pin(options, t), t))
}

/// `options` with `prefer` replaced by the mode `t` stands for; any
/// other mode is kept as it is (it already says what the library does).
pub fn pin(options: ConnectOptions, t: Transport) -> ConnectOptions {
    match (options.ssl_mode(), t) {
        (SslMode::Prefer, Transport::Tls) => options.with_ssl_mode(SslMode::Require),
        (SslMode::Prefer, Transport::Plaintext) => options.with_ssl_mode(SslMode::Disable),
        _ => options,
    }
}

/// The root file libpq (and the library) would use: `sslrootcert`, else
/// `~/.postgresql/root.crt` when it exists.
fn root_file(options: &ConnectOptions) -> Option<PathBuf> {
    if let Some(p) = options.ssl_root_cert() {
        return Some(p.to_owned());
    }
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(".postgresql/root.crt");
    p.exists().then_some(p)
}

/// sqlx's options for the same server, user, database and transport as
/// `options` (pinned by [`resolve`]): its first host, and its TLS mode,
/// root file and client certificate. Built field by field (not by parsing
/// the URL), so key=value strings and libpq-only parameters work too.
/// With several hosts, [`sqlx_connectable`] picks the one that answers.
pub fn sqlx_options(options: &ConnectOptions, app: &str) -> Res<PgConnectOptions> {
    sqlx_options_at(options, app, 0)
}

/// How many hosts `options` lists (at least 1: none means the default).
fn host_count(options: &ConnectOptions) -> usize {
    options.config().get_hosts().len().max(1)
}

/// sqlx's options for the first host of `options` that accepts a
/// session, tried in order as the library (and libpq) tries them: sqlx
/// takes one host only, so a multi-host URL whose first host is down
/// would otherwise send the sqlx baselines to it. Err: every host's
/// reason. A single host is returned untried.
pub async fn sqlx_connectable(options: &ConnectOptions, app: &str) -> Res<PgConnectOptions> {
    let n = host_count(options);
    if n == 1 {
        return sqlx_options(options, app);
    }
    let mut why = Vec::with_capacity(n);
    for i in 0..n {
        let o = sqlx_options_at(options, app, i)?;
        let place = format!("{}:{}", o.get_host(), o.get_port());
        match tokio::time::timeout(SESSION_LIMIT, o.connect()).await {
            Ok(Ok(conn)) => {
                let _ = sqlx::Connection::close(conn).await;
                return Ok(o);
            }
            Ok(Err(e)) => why.push(format!("{place}: {e}")),
            Err(_) => why.push(format!(
                "{place}: no session within {} s",
                SESSION_LIMIT.as_secs()
            )),
        }
    }
    Err(format!(
        "sqlx could connect to none of the hosts: {}",
        why.join("; ")
    )
    .into())
}

/// [`sqlx_options`] for the `i`th host of `options` (with its port: the
/// `i`th, or the only one given).
fn sqlx_options_at(options: &ConnectOptions, app: &str, i: usize) -> Res<PgConnectOptions> {
    let c = options.config();
    let mut o = PgConnectOptions::new_without_pgpass().application_name(app);
    match c.get_hosts().get(i) {
        Some(Host::Tcp(h)) => o = o.host(h),
        #[cfg(unix)]
        Some(Host::Unix(p)) => o = o.socket(p),
        None => {}
    }
    let ports = c.get_ports();
    if let Some(port) = ports.get(i).or(if ports.len() == 1 {
        ports.first()
    } else {
        None
    }) {
        o = o.port(*port);
    }
    if let Some(u) = c.get_user() {
        o = o.username(u);
    }
    if let Some(pw) = c.get_password() {
        o = o.password(std::str::from_utf8(pw)?);
    }
    if let Some(db) = c.get_dbname() {
        o = o.database(db);
    }
    let root = root_file(options);
    let mode = match options.ssl_mode() {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        // With a root file, the library checks the chain for `require`
        // too (libpq's rule); sqlx does only for `verify-ca`.
        SslMode::Require if root.is_some() => PgSslMode::VerifyCa,
        SslMode::Require => PgSslMode::Require,
        SslMode::VerifyCa => PgSslMode::VerifyCa,
        // VerifyFull, and any mode a later library adds: the strictest.
        _ => PgSslMode::VerifyFull,
    };
    o = o.ssl_mode(if sockets_only(options) {
        PgSslMode::Disable
    } else {
        mode
    });
    if let Some(r) = root {
        o = o.ssl_root_cert(r);
    }
    if let (Some(cert), Some(key)) = options.ssl_client_cert() {
        o = o.ssl_client_cert(cert).ssl_client_key(key);
    }
    Ok(o.disable_statement_logging())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefer_is_pinned_to_what_the_server_offers() {
        let o = ConnectOptions::parse("postgres://u@db.example/x").unwrap();
        assert_eq!(o.ssl_mode(), SslMode::Prefer);
        assert_eq!(pin(o.clone(), Transport::Tls).ssl_mode(), SslMode::Require);
        assert_eq!(pin(o, Transport::Plaintext).ssl_mode(), SslMode::Disable);
        let full = ConnectOptions::parse("postgres://u@db.example/x?sslmode=verify-full").unwrap();
        assert_eq!(pin(full, Transport::Tls).ssl_mode(), SslMode::VerifyFull);
    }

    #[test]
    fn sqlx_gets_the_same_server_and_tls_mode() {
        let o = ConnectOptions::parse(
            "host=db.example port=6432 user=u password=pw dbname=x sslmode=require",
        )
        .unwrap();
        let s = sqlx_options(&o, "bench/t").unwrap();
        assert_eq!(s.get_host(), "db.example");
        assert_eq!(s.get_port(), 6432);
        assert_eq!(s.get_username(), "u");
        assert_eq!(s.get_database(), Some("x"));
        assert!(matches!(
            s.get_ssl_mode(),
            PgSslMode::Require | PgSslMode::VerifyCa
        ));
        let d = ConnectOptions::parse("postgres://u@db.example/x?sslmode=disable").unwrap();
        let s = sqlx_options(&d, "bench/t").unwrap();
        assert!(matches!(s.get_ssl_mode(), PgSslMode::Disable));
    }

    #[test]
    fn each_host_of_a_multi_host_url_has_its_port() {
        let o = ConnectOptions::parse("postgres://u@h1:5433,h2:5434/x").unwrap();
        assert_eq!(host_count(&o), 2);
        let second = sqlx_options_at(&o, "bench/t", 1).unwrap();
        assert_eq!((second.get_host(), second.get_port()), ("h2", 5434));
        let one_port = ConnectOptions::parse("host=h1,h2 port=6000 user=u dbname=x").unwrap();
        let second = sqlx_options_at(&one_port, "bench/t", 1).unwrap();
        assert_eq!((second.get_host(), second.get_port()), ("h2", 6000));
    }

    #[tokio::test]
    async fn sqlx_takes_the_first_host_that_answers() {
        // Two hosts on a port nobody listens on (taken and freed): the
        // error names each host's refusal, not only the first.
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_port = dead.local_addr().unwrap().port();
        drop(dead);
        let o = ConnectOptions::parse(&format!(
            "postgres://u@127.0.0.1:{dead_port},127.0.0.1:{dead_port}/x?sslmode=disable"
        ))
        .unwrap();
        let e = sqlx_connectable(&o, "bench/t")
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            e.matches(&format!("127.0.0.1:{dead_port}")).count(),
            2,
            "{e}"
        );
    }
}
