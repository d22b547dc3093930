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
        let text = match err.downcast_ref::<tokio_postgres::Error>() {
            Some(pg) => match pg.as_db_error() {
                Some(db) => db_error(db),
                None => pg.to_string(),
            },
            None => match err.downcast_ref::<tokio_postgres::error::DbError>() {
                Some(db) => db_error(db),
                None => err.to_string(),
            },
        };
        // Skip a source whose text its parent already said.
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        // A DbError has been said in full; its source (none) adds nothing.
        if err
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(|pg| pg.as_db_error())
            .is_some()
        {
            break;
        }
        cur = err.source();
    }
    parts.join(": ")
}

fn db_error(db: &tokio_postgres::error::DbError) -> String {
    let mut s = format!(
        "{}: {} (SQLSTATE {})",
        db.severity(),
        db.message(),
        db.code().code()
    );
    if let Some(d) = db.detail() {
        s.push_str(&format!("; detail: {d}"));
    }
    if let Some(h) = db.hint() {
        s.push_str(&format!("; hint: {h}"));
    }
    s
}
