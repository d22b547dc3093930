//! A lock session's prepared statements: its setup, every statement of
//! `sql.rs` prepared in one pipelined round trip, its claim on the server
//! connection, and the checks that the answers it read are its own.

use tokio_postgres::types::Type;
use tokio_postgres::{Client, Statement};

use tokio_postgres::error::SqlState;

use super::super::fencing::fence_query_error;
use super::answer::{shaped, Kind, Stamps};
use super::sql::*;
use crate::adapters::postgres::connection::connect::{pg_error, SESSION_SETUP, SESSION_SETUP_PG14};
use crate::adapters::postgres::connection::tcp_timeouts;
use crate::ports::error::{BackendError, BackendErrorKind};

/// The prepared statements of one session.
pub(super) struct Statements {
    pub(super) try_one: Statement,
    pub(super) unlock_one: Statement,
    pub(super) batch: Statement,
    pub(super) try_first: Statement,
    pub(super) lock: Statement,
    pub(super) set_lock_timeout: Statement,
    pub(super) unlock_all: Statement,
    pub(super) ping: Statement,
    pub(super) held_ids: Statement,
    pub(super) lock_shared: Statement,
    pub(super) try_shared: Statement,
    pub(super) unlock_shared: Statement,
    pub(super) downgrade: Statement,
    /// The fenced forms, prepared when the manager fences.
    pub(super) fenced: Option<FencedStatements>,
    /// The session's claim on its server connection (`claim.rs`): the
    /// parameter before the last of every statement that touches a lock.
    pub(super) tag: String,
    /// The numbers its requests send and expect back (`answer.rs`).
    pub(super) stamps: Stamps,
}

pub(super) struct FencedStatements {
    pub(super) batch: Statement,
    /// [`TRY_ONE_FENCED`].
    pub(super) try_one: Statement,
    pub(super) lock: Statement,
    /// The first token of the server's epoch ([`FIRST_TOKEN`]).
    pub(super) first_token: Option<i64>,
}

/// What a session learns about its server when it opens.
pub(super) struct Identity {
    pub(super) pid: i32,
    pub(super) in_recovery: bool,
    /// How long the server keeps this session however silent it is (its
    /// TCP timeouts, [`tcp_timeouts`]); `None` over a Unix socket.
    pub(super) silence_bound: Option<std::time::Duration>,
}

/// Applies the session settings and prepares every statement, all in one
/// pipelined round trip. `extra` sets what fencing and lease mode need.
pub(super) async fn prepare(
    client: &Client,
    fencing: bool,
    extra: Option<&str>,
) -> Result<(Statements, Identity), BackendError> {
    let tag = super::claim::new_tag();
    let stamps = Stamps::new();
    let identify_stamp = stamps.next(Kind::Identify);
    let first_token_stamp = stamps.next(Kind::FirstToken);
    let identify: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&tag, &identify_stamp.sent];
    let first_token: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&first_token_stamp.sent];
    let prep = |sql: &'static str, types: &'static [Type]| client.prepare_typed(sql, types);
    let (setup, pg14, silence_bound, extra, fenced, prepared) = tokio::join!(
        client.batch_execute(SESSION_SETUP),
        client.batch_execute(SESSION_SETUP_PG14),
        tcp_timeouts::apply(client),
        async {
            match extra {
                Some(sql) => client.batch_execute(sql).await.map(Some),
                None => Ok(None),
            }
        },
        async {
            if !fencing {
                return Ok(None);
            }
            let (batch, try_one, lock, first) = tokio::try_join!(
                prep(
                    BATCH_FENCED,
                    &[
                        Type::INT8_ARRAY,
                        Type::BOOL_ARRAY,
                        Type::TEXT_ARRAY,
                        Type::INT8,
                        Type::TEXT,
                        Type::INT8
                    ]
                ),
                prep(
                    TRY_ONE_FENCED,
                    &[Type::INT8, Type::TEXT, Type::INT8, Type::TEXT, Type::INT8]
                ),
                prep(
                    LOCK_FENCED,
                    &[Type::INT8, Type::TEXT, Type::INT8, Type::TEXT, Type::INT8]
                ),
                client.query_opt(FIRST_TOKEN, &first_token),
            )?;
            // An answer that is not this request's: not a token to trust.
            let Some(first) = first.filter(|row| first_token_stamp.answers(row)) else {
                return Ok(Some(None));
            };
            Ok(Some(Some(FencedStatements {
                batch,
                try_one,
                lock,
                first_token: first.get(0),
            })))
        },
        async {
            tokio::try_join!(
                prep(TRY_ONE, &[Type::INT8, Type::TEXT, Type::INT8]),
                prep(UNLOCK_ONE, &[Type::INT8, Type::TEXT, Type::INT8]),
                prep(BATCH, &[Type::INT8_ARRAY, Type::TEXT, Type::INT8]),
                prep(TRY_FIRST, &[Type::INT8_ARRAY, Type::TEXT, Type::INT8]),
                prep(LOCK, &[Type::INT8, Type::TEXT, Type::INT8]),
                prep(SET_LOCK_TIMEOUT, &[Type::TEXT, Type::TEXT, Type::INT8]),
                prep(UNLOCK_ALL, &[Type::TEXT, Type::INT8]),
                prep(PING, &[Type::TEXT, Type::INT8]),
                prep(HELD_IDS, &[Type::TEXT, Type::INT8]),
                prep(LOCK_SHARED, &[Type::INT8, Type::TEXT, Type::INT8]),
                prep(TRY_SHARED, &[Type::INT8, Type::TEXT, Type::INT8]),
                prep(UNLOCK_SHARED, &[Type::INT8, Type::TEXT, Type::INT8]),
                prep(DOWNGRADE, &[Type::INT8, Type::TEXT, Type::INT8]),
                client.query_opt(IDENTIFY, &identify),
            )
        }
    );
    // Statements prepared on one server connection and run on another (or
    // meeting another client's): a pooler between, named as such.
    let opening = |e: tokio_postgres::Error| match super::claim::mixed_statements(&e) {
        true => super::claim::not_its_connection(),
        false => pg_error(e, BackendErrorKind::NotPostgres),
    };
    setup.map_err(opening)?;
    // Servers before 14 do not know the setting; that is fine.
    drop(pg14);
    extra.map_err(|e| {
        let mut err = pg_error(e, BackendErrorKind::NotPostgres);
        if err.code().map(|c| c.code()) == Some(SqlState::UNDEFINED_OBJECT.code()) {
            err = BackendError::new(
                BackendErrorKind::NotPostgres,
                "lease mode needs PostgreSQL 14 or later (idle_session_timeout): without it a \
                 frozen holder keeps its locks",
            );
        }
        err
    })?;
    let fenced = fenced.map_err(|e| match super::claim::mixed_statements(&e) {
        true => super::claim::not_its_connection(),
        false => fence_query_error(e),
    })?;
    let fenced = match fenced {
        Some(Some(f)) => Some(f),
        Some(None) => return Err(super::claim::not_its_connection()),
        None => None,
    };
    let (
        try_one,
        unlock_one,
        batch,
        try_first,
        lock,
        set_lock_timeout,
        unlock_all,
        ping,
        held_ids,
        lock_shared,
        try_shared,
        unlock_shared,
        downgrade,
        row,
    ) = prepared.map_err(opening)?;
    let statements = Statements {
        try_one,
        unlock_one,
        batch,
        try_first,
        lock,
        set_lock_timeout,
        unlock_all,
        ping,
        held_ids,
        lock_shared,
        try_shared,
        unlock_shared,
        downgrade,
        fenced,
        tag,
        stamps,
    };
    // Answers taken for others' (a pooler that loses track of pipelined
    // statements) would make a statement decode another's row: refused.
    let row = row
        .filter(|row| identify_stamp.answers(row))
        .filter(|_| all_shaped(&statements))
        .ok_or_else(super::claim::not_its_connection)?;
    if !super::claim::unclaimed(row.get::<_, Option<&str>>(2)) {
        return Err(super::claim::claimed_by_another());
    }
    let identity = Identity {
        pid: row.get(0),
        in_recovery: row.get(1),
        silence_bound,
    };
    Ok((statements, identity))
}

/// Whether every statement's columns are the ones its SQL returns: a
/// pooler that loses track of pipelined statements can hand one statement
/// the description of another (then a row would be decoded as the wrong
/// types), which this refuses.
fn all_shaped(st: &Statements) -> bool {
    use Type as T;
    let flag = [T::BOOL, T::INT8];
    let void = [T::VOID, T::INT8];
    let plain = [
        (&st.try_one, &flag[..]),
        (&st.unlock_one, &flag),
        (&st.batch, &[T::INT8_ARRAY, T::INT8]),
        (&st.try_first, &[T::INT8, T::INT8]),
        (&st.lock, &void),
        (&st.set_lock_timeout, &[T::TEXT, T::INT8]),
        (&st.unlock_all, &void),
        (&st.ping, &[T::INT8]),
        (&st.held_ids, &[T::INT8, T::INT8]),
        (&st.lock_shared, &flag),
        (&st.try_shared, &flag),
        (&st.unlock_shared, &flag),
        (&st.downgrade, &flag),
    ];
    let fenced = st.fenced.as_ref().is_none_or(|f| {
        shaped(&f.batch, &[T::BOOL, T::INT8, T::BOOL, T::INT8])
            && shaped(&f.try_one, &[T::BOOL, T::INT8, T::INT8])
            && shaped(&f.lock, &[T::INT8, T::INT8])
    });
    fenced && plain.iter().all(|(stmt, columns)| shaped(stmt, columns))
}
