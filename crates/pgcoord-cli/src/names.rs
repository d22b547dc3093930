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

/// Linux's cap on one string of a new program's environment
/// (`MAX_ARG_STRLEN`): `NAME=value` and the NUL that ends it, together.
pub const ENV_STRING_MAX: usize = 128 * 1024;

/// The longest text that reaches COMMAND as `var=` `prefix` text.
const fn longest_in_env(var: &str, prefix: &str) -> usize {
    ENV_STRING_MAX - var.len() - "=".len() - prefix.len() - 1
}

/// A KEY of `lock run` / `lock holders`: anything but empty (an unset
/// shell variable would otherwise make unrelated jobs share the lock of
/// the empty key), and short enough to reach COMMAND in
/// `EVENTSOURCE_LOCK_KEY` (Linux takes at most 128 KiB per environment
/// string, name included).
pub fn parse_key(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("KEY is empty: a script's variable that came out empty? \
                    (`lock key ''` prints the empty key's id)"
            .into());
    }
    let longest = longest_in_env("EVENTSOURCE_LOCK_KEY", "");
    if text.len() > longest {
        return Err(format!(
            "KEY is {} bytes: COMMAND gets it in EVENTSOURCE_LOCK_KEY, and Linux passes at most \
             {longest} bytes of one environment variable",
            text.len(),
        ));
    }
    Ok(text.to_owned())
}

/// The longest NAME of `leader run`: COMMAND gets it in
/// `EVENTSOURCE_LEADER_NAME`, and the election's key, `election:NAME`, in
/// `EVENTSOURCE_LOCK_KEY`, the longer of the two.
pub const LONGEST_ELECTION_NAME: usize = {
    let as_key = longest_in_env("EVENTSOURCE_LOCK_KEY", "election:");
    let as_name = longest_in_env("EVENTSOURCE_LEADER_NAME", "");
    if as_key < as_name {
        as_key
    } else {
        as_name
    }
};

/// The NAME of `leader run`: a NAME ([`parse_name`]) short enough to
/// reach COMMAND (see [`LONGEST_ELECTION_NAME`]). Checked before anything
/// is taken: a longer one used to win the election and write a term, and
/// COMMAND then failed to start (126, "Argument list too long").
pub fn parse_election_name(text: &str) -> Result<String, String> {
    let name = parse_name(text)?;
    if name.len() > LONGEST_ELECTION_NAME {
        return Err(format!(
            "NAME is {} bytes: COMMAND gets it in EVENTSOURCE_LOCK_KEY (as election:NAME) and \
             EVENTSOURCE_LEADER_NAME, and Linux passes at most {ENV_STRING_MAX} bytes of one \
             environment variable, its name included: NAME has at most \
             {LONGEST_ELECTION_NAME} bytes",
            name.len(),
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_not_empty_and_fits_in_the_environment() {
        assert!(parse_key("").is_err());
        assert_eq!(parse_key("nightly").as_deref(), Ok("nightly"));
        let longest = 128 * 1024 - "EVENTSOURCE_LOCK_KEY=".len() - 1;
        assert!(parse_key(&"k".repeat(longest)).is_ok());
        let err = parse_key(&"k".repeat(longest + 1)).unwrap_err();
        assert!(err.contains("EVENTSOURCE_LOCK_KEY"), "{err}");
    }

    /// Linux counts `EVENTSOURCE_LOCK_KEY=election:` and the final NUL:
    /// a NAME one byte over them used to win the election, and COMMAND
    /// then could not start.
    #[test]
    fn an_election_name_fits_in_the_environment_as_its_key() {
        assert_eq!(LONGEST_ELECTION_NAME, 131_041);
        let longest = "n".repeat(LONGEST_ELECTION_NAME);
        assert_eq!(
            "EVENTSOURCE_LOCK_KEY=election:".len() + longest.len() + 1,
            ENV_STRING_MAX
        );
        assert!(parse_election_name(&longest).is_ok());
        let err = parse_election_name(&format!("{longest}n")).unwrap_err();
        assert!(err.starts_with("NAME is 131042 bytes: "), "{err}");
        assert!(err.contains("EVENTSOURCE_LOCK_KEY"), "{err}");
        assert!(err.ends_with("NAME has at most 131041 bytes"), "{err}");
        assert!(!err.contains("  "), "one space between words: {err}");
        // Still a NAME first.
        assert_eq!(parse_election_name(""), parse_name(""));
        assert_eq!(parse_election_name("a\tb"), parse_name("a\tb"));
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
