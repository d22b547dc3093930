//! `eventsource lock key`: key to advisory-lock id.

use pgcoord::{lock_id_for_key, MAX_KEY_LEN};

use crate::{exit, report};

/// Escapes control characters so that one key stays on one line and in one
/// tab-separated field.
pub fn printable_key(key: &str) -> String {
    if !key.chars().any(char::is_control) {
        return key.to_owned();
    }
    key.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The output line for one key.
pub fn key_line(key: &str) -> String {
    format!("{}\t{}\n", printable_key(key), lock_id_for_key(key))
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

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable_key("a\tb\nc"), "a\\tb\\nc");
        assert_eq!(printable_key("plain \\ key é"), "plain \\ key é");
    }
}
