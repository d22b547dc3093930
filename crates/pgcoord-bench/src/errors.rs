//! Error messages that say what the server said.
//!
//! `tokio_postgres::Error`'s `Display` is just "db error" for a server
//! error: the message, SQLSTATE, detail and hint sit in its `DbError`
//! (`as_db_error()`). Every error the bench prints goes through [`describe`].

use std::error::Error as StdError;

/// One line for `e` and its sources, with the server's own message and
/// SQLSTATE wherever a `tokio_postgres::Error` carries a `DbError`.
pub fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        let db = err
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(|pg| pg.as_db_error())
            .or_else(|| err.downcast_ref::<tokio_postgres::error::DbError>());
        match db {
            // The library's errors already carry the server's message and
            // SQLSTATE: add only what they left out (detail, hint).
            Some(db) if parts.iter().any(|p| p.contains(db.message())) => {
                let more = db_extras(db);
                if let Some(last) = parts.last_mut().filter(|_| !more.is_empty()) {
                    if !last.contains(&more) {
                        last.push_str(&more);
                    }
                }
            }
            Some(db) => parts.push(db_error(db)),
            None => {
                // tokio-postgres says just "db error" where the server's
                // words are further down the chain: say those instead.
                // (The library's own messages may end in it too: its
                // source's text, after the server's words it already gave.)
                let full = err.to_string();
                let text = full.strip_suffix(": db error").unwrap_or(&full).to_owned();
                if text != "db error" && !parts.iter().any(|p| p.contains(&text)) {
                    parts.push(text);
                }
            }
        }
        // A DbError has been said in full; its source (none) adds nothing.
        if db.is_some() {
            break;
        }
        cur = err.source();
    }
    parts.join(": ")
}

fn db_error(db: &tokio_postgres::error::DbError) -> String {
    format!(
        "{}: {} (SQLSTATE {}){}",
        db.severity(),
        db.message(),
        db.code().code(),
        db_extras(db)
    )
}

fn db_extras(db: &tokio_postgres::error::DbError) -> String {
    let mut s = String::new();
    if let Some(d) = db.detail() {
        s.push_str(&format!("; detail: {d}"));
    }
    if let Some(h) = db.hint() {
        s.push_str(&format!("; hint: {h}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(&'static str);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl StdError for Wrapped {}

    #[test]
    fn a_bare_db_error_is_never_printed() {
        let e = Wrapped(
            "could not acquire lock \"k\": database session ended: query_wait_timeout \
             (SQLSTATE 08P01): db error",
        );
        let said = describe(&e);
        assert!(!said.contains("db error"), "{said}");
        assert!(
            said.contains("query_wait_timeout (SQLSTATE 08P01)"),
            "{said}"
        );
    }
}
