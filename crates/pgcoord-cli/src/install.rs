//! `eventsource lock install`: creates what `lock run --fence`, `--min-interval`
//! and `leader run` need (see
//! `PostgresLockManager::install_fencing`), once per database.

use crate::db::{self, Database};

/// Runs `lock install`; returns the exit code.
pub async fn install(db: Database) -> i32 {
    let manager = match db.manager_builder().holder_id("install").build() {
        Ok(m) => m,
        Err(e) => return db::fail("cannot install fencing", Some(&db), &e),
    };
    match manager.install_fencing().await {
        Ok(installed) => {
            let text = if installed.left_as_is {
                format!(
                    "fencing is installed and up to date in schema {} of database {} (owned by \
                     role {}; this role may not change it, and nothing needed changing)\n",
                    installed.schema,
                    db.shown(),
                    installed.owner
                )
            } else {
                format!(
                    "fencing installed in schema {} of database {}: table \
                     eventsource_lock_fences (with last_run_started, for lock run \
                     --min-interval), functions eventsource_lock_id(key), \
                     eventsource_lock_fence_check(lock_id, token), \
                     eventsource_lock_fence_check_key(key, token), eventsource_lock_epoch() and \
                     eventsource_lock_claim_run(lock_ids, keys, interval_us)\n",
                    installed.schema,
                    db.shown()
                )
            };
            match crate::print_stdout(&text) {
                Ok(()) => 0,
                Err(code) => code,
            }
        }
        Err(e) => crate::read_only::fail("cannot install fencing", &db, &e).await,
    }
}
