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
}
