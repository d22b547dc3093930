//! libpq's `key=value` connection strings (conninfo): the pairs, their
//! values unquoted; and a URL's `key=value&...` query, split as libpq
//! splits it. For `connstring.rs`.

use crate::ports::error::{Error, Result};

/// The error of a connection string that does not parse; never repeats it.
pub(super) fn invalid(why: String) -> Error {
    Error::InvalidArgument(format!("not a valid PostgreSQL connection string: {why}"))
}

/// libpq's separator: C's `isspace` (ASCII space, tab, line feed,
/// vertical tab, form feed, carriage return), never a Unicode space (a
/// U+00A0 belongs to the value, as in libpq).
pub(super) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// The `key=value` pairs of a conninfo string: (key, unquoted value, the
/// pair as written).
pub(super) fn conninfo_pairs(s: &str) -> Result<Vec<(String, String, String)>> {
    // `mysql://...`, `http://...`: a URL, but not PostgreSQL's (read as
    // `key=value` pairs it would only be "a parameter has no `=`").
    if let Some((scheme, _)) = s.trim_start_matches(is_space).split_once("://") {
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            return Err(invalid(format!(
                "a URL of scheme {scheme:?}: use postgres:// or postgresql://"
            )));
        }
    }
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| is_space(*c)).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !is_space(*c)) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| is_space(*c)).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(invalid("a parameter has no `=`".into()));
        }
        while chars.next_if(|(_, c)| is_space(*c)).is_some() {}
        let mut value = String::new();
        let quoted = chars.next_if(|(_, c)| *c == '\'').is_some();
        if quoted {
            loop {
                match chars.next() {
                    None => return Err(invalid("unterminated quoted value".into())),
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, c)) => value.push(c),
                        None => return Err(invalid("unterminated quoted value".into())),
                    },
                    Some((_, c)) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !is_space(*c)) {
                if c == '\\' {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(s.len(), |&(i, _)| i);
        // A value ends at an unescaped space: a space at the end of the
        // pair is the value's (`a\ `), but for the spaces after an empty
        // value's `=` at the string's end.
        let raw = match value.is_empty() && !quoted {
            true => s[start..end].trim_end_matches(is_space),
            false => &s[start..end],
        };
        out.push((key, value, raw.to_owned()));
    }
    Ok(out)
}

/// A URL query's `key=value` pairs as written (not decoded): (the pair,
/// key, value). As in libpq, each needs exactly one `=` (an `=` in a value
/// is written %3D) and none may be empty, except after a trailing `&` (a
/// bare trailing `?` has none). Errors never repeat the query.
pub(super) fn query_pairs(query: &str) -> Result<Vec<(&str, &str, &str)>> {
    // With an `@` in the query, the likeliest cause is a password's tail
    // (a `/` in it ends libpq's credentials early).
    let hint = if query.contains('@') {
        "; a `/` or `@` in a user name or password is written %2F or %40"
    } else {
        ""
    };
    let pieces: Vec<&str> = query.split('&').collect();
    let mut out = Vec::new();
    for (i, pair) in pieces.iter().enumerate() {
        if pair.is_empty() && i + 1 == pieces.len() {
            break;
        }
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid(format!(
                "a URL query parameter has no `=` (missing key/value separator; \
                 parameters are key=value, joined by one `&`){hint}"
            )));
        };
        if value.contains('=') {
            return Err(invalid(format!(
                "a URL query parameter has a second `=` (extra key/value separator; \
                 an `=` in a value is written %3D){hint}"
            )));
        }
        out.push((*pair, key, value));
    }
    Ok(out)
}
