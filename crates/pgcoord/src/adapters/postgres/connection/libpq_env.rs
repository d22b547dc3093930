//! [`LibpqEnv`]: what libpq reads from the process besides the connection
//! string: the `PG*` environment variables, the home directory (for
//! `~/.pgpass` and `~/.pg_service.conf`), the operating-system user (the
//! default user name) and the Unix socket directories (the default host).
//!
//! A value of its own, so that the precedence rules are a pure function of
//! it: tests build one from a map instead of changing the process's
//! environment.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The environment variables libpq reads, and the connection parameter
/// each one supplies when the connection string does not set it.
pub(super) const ENV_PARAMS: &[(&str, &str)] = &[
    ("PGHOST", "host"),
    ("PGHOSTADDR", "hostaddr"),
    ("PGPORT", "port"),
    ("PGDATABASE", "dbname"),
    ("PGUSER", "user"),
    ("PGPASSWORD", "password"),
    ("PGPASSFILE", "passfile"),
    ("PGOPTIONS", "options"),
    ("PGAPPNAME", "application_name"),
    ("PGSSLMODE", "sslmode"),
    ("PGSSLROOTCERT", "sslrootcert"),
    ("PGSSLCERT", "sslcert"),
    ("PGSSLKEY", "sslkey"),
    ("PGSSLCRL", "sslcrl"),
    ("PGSSLCRLDIR", "sslcrldir"),
    ("PGSSLSNI", "sslsni"),
    ("PGSSLCOMPRESSION", "sslcompression"),
    ("PGSSLMINPROTOCOLVERSION", "ssl_min_protocol_version"),
    ("PGSSLMAXPROTOCOLVERSION", "ssl_max_protocol_version"),
    ("PGGSSENCMODE", "gssencmode"),
    ("PGCONNECT_TIMEOUT", "connect_timeout"),
    ("PGTARGETSESSIONATTRS", "target_session_attrs"),
    ("PGCHANNELBINDING", "channel_binding"),
    ("PGLOADBALANCEHOSTS", "load_balance_hosts"),
    ("PGSSLNEGOTIATION", "sslnegotiation"),
];

/// Where a libpq built for Debian and for upstream looks for the server's
/// socket, in that order.
const SOCKET_DIRS: &[&str] = &["/var/run/postgresql", "/tmp"];

/// The system-wide directory of `pg_service.conf` when `PGSYSCONFDIR` is
/// not set (Debian's libpq; upstream's default is its install prefix's
/// `etc`).
pub(super) const DEFAULT_SYSCONFDIR: &str = "/etc/postgresql-common";

/// What libpq reads from the process: environment variables, the home
/// directory, the OS user name and the socket directories.
///
/// [`LibpqEnv::from_process`] reads the real ones;
/// [`LibpqEnv::from_vars`] builds one from given variables (`HOME` among
/// them), for tests and for programs that keep their own environment.
///
/// ```
/// use pgcoord::{ConnectOptions, postgres::LibpqEnv};
/// let env = LibpqEnv::from_vars([("PGHOST", "db.internal"), ("PGUSER", "app")]);
/// let o = ConnectOptions::resolve(Some("dbname=orders"), &env)?;
/// assert_eq!(o.config().get_user(), Some("app"));
/// assert_eq!(o.config().get_dbname(), Some("orders"));
/// # Ok::<(), pgcoord::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct LibpqEnv {
    vars: HashMap<String, String>,
    os_user: Option<String>,
    /// The home directory when `HOME` is not set (the user's entry in the
    /// system's user database).
    os_home: Option<PathBuf>,
    socket_dirs: Vec<PathBuf>,
}

impl LibpqEnv {
    /// The process's own environment, home directory, effective user and
    /// the socket directories `/var/run/postgresql` and `/tmp`.
    pub fn from_process() -> Self {
        let vars = std::env::vars()
            .filter(|(k, _)| k.starts_with("PG") || k == "HOME" || k == "USER")
            .collect();
        let (os_user, os_home) = process_user();
        Self {
            vars,
            os_user,
            os_home,
            socket_dirs: SOCKET_DIRS.iter().map(PathBuf::from).collect(),
        }
    }

    /// Only the given variables (`HOME` included, if wanted): no OS user,
    /// no socket directory (the default host is `localhost`).
    pub fn from_vars<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            os_user: None,
            os_home: None,
            socket_dirs: Vec::new(),
        }
    }

    /// Replaces the operating-system user name, the default `user`.
    pub fn with_os_user(mut self, user: impl Into<String>) -> Self {
        self.os_user = Some(user.into());
        self
    }

    /// Replaces the directories searched for a server socket
    /// (`.s.PGSQL.PORT`) when no host is given.
    pub fn with_socket_dirs(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.socket_dirs = dirs.into_iter().collect();
        self
    }

    /// A variable's value; unset and empty are the same, as for libpq's
    /// connection defaults.
    pub(super) fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The home directory: `HOME`, as libpq reads it first, else the
    /// user's entry in the system's user database.
    pub(super) fn home(&self) -> Option<&Path> {
        self.var("HOME").map(Path::new).or(self.os_home.as_deref())
    }

    /// The default user name: the operating-system user (libpq asks the
    /// system for the effective user's name).
    pub(super) fn os_user(&self) -> Option<&str> {
        self.os_user.as_deref()
    }

    /// The default host: the first socket directory that holds a server
    /// socket for `port`, else `localhost`.
    pub(super) fn default_host(&self, port: &str) -> String {
        default_host_in(&self.socket_dirs, port)
    }
}

/// The default host of a string that names none, read without libpq's
/// environment: the first of `/var/run/postgresql` (Debian's and Ubuntu's
/// libpq) and `/tmp` (upstream's) that holds a server socket for `port`,
/// else `localhost`, as [`LibpqEnv::from_process`] finds it.
pub(super) fn standard_default_host(port: u16) -> String {
    let dirs: Vec<PathBuf> = SOCKET_DIRS.iter().map(PathBuf::from).collect();
    default_host_in(&dirs, &port.to_string())
}

fn default_host_in(dirs: &[PathBuf], port: &str) -> String {
    dirs.iter()
        .find(|dir| dir.join(format!(".s.PGSQL.{port}")).exists())
        .map(|dir| dir.display().to_string())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The effective user's name and home directory.
#[cfg(unix)]
fn process_user() -> (Option<String>, Option<PathBuf>) {
    let uid = nix::unistd::geteuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => (Some(user.name), Some(user.dir)),
        _ => (std::env::var("USER").ok().filter(|u| !u.is_empty()), None),
    }
}

#[cfg(not(unix))]
fn process_user() -> (Option<String>, Option<PathBuf>) {
    (
        std::env::var("USERNAME").ok().filter(|u| !u.is_empty()),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_variables_count_as_unset_and_the_default_host_needs_a_socket() {
        let env = LibpqEnv::from_vars([("PGHOST", ""), ("PGPORT", "6543")]);
        assert_eq!(env.var("PGHOST"), None);
        assert_eq!(env.var("PGPORT"), Some("6543"));
        assert_eq!(env.default_host("5432"), "localhost");
        let dir = std::env::temp_dir().join(format!("pgcoord-sock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".s.PGSQL.6543"), "").unwrap();
        let env = env.with_socket_dirs([PathBuf::from("/nonexistent"), dir.clone()]);
        assert_eq!(env.default_host("6543"), dir.display().to_string());
        assert_eq!(env.default_host("5432"), "localhost");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
