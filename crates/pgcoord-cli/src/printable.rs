//! Text that others control (lock keys, holder labels, names, the server's
//! messages, a projection's stored errors) as the tool prints it: one
//! escaping for all of it, so that nothing it prints can move the cursor,
//! retitle the terminal, reorder what follows (bidirectional controls) or
//! hide characters, and so that two different texts never print the same.
//!
//! The escaping is Rust's `{:?}` of a string without its quotes, and with
//! quotes left as they are: a backslash is `\\`; tab, newline and carriage
//! return are `\t`, `\n`, `\r`; every other character that does not print
//! is `\u{HEX}`: control characters (ESC is `\u{1b}`), format characters
//! (Unicode `Cf`: U+202E RIGHT-TO-LEFT OVERRIDE is `\u{202e}`, U+200B ZERO
//! WIDTH SPACE `\u{200b}`, U+2066 LEFT-TO-RIGHT ISOLATE `\u{2066}`), line
//! and paragraph separators, spaces other than the space, private-use and
//! unassigned code points, and a combining mark that would join what comes
//! before the text. Letters of every script, marks after a letter, symbols
//! and the space print as they are.

/// The character that ends a text [`shortened`] to fit.
pub const ELLIPSIS: char = '…';

/// `text` with every character that does not print escaped (see the
/// module's documentation), and every backslash doubled: one line whatever
/// `text` holds, and different texts print differently.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        push_printable(&mut out, c, i == 0);
    }
    out
}

/// Appends `c` as [`printable`] shows it; `first` when nothing of the text
/// precedes it (a combining mark there would join the blank before it).
fn push_printable(out: &mut String, c: char, first: bool) {
    match c {
        // Quotes print: they are no escape here, nothing is quoted.
        '"' | '\'' => out.push(c),
        _ if first => out.extend(c.escape_debug()),
        _ => {
            // The standard library's test of "prints", as `str::escape_debug`
            // applies it after a string's first character (a combining mark
            // there joins its letter and is left alone): `c` after a letter.
            let mut buf = [0u8; 8];
            buf[0] = b'a';
            let len = c.encode_utf8(&mut buf[1..]).len();
            let pair = std::str::from_utf8(&buf[..=len]).expect("a letter and a char");
            out.extend(pair.escape_debug().skip(1));
        }
    }
}

/// [`printable`], in at most `width` characters: a longer text is cut
/// (never inside an escape) and ends in [`ELLIPSIS`].
pub fn shortened(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut shown = 0;
    // Where to cut if the text does not fit: after the last character that
    // leaves room for the ellipsis.
    let mut cut = 0;
    for (i, c) in text.chars().enumerate() {
        let before = out.len();
        push_printable(&mut out, c, i == 0);
        shown += out[before..].chars().count();
        if shown < width {
            cut = out.len();
        }
        if shown > width {
            out.truncate(cut);
            out.push(ELLIPSIS);
            return out;
        }
    }
    out
}

/// The widest a key (or a partition key) is shown in a text table (`lock
/// top`, `lock holders`, `projection dlq list`), in characters, the
/// ellipsis included: one long key must not push every other column off
/// the screen. JSON output has the whole key.
pub const SHOWN_KEY_WIDTH: usize = 40;

/// JSON text (`serde_json`'s, pretty or not) with every character that
/// does not print (see [`printable`]) inside its strings as a JSON escape
/// (`\u001b`, `\u202e`): still the same JSON. `serde_json` escapes only
/// the C0 controls; DEL, the C1 controls (U+009B starts an escape sequence
/// on some terminals) and format characters it leaves as they are. The
/// layout's newlines stay (a string's are escaped already).
pub fn printable_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        let mut shown = String::new();
        push_printable(&mut shown, c, false);
        if c == '\n' || c == '\\' || shown.len() == c.len_utf8() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// The longest line of a server's text shown, in bytes: a message, DETAIL or
/// HINT longer than this (a server's, or a table's row, can be megabytes)
/// is cut, with a note of how much was left out.
pub const LONGEST_SERVER_LINE: usize = 4096;

/// `line` cut to at most `max` bytes (at a character's boundary), with
/// `… (N more bytes not shown)` after a cut.
pub fn capped(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}{ELLIPSIS} ({} more bytes not shown)",
        &line[..end],
        line.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_does_not_print_is_escaped() {
        assert_eq!(
            printable("plain key é 日本 \"q\" 'q'"),
            "plain key é 日本 \"q\" 'q'"
        );
        assert_eq!(printable("a\tb\nc\r"), "a\\tb\\nc\\r");
        assert_eq!(printable("pk\x1b[2J\x07\0"), "pk\\u{1b}[2J\\u{7}\\0");
        assert_eq!(
            printable("a\u{202e}b\u{200b}c\u{2066}d\u{feff}\u{2028}\u{a0}"),
            "a\\u{202e}b\\u{200b}c\\u{2066}d\\u{feff}\\u{2028}\\u{a0}"
        );
        // A mark after its letter prints; one that would join a column's
        // blank does not.
        assert_eq!(printable("e\u{301}"), "e\u{301}");
        assert_eq!(printable("\u{301}e"), "\\u{301}e");
    }

    /// A literal backslash-n and a newline used to print alike.
    #[test]
    fn a_backslash_is_escaped_too() {
        assert_eq!(printable("a\\nb"), "a\\\\nb");
        assert_ne!(printable("a\\nb"), printable("a\nb"));
    }

    #[test]
    fn a_long_text_is_cut_with_an_ellipsis_never_inside_an_escape() {
        assert_eq!(shortened("short", 5), "short");
        assert_eq!(shortened("longer", 5), "long…");
        assert_eq!(shortened(&"x".repeat(250), 40).chars().count(), 40);
        // `ab\u{1b}` is 9 characters: cut before the escape, not inside it.
        assert_eq!(shortened("ab\x1bcdef", 6), "ab…");
        assert_eq!(shortened("ab\x1b", 9), "ab\\u{1b}");
    }

    #[test]
    fn json_keeps_its_layout_and_escapes_what_does_not_print() {
        let value = serde_json::json!({ "k": "a\u{1b}[2J\u{9b}\u{202e}\u{7f}é\\\"", "n": 1 });
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let shown = printable_json(&pretty);
        assert_eq!(
            shown,
            "{\n  \"k\": \"a\\u001b[2J\\u009b\\u202e\\u007fé\\\\\\\"\",\n  \"n\": 1\n}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
        assert_eq!(
            printable_json("\"\u{1f600}\u{e000}\""),
            "\"\u{1f600}\\ue000\""
        );
    }

    #[test]
    fn a_long_server_line_is_capped_with_a_note() {
        assert_eq!(capped("short", 10), "short");
        assert_eq!(capped("abcdef", 4), "abcd… (2 more bytes not shown)");
        // Never inside a character: é is two bytes.
        assert_eq!(capped("aéb", 2), "a… (3 more bytes not shown)");
    }
}
