//! NAME arguments (of an election, a projection): printed on one line of
//! TAB-separated output and in messages, so they must be one printable line.

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

#[cfg(test)]
mod tests {
    use super::parse_name;

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
