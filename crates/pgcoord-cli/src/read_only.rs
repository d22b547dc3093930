//! A write refused with "cannot execute ... in a read-only transaction"
//! (SQLSTATE 25006): a hot standby, or a primary on which the role's
//! sessions are read-only by default (`default_transaction_read_only`,
//! set for the role, the database or the connection). Which of the two,
//! the server is asked, so that the line sends the operator to the right
//! place: the primary, or the role's settings.

use pgcoord::Error;
use tokio_postgres::Client;

use crate::db::{self, Database};
use crate::{exit, report};

/// What makes the sessions read-only, as the server says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOnly {
    /// `pg_is_in_recovery()`: a hot standby takes no writes.
    Standby,
    /// A primary, with `default_transaction_read_only` on; `source` is
    /// `pg_settings.source` (`user`, `database`, `client`, ...), `role`
    /// the session's role.
    ByDefault { source: String, role: String },
}

const ASK: &str = "SELECT pg_catalog.pg_is_in_recovery(), s.setting = 'on', s.source, \
                   current_user::text FROM pg_catalog.pg_settings s \
                   WHERE s.name = 'default_transaction_read_only'";

/// Whether `err` is the server's refusal of a write in a read-only transaction.
pub fn is_read_only(err: &Error) -> bool {
    err.as_backend()
        .and_then(|b| b.code())
        .is_some_and(|c| c.code() == "25006")
}

/// Whether the sessions of `client` are read-only, and why; `None` for
/// a primary whose sessions may write.
pub async fn read_only(client: &Client) -> Result<Option<ReadOnly>, Error> {
    let row = db::answered(async { client.query_one(ASK, &[]).await.map_err(Error::from) }).await?;
    let (standby, by_default): (bool, bool) = (row.get(0), row.get(1));
    Ok(match (standby, by_default) {
        (true, _) => Some(ReadOnly::Standby),
        (false, true) => Some(ReadOnly::ByDefault {
            source: row.get(2),
            role: row.get(3),
        }),
        (false, false) => None,
    })
}

/// Where a `default_transaction_read_only` of `source` was set, in words.
fn set_by(source: &str, role: &str) -> String {
    match source {
        "user" => format!("role {role}'s own setting (ALTER ROLE {role} SET)"),
        "database" => "the database's setting (ALTER DATABASE ... SET)".to_owned(),
        "database user" => {
            format!(
                "role {role}'s setting in this database (ALTER ROLE {role} IN DATABASE ... SET)"
            )
        }
        "client" => "the connection's options (options=-c..., PGOPTIONS)".to_owned(),
        "configuration file" => "the server's configuration file".to_owned(),
        other => format!("its {other} setting"),
    }
}

impl ReadOnly {
    /// The hint for a write it refused.
    pub fn hint(&self) -> String {
        match self {
            ReadOnly::Standby => "the server is a hot standby (pg_is_in_recovery()): fence \
                                  tokens, --min-interval's run log and `lock install` are \
                                  writes, which need the primary"
                .to_owned(),
            ReadOnly::ByDefault { source, role } => format!(
                "the server is a primary, but this session's transactions are read-only: \
                 default_transaction_read_only is on, by {}; fence tokens, --min-interval's run \
                 log, leader terms and `lock install` are writes: connect as a role whose \
                 sessions may write, or turn the setting off for this one",
                set_by(source, role)
            ),
        }
    }

    /// The exit code of a write it refused: a standby is not the server
    /// the command needs (69); a read-only role is the set-up lacking
    /// what the options need (78).
    pub fn exit_code(&self) -> i32 {
        match self {
            ReadOnly::Standby => exit::UNAVAILABLE,
            ReadOnly::ByDefault { .. } => exit::CONFIG,
        }
    }
}

/// [`db::fail`], with the cause of a read-only refusal asked of the server
/// on a plain session of its own (when that cannot be asked, the generic
/// hint stands).
pub async fn fail(context: &str, db: &Database, err: &Error) -> i32 {
    let (line, code) = describe(context, db, err).await;
    report!("{line}");
    code
}

/// The line of [`fail`] and its exit code.
pub async fn describe(context: &str, db: &Database, err: &Error) -> (String, i32) {
    match cause(db, err).await {
        Some(cause) => (
            db::describe_failure_with(context, Some(db), err, Some(cause.hint())),
            cause.exit_code(),
        ),
        None => (
            db::describe_failure(context, Some(db), err),
            exit::for_error(err),
        ),
    }
}

async fn cause(db: &Database, err: &Error) -> Option<ReadOnly> {
    if !is_read_only(err) {
        return None;
    }
    let client = db.connect().await.ok()?;
    read_only(&client).await.ok().flatten()
}
