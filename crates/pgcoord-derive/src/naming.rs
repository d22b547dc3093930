//! The table-name rules of `pgcoord::readmodels::default_table_name`,
//! applied at compile time (a test in `pgcoord` keeps the two in step).

/// `CamelCase` to `snake_case`, acronyms kept together.
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                None | Some('_') => false,
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

/// English plural of the last word: consonant + `y` -> `ies`; `s`, `x`,
/// `z`, `ch`, `sh` -> `es`; else `s`.
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
