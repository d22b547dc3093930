//! One connection attempt per host, as libpq makes them.
//!
//! tokio-postgres tries a multi-host config's hosts in order, but bounds
//! only each TCP connect by `connect_timeout`: a host that accepts the
//! connection and then never answers (a SIGSTOPped server, a paused VM, a
//! frozen old primary) holds the whole attempt, and an overall timeout
//! then gives up before the next host is tried. libpq gives every host
//! its own `connect_timeout` and moves on; so do we, by splitting the
//! config into one config per host and bounding each attempt.

use tokio_postgres::config::{Host, LoadBalanceHosts};
use tokio_postgres::Config;

/// `config` as one config per host, in the order they are tried; a config
/// with one host (or none) is returned as it is.
pub(crate) fn one_per_host(config: &Config) -> Vec<Config> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    // Hosts given by address alone (`hostaddr=a,b` without `host`) are
    // several hosts too.
    let count = hosts.len().max(addrs.len());
    if count <= 1 {
        return vec![config.clone()];
    }
    let ports = config.get_ports();
    let mut out: Vec<Config> = (0..count)
        .map(|i| {
            let mut c = without_hosts(config);
            let host = hosts.get(i);
            match host {
                Some(Host::Tcp(name)) => {
                    c.host(name);
                }
                #[cfg(unix)]
                Some(Host::Unix(path)) => {
                    c.host_path(path);
                }
                None => {}
            };
            if host.is_some_and(is_socket) && addrs.get(i).is_none() {
                // libpq ignores sslmode on a Unix-domain socket.
                c.ssl_mode(tokio_postgres::config::SslMode::Disable);
            }
            // libpq's rule: one port for all hosts, or one port per host.
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            c.port(port);
            if let Some(addr) = addrs.get(i) {
                c.hostaddr(*addr);
            }
            c
        })
        .collect();
    if config.get_load_balance_hosts() == LoadBalanceHosts::Random {
        let start = random_below(out.len());
        out.rotate_left(start);
    }
    out
}

/// `config`, whose hosts are given by address alone (`hostaddr`,
/// `PGHOSTADDR`, no `host`), with each address as its host's name too:
/// the driver refuses a TLS handshake without a host name, where libpq
/// goes on (it checks no name below `verify-full`, and sends no SNI for an
/// address). `None` when `config` names its hosts (or has no address).
pub(crate) fn addresses_as_names(config: &Config) -> Option<Config> {
    let addrs = config.get_hostaddrs();
    if !config.get_hosts().is_empty() || addrs.is_empty() {
        return None;
    }
    let mut named = config.clone();
    for addr in addrs {
        named.host(addr.to_string());
    }
    Some(named)
}

/// Whether `config` names hosts and every one is a Unix-domain socket
/// directory (no host address given for it), where libpq ignores
/// `sslmode`.
pub(crate) fn every_host_is_a_socket(config: &Config) -> bool {
    let hosts = config.get_hosts();
    !hosts.is_empty() && config.get_hostaddrs().is_empty() && hosts.iter().all(is_socket)
}

fn is_socket(host: &Host) -> bool {
    match host {
        Host::Tcp(_) => false,
        #[cfg(unix)]
        Host::Unix(_) => true,
    }
}

/// Every setting of `config` but its hosts, ports and host addresses.
fn without_hosts(config: &Config) -> Config {
    let mut c = Config::new();
    if let Some(v) = config.get_user() {
        c.user(v);
    }
    if let Some(v) = config.get_password() {
        c.password(v);
    }
    if let Some(v) = config.get_dbname() {
        c.dbname(v);
    }
    if let Some(v) = config.get_options() {
        c.options(v);
    }
    if let Some(v) = config.get_application_name() {
        c.application_name(v);
    }
    c.ssl_mode(config.get_ssl_mode());
    c.ssl_negotiation(config.get_ssl_negotiation());
    if let Some(v) = config.get_connect_timeout() {
        c.connect_timeout(*v);
    }
    if let Some(v) = config.get_tcp_user_timeout() {
        c.tcp_user_timeout(*v);
    }
    c.keepalives(config.get_keepalives());
    c.keepalives_idle(config.get_keepalives_idle());
    if let Some(v) = config.get_keepalives_interval() {
        c.keepalives_interval(v);
    }
    if let Some(v) = config.get_keepalives_retries() {
        c.keepalives_retries(v);
    }
    c.target_session_attrs(config.get_target_session_attrs());
    c.channel_binding(config.get_channel_binding());
    c
}

/// A number in `0..n` that differs between calls (for
/// `load_balance_hosts=random`; no cryptographic quality needed).
fn random_below(n: usize) -> usize {
    use std::hash::{BuildHasher, RandomState};
    (RandomState::new().hash_one(std::time::Instant::now()) as usize) % n.max(1)
}

/// `host:port` of a one-host config, for an error message.
pub(crate) fn host_name(config: &Config) -> String {
    let port = config.get_ports().first().copied().unwrap_or(5432);
    match (config.get_hosts().first(), config.get_hostaddrs().first()) {
        (Some(Host::Tcp(h)), _) => format!("{h}:{port}"),
        #[cfg(unix)]
        (Some(Host::Unix(p)), _) => format!("{}:{port}", p.display()),
        (None, Some(addr)) => format!("{addr}:{port}"),
        // Never built by `ConnectOptions` (it fills the default host); an
        // address that was not tried is never named.
        (None, None) => "no host given".to_owned(),
    }
}

/// Whether the first host of `config` is a Unix-domain socket (not an
/// address).
pub(super) fn first_host_is_a_socket(config: &Config) -> bool {
    config.get_hostaddrs().is_empty() && config.get_hosts().first().is_some_and(is_socket)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::config::TargetSessionAttrs;

    #[test]
    fn each_host_gets_its_own_config_with_every_other_setting() {
        let config: Config = "postgres://app:pw@h1:5433,h2/db?target_session_attrs=read-write\
             &application_name=x&connect_timeout=3"
            .parse()
            .unwrap();
        let each = one_per_host(&config);
        assert_eq!(each.len(), 2);
        for (c, (host, port)) in each.iter().zip([("h1", 5433), ("h2", 5432)]) {
            assert_eq!(c.get_hosts(), [Host::Tcp(host.into())]);
            assert_eq!(c.get_ports(), [port]);
            assert_eq!(c.get_user(), Some("app"));
            assert_eq!(c.get_password(), Some(&b"pw"[..]));
            assert_eq!(c.get_dbname(), Some("db"));
            assert_eq!(c.get_application_name(), Some("x"));
            assert_eq!(c.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
            assert_eq!(c.get_connect_timeout().map(|d| d.as_secs()), Some(3));
        }
    }

    #[test]
    fn one_port_serves_every_host_and_one_host_is_left_alone() {
        let config: Config = "host=a,b port=6000".parse().unwrap();
        let ports: Vec<_> = one_per_host(&config)
            .iter()
            .map(|c| c.get_ports()[0])
            .collect();
        assert_eq!(ports, [6000, 6000]);
        let single: Config = "host=a port=6000".parse().unwrap();
        assert_eq!(one_per_host(&single).len(), 1);
    }

    #[test]
    fn hosts_given_by_address_alone_are_split_and_named_by_their_address() {
        let config: Config = "hostaddr=127.0.0.1,::1 port=6000,6001".parse().unwrap();
        let each = one_per_host(&config);
        assert_eq!(each.len(), 2);
        assert!(each.iter().all(|c| c.get_hosts().is_empty()));
        let named = addresses_as_names(&each[1]).expect("an address alone");
        assert_eq!(named.get_hosts(), [Host::Tcp("::1".into())]);
        assert_eq!(named.get_hostaddrs(), each[1].get_hostaddrs());
        assert_eq!(named.get_ports(), [6001]);
        let both = addresses_as_names(&config).expect("addresses alone");
        assert_eq!(both.get_hosts().len(), 2);
        let with_name: Config = "host=db hostaddr=127.0.0.1".parse().unwrap();
        assert!(addresses_as_names(&with_name).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_socket_host_connects_without_tls_whatever_the_mode() {
        use tokio_postgres::config::SslMode;
        let sockets: Config = "host=/run/postgresql,/tmp sslmode=require".parse().unwrap();
        assert!(every_host_is_a_socket(&sockets));
        let tcp: Config = "host=db.example sslmode=require".parse().unwrap();
        assert!(!every_host_is_a_socket(&tcp));
        let mixed: Config = "host=/tmp,db.example sslmode=require".parse().unwrap();
        assert!(!every_host_is_a_socket(&mixed));
        let modes: Vec<_> = one_per_host(&mixed)
            .iter()
            .map(|c| c.get_ssl_mode())
            .collect();
        assert_eq!(modes, [SslMode::Disable, SslMode::Require]);
    }
}
