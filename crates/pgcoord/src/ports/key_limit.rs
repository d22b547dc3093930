//! How long a key may be, and how a key too long is shown.

/// The longest key, in bytes, that the lock managers accept: 1 MiB.
///
/// Keys are hashed locally and never sent to the server (only the 63-bit id
/// is), so any key another service locks on (the Python reference library
/// takes keys of any length) can be used here; the limit only guards
/// against a whole document passed as a key by mistake.
pub const MAX_KEY_LEN: usize = 1 << 20;

/// `key` as errors and spans show it: whole, but for a key too long to be
/// locked (over [`MAX_KEY_LEN`]), whose first 64 characters are followed
/// by `…`, so that a document passed as a key by mistake does not end up
/// in every log line about it.
pub(crate) fn shown_key(key: &str) -> std::borrow::Cow<'_, str> {
    match key.len() > MAX_KEY_LEN {
        true => format!("{}…", key.chars().take(64).collect::<String>()).into(),
        false => key.into(),
    }
}
