//! libpq's connection service file (`pg_service.conf`): the parameters of
//! a named service (`service=NAME`, `PGSERVICE`).
//!
//! Looked up as libpq does: the user's file (`PGSERVICEFILE`, else
//! `~/.pg_service.conf`) first, then the system's
//! (`PGSYSCONFDIR/pg_service.conf`, else
//! `/etc/postgresql-common/pg_service.conf`); the first file with a
//! `[NAME]` section gives the parameters. Written here rather than taken
//! from a crate: the crates that read it build a `tokio_postgres::Config`
//! directly (which drops `sslmode=verify-full` and `sslrootcert`, and loses
//! the precedence between the file, the string and the environment), and
//! the format is a few lines of INI: `[name]` headers, `keyword=value`
//! lines, `#` comments.

use std::path::{Path, PathBuf};

use super::conninfo::is_space;
use super::connstring::invalid;
use super::libpq_env::{LibpqEnv, DEFAULT_SYSCONFDIR};
use crate::ports::error::Result;

/// A service's parameters and the file they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Service {
    pub(super) file: PathBuf,
    pub(super) params: Vec<(String, String)>,
}

/// The files searched, in order.
fn candidates(env: &LibpqEnv) -> Vec<PathBuf> {
    let mut files = Vec::new();
    match env.var("PGSERVICEFILE") {
        Some(f) => files.push(PathBuf::from(f)),
        None => {
            if let Some(home) = env.home() {
                files.push(home.join(".pg_service.conf"));
            }
        }
    }
    let sysconf = env.var("PGSYSCONFDIR").unwrap_or(DEFAULT_SYSCONFDIR);
    files.push(Path::new(sysconf).join("pg_service.conf"));
    files
}

/// The parameters of service `name`; an error when no file defines it.
pub(super) fn find(name: &str, env: &LibpqEnv) -> Result<Service> {
    let files = candidates(env);
    for file in &files {
        let Some(text) = read(file)? else {
            continue;
        };
        if let Some(params) = section(&text, name, file)? {
            return Ok(Service {
                file: file.clone(),
                params,
            });
        }
    }
    let searched: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    Err(invalid(format!(
        "definition of service \"{name}\" not found (searched {})",
        searched.join(", ")
    )))
}

/// The most of a service file read: a service file is a few lines, and a
/// file with no end (`PGSERVICEFILE=/dev/zero`, a pipe never closed) must
/// not fill memory.
const MAX_SIZE: u64 = 1 << 20;

/// The file's text; `None` when it cannot be read (the next file is
/// searched, as libpq does); an error naming the file when it holds more
/// than [`MAX_SIZE`] bytes, or naming the file and the line when it is not
/// UTF-8 (skipping it would silently take another file's section).
fn read(file: &Path) -> Result<Option<String>> {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(file) else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    if f.take(MAX_SIZE + 1).read_to_end(&mut bytes).is_err() {
        return Ok(None);
    }
    if bytes.len() as u64 > MAX_SIZE {
        return Err(invalid(format!(
            "service file \"{}\" holds more than {} MiB (is it a service file?); not read",
            file.display(),
            MAX_SIZE >> 20
        )));
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..bad].iter().filter(|b| **b == b'\n').count() + 1;
        invalid(format!(
            "service file \"{}\", line {line}, is not UTF-8; not read",
            file.display()
        ))
    })
}

/// The `keyword=value` lines of section `[name]`, if the file has one.
/// Errors name the file and the line, never the line's text (it may hold
/// a password).
fn section(text: &str, name: &str, file: &Path) -> Result<Option<Vec<(String, String)>>> {
    let mut in_section = false;
    let mut found = None::<Vec<(String, String)>>;
    for (n, raw) in text.lines().enumerate() {
        // libpq trims C's `isspace`, never a Unicode space (a U+00A0 ending
        // a password is the password's).
        let line = raw.trim_matches(is_space);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            if found.is_some() {
                break;
            }
            // libpq compares `[name]` only: what follows `]` is ignored.
            in_section = header
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(']'));
            if in_section {
                found = Some(Vec::new());
            }
            continue;
        }
        if !in_section {
            continue;
        }
        let syntax = |why: &str| {
            invalid(format!(
                "syntax error in service file \"{}\", line {}: {why}",
                file.display(),
                n + 1
            ))
        };
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| syntax("expected keyword=value"))?;
        let key = key.trim_end_matches(is_space);
        if key == "service" {
            return Err(syntax("nested service specifications are not supported"));
        }
        if let Some(params) = found.as_mut() {
            params.push((
                key.to_owned(),
                value.trim_start_matches(is_space).to_owned(),
            ));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_section_gives_its_parameters() {
        let text = "# services\n[other]\nhost=elsewhere\nnot a pair\n\n[orders]\nhost = db.internal\nport=6432\npassword=p=w\n[after]\nhost=no\n";
        let got = section(text, "orders", Path::new("/f")).unwrap().unwrap();
        assert_eq!(
            got,
            vec![
                ("host".to_owned(), "db.internal".to_owned()),
                ("port".to_owned(), "6432".to_owned()),
                ("password".to_owned(), "p=w".to_owned()),
            ]
        );
        assert_eq!(section(text, "missing", Path::new("/f")).unwrap(), None);
        let err = section("[s]\nhunter2\n", "s", Path::new("/etc/x.conf")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("/etc/x.conf") && msg.contains("line 2"),
            "{msg}"
        );
        assert!(!msg.contains("hunter2"), "{msg}");
        assert!(section("[s]\nservice=t\n", "s", Path::new("/f")).is_err());
    }

    /// Found by fuzzing: the lines were trimmed of Unicode spaces, so a
    /// password ending in U+00A0 (or U+3000) lost it, where libpq keeps it.
    #[test]
    fn only_ascii_spaces_are_trimmed_as_in_libpq() {
        let text = "[s]\n\u{a0}host\u{a0}=h\npassword = \u{3000}pw\u{a0} \t\r\n";
        let got = section(text, "s", Path::new("/f")).unwrap().unwrap();
        assert_eq!(
            got,
            vec![
                ("\u{a0}host\u{a0}".to_owned(), "h".to_owned()),
                ("password".to_owned(), "\u{3000}pw\u{a0}".to_owned()),
            ]
        );
    }

    #[test]
    fn a_header_is_matched_on_its_bracketed_name_alone() {
        let text = "[s1] # the first\nport=1\n[s10]\nport=10\n";
        let got = section(text, "s1", Path::new("/f")).unwrap().unwrap();
        assert_eq!(got, vec![("port".to_owned(), "1".to_owned())]);
        let got = section(text, "s10", Path::new("/f")).unwrap().unwrap();
        assert_eq!(got, vec![("port".to_owned(), "10".to_owned())]);
        assert_eq!(section(text, "s", Path::new("/f")).unwrap(), None);
    }

    #[test]
    fn a_file_that_is_not_utf8_is_refused_by_name_and_line() {
        let dir = std::env::temp_dir().join(format!("pgcoord-svc-utf8-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sys")).unwrap();
        std::fs::write(
            dir.join("user.conf"),
            b"[a]\nport=1\napplication_name=\xff\n",
        )
        .unwrap();
        std::fs::write(dir.join("sys/pg_service.conf"), "[a]\nport=2\n").unwrap();
        let env = LibpqEnv::from_vars([
            ("PGSERVICEFILE", dir.join("user.conf").display().to_string()),
            ("PGSYSCONFDIR", dir.join("sys").display().to_string()),
        ]);
        let err = find("a", &env).unwrap_err().to_string();
        let want = format!(
            "service file \"{}\", line 3, is not UTF-8",
            dir.join("user.conf").display()
        );
        assert!(err.contains(&want), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_users_file_comes_before_the_systems() {
        let dir = std::env::temp_dir().join(format!("pgcoord-svc-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sys")).unwrap();
        std::fs::write(dir.join("user.conf"), "[a]\nport=1\n").unwrap();
        std::fs::write(
            dir.join("sys/pg_service.conf"),
            "[a]\nport=2\n[b]\nport=3\n",
        )
        .unwrap();
        let env = LibpqEnv::from_vars([
            ("PGSERVICEFILE", dir.join("user.conf").display().to_string()),
            ("PGSYSCONFDIR", dir.join("sys").display().to_string()),
        ]);
        assert_eq!(find("a", &env).unwrap().params[0].1, "1");
        let b = find("b", &env).unwrap();
        assert_eq!(
            (b.params[0].1.as_str(), b.file),
            ("3", dir.join("sys/pg_service.conf"))
        );
        let err = find("c", &env).unwrap_err().to_string();
        assert!(
            err.contains("definition of service \"c\" not found"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_without_end_is_read_only_up_to_a_cap_and_named() {
        let dir = std::env::temp_dir().join(format!("pgcoord-svc-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.conf");
        let line = "# a comment line of a service file far too long to be one\n";
        let lines = (MAX_SIZE as usize).div_ceil(line.len()) + 1;
        std::fs::write(&big, format!("[a]\nport=1\n{}", line.repeat(lines))).unwrap();
        for file in [big.as_path(), Path::new("/dev/zero")] {
            let env = LibpqEnv::from_vars([
                ("PGSERVICEFILE", file.display().to_string()),
                ("PGSYSCONFDIR", dir.display().to_string()),
            ]);
            let err = find("a", &env).unwrap_err().to_string();
            assert!(
                err.contains(&format!(
                    "service file \"{}\" holds more than 1 MiB",
                    file.display()
                )),
                "{err}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
