//! NAME arguments (of an election, a projection) and holder labels: NAMEs
//! are printed on one line of TAB-separated output and in messages, so they
//! must be one printable line.

/// A NAME: not empty, no control characters (newline, tab, ...).
pub fn parse_name(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("NAME is empty: it needs a name".into());
    }
    if text.chars().any(char::is_control) {
        return Err("a NAME has no control characters (newline, tab, ...)".into());
    }
    Ok(text.to_owned())
}

/// A `--holder-id` label: anything but empty (an empty label would show
/// as no label at all in `lock holders` and `leader show`, so a script
/// whose variable came out empty would lose its name silently).
pub fn parse_holder_id(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err(
            "the label is empty: give one, or leave the option out for HOSTNAME:PID".into(),
        );
    }
    Ok(text.to_owned())
}

/// A KEY of `lock run` / `lock holders`: anything but empty (an unset
/// shell variable would otherwise make unrelated jobs share the lock of
/// the empty key), and short enough to reach COMMAND in
/// `EVENTSOURCE_LOCK_KEY` (Linux takes at most 128 KiB per environment
/// string, name included).
pub fn parse_key(text: &str) -> Result<String, String> {
    const ENV_STRING_MAX: usize = 128 * 1024;
    if text.is_empty() {
        return Err("KEY is empty: a script's variable that came out empty? \
                    (`lock key ''` prints the empty key's id)"
            .into());
    }
    let with_name = "EVENTSOURCE_LOCK_KEY=".len() + text.len() + 1;
    if with_name > ENV_STRING_MAX {
        return Err(format!(
            "KEY is {} bytes: COMMAND gets it in EVENTSOURCE_LOCK_KEY, and Linux passes at most \
             {} bytes of one environment variable",
            text.len(),
            ENV_STRING_MAX - "EVENTSOURCE_LOCK_KEY=".len() - 1
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::{parse_holder_id, parse_key, parse_name};

    #[test]
    fn a_key_is_not_empty_and_fits_in_the_environment() {
        assert!(parse_key("").is_err());
        assert_eq!(parse_key("nightly").as_deref(), Ok("nightly"));
        let longest = 128 * 1024 - "EVENTSOURCE_LOCK_KEY=".len() - 1;
        assert!(parse_key(&"k".repeat(longest)).is_ok());
        let err = parse_key(&"k".repeat(longest + 1)).unwrap_err();
        assert!(err.contains("EVENTSOURCE_LOCK_KEY"), "{err}");
    }

    #[test]
    fn a_holder_label_is_never_empty() {
        assert!(parse_holder_id("").is_err());
        assert_eq!(parse_holder_id("web-1").as_deref(), Ok("web-1"));
    }

    #[test]
    fn names_are_one_printable_line() {
        assert_eq!(
            parse_name("nightly-report").as_deref(),
            Ok("nightly-report")
        );
        assert_eq!(parse_name("über:7").as_deref(), Ok("über:7"));
        for bad in ["", "a\tb", "a\nb", "\u{7f}"] {
            assert!(parse_name(bad).is_err(), "{bad:?}");
        }
    }
}
