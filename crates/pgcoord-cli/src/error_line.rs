//! A library or driver error as the one line the tool prints: its causes
//! joined, the server's DETAIL and HINT on the same line, passwords masked,
//! what does not print escaped and each line of it capped (the server's
//! text is anyone's who can name a database, a role or a schema, or raise
//! an error: it must not drive the terminal, nor flood it).

use crate::printable::{capped, printable, LONGEST_SERVER_LINE};

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
    shown(&text)
}

/// Text that came from the server (or carries its words), as printed: its
/// lines, each cut to [`LONGEST_SERVER_LINE`] bytes, joined with `; ` (see
/// [`one_line`]), passwords masked (before the cut, so that a cut never
/// leaves part of one), and escaped (see [`printable`]).
pub fn shown(text: &str) -> String {
    let scrubbed = crate::redact::scrub_secrets(text);
    let lines: Vec<String> = scrubbed
        .lines()
        .map(|l| capped(l, LONGEST_SERVER_LINE))
        .collect();
    printable(&one_line(&lines.join("\n")))
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

    /// A server's message with escape sequences used to be printed raw,
    /// and a huge one in full.
    #[test]
    fn server_text_is_escaped_and_each_line_capped() {
        let text = "ERROR: \x1b]0;pwned\x07\x1b[2J bad\nDETAIL: \u{202e}x\ry";
        assert_eq!(
            shown(text),
            "ERROR: \\u{1b}]0;pwned\\u{7}\\u{1b}[2J bad; DETAIL: \\u{202e}x\\ry"
        );
        let huge = format!("ERROR: {}\nHINT: short", "x".repeat(5 << 20));
        let line = shown(&huge);
        assert!(line.len() < 2 * LONGEST_SERVER_LINE, "{}", line.len());
        let cut = "ERROR: ".len() + (5 << 20) - LONGEST_SERVER_LINE;
        assert!(
            line.ends_with(&format!("… ({cut} more bytes not shown); HINT: short")),
            "{line:.80}"
        );
    }

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
