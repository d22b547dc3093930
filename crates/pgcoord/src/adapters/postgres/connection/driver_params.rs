//! libpq parameters whose form differs in tokio-postgres's connection
//! string: each is turned into what the driver takes, so that a libpq URL
//! means the same here.

use std::time::Duration;

use tokio_postgres::Config;

use super::conninfo::is_space;

/// `tcp_user_timeout`: libpq counts it in milliseconds, the driver's
/// string form in seconds (a libpq URL's 30000, 30 s, would be 8 hours
/// there). 0 or less: the system's default, as in libpq.
pub(super) fn tcp_user_timeout_ms(value: &str) -> Result<Option<Duration>, String> {
    let ms: i64 = value
        .trim()
        .parse()
        .map_err(|_| ": expected milliseconds".to_owned())?;
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

/// `keepalives_count`, libpq's name for what the driver calls
/// `keepalives_retries`: the driver's `name=value` pair (`quote` quotes
/// the value for a connection string).
pub(super) fn keepalives_count(value: &str, quote: fn(&str) -> String) -> Result<String, String> {
    let pair = format!("keepalives_retries={}", quote(value));
    match pair.parse::<Config>() {
        Ok(_) => Ok(pair),
        Err(_) => Err(": expected a number".to_owned()),
    }
}

/// libpq 14's `target_session_attrs` in tokio-postgres's terms: it checks
/// `transaction_read_only` after connecting, not `pg_is_in_recovery()`, so
/// `primary` is taken as `read-write` and `standby` as `read-only`; it
/// cannot prefer one host over another, so `prefer-standby` is `any` for
/// one host and refused for several.
pub(super) fn target_session_attrs(
    value: &str,
    several_hosts: bool,
) -> std::result::Result<&'static str, String> {
    Ok(match value {
        "any" => "any",
        "read-write" | "primary" => "read-write",
        "read-only" | "standby" => "read-only",
        "prefer-standby" if !several_hosts => "any",
        "prefer-standby" => {
            return Err(
                ": prefer-standby with several hosts is not supported (the driver cannot \
                        try the standbys first); use standby, or any with the standby listed first"
                    .to_owned(),
            )
        }
        _ => {
            return Err(
                ": expected any, read-write, read-only, primary, standby or prefer-standby"
                    .to_owned(),
            )
        }
    })
}

/// libpq's rule for several ports: one port for every host, or as many
/// ports as hosts (`hostaddr`'s, when given, else `host`'s); an empty
/// entry is the default port. The driver would refuse only when connecting.
pub(super) fn port_count(hosts: &str, ports: &str) -> Result<(), String> {
    let hosts = hosts.split(',').count();
    let ports = ports.split(',').count();
    if ports > 1 && ports != hosts {
        return Err(format!(
            "could not match {ports} port numbers to {hosts} hosts \
             (give one port, or one for each host)"
        ));
    }
    Ok(())
}

/// libpq's integer parameters, which it reads with spaces around them.
const NUMBERS: &[&str] = &[
    "port",
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
];

/// The value of an integer parameter without ASCII whitespace around it
/// (around each port of a list), as libpq reads `port=' 5432'`; `None`
/// for another parameter.
pub(super) fn trimmed_number(key: &str, value: &str) -> Option<String> {
    NUMBERS.contains(&key).then(|| {
        value
            .split(',')
            .map(|v| v.trim_matches(is_space))
            .collect::<Vec<_>>()
            .join(",")
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::adapters::postgres::connection::options::ConnectOptions;

    #[test]
    fn a_libpq_url_means_the_same_timeouts_and_keepalives_here() {
        let o = ConnectOptions::parse(
            "postgres://u@h/db?tcp_user_timeout=30000&keepalives_count=3&keepalives_idle=5",
        )
        .unwrap();
        let c = o.config();
        assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(30)));
        assert_eq!(c.get_keepalives_retries(), Some(3));
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(5));
        let unset = ConnectOptions::parse("host=h tcp_user_timeout=0").unwrap();
        assert_eq!(unset.config().get_tcp_user_timeout(), None);
        for bad in ["tcp_user_timeout=soon", "keepalives_count=many"] {
            let err = ConnectOptions::parse(&format!("host=h {bad}")).unwrap_err();
            let name = bad.split('=').next().unwrap();
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
