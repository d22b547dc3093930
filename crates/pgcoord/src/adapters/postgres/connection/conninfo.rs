//! libpq's `key=value` connection strings (conninfo): the pairs, their
//! values unquoted. For `connstring.rs`.

use crate::ports::error::{Error, Result};

/// The error of a connection string that does not parse; never repeats it.
pub(super) fn invalid(why: String) -> Error {
    Error::InvalidArgument(format!("not a valid PostgreSQL connection string: {why}"))
}

/// The `key=value` pairs of a conninfo string: (key, unquoted value, the
/// pair as written).
pub(super) fn conninfo_pairs(s: &str) -> Result<Vec<(String, String, String)>> {
    // `mysql://...`, `http://...`: a URL, but not PostgreSQL's (read as
    // `key=value` pairs it would only be "a parameter has no `=`").
    if let Some((scheme, _)) = s.trim_start().split_once("://") {
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
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(invalid("a parameter has no `=`".into()));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
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
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
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
        out.push((key, value, s[start..end].trim_end().to_owned()));
    }
    Ok(out)
}
