//! Which libpq connection parameters this crate takes, and which it
//! refuses by name (with why). For `resolve.rs`.

/// The connection parameters this crate takes: tokio-postgres's, and
/// those it reads itself (TLS beyond `require`, the password file, the
/// service, libpq's fallback name).
pub(super) const KNOWN: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "service",
    "options",
    "application_name",
    "fallback_application_name",
    "sslmode",
    "requiressl",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslcrl",
    "sslcrldir",
    "sslnegotiation",
    "sslsni",
    "sslcompression",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "gssencmode",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "keepalives_count",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// libpq parameters this client does not take, and why; named in the
/// error rather than called unknown, since each would change what the
/// connection accepts.
pub(super) fn unsupported(key: &str) -> Option<&'static str> {
    Some(match key {
        "sslpassword" => {
            "this client cannot decrypt an encrypted sslkey; store the key decrypted, \
             readable by its owner only (chmod 0600)"
        }
        "require_auth" => "this client cannot restrict the server's authentication methods",
        "sslcertmode" => {
            "this client sends the client certificate whenever sslcert (or \
             ~/.postgresql/postgresql.crt) exists and the server asks for one"
        }
        _ => return None,
    })
}

/// The environment variables of [`unsupported`] parameters.
pub(super) const UNSUPPORTED_ENV: &[(&str, &str)] = &[
    ("PGREQUIREAUTH", "require_auth"),
    ("PGSSLCERTMODE", "sslcertmode"),
];
