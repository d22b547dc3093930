//! The SQL a lock session runs (prepared once when it opens, in
//! `statements.rs`).
//!
//! Every function is called schema-qualified (`pg_catalog.`), so a function
//! of the same name earlier in the `search_path` cannot stand in for it.

// Every statement that takes, gives back or waits for a lock, and the
// ping, runs only on the server connection the session claimed (its tag,
// the parameter before the last): elsewhere it returns no row (see
// `claim.rs`). The last parameter is the request's number, returned plus
// the statement's own constant as the last column (see `answer.rs`).
pub(super) const TRY_ONE: &str = "SELECT pg_catalog.pg_try_advisory_lock($1), $3::int8 + 1 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
pub(super) const UNLOCK_ONE: &str = "SELECT pg_catalog.pg_advisory_unlock($1), $3::int8 + 2 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
/// Locks and unlocks of one batch, in order, as one `int8[]` of
/// `batch_form::batch_item`s. One row comes back: the 1-based positions in `$1` of
/// the items that failed (a try that found the id held, an unlock of an
/// id not held), as one `int8[]`, NULL when all succeeded. A set of
/// positions needs no order, so the server does not sort: `array_agg(...
/// ORDER BY n)` over the results cost it about 0.3 µs an id (pgbench, one
/// backend's CPU). And a row per id cost the client a message to parse
/// and a row to allocate per id, and the server a row to send.
///
/// One array, not an id array and a lock-or-unlock array side by side:
/// `ROWS FROM` over two `unnest`s cost the server about 0.1–0.2 µs more a
/// pair (a batch of 200 locks and 200 unlocks, one backend's CPU).
pub(super) const BATCH: &str =
    "SELECT pg_catalog.array_agg(t.n) FILTER (WHERE NOT CASE WHEN t.k >= 0 \
     THEN pg_catalog.pg_try_advisory_lock(t.k) \
     ELSE pg_catalog.pg_advisory_unlock(pg_catalog.int8not(t.k)) END), $3::int8 + 3 \
     FROM pg_catalog.unnest($1::int8[]) WITH ORDINALITY AS t(k, n) \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2 \
     HAVING pg_catalog.current_setting('eventsource.lock_session', true) = $2";

pub(super) const LOCK: &str = "SELECT pg_catalog.pg_advisory_lock($1), $3::int8 + 5 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
/// The first id of `$1` whose try-lock succeeds (its 1-based position, or
/// NULL): `LIMIT 1` stops the scan there, so no later id is tried.
pub(super) const TRY_FIRST: &str =
    "SELECT (SELECT t.n FROM ROWS FROM (pg_catalog.unnest($1::int8[])) \
     WITH ORDINALITY AS t(id, n) WHERE pg_catalog.pg_try_advisory_lock(t.id) LIMIT 1), \
       $3::int8 + 4 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
/// [`BATCH`] with fencing: each lock granted also increments its key's
/// fence row in the same statement, and the new token comes back: one more
/// than the last, but at least `$4`, the first token of the server's epoch
/// ([`FIRST_TOKEN`]), so a token never repeats across a promotion. A row
/// that an older holder's protected write still has locked `FOR SHARE` is
/// skipped, not waited for (a batched session never blocks): that grant is
/// given back at once and reported as not granted, and the caller's wait
/// (on a dedicated session) then waits for the write to end.
pub(super) const BATCH_FENCED: &str = "WITH t AS (\
       SELECT t.n, t.id, t.op, t.key, CASE WHEN t.op THEN pg_catalog.pg_try_advisory_lock(t.id) \
              ELSE pg_catalog.pg_advisory_unlock(t.id) END AS ok \
       FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::bool[]), \
                       pg_catalog.unnest($3::text[])) WITH ORDINALITY AS t(id, op, key, n) \
       WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $5 \
       ORDER BY t.n), \
     taken AS (SELECT id, key FROM t WHERE op AND ok), \
     free AS (SELECT f.lock_id FROM eventsource_lock_fences f \
              WHERE f.lock_id IN (SELECT id FROM taken) FOR UPDATE SKIP LOCKED), \
     busy AS (SELECT f.lock_id, pg_catalog.pg_advisory_unlock(f.lock_id) AS given_back \
              FROM eventsource_lock_fences f WHERE f.lock_id IN (SELECT id FROM taken) \
              AND f.lock_id NOT IN (SELECT lock_id FROM free)), \
     bumped AS (INSERT INTO eventsource_lock_fences AS f (lock_id, key, fence) \
              SELECT id, key, $4::int8 FROM taken \
              WHERE id NOT IN (SELECT lock_id FROM busy) \
              ON CONFLICT (lock_id) DO UPDATE SET fence = GREATEST(f.fence + 1, $4::int8) \
              RETURNING f.lock_id, f.fence) \
     SELECT CASE WHEN t.op THEN t.ok AND b.fence IS NOT NULL ELSE t.ok END, b.fence, u.given_back, \
       $6::int8 + 14 \
     FROM t LEFT JOIN bumped b ON t.op AND b.lock_id = t.id \
            LEFT JOIN busy u ON t.op AND u.lock_id = t.id ORDER BY t.n";
/// [`BATCH_FENCED`] for a batch of one try-lock (the sequential path):
/// the try and the increment, one id bound as `$1` (its key `$2`, the
/// epoch's first token `$3`), without the arrays, the ordinality, the joins
/// and the row lock that let the batch skip a busy fence row: those cost
/// the server a fifth more per pair than the raw fenced grant.
///
/// A fence row that an older holder's protected write still has locked is
/// waited for at most 1 ms (`lock_timeout`, local to the statement's own
/// transaction; the batched session is blocked meanwhile, so only as long
/// as it takes to tell): then the statement fails with `55P03`,
/// which rolls the increment back but not the session-level advisory lock,
/// so the batch gives that back and reports the key as not granted
/// (`run_batch`); the caller's wait, on a dedicated session, then waits
/// for the write to end. The `MATERIALIZED` try is read by the insert, so
/// the setting is in force before the increment can wait.
pub(super) const TRY_ONE_FENCED: &str = "WITH l AS MATERIALIZED (\
       SELECT pg_catalog.pg_try_advisory_lock($1) AS ok, \
              pg_catalog.set_config('lock_timeout', '1ms', true) AS busy_row_wait \
       WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $4), \
     bumped AS (INSERT INTO eventsource_lock_fences AS f (lock_id, key, fence) \
              SELECT $1, $2, $3::int8 FROM l WHERE l.ok \
              ON CONFLICT (lock_id) DO UPDATE SET fence = GREATEST(f.fence + 1, $3::int8) \
              RETURNING f.fence) \
     SELECT l.ok AND b.fence IS NOT NULL, b.fence, $5::int8 + 15 FROM l LEFT JOIN bumped b ON true";
/// [`LOCK`] with fencing: the wait, then the key's fence increment, in
/// one statement; the increment waits (within `lock_timeout`) for an older
/// holder's protected writes to end.
pub(super) const LOCK_FENCED: &str = "WITH l AS (SELECT pg_catalog.pg_advisory_lock($1) \
       WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $4) \
     INSERT INTO eventsource_lock_fences AS f (lock_id, key, fence) \
     SELECT $1, $2, $3::int8 FROM l \
     ON CONFLICT (lock_id) DO UPDATE \
     SET fence = GREATEST(f.fence + 1, $3::int8) RETURNING f.fence, $5::int8 + 16";
/// The first token of this server's epoch (its timeline), read once when a
/// fencing session opens and passed to every fenced grant: a primary's
/// timeline only changes at the end of a recovery, which no session lives
/// through, so the grants need not call the epoch function each time.
/// `NULL` on a standby (there is no epoch to read; a grant there fails as
/// any write does).
pub(super) const FIRST_TOKEN: &str = "SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL \
     ELSE (eventsource_lock_epoch() << 40) + 1 END, $1::int8 + 18";
/// Shared holds (never fenced: fencing protects writes). The wait first
/// tries, and blocks only when the try fails, in one statement: its answer
/// says whether the server made it wait (`true`) or granted at once. The
/// try fails while a writer waits for the key, so the wait then queues
/// behind that writer as a plain `pg_advisory_lock_shared` would.
pub(super) const LOCK_SHARED: &str =
    "SELECT CASE WHEN pg_catalog.pg_try_advisory_lock_shared($1) THEN false \
       ELSE pg_catalog.pg_advisory_lock_shared($1) IS NOT NULL END, $3::int8 + 10 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
pub(super) const TRY_SHARED: &str =
    "SELECT pg_catalog.pg_try_advisory_lock_shared($1), $3::int8 + 11 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
pub(super) const UNLOCK_SHARED: &str =
    "SELECT pg_catalog.pg_advisory_unlock_shared($1), $3::int8 + 12 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
/// Exclusive to shared on one session with no gap: the materialized CTE
/// takes the shared hold before the outer query gives up the exclusive
/// one. Not blocked by queued requests: PostgreSQL grants at once a
/// request of a backend that already holds a lock conflicting with them.
pub(super) const DOWNGRADE: &str =
    "WITH s AS MATERIALIZED (SELECT pg_catalog.pg_advisory_lock_shared($1) \
       WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2) \
     SELECT pg_catalog.pg_advisory_unlock($1), $3::int8 + 13 FROM s";
pub(super) const SET_LOCK_TIMEOUT: &str =
    "SELECT pg_catalog.set_config('lock_timeout', $1, false), \
       $3::int8 + 6 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $2";
/// After a wait that did not end in a grant: the dedicated session holds
/// nothing else, so this establishes that it holds nothing at all (a grant
/// that raced a timeout or a cancel is given back).
pub(super) const UNLOCK_ALL: &str = "SELECT pg_catalog.pg_advisory_unlock_all(), $2::int8 + 7 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $1";
pub(super) const PING: &str = "SELECT $2::int8 + 8 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $1";
/// One row per advisory lock the session's server process holds, and
/// one more with no id: a statement that reached another server connection
/// returns no row at all, never another process's locks.
pub(super) const HELD_IDS: &str = "SELECT (classid::int8 << 32) | objid::int8, $2::int8 + 9 \
     FROM pg_catalog.pg_locks \
     WHERE locktype = 'advisory' AND objsubid = 1 AND granted \
       AND pid = pg_catalog.pg_backend_pid() \
       AND pg_catalog.current_setting('eventsource.lock_session', true) = $1 \
     UNION ALL SELECT NULL, $2::int8 + 9 \
     WHERE pg_catalog.current_setting('eventsource.lock_session', true) = $1";
/// The server process, whether it is a standby, and the connection's
/// claim before this session's (`claim.rs`), which it then writes unless
/// another session's is there.
pub(super) const IDENTIFY: &str = "WITH c AS MATERIALIZED (\
       SELECT pg_catalog.current_setting('eventsource.lock_session', true) AS before) \
     SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), c.before, \
       pg_catalog.set_config('eventsource.lock_session', \
         CASE WHEN coalesce(c.before, '') = '' THEN $1 ELSE c.before END, false), \
       $2::int8 + 17 \
     FROM c";

#[cfg(test)]
mod epoch_tests {
    use super::super::super::fencing::EPOCH_SHIFT;
    use super::FIRST_TOKEN;

    #[test]
    fn the_fenced_grants_shift_the_epoch_as_the_checks_read_it() {
        assert!(FIRST_TOKEN.contains(&format!("eventsource_lock_epoch() << {EPOCH_SHIFT})")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_that_touches_a_lock_runs_only_on_the_claimed_connection() {
        let gate = format!(
            "pg_catalog.current_setting('{}', true) = $",
            super::super::claim::SETTING
        );
        for sql in [
            TRY_ONE,
            UNLOCK_ONE,
            BATCH,
            LOCK,
            TRY_FIRST,
            BATCH_FENCED,
            TRY_ONE_FENCED,
            LOCK_FENCED,
            LOCK_SHARED,
            TRY_SHARED,
            UNLOCK_SHARED,
            DOWNGRADE,
            SET_LOCK_TIMEOUT,
            UNLOCK_ALL,
            PING,
        ] {
            assert!(sql.contains(&gate), "{sql}");
        }
        assert!(IDENTIFY.contains(super::super::claim::SETTING));
    }
}
