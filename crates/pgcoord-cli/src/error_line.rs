//! A library or driver error as the one line the tool prints: its causes
//! joined, the server's DETAIL and HINT on the same line, passwords masked.

/// An error and its causes on one line: the server's DETAIL and HINT,
/// which the driver puts on lines of their own, follow after `; `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        // The driver's own wrapper of a server error says only this; the
        // server's error follows as its source.
        if more == "db error" {
            source = s.source();
            continue;
        }
        // The server's DETAIL and HINT, as the library's error gives
        // them, go on lines of their own as the driver's did.
        let more = match more.starts_with("DETAIL: ") || more.starts_with("HINT: ") {
            true => format!("\n{more}"),
            false => without_repeated_message(&text, &more),
        };
        if !more.is_empty() && !text.contains(more.as_str()) {
            text.push_str(if more.starts_with('\n') { "" } else { ": " });
            text.push_str(&more);
        }
        source = s.source();
    }
    crate::redact::scrub_secrets(&one_line(&text))
}

/// The driver's text of a server error (`db error: ERROR: MESSAGE`, then
/// DETAIL and HINT lines) less its first line when `text` already carries
/// that MESSAGE (the library's error repeats the server's message).
fn without_repeated_message(text: &str, more: &str) -> String {
    let (first, rest) = more.split_once('\n').unwrap_or((more, ""));
    let message = first.strip_prefix("db error: ").unwrap_or(first);
    let message = ["ERROR: ", "FATAL: ", "PANIC: "]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .unwrap_or(message);
    if message.is_empty() || !text.contains(message) {
        return more.to_owned();
    }
    match rest.trim() {
        "" => String::new(),
        rest => format!("\n{rest}"),
    }
}

/// Joins the lines of a message with `; `.
pub fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_message_the_error_already_carries_is_not_repeated() {
        let text = "database error: permission denied for table t (SQLSTATE 42501)";
        let more = "db error: ERROR: permission denied for table t";
        assert_eq!(without_repeated_message(text, more), "");
        let more = "db error: ERROR: permission denied for table t\nHINT: grant it";
        assert_eq!(without_repeated_message(text, more), "\nHINT: grant it");
        let other = "db error: ERROR: something else";
        assert_eq!(without_repeated_message(text, other), other);
    }
}
