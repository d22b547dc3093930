//! A library or driver error as the one line the tool prints: its causes
//! joined, the server's DETAIL and HINT on the same line, passwords masked.

/// An error and its causes on one line: the server's DETAIL and HINT,
/// which the driver puts on lines of their own, follow after `; `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    crate::redact::scrub_secrets(&one_line(&text))
}

/// Joins the lines of a message with `; `.
pub fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
