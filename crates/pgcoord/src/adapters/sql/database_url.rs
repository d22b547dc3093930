//! [`DatabaseUrl`]: what a `postgres://` or `sqlite:` URL names, the
//! parsing step of [`connect`](super::connect).

use std::path::PathBuf;

use crate::ports::error::{Error, Result};

use super::Dialect;

/// What a database URL names. Its `Debug` never shows a PostgreSQL URL
/// (it may hold a password).
#[derive(Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A PostgreSQL server; the URL as tokio-postgres reads it.
    Postgres(String),
    /// A private in-memory SQLite database.
    SqliteMemory,
    /// A SQLite database file.
    SqliteFile(PathBuf),
}

impl DatabaseUrl {
    /// Parses a `postgres://` / `postgresql://` / `sqlite:` URL (see
    /// [`connect`](super::connect) for the forms).
    ///
    /// ```
    /// use pgcoord::readmodels::DatabaseUrl;
    /// assert_eq!(DatabaseUrl::parse("sqlite::memory:").unwrap(), DatabaseUrl::SqliteMemory);
    /// assert_eq!(
    ///     DatabaseUrl::parse("sqlite:////var/lib/app.db").unwrap(),
    ///     DatabaseUrl::SqliteFile("/var/lib/app.db".into())
    /// );
    /// assert!(DatabaseUrl::parse("mysql://x").is_err());
    /// ```
    ///
    /// Errors never repeat the URL (it may hold a password).
    pub fn parse(url: &str) -> Result<Self> {
        let bad = |why: &str| Error::InvalidArgument(format!("unsupported database URL: {why}"));
        let (scheme, rest) = url.split_once(':').ok_or_else(|| bad("no scheme"))?;
        let base = scheme
            .split('+')
            .next()
            .unwrap_or(scheme)
            .to_ascii_lowercase();
        match base.as_str() {
            "postgres" | "postgresql" => {
                if !rest.starts_with("//") {
                    return Err(bad("expected postgres://"));
                }
                Ok(DatabaseUrl::Postgres(format!("postgresql:{rest}")))
            }
            "sqlite" | "sqlite3" => {
                let rest = rest.split('?').next().unwrap_or(rest);
                let path = match rest.strip_prefix("//") {
                    // `sqlite:path.db`, `sqlite::memory:`
                    None => rest.to_owned(),
                    // `sqlite://` + `/path`: what follows the third slash is
                    // the path, so `////abs` is absolute.
                    Some(after) => match after.strip_prefix('/') {
                        Some(path) => path.to_owned(),
                        None if after.is_empty() || after == ":memory:" => String::new(),
                        None => return Err(bad("a SQLite URL has no host: use sqlite:///relative.db or sqlite:////absolute.db")),
                    },
                };
                let path = decode_path(&path)
                    .ok_or_else(|| bad("the path is not UTF-8 once percent-decoded"))?;
                if path.is_empty() || path == ":memory:" {
                    Ok(DatabaseUrl::SqliteMemory)
                } else {
                    Ok(DatabaseUrl::SqliteFile(PathBuf::from(path)))
                }
            }
            _ => Err(bad("expected postgres:// or sqlite:")),
        }
    }

    /// The dialect of the named database.
    pub fn dialect(&self) -> Dialect {
        match self {
            DatabaseUrl::Postgres(_) => Dialect::Postgres,
            DatabaseUrl::SqliteMemory | DatabaseUrl::SqliteFile(_) => Dialect::Sqlite,
        }
    }
}

/// The refusal of a URL whose backend this build of `pgcoord` left out:
/// it names the feature to turn on.
pub(super) fn feature_missing(dialect: Dialect) -> Error {
    let (database, feature) = match dialect {
        Dialect::Postgres => ("PostgreSQL", "postgres"),
        Dialect::Sqlite => ("SQLite", "sqlite"),
    };
    Error::InvalidArgument(format!(
        "the URL names a {database} database, but pgcoord was built without its \
         feature: add `features = [\"{feature}\"]` to the `pgcoord` dependency"
    ))
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatabaseUrl::Postgres(_) => f.write_str("Postgres(\"<not shown>\")"),
            DatabaseUrl::SqliteMemory => f.write_str("SqliteMemory"),
            DatabaseUrl::SqliteFile(p) => f.debug_tuple("SqliteFile").field(p).finish(),
        }
    }
}

/// Percent-decodes `%XX` sequences in a URL path.
fn decode_path(path: &str) -> Option<String> {
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()
        .map(|p| p.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_out_backend_is_refused_naming_its_feature() {
        assert_eq!(
            feature_missing(Dialect::Sqlite).to_string(),
            "invalid argument: the URL names a SQLite database, but pgcoord was built \
             without its feature: add `features = [\"sqlite\"]` to the `pgcoord` dependency"
        );
        let pg = feature_missing(Dialect::Postgres).to_string();
        assert!(
            pg.contains("PostgreSQL database") && pg.contains(r#"features = ["postgres"]"#),
            "{pg}"
        );
    }

    #[test]
    fn urls_follow_the_sqlalchemy_convention() {
        use DatabaseUrl::*;
        let file = |p: &str| SqliteFile(p.into());
        let table = [
            ("sqlite://", SqliteMemory),
            ("sqlite:///:memory:", SqliteMemory),
            ("sqlite+aiosqlite:///:memory:", SqliteMemory),
            ("sqlite+pysqlite://", SqliteMemory),
            ("sqlite::memory:", SqliteMemory),
            ("sqlite://:memory:", SqliteMemory),
            ("sqlite:///relative.db", file("relative.db")),
            ("sqlite:///data/rm.db?mode=rwc", file("data/rm.db")),
            ("sqlite+aiosqlite:///relative.db", file("relative.db")),
            ("sqlite:////absolute/path.db", file("/absolute/path.db")),
            ("sqlite+aiosqlite:////tmp/x.db", file("/tmp/x.db")),
            ("sqlite:////tmp/with%20space.db", file("/tmp/with space.db")),
            ("sqlite:rel.db", file("rel.db")),
            ("sqlite3:///a.db", file("a.db")),
            (
                "postgresql+asyncpg://u@h/db",
                Postgres("postgresql://u@h/db".into()),
            ),
            (
                "postgresql+psycopg://u@h/db",
                Postgres("postgresql://u@h/db".into()),
            ),
            (
                "postgres://u@h:5433/db",
                Postgres("postgresql://u@h:5433/db".into()),
            ),
        ];
        for (url, expected) in table {
            assert_eq!(DatabaseUrl::parse(url).unwrap(), expected, "{url}");
        }
        for bad in [
            "mysql://h/db",
            "no-scheme",
            "postgres:h/db",
            "sqlite://host/x.db",
            "sqlite:////bad%ff.db",
        ] {
            assert!(
                matches!(DatabaseUrl::parse(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn errors_and_debug_never_show_the_url() {
        for bad in [
            "mysql://u:hunter2@h/db",
            "postgres:u:hunter2@h/db",
            "hunter2",
        ] {
            let msg = DatabaseUrl::parse(bad).unwrap_err().to_string();
            assert!(!msg.contains("hunter2"), "{bad}: {msg}");
        }
        let url = DatabaseUrl::parse("postgres://u:hunter2@h/db").unwrap();
        assert!(!format!("{url:?}").contains("hunter2"));
    }
}
