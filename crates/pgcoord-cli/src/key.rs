//! `eventsource lock key`: key to advisory-lock id.

use pgcoord::{lock_id_for_key, MAX_KEY_LEN};

use crate::printable::printable;
use crate::{exit, report};

/// The output line for one key.
pub fn key_line(key: &str) -> String {
    format!("{}\t{}\n", printable(key), lock_id_for_key(key))
}

/// Prints `KEY<TAB>LOCK_ID` per key; a key too long to lock is a usage error.
pub fn print_keys(keys: &[String]) -> i32 {
    if let Some(long) = keys.iter().find(|k| k.len() > MAX_KEY_LEN) {
        let shown: String = long.chars().take(40).collect();
        report!(
            "key {:?}… is {} bytes long; lock keys are at most {MAX_KEY_LEN} bytes",
            shown,
            long.len()
        );
        return exit::USAGE;
    }
    let out: String = keys.iter().map(|k| key_line(k)).collect();
    match crate::print_stdout(&out) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_key_tab_id() {
        assert_eq!(key_line("alpha"), "alpha\t1068468761257547166\n");
        assert_eq!(key_line(""), "\t7183457195969485844\n");
    }

    /// A literal backslash-n and a newline used to print alike; format
    /// characters (U+202E reorders what follows it) printed raw.
    #[test]
    fn keys_print_one_way_each_with_nothing_unprintable() {
        assert_eq!(
            key_line("a\tb\nc"),
            format!("a\\tb\\nc\t{}\n", lock_id_for_key("a\tb\nc"))
        );
        assert_ne!(
            key_line("a\\nb").split('\t').next(),
            key_line("a\nb").split('\t').next()
        );
        assert!(key_line("x\u{202e}y").starts_with("x\\u{202e}y\t"));
        assert!(key_line("plain key é").starts_with("plain key é\t"));
    }
}
