//! Table names from type names: snake_case, then an English plural. The
//! derive (`pgcoord-derive`) applies the same rules at compile time; a
//! test in `tests/it/readmodels_derive.rs` keeps the two in step.

/// Converts `CamelCase` to `snake_case`, keeping acronyms together
/// (`HTTPRequest` -> `http_request`).
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                None => false,
                Some('_') => false,
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(|n| n.is_lowercase()),
                Some(_) => false,
            };
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// English plural of a snake_case name's last word: `-y` after a consonant
/// becomes `-ies`; `-s`, `-x`, `-z`, `-ch`, `-sh` take `-es`; else `-s`.
pub(crate) fn pluralize(name: &str) -> String {
    let vowel = |c: char| "aeiou".contains(c);
    if let Some(stem) = name.strip_suffix('y') {
        if stem
            .chars()
            .last()
            .is_some_and(|c| c.is_alphabetic() && !vowel(c))
        {
            return format!("{stem}ies");
        }
    }
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|s| name.ends_with(s))
    {
        return format!("{name}es");
    }
    format!("{name}s")
}

/// Derives a table name from a (possibly path-qualified, possibly generic)
/// Rust type name: the last path segment, in snake_case, pluralised.
///
/// `#[derive(ReadModel)]` computes the same name from the identifier at
/// compile time; this function serves hand-written impls without a
/// `TABLE_NAME`, which get their type name from `std::any::type_name`
/// (whose exact output the standard library does not promise to keep).
///
/// ```
/// use pgcoord::readmodels::default_table_name;
/// assert_eq!(default_table_name("my_app::OrderSummary"), "order_summaries");
/// assert_eq!(default_table_name("Category"), "categories");
/// assert_eq!(default_table_name("Address"), "addresses");
/// assert_eq!(default_table_name("HTTPRequest"), "http_requests");
/// ```
pub fn default_table_name(type_name: &str) -> String {
    let base = type_name.split('<').next().unwrap_or(type_name);
    let last = base.rsplit("::").next().unwrap_or(base);
    pluralize(&snake_case(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_snake_case_plurals() {
        for (ty, table) in [
            ("OrderSummary", "order_summaries"),
            ("Category", "categories"),
            ("app::read::Key", "keys"),
            ("Box", "boxes"),
            ("Status", "statuses"),
            ("Branch", "branches"),
            ("Wish", "wishes"),
            ("HTTPRequest", "http_requests"),
            ("Order2Item", "order2_items"),
            ("Wrapper<u8>", "wrappers"),
            ("Day", "days"),
        ] {
            assert_eq!(default_table_name(ty), table, "{ty}");
        }
    }
}
