//! Keeping database passwords out of every line the tool prints, without
//! rewriting anything else.
//!
//! Two rules, applied to every line before it is written:
//!
//! - structure: in any URL in the text, the password field of its userinfo
//!   (`scheme://user:PASSWORD@host`) becomes `***`, and so does the value of
//!   a `password=` or `sslpassword=` parameter (URL query or key/value
//!   form; its name percent-decoded, as in `pass%77ord=`) — [`scrub`];
//! - exact matches: in text that comes from the driver or the library
//!   (error chains, log lines), a registered password that stands alone as
//!   a word (between spaces, quotes, `=`, `,`, `;` or parentheses) becomes
//!   `***` — [`scrub_secrets`]. Part of a word, a URL's scheme, user, host
//!   or database name is never rewritten, so a password such as `postgres`
//!   or `e` garbles nothing.

use std::io::{self, Write};
use std::sync::{Mutex, OnceLock};

const MASK: &str = "***";

fn secrets() -> &'static Mutex<Vec<String>> {
    static SECRETS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    SECRETS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Registers every password found in `url` (URL userinfo, a `password`
/// query parameter, a `password=` key/value pair, and what the driver
/// parses out of it), raw and percent-decoded.
pub fn register_url(url: &str) {
    let mut found = passwords_in(url);
    if let Ok(config) = url.parse::<tokio_postgres::Config>() {
        if let Some(pw) = config.get_password() {
            found.push(String::from_utf8_lossy(pw).into_owned());
        }
    }
    register(found);
}

/// Registers secrets to mask where they stand alone in driver text.
pub fn register(found: impl IntoIterator<Item = String>) {
    let mut list = secrets().lock().unwrap_or_else(|p| p.into_inner());
    for s in found {
        for variant in [percent_decode(&s), s] {
            if !variant.is_empty() && !list.contains(&variant) {
                list.push(variant);
            }
        }
    }
    // Longest first, so that a secret containing another is masked whole.
    list.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Masks the password fields of URLs and `password=` values in `text`.
pub fn scrub(text: &str) -> String {
    mask_password_params(&mask_url_passwords(text))
}

/// [`scrub`], then masks registered passwords that stand alone as a word:
/// for text from the driver or the library.
pub fn scrub_secrets(text: &str) -> String {
    let mut out = scrub(text);
    let list = secrets().lock().unwrap_or_else(|p| p.into_inner());
    for secret in list.iter() {
        out = mask_standalone(&out, secret);
    }
    out
}

/// A connection string given whole (`--database-url`, `DATABASE_URL`) with
/// its password (userinfo or parameter) replaced by `***`. Its password may
/// hold any character, `/ ? # ' "` and spaces included, even where the
/// string does not parse: the userinfo runs to the string's last `@`, so
/// an `@` elsewhere may mask more than the password, never less.
pub fn redact_url(url: &str) -> String {
    let masked = match userinfo_password_span(url) {
        Some((start, end)) => format!("{}{MASK}{}", &url[..start], &url[end..]),
        None => url.to_owned(),
    };
    mask_password_params(&masked)
}

/// Whether `c` may stand next to a password that is a word of its own.
fn is_word_boundary(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '=' | ',' | ';' | '(' | ')')
}

/// Replaces each occurrence of `secret` that has a boundary (or the text's
/// end) on both sides.
fn mask_standalone(text: &str, secret: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut prev: Option<char> = None;
    while let Some(pos) = rest.find(secret) {
        let before = rest[..pos].chars().next_back().or(prev);
        let after = rest[pos + secret.len()..].chars().next();
        let alone = before.is_none_or(is_word_boundary) && after.is_none_or(is_word_boundary);
        out.push_str(&rest[..pos]);
        if alone {
            out.push_str(MASK);
        } else {
            out.push_str(secret);
        }
        prev = secret.chars().next_back();
        rest = &rest[pos + secret.len()..];
    }
    out.push_str(rest);
    out
}

/// Masks the userinfo password of every `scheme://user:password@host` in
/// `text`. The authority normally ends at the first `/ ? #`, quote or
/// space; when no `@` comes before that, the password itself may hold one
/// of them, so the last `@` before the next space ends the userinfo.
fn mask_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // The end of the word (at the next space) last searched for an `@`,
    // and its last `@`, as offsets in `text`: a word holding many `://` is
    // searched once, not once for each (quadratic in a long line).
    let mut word: Option<(usize, Option<usize>)> = None;
    while let Some(pos) = rest.find("://") {
        let start = pos + 3;
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let offset = text.len() - after.len();
        let authority_len = after
            .find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'' | '`') || c.is_whitespace())
            .unwrap_or(after.len());
        let at = after[..authority_len].rfind('@').or_else(|| {
            let last_at = match word {
                Some((end, last_at)) if offset < end => last_at,
                _ => {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    let last_at = after[..end].rfind('@').map(|at| offset + at);
                    word = Some((offset + end, last_at));
                    last_at
                }
            };
            last_at.and_then(|at| at.checked_sub(offset))
        });
        let span = at.and_then(|at| Some((after[..at].find(':')?, at)));
        let consumed = match span {
            Some((colon, at)) => {
                out.push_str(&after[..=colon]);
                out.push_str(MASK);
                at
            }
            None => 0,
        };
        rest = &after[consumed..];
    }
    out.push_str(rest);
    out
}

/// Masks the value of every `password=` and `sslpassword=` parameter in
/// `text` (also written `password = value`, as libpq allows, and with a
/// percent-encoded name).
fn mask_password_params(text: &str) -> String {
    let mut masked = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(value_start) = find_password_value(rest) {
        masked.push_str(&rest[..value_start]);
        let value_end = value_end(rest, value_start);
        masked.push_str(MASK);
        rest = &rest[value_end..];
    }
    masked.push_str(rest);
    masked
}

/// Passwords in a connection string, raw (not decoded).
fn passwords_in(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((start, end)) = userinfo_password_span(url) {
        found.push(url[start..end].to_owned());
    }
    let mut rest = url;
    while let Some(value_start) = find_password_value(rest) {
        let value_end = value_end(rest, value_start);
        let value = rest[value_start..value_end].trim_matches('\'');
        found.push(value.to_owned());
        rest = &rest[value_end..];
    }
    found
}

/// The byte span of the password in `scheme://user:password@host...`.
fn userinfo_password_span(url: &str) -> Option<(usize, usize)> {
    let after_scheme = url.find("://")? + 3;
    let authority_end = url[after_scheme..].rfind('@').map(|at| after_scheme + at)?;
    let userinfo = &url[after_scheme..authority_end];
    let colon = userinfo.find(':')?;
    Some((after_scheme + colon + 1, authority_end))
}

/// Parameters whose values are secrets, as libpq has them.
const SECRET_PARAMS: &[&str] = &["password", "sslpassword"];

/// Finds a secret parameter ([`SECRET_PARAMS`]; spaces allowed around
/// `=`) at the start of a parameter (after `?`, `&`, whitespace or the
/// start of a key/value string), its name case-insensitively and
/// percent-decoded (`pass%77ord` is `password` to libpq's URL parser);
/// returns where its value starts.
fn find_password_value(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let is_space = |b: &u8| *b == b' ' || *b == b'\t';
    for pos in 0..bytes.len() {
        let boundary = pos == 0 || matches!(bytes[pos - 1], b'?' | b'&' | b' ' | b'\t' | b'\n');
        if !boundary {
            continue;
        }
        // `pos` follows an ASCII byte (or is 0): a character boundary.
        let name_end = text[pos..]
            .find(|c: char| matches!(c, '=' | '&' | '?') || c.is_whitespace())
            .map_or(bytes.len(), |i| pos + i);
        let name = percent_decode(&text[pos..name_end]).to_ascii_lowercase();
        if !SECRET_PARAMS.contains(&name.as_str()) {
            continue;
        }
        let mut i = name_end;
        while bytes.get(i).is_some_and(is_space) {
            i += 1;
        }
        if bytes.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while bytes.get(i).is_some_and(is_space) {
            i += 1;
        }
        return Some(i);
    }
    None
}

/// The end of a parameter value starting at `start`: a quoted value runs to
/// its closing quote (`'`, as libpq; `"` too, which libpq does not quote
/// with, so a mistaken one hides the whole value), a plain one to `&` or
/// whitespace, a backslash escaping the character after it (libpq's
/// `password=a\ b`).
fn value_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    if let Some(&quote @ (b'\'' | b'"')) = bytes.get(start) {
        let mut i = start + 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b if b == quote => return i + 1,
                _ => i += 1,
            }
        }
        return bytes.len();
    }
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'&' => return i,
            b if b.is_ascii_whitespace() => return i,
            _ => i += 1,
        }
    }
    bytes.len()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(b) = hex {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `tracing` writer that scrubs each log line before writing it to stderr.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScrubbingStderr;

impl Write for ScrubbingStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        io::stderr().write_all(scrub_secrets(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ScrubbingStderr {
    type Writer = ScrubbingStderr;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbingStderr
    }
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
