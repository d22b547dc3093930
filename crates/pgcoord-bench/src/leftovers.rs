//! What a run has created and not yet dropped, so that an interrupted run
//! (SIGINT, SIGTERM) still takes it away, and what an earlier run that
//! could not (SIGKILL, a crash, a version before this) left behind.
//!
//! The scenarios register each table they are about to create (the
//! cleanup module's `absent` does, for the tables it finds missing) and
//! the bookkeeping rows they are about to write in tables that were there
//! before; [`drop_tables`] forgets what it dropped. On a signal the run stops its scenarios and
//! [`take_away`] drops whatever is still registered.
//!
//! At the start of a run, [`sweep`] drops the tables that are unmistakably
//! the bench's own ([`stale_reason`]): never a table such as
//! `eventsource_lock_fences` or `eventsource_projection_*`, which real users
//! share, and nothing while another run of the bench is connected.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tokio_postgres::Client;

use crate::Res;

#[derive(Default)]
struct Pending {
    tables: BTreeSet<String>,
    /// (table, LIKE pattern of `projection`): rows to delete.
    rows: BTreeSet<(String, String)>,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    tables: BTreeSet::new(),
    rows: BTreeSet::new(),
});

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// `table` is about to be created by this run: drop it if the run is interrupted.
pub fn created(table: &str) {
    pending().tables.insert(table.to_owned());
}

/// `table` was dropped (or is no longer the run's to drop).
pub fn dropped(table: &str) {
    pending().tables.remove(table);
}

/// Rows of `table` whose `projection` is LIKE `pattern` are about to be
/// written by this run (in a table that was there before).
pub fn rows(table: &str, pattern: &str) {
    pending()
        .rows
        .insert((table.to_owned(), pattern.to_owned()));
}

/// Those rows were deleted.
pub fn rows_deleted(table: &str, pattern: &str) {
    pending()
        .rows
        .remove(&(table.to_owned(), pattern.to_owned()));
}

/// What is still registered, as (tables, rows): for messages and tests.
pub fn registered() -> (Vec<String>, Vec<(String, String)>) {
    let p = pending();
    (
        p.tables.iter().cloned().collect(),
        p.rows.iter().cloned().collect(),
    )
}

/// Drops `tables` (with their owned sequences) if they exist, and
/// forgets them ([`dropped`]).
pub async fn drop_tables(client: &Client, tables: &[String]) -> Res<()> {
    for table in tables {
        let t = table.replace('"', "\"\"");
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{t}\""))
            .await?;
        dropped(table);
    }
    Ok(())
}

/// Drops every registered table and deletes every registered row, on
/// `client` (the run's monitor session: the scenarios' own sessions went
/// with them). A statement waits at most 10 s for a lock, so a session
/// still ending cannot hold the exit up for long. Returns what it did.
pub async fn take_away(client: &Client) -> Res<Vec<String>> {
    let (tables, rows) = registered();
    client.batch_execute("SET lock_timeout = '10s'").await?;
    let mut done = Vec::new();
    for (table, pattern) in &rows {
        let present: bool = client
            .query_one("SELECT to_regclass(quote_ident($1)) IS NOT NULL", &[table])
            .await?
            .get(0);
        if present && !tables.contains(table) {
            let t = table.replace('"', "\"\"");
            client
                .execute(
                    &format!("DELETE FROM \"{t}\" WHERE projection LIKE $1"),
                    &[pattern],
                )
                .await?;
            done.push(format!("the run's rows of {table}"));
        }
        rows_deleted(table, pattern);
    }
    drop_tables(client, &tables).await?;
    done.extend(tables);
    Ok(done)
}

/// Whether a process `pid` runs on this machine (true where that cannot
/// be told: no `/proc`).
pub fn pid_alive(pid: u32) -> bool {
    if pid == std::process::id() || !std::path::Path::new("/proc/self").exists() {
        return true;
    }
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Why `table` (in the run's schema) is a leftover of an earlier run of
/// the bench, safe to drop; None: it is not, or it may still be in use.
/// Only the bench's own names count: `bench_fenced_write`,
/// `bench_segment_tallies`, and `bench_segment_events_<n>_<n>_<pid>` whose
/// process `alive` says is gone.
pub fn stale_reason(table: &str, alive: impl Fn(u32) -> bool) -> Option<String> {
    match table {
        "bench_fenced_write" | "bench_segment_tallies" => {
            return Some("a table of the bench's own, left by an interrupted run".into())
        }
        _ => {}
    }
    let rest = table.strip_prefix("bench_segment_events_")?;
    let parts: Vec<&str> = rest.split('_').collect();
    let [count, runners, pid] = parts[..] else {
        return None;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(count) && digits(runners) && digits(pid)) {
        return None;
    }
    let pid: u32 = pid.parse().ok()?;
    (!alive(pid)).then(|| format!("left by run {pid}, which no longer runs"))
}

/// Drops what earlier runs left in the current schema (see
/// [`stale_reason`]), each with a note on standard error; does nothing,
/// with a note, while another run of the bench has a session on the
/// database. A table it may not drop is named and kept.
pub async fn sweep(client: &Client) -> Res<()> {
    let others: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
               AND (application_name LIKE 'bench/%' \
                    OR application_name LIKE 'eventsource/bench-%')",
            &[],
        )
        .await?
        .get(0);
    let rows = client
        .query(
            "SELECT c.relname::text FROM pg_class c \
             WHERE c.relnamespace = current_schema()::regnamespace \
               AND c.relkind IN ('r', 'p') AND c.relname LIKE 'bench\\_%' ORDER BY 1",
            &[],
        )
        .await?;
    let stale: Vec<(String, String)> = rows
        .iter()
        .filter_map(|r| {
            let name: String = r.get(0);
            stale_reason(&name, pid_alive).map(|why| (name, why))
        })
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    if others > 0 {
        eprintln!(
            "note: kept {} table(s) an earlier run may have left ({}): another run of the \
             bench is connected to this database",
            stale.len(),
            stale
                .iter()
                .map(|s| s.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(());
    }
    for (name, why) in stale {
        match drop_tables(client, std::slice::from_ref(&name)).await {
            Ok(()) => eprintln!("note: dropped {name}: {why}"),
            Err(e) => eprintln!(
                "note: cannot drop {name} ({why}): {}",
                crate::errors::describe(&*e)
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_benchs_own_names_are_stale() {
        let dead = |_: u32| false;
        let alive = |_: u32| true;
        assert!(stale_reason("bench_fenced_write", alive).is_some());
        assert!(stale_reason("bench_segment_tallies", alive).is_some());
        let why = stale_reason("bench_segment_events_4_2_4242", dead).unwrap();
        assert!(why.contains("4242"), "{why}");
        // A run that still runs keeps its tables.
        assert_eq!(stale_reason("bench_segment_events_4_2_4242", alive), None);
        // Not the bench's names: kept whatever the pid.
        for name in [
            "eventsource_lock_fences",
            "eventsource_projection_checkpoints",
            "eventsource_projection_progress",
            "bench_results",
            "bench_segment_events_4_2",
            "bench_segment_events_4_2_x1",
            "bench_segment_events_4_2_42_extra",
            "bench_segment_events__2_42",
            "my_bench_fenced_write",
        ] {
            assert_eq!(stale_reason(name, dead), None, "{name}");
        }
    }

    #[test]
    fn this_process_is_alive() {
        assert!(pid_alive(std::process::id()));
    }
}
