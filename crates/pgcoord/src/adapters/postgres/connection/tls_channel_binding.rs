//! SCRAM channel binding over our TLS sessions: `tls-server-end-point`
//! (RFC 5929), the one type PostgreSQL offers (`SCRAM-SHA-256-PLUS`).
//!
//! The binding data is a hash of the server's own certificate, with the
//! hash function of the certificate's signature (SHA-256 for one signed
//! with MD5 or SHA-1), as PostgreSQL's server computes it. A signature
//! without such a hash (Ed25519, RSA-PSS) gets no binding: the server
//! cannot compute one either, and `channel_binding=require` then fails as
//! it does with libpq.

use sha2::{Digest, Sha256, Sha384, Sha512};
use tokio_postgres::tls::ChannelBinding;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The hash a certificate's signature algorithm names, by OID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

fn hash_of_signature(oid: &str) -> Option<Hash> {
    match oid {
        // md5WithRSA, sha1WithRSA, ecdsa-with-SHA1, dsa-with-sha1: SHA-256 (RFC 5929 4.1).
        "1.2.840.113549.1.1.4"
        | "1.2.840.113549.1.1.5"
        | "1.2.840.10045.4.1"
        | "1.2.840.10040.4.3" => Some(Hash::Sha256),
        "1.2.840.113549.1.1.11" | "1.2.840.10045.4.3.2" | "2.16.840.1.101.3.4.3.2" => {
            Some(Hash::Sha256)
        }
        "1.2.840.113549.1.1.12" | "1.2.840.10045.4.3.3" => Some(Hash::Sha384),
        "1.2.840.113549.1.1.13" | "1.2.840.10045.4.3.4" => Some(Hash::Sha512),
        _ => None,
    }
}

/// The `tls-server-end-point` binding for the server certificate `der`,
/// or none where it has no hash to use (or does not parse).
pub(crate) fn server_end_point(der: &[u8]) -> ChannelBinding {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return ChannelBinding::none();
    };
    let oid = cert.signature_algorithm.algorithm.to_id_string();
    match hash_of_signature(&oid) {
        Some(Hash::Sha256) => ChannelBinding::tls_server_end_point(Sha256::digest(der).to_vec()),
        Some(Hash::Sha384) => ChannelBinding::tls_server_end_point(Sha384::digest(der).to_vec()),
        Some(Hash::Sha512) => ChannelBinding::tls_server_end_point(Sha512::digest(der).to_vec()),
        None => ChannelBinding::none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_follows_the_signature_and_md5_or_sha1_become_sha256() {
        assert_eq!(
            hash_of_signature("1.2.840.113549.1.1.11"),
            Some(Hash::Sha256)
        );
        assert_eq!(
            hash_of_signature("1.2.840.113549.1.1.5"),
            Some(Hash::Sha256)
        );
        assert_eq!(hash_of_signature("1.2.840.10045.4.3.3"), Some(Hash::Sha384));
        assert_eq!(
            hash_of_signature("1.2.840.113549.1.1.13"),
            Some(Hash::Sha512)
        );
        // Ed25519: no hash, no binding (PostgreSQL's server has none either).
        assert_eq!(hash_of_signature("1.3.101.112"), None);
    }

    #[test]
    fn a_certificate_that_does_not_parse_gets_no_binding() {
        // Must not panic, and binds nothing.
        let _ = server_end_point(b"not a certificate");
    }
}
