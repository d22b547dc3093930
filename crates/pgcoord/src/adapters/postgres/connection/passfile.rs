//! libpq's password file (`~/.pgpass`, `PGPASSFILE`, the `passfile`
//! parameter): reading it with libpq's permission check, and finding the
//! password for a host, port, database and user.
//!
//! Written here (about a hundred lines) rather than taken from a crate: the
//! crates that parse it either build a synchronous `postgres::Config`
//! themselves or skip libpq's permission check, and none takes the host
//! rules for Unix sockets. The format: one
//! `hostname:port:database:username:password` per line, `*` matching
//! anything in the first four fields, `\` escaping `:` and `\`, lines
//! starting with `#` ignored; the first matching line wins.

use std::path::Path;

/// One line of the file: four patterns (`None` = `*`) and the password.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    patterns: [Option<String>; 4],
    password: String,
}

/// The entries of a password file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PassFile {
    entries: Vec<Entry>,
}

/// What reading a password file gave.
#[derive(Debug)]
pub(super) enum Loaded {
    /// No such file, or not readable: nothing to look up, nothing to say.
    Missing,
    /// The file exists but is not used; the warning says why (it never
    /// contains a password).
    Ignored(String),
    /// The file's entries.
    Read(PassFile),
}

/// Reads `path` as libpq does: a file that is not a plain file, or that
/// its group or others may read, write or execute, is ignored with a
/// warning.
pub(super) fn load(path: &Path) -> Loaded {
    let Ok(meta) = std::fs::metadata(path) else {
        return Loaded::Missing;
    };
    if !meta.is_file() {
        return Loaded::Ignored(format!(
            "password file \"{}\" is not a plain file; it is not used",
            path.display()
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Loaded::Ignored(format!(
                "password file \"{}\" has group or world access; permissions should be \
                 u=rw (0600) or less; it is not used",
                path.display()
            ));
        }
    }
    match std::fs::read(path) {
        Ok(bytes) => Loaded::Read(PassFile::parse(&String::from_utf8_lossy(&bytes))),
        Err(_) => Loaded::Missing,
    }
}

impl PassFile {
    /// Parses the file's text; lines with fewer than five fields are skipped.
    pub(super) fn parse(text: &str) -> Self {
        let entries = text
            .lines()
            .map(|l| l.trim_end_matches('\r'))
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(parse_line)
            .collect();
        Self { entries }
    }

    /// The password of the first entry matching all four values.
    pub(super) fn lookup(&self, host: &str, port: &str, dbname: &str, user: &str) -> Option<&str> {
        let wanted = [host, port, dbname, user];
        self.entries
            .iter()
            .find(|e| {
                e.patterns
                    .iter()
                    .zip(wanted)
                    .all(|(p, w)| p.as_deref().is_none_or(|p| p == w))
            })
            .map(|e| e.password.as_str())
    }
}

/// `host:port:db:user:password` with `\` escapes; `None` unless all five
/// fields are there.
fn parse_line(line: &str) -> Option<Entry> {
    let mut fields: Vec<(String, bool)> = Vec::with_capacity(5);
    let mut field = String::new();
    let mut escaped_any = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                escaped_any = true;
                match chars.next() {
                    Some(next) => field.push(next),
                    None => field.push('\\'),
                }
            }
            // The password ends at an unescaped `:` too, as in libpq.
            ':' => {
                fields.push((std::mem::take(&mut field), escaped_any));
                escaped_any = false;
                if fields.len() == 5 {
                    break;
                }
            }
            c => field.push(c),
        }
    }
    if fields.len() < 5 {
        fields.push((field, escaped_any));
    }
    if fields.len() != 5 {
        return None;
    }
    let password = fields.pop()?.0;
    let pattern = |(text, escaped): (String, bool)| (escaped || text != "*").then_some(text);
    let mut it = fields.into_iter().map(pattern);
    Some(Entry {
        patterns: [it.next()?, it.next()?, it.next()?, it.next()?],
        password,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_line_wins_with_wildcards_and_escapes() {
        let file = PassFile::parse(
            "# comment\n\
             db.internal:5432:orders:app:first\r\n\
             *:*:*:app:any-db\n\
             h\\:colon:6432:d:u:pa\\:ss\\\\word\n\
             \\*:1:d:u:literal-star\n\
             short:line\n",
        );
        assert_eq!(
            file.lookup("db.internal", "5432", "orders", "app"),
            Some("first")
        );
        assert_eq!(
            file.lookup("db.internal", "5432", "other", "app"),
            Some("any-db")
        );
        assert_eq!(
            file.lookup("h:colon", "6432", "d", "u"),
            Some("pa:ss\\word")
        );
        assert_eq!(file.lookup("*", "1", "d", "u"), Some("literal-star"));
        assert_eq!(file.lookup("x", "1", "d", "u"), None);
        assert_eq!(file.lookup("db.internal", "5432", "orders", "bob"), None);
        // A password ends at an unescaped colon.
        let file = PassFile::parse("h:1:d:u:pw:trailing");
        assert_eq!(file.lookup("h", "1", "d", "u"), Some("pw"));
    }

    #[test]
    fn files_open_to_others_are_ignored_and_say_so_without_the_password() {
        use std::os::unix::fs::PermissionsExt;
        // Not the pid alone: resolve_tests.rs makes a `pgpass` scratch
        // directory in the same process, at the same time.
        let dir = std::env::temp_dir().join(format!("pgcoord-pgpass-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pgpass");
        std::fs::write(&path, "*:*:*:*:s3cret-in-file\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        match load(&path) {
            Loaded::Read(f) => assert_eq!(f.lookup("h", "1", "d", "u"), Some("s3cret-in-file")),
            other => panic!("{other:?}"),
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        match load(&path) {
            Loaded::Ignored(why) => {
                assert!(why.contains("group or world access"), "{why}");
                assert!(!why.contains("s3cret"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(load(&dir), Loaded::Ignored(w) if w.contains("not a plain file")));
        assert!(matches!(load(&dir.join("none")), Loaded::Missing));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
