//! libpq's TLS and GSSAPI parameters beyond `sslmode` and the certificate
//! files (`sslsni`, `sslcompression`, `ssl_min_protocol_version`,
//! `ssl_max_protocol_version`, `gssencmode`), as [`TlsSettings`].

use super::tls::TlsSettings;

/// libpq's TLS and GSSAPI options beyond `sslmode`, in this client's
/// terms: rustls speaks TLS 1.2 and 1.3 and never compresses; this client
/// has no GSSAPI encryption, so `gssencmode=prefer` (libpq's default) is
/// `disable`, as in a libpq built without GSSAPI.
pub(super) fn apply(
    tls: &mut TlsSettings,
    key: &str,
    value: &str,
) -> std::result::Result<(), String> {
    use super::tls::TlsVersions as V;
    let version = |v: &str| match v {
        "TLSv1" | "TLSv1.1" | "TLSv1.2" => Ok(12),
        "TLSv1.3" => Ok(13),
        _ => Err(": expected TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3".to_owned()),
    };
    match key {
        "sslsni" => match value {
            "0" => tls.no_sni = true,
            "1" => tls.no_sni = false,
            _ => return Err(": expected 0 or 1".to_owned()),
        },
        // No PostgreSQL since 14 compresses; libpq then goes on uncompressed.
        "sslcompression" => match value {
            "0" | "1" => {}
            _ => return Err(": expected 0 or 1".to_owned()),
        },
        "ssl_min_protocol_version" => {
            // TLS 1.0 and 1.1 are below rustls's floor: any minimum up to
            // 1.2 is met by 1.2.
            if version(value)? == 13 {
                if tls.versions == V::Tls12 {
                    return Err(": above ssl_max_protocol_version".to_owned());
                }
                tls.versions = V::Tls13;
            }
        }
        "ssl_max_protocol_version" => match (value, version(value)?) {
            ("TLSv1" | "TLSv1.1", _) => {
                return Err(": this client speaks TLSv1.2 and TLSv1.3 only".to_owned())
            }
            (_, 12) if tls.versions == V::Tls13 => {
                return Err(": below ssl_min_protocol_version".to_owned())
            }
            (_, 12) => tls.versions = V::Tls12,
            _ => {}
        },
        "gssencmode" => match value {
            "disable" | "prefer" => {}
            "require" => {
                return Err(": require is not supported (this client has no GSSAPI \
                            encryption); use sslmode for an encrypted session"
                    .to_owned())
            }
            _ => return Err(": expected disable, prefer or require".to_owned()),
        },
        _ => unreachable!("not a TLS option: {key}"),
    }
    Ok(())
}

/// libpq's rule for `sslnegotiation=direct`: the session opens with the
/// TLS handshake, so a mode that may go without TLS (`disable`, `allow`,
/// `prefer`, the default) is a mistake, refused before any connection
/// ("weak sslmode ... may not be used with sslnegotiation=direct").
/// `negotiation` and `mode` are the parameters' values, each with where it
/// came from; `None` when they go together.
pub(super) fn weak_for_direct(
    negotiation: Option<(&str, String)>,
    mode: Option<(&str, String)>,
) -> Option<String> {
    let (negotiation, from) = negotiation?;
    let (mode, mode_from) = mode.unwrap_or(("prefer", "by default".to_owned()));
    if negotiation != "direct" || !matches!(mode, "disable" | "allow" | "prefer") {
        return None;
    }
    Some(format!(
        "weak sslmode \"{mode}\" may not be used with sslnegotiation=direct (`sslnegotiation` \
         {from}, `sslmode` {mode_from}): direct negotiation opens every connection with the \
         TLS handshake, so set sslmode (or PGSSLMODE) to require, verify-ca or verify-full, \
         or leave sslnegotiation (PGSSLNEGOTIATION) unset"
    ))
}

#[cfg(test)]
mod tests {
    use super::super::tls::TlsVersions;
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<TlsSettings, String> {
        let mut tls = TlsSettings::default();
        for (k, v) in pairs {
            apply(&mut tls, k, v)?;
        }
        Ok(tls)
    }

    #[test]
    fn versions_sni_and_gssencmode_are_taken_as_libpq_means_them() {
        assert_eq!(settings(&[]).unwrap().versions, TlsVersions::Any);
        let v13 = settings(&[("ssl_min_protocol_version", "TLSv1.3")]).unwrap();
        assert_eq!(v13.versions, TlsVersions::Tls13);
        let v12 = settings(&[("ssl_max_protocol_version", "TLSv1.2")]).unwrap();
        assert_eq!(v12.versions, TlsVersions::Tls12);
        let floor = settings(&[("ssl_min_protocol_version", "TLSv1")]).unwrap();
        assert_eq!(floor.versions, TlsVersions::Any);
        assert!(settings(&[("sslsni", "0")]).unwrap().no_sni);
        assert!(!settings(&[("sslsni", "1")]).unwrap().no_sni);
        assert!(settings(&[("gssencmode", "disable"), ("sslcompression", "1")]).is_ok());
        assert!(settings(&[("gssencmode", "prefer")]).is_ok());
    }

    #[test]
    fn what_this_client_cannot_do_is_refused_with_the_reason() {
        let gss = settings(&[("gssencmode", "require")]).unwrap_err();
        assert!(gss.contains("no GSSAPI"), "{gss}");
        let old = settings(&[("ssl_max_protocol_version", "TLSv1.1")]).unwrap_err();
        assert!(old.contains("TLSv1.2 and TLSv1.3 only"), "{old}");
        let crossed = settings(&[
            ("ssl_min_protocol_version", "TLSv1.3"),
            ("ssl_max_protocol_version", "TLSv1.2"),
        ]);
        assert!(crossed.is_err());
        let crossed = settings(&[
            ("ssl_max_protocol_version", "TLSv1.2"),
            ("ssl_min_protocol_version", "TLSv1.3"),
        ]);
        assert!(crossed.is_err());
        assert!(settings(&[("sslsni", "yes")]).is_err());
        assert!(settings(&[("ssl_min_protocol_version", "SSLv3")]).is_err());
    }

    /// libpq's rule, from the string or the environment: a usage error
    /// naming both parameters and where they came from, before anything is
    /// connected.
    #[test]
    fn direct_negotiation_with_a_mode_that_may_go_without_tls_is_refused() {
        use crate::adapters::postgres::{ConnectOptions, LibpqEnv};
        use crate::Error;
        use tokio_postgres::config::SslNegotiation;
        for mode in ["", " sslmode=disable", " sslmode=allow", " sslmode=prefer"] {
            let s = format!("host=db.example{mode} sslnegotiation=direct");
            let err = ConnectOptions::parse(&s).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{s}: {err:?}");
            let shown = mode.strip_prefix(" sslmode=").unwrap_or("prefer");
            let text = err.to_string();
            assert!(
                text.contains(&format!("weak sslmode \"{shown}\""))
                    && text.contains("`sslnegotiation` in the connection string")
                    && text.contains("require, verify-ca or verify-full"),
                "{s}: {text}"
            );
            assert_eq!(
                text.contains("`sslmode` by default"),
                mode.is_empty(),
                "{text}"
            );
        }
        for mode in ["require", "verify-ca", "verify-full"] {
            let s = format!("host=db.example sslmode={mode} sslnegotiation=direct");
            let o = ConnectOptions::parse(&s).unwrap();
            assert_eq!(o.config().get_ssl_negotiation(), SslNegotiation::Direct);
        }
        ConnectOptions::parse("host=db.example sslnegotiation=postgres").unwrap();
        // From the environment, each variable named.
        let env = LibpqEnv::from_vars([("PGSSLNEGOTIATION", "direct"), ("PGHOST", "db.example")]);
        let err = ConnectOptions::resolve(None, &env).unwrap_err().to_string();
        assert!(
            err.contains("from PGSSLNEGOTIATION") && err.contains("`sslmode` by default"),
            "{err}"
        );
        let env = LibpqEnv::from_vars([
            ("PGSSLNEGOTIATION", "direct"),
            ("PGSSLMODE", "allow"),
            ("PGHOST", "db.example"),
        ]);
        let err = ConnectOptions::resolve(None, &env).unwrap_err().to_string();
        assert!(err.contains("`sslmode` from PGSSLMODE"), "{err}");
        let env = LibpqEnv::from_vars([
            ("PGSSLNEGOTIATION", "direct"),
            ("PGSSLMODE", "require"),
            ("PGHOST", "db.example"),
        ]);
        ConnectOptions::resolve(None, &env).unwrap();
    }

    /// Options changed after parsing are refused by the lock manager's and
    /// the read-model pool's build, and by a connect (a TLS settings error,
    /// never retried); a Unix-domain socket, where there is no TLS, keeps working.
    #[tokio::test]
    async fn direct_negotiation_made_weak_after_parsing_is_refused_before_connecting() {
        use super::super::tls::refuse_weak_direct;
        use crate::adapters::postgres::{ConnectOptions, PostgresLockManager, SslMode};
        use crate::error::BackendErrorKind;
        let strong = "host=127.0.0.1 port=1 sslmode=require sslnegotiation=direct";
        let weak = ConnectOptions::parse(strong)
            .unwrap()
            .with_ssl_mode(SslMode::Prefer);
        let (config, tls) = weak.clone().into_parts();
        assert!(refuse_weak_direct(&config, tls.mode).is_err());
        let err = PostgresLockManager::builder(weak.clone())
            .build()
            .unwrap_err();
        assert!(matches!(err, crate::Error::InvalidArgument(_)), "{err:?}");
        assert!(err.to_string().contains("weak sslmode \"prefer\""), "{err}");
        // The connect itself refuses it too (a TLS settings error, never
        // retried), for a driver config reaching it some other way.
        let make = super::super::tls::MakeRustls::new(tls.clone());
        let second = std::time::Duration::from_secs(1);
        let refused =
            super::super::connect::connect_each_host(std::slice::from_ref(&config), &make, second)
                .await
                .err()
                .expect("refused");
        assert_eq!(refused.kind(), BackendErrorKind::Tls, "{refused}");
        #[cfg(feature = "readmodels")]
        {
            let err = crate::adapters::postgres::PostgresDatabase::builder(weak)
                .build()
                .unwrap_err();
            assert!(err.to_string().contains("sslnegotiation=direct"), "{err}");
        }
        let socket =
            ConnectOptions::parse("host=/var/run/postgresql sslmode=require sslnegotiation=direct")
                .unwrap();
        let (config, tls) = socket.into_parts();
        assert_eq!(tls.mode, SslMode::Disable);
        refuse_weak_direct(&config, tls.mode).unwrap();
    }
}
