//! libpq's precedence: the connection string's parameters, then those of
//! its service (`service=`, `PGSERVICE`), then the `PG*` environment, then
//! the defaults (host: a local server's socket directory, else
//! `localhost`; port 5432; user: the OS user; database: the user name),
//! then the password file for a password still missing. Each value
//! remembers where it came from, so an error names the parameter and its
//! source, never its value.

use std::path::PathBuf;

use tokio_postgres::Config;

use super::connstring::{invalid, names_before_last_at, params, quote};
use super::driver_params::{
    keepalives_count, port_count, target_session_attrs, tcp_user_timeout_ms, trimmed_number,
};
use super::known_params::{unsupported, KNOWN, UNSUPPORTED_ENV};
use super::libpq_env::{LibpqEnv, ENV_PARAMS};
use super::passfile::{self, Loaded};
use super::service_file;
use super::tls::{SslMode, TlsSettings};
use super::tls_trust;
use crate::ports::error::Result;

/// Where a connection's password came from, for messages about it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PasswordSource {
    /// The URL or `key=value` string.
    ConnectionString,
    /// `PGPASSWORD`.
    Environment,
    /// The service's section of this `pg_service.conf`.
    ServiceFile(PathBuf),
    /// A matching line of this password file (`~/.pgpass`, `PGPASSFILE`).
    PasswordFile(PathBuf),
}

/// Where one parameter's value came from.
#[derive(Debug, Clone)]
enum Origin {
    String,
    Service(PathBuf),
    Env(&'static str),
    Default,
}

impl Origin {
    fn describe(&self) -> String {
        match self {
            Origin::String => "in the connection string".to_owned(),
            Origin::Service(f) => format!("in service file \"{}\"", f.display()),
            Origin::Env(var) => format!("from {var}"),
            Origin::Default => "by default".to_owned(),
        }
    }
}

/// What resolving gave: the driver's settings, TLS, the password's
/// source, warnings (an ignored password file).
pub(super) struct Resolved {
    pub(super) config: Config,
    pub(super) tls: TlsSettings,
    pub(super) password_source: Option<PasswordSource>,
    pub(super) warnings: Vec<String>,
}

#[derive(Default)]
struct Params(Vec<(String, String, Origin)>);

impl Params {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, _)| v.as_str())
    }

    fn origin(&self, key: &str) -> Option<&Origin> {
        self.0.iter().find(|(k, _, _)| k == key).map(|(_, _, o)| o)
    }

    /// libpq's deprecated `requiressl`: a value beginning with 1 is
    /// `sslmode=require` unless `sslmode` is given; any other means nothing.
    fn fold_requiressl(&mut self) {
        let Some(at) = self.0.iter().position(|(k, _, _)| k == "requiressl") else {
            return;
        };
        let (_, value, origin) = self.0.remove(at);
        if value.starts_with('1') {
            self.fill("sslmode", "require", origin);
        }
    }

    /// Integer parameters without the spaces libpq allows around them.
    fn trim_numbers(&mut self) {
        for (key, value, _) in &mut self.0 {
            if let Some(trimmed) = trimmed_number(key, value) {
                *value = trimmed;
            }
        }
    }

    /// Sets `key`, replacing a value it has.
    fn set(&mut self, key: &str, value: &str, origin: Origin) {
        self.0.retain(|(k, _, _)| k != key);
        self.0.push((key.to_owned(), value.to_owned(), origin));
    }

    /// Sets `key` unless it is set already (a later source never overrides).
    fn fill(&mut self, key: &str, value: &str, origin: Origin) {
        if self.get(key).is_none() {
            self.0.push((key.to_owned(), value.to_owned(), origin));
        }
    }
}

/// The string's parameters alone (`env: None`, as tokio-postgres reads a
/// string) or libpq's whole precedence over `env`.
pub(super) fn resolve(s: Option<&str>, env: Option<&LibpqEnv>) -> Result<Resolved> {
    let mut p = Params::default();
    for (k, v) in params(s.unwrap_or(""))? {
        // libpq: a later duplicate in the string replaces the earlier one.
        p.0.retain(|(key, _, _)| *key != k);
        let unknown = !KNOWN.contains(&k.as_str());
        p.0.push((k, v, Origin::String));
        if unknown {
            break; // refused below; many unknown names are not deduplicated (quadratic)
        }
    }
    p.fold_requiressl();
    if let Some((key, _, _)) = p.0.iter().find(|(k, _, _)| !KNOWN.contains(&k.as_str())) {
        return Err(invalid(match unsupported(key) {
            Some(why) => format!("connection parameter `{key}` is not supported: {why}"),
            // Not a name at all, or written before the URL's last `@`:
            // most likely a password's tail read as a query (a `/` in it
            // ends libpq's credentials early), so never repeated.
            None if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                || names_before_last_at(s.unwrap_or("")).contains(key) =>
            {
                "a parameter whose name is not a parameter name (a `/` or `@` in the \
                 password or user name is written %2F or %40)"
                    .to_owned()
            }
            None => format!("unknown connection parameter `{key}`"),
        }));
    }
    // What libpq would enforce from the environment is never dropped silently.
    if let Some(env) = env {
        for (var, key) in UNSUPPORTED_ENV {
            if let (Some(_), Some(why)) = (env.var(var), unsupported(key)) {
                return Err(invalid(format!(
                    "{var} is set (libpq's `{key}`), which is not supported: {why}; unset it"
                )));
            }
        }
    }
    if env.is_none() {
        // Both name files that only libpq's rules read: never drop them silently.
        if let Some(key) = ["service", "passfile"]
            .into_iter()
            .find(|k| p.get(k).is_some())
        {
            return Err(invalid(format!(
                "connection parameter `{key}` is read only with libpq's environment rules \
                 (ConnectOptions::parse_with_env, from_env)"
            )));
        }
    }
    let mut warnings = Vec::new();
    let mut password_source = None;
    if let Some(env) = env {
        let service = p
            .get("service")
            .map(|s| (s.to_owned(), Origin::String))
            .or_else(|| {
                env.var("PGSERVICE")
                    .map(|s| (s.to_owned(), Origin::Env("PGSERVICE")))
            });
        if let Some((name, _)) = service {
            let found = service_file::find(&name, env)?;
            for (k, v) in &found.params {
                if !KNOWN.contains(&k.as_str()) {
                    return Err(invalid(format!(
                        "unknown connection parameter `{k}` in service file \"{}\"",
                        found.file.display()
                    )));
                }
                p.fill(k, v, Origin::Service(found.file.clone()));
            }
            p.fold_requiressl();
        }
        for (var, key) in ENV_PARAMS {
            if let Some(v) = env.var(var) {
                p.fill(key, v, Origin::Env(var));
            }
        }
        // libpq's deprecated PGREQUIRESSL: a value beginning with 1 is
        // sslmode=require, unless sslmode is given.
        if env.var("PGREQUIRESSL").is_some_and(|v| v.starts_with('1')) {
            p.fill("sslmode", "require", Origin::Env("PGREQUIRESSL"));
        }
        p.trim_numbers();
        let port = p.get("port").unwrap_or("5432").to_owned();
        p.fill("port", &port, Origin::Default);
        if p.get("host").is_none() && p.get("hostaddr").is_none_or(str::is_empty) {
            p.fill("host", &env.default_host(&port), Origin::Default);
        }
        // libpq: no user name, or an empty one, is the OS user's.
        if let Some(user) = env.os_user() {
            if p.get("user").is_none_or(str::is_empty) {
                p.set("user", user, Origin::Default);
            }
        }
        if let Some(user) = p.get("user").map(str::to_owned) {
            p.fill("dbname", &user, Origin::Default);
        }
        // libpq: an empty password is none (the password file is read;
        // PGPASSWORD is not, the parameter having been given).
        if p.get("password").is_none_or(str::is_empty) {
            let file = match p.get("passfile") {
                Some(f) => Some(PathBuf::from(f)),
                None => env.home().map(|h| h.join(".pgpass")),
            };
            if let Some(file) = file {
                match passfile::load(&file) {
                    Loaded::Missing => {}
                    Loaded::Ignored(why) => {
                        tracing::warn!("{why}");
                        warnings.push(why);
                    }
                    Loaded::Read(entries) => {
                        if let Some(pw) = password_from(&entries, &p) {
                            p.set("password", &pw, Origin::Default);
                            password_source = Some(PasswordSource::PasswordFile(file));
                        }
                    }
                }
            }
        }
    }
    // Still empty: no password, as in libpq (never sent as one).
    p.0.retain(|(k, v, _)| k != "password" || !v.is_empty());
    if password_source.is_none() {
        password_source = p.origin("password").map(|o| match o {
            Origin::Service(f) => PasswordSource::ServiceFile(f.clone()),
            Origin::Env(_) => PasswordSource::Environment,
            _ => PasswordSource::ConnectionString,
        });
    }
    p.trim_numbers();
    let (config, tls) = build(&p)?;
    Ok(Resolved {
        config,
        tls,
        password_source,
        warnings,
    })
}

/// The password file's password for the first host that has one
/// (tokio-postgres keeps one password for every host).
fn password_from(file: &passfile::PassFile, p: &Params) -> Option<String> {
    let hosts: Vec<&str> = p
        .get("host")
        .or_else(|| p.get("hostaddr"))
        .unwrap_or("")
        .split(',')
        .collect();
    let ports: Vec<&str> = p.get("port").unwrap_or("").split(',').collect();
    let dbname = p.get("dbname").unwrap_or("");
    let user = p.get("user").unwrap_or("");
    hosts.iter().enumerate().find_map(|(i, host)| {
        // libpq: a socket in the default directory, or no host, is `localhost`.
        let host = if host.is_empty() || ["/var/run/postgresql", "/tmp"].contains(host) {
            "localhost"
        } else {
            host
        };
        let port = if ports.len() == 1 {
            ports[0]
        } else {
            ports.get(i).copied().unwrap_or("")
        };
        let port = if port.is_empty() { "5432" } else { port };
        file.lookup(host, port, dbname, user).map(str::to_owned)
    })
}

/// The driver's config and the TLS settings from the resolved parameters.
fn build(p: &Params) -> Result<(Config, TlsSettings)> {
    let mut tls = TlsSettings::default();
    let mut conninfo = Vec::new();
    let mut tcp_user_timeout = None;
    let bad = |key: &str, origin: &Origin, expected: &str| {
        invalid(format!(
            "invalid value for connection parameter `{key}` ({}){expected}",
            origin.describe()
        ))
    };
    if let Some(ports) = p.get("port") {
        let hosts = p
            .get("hostaddr")
            .filter(|a| !a.is_empty())
            .or_else(|| p.get("host"))
            .unwrap_or("");
        port_count(hosts, ports).map_err(|why| {
            let origin = p.origin("port").map_or(String::new(), Origin::describe);
            invalid(format!("connection parameter `port` ({origin}): {why}"))
        })?;
    }
    for (key, value, origin) in &p.0 {
        match key.as_str() {
            "passfile" | "service" => {}
            // Empty is unset, as in libpq.
            "hostaddr" | "sslsni" | "ssl_min_protocol_version" | "ssl_max_protocol_version"
                if value.is_empty() => {}
            "sslmode" => {
                tls.mode = SslMode::parse(value).ok_or_else(|| {
                    bad(
                        key,
                        origin,
                        ": expected disable, allow, prefer, require, verify-ca or verify-full",
                    )
                })?;
            }
            // libpq 16's OS CA store: refused before connecting.
            "sslrootcert" if value == "system" => {
                let why = format!(
                    ": `system` is not supported: {}",
                    tls_trust::SYSTEM_STORE_WHY
                );
                return Err(bad(key, origin, &why));
            }
            "sslrootcert" => tls.root_cert = Some(PathBuf::from(value)),
            "sslcert" => tls.client_cert = Some(PathBuf::from(value)),
            "sslkey" => tls.client_key = Some(PathBuf::from(value)),
            // Empty is unset, as in libpq.
            "sslcrl" => tls.crl = (!value.is_empty()).then(|| PathBuf::from(value)),
            "sslcrldir" => tls.crl_dir = (!value.is_empty()).then(|| PathBuf::from(value)),
            "sslsni"
            | "sslcompression"
            | "ssl_min_protocol_version"
            | "ssl_max_protocol_version"
            | "gssencmode" => super::tls_options::apply(&mut tls, key, value)
                .map_err(|why| bad(key, origin, &why))?,
            "fallback_application_name" if p.get("application_name").is_none() => {
                conninfo.push(format!("application_name={}", quote(value)));
            }
            "fallback_application_name" => {}
            "tcp_user_timeout" => {
                tcp_user_timeout =
                    tcp_user_timeout_ms(value).map_err(|why| bad(key, origin, &why))?;
            }
            "keepalives_count" => {
                conninfo.push(keepalives_count(value, quote).map_err(|why| bad(key, origin, &why))?)
            }
            "target_session_attrs" => {
                let hosts = p.get("host").or_else(|| p.get("hostaddr")).unwrap_or("");
                let driver = target_session_attrs(value, hosts.contains(','))
                    .map_err(|why| bad(key, origin, &why))?;
                conninfo.push(format!("target_session_attrs={driver}"));
            }
            _ => {
                let pair = format!("{key}={}", quote(value));
                if pair.parse::<Config>().is_err() {
                    return Err(bad(key, origin, ""));
                }
                conninfo.push(pair);
            }
        }
    }
    let with_origin = |key: &str| {
        let origin = p
            .origin(key)
            .map_or("by default".to_owned(), Origin::describe);
        p.get(key).map(|v| (v, origin))
    };
    if let Some(why) =
        super::tls_options::weak_for_direct(with_origin("sslnegotiation"), with_origin("sslmode"))
    {
        return Err(invalid(why));
    }
    let mut config = conninfo.join(" ").parse::<Config>().map_err(|_| {
        invalid("the parameters do not combine (hosts, ports and addresses must be as many)".into())
    })?;
    if let Some(timeout) = tcp_user_timeout {
        config.tcp_user_timeout(timeout);
    }
    Ok((config, tls))
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "resolve_libpq_tests.rs"]
mod libpq_tests;
