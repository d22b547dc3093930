//! Derivation of PostgreSQL advisory-lock ids from string keys.

use sha2::{Digest, Sha256};

use super::key_limit::shown_key;
pub use super::key_limit::MAX_KEY_LEN;

/// Derives the 63-bit advisory-lock id for `key`.
///
/// The id is the first 8 bytes of the SHA-256 digest of the key's UTF-8
/// bytes, read big-endian, with the top bit cleared, so it is always a
/// non-negative `i64`. The derivation is bit-exact with the Python reference
/// library, so services written in either language exclude each other on the
/// same key.
///
/// ```
/// use pgcoord::lock_id_for_key;
/// assert_eq!(lock_id_for_key("alpha"), 1068468761257547166);
/// assert_eq!(lock_id_for_key(""), 7183457195969485844);
/// ```
pub fn lock_id_for_key(key: &str) -> i64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) & 0x7FFF_FFFF_FFFF_FFFF) as i64
}

/// Checks a key's length and derives its id; the error names the key and timeout.
pub(crate) fn checked_lock_id(
    key: &str,
    timeout: Option<std::time::Duration>,
) -> crate::Result<i64> {
    if key.len() > MAX_KEY_LEN {
        return Err(crate::ports::error::LockAcquisitionError::new(
            shown_key(key),
            crate::ports::error::AcquireFailure::KeyTooLong {
                len: key.len(),
                limit: MAX_KEY_LEN,
            },
            timeout,
        )
        .into());
    }
    Ok(lock_id_for_key(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors() {
        assert_eq!(lock_id_for_key(""), 7183457195969485844);
        assert_eq!(lock_id_for_key("alpha"), 1068468761257547166);
        assert_eq!(lock_id_for_key("beta"), 8380746901480884457);
    }

    #[test]
    fn ids_are_non_negative_for_many_keys() {
        for i in 0..10_000 {
            assert!(lock_id_for_key(&format!("key-{i}")) >= 0);
        }
    }

    #[test]
    fn keys_up_to_the_limit_are_accepted_and_longer_ones_refused() {
        let long = "k".repeat(MAX_KEY_LEN);
        assert_eq!(
            checked_lock_id(&long, None).unwrap(),
            lock_id_for_key(&long)
        );
        let err = checked_lock_id(&format!("{long}k"), None).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("1048577 bytes") && text.len() < 300, "{text}");
    }

    #[test]
    fn non_ascii_and_nul_keys_hash_their_utf8_bytes() {
        assert_ne!(lock_id_for_key("a\0b"), lock_id_for_key("ab"));
        assert_ne!(lock_id_for_key("é"), lock_id_for_key("e"));
    }
}
