//! What [`verify`](super::verify) reports about replication: the standbys
//! the primary streams to, whether any is synchronous, and what fencing
//! guarantees in that topology; and whether the endpoint sent the two test
//! sessions to one server.

use std::fmt;

use tokio_postgres::Client;

use super::query_failed;
use crate::ports::error::Result;

/// The replication a primary shows (`pg_stat_replication`, which any role
/// may count; the states need `pg_read_all_stats` or a superuser).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replication {
    /// Standbys streaming from this server now.
    pub standbys: i64,
    /// Of those, how many are synchronous (`sync` or `quorum`); `None` when
    /// the role may not see the states.
    pub synchronous: Option<i64>,
    /// `synchronous_commit` for this role's sessions.
    pub synchronous_commit: String,
    /// `synchronous_standby_names`.
    pub synchronous_standby_names: String,
    /// The WAL timeline: the epoch in every fencing token granted now
    /// (`None` when the role may not read it).
    pub timeline: Option<i64>,
}

impl Replication {
    /// What fencing guarantees here, in one sentence.
    pub fn fencing_guarantee(&self) -> &'static str {
        match (self.standbys, self.synchronous) {
            (0, _) => {
                "no standby streams from this server: a failover can only come from a backup or a \
                 standby that is not connected now, and fencing tokens still never repeat across \
                 the new timeline it starts"
            }
            (_, Some(n))
                if n > 0
                    && self.synchronous_commit != "off"
                    && self.synchronous_commit != "local" =>
            {
                "a synchronous standby confirms every commit: a promotion of it loses no fence \
                 increment and no fenced write, and every pre-failover token is refused on it"
            }
            (_, None) => {
                "standbys stream from this server (whether synchronously is not visible to this \
                 role): a promotion may lose the last commits, fenced writes included, but no \
                 token repeats and every pre-failover token is refused on the new primary"
            }
            _ => {
                "standbys stream asynchronously: a promotion may lose the last commits, fenced \
                 writes included, but no token repeats and every pre-failover token is refused \
                 on the new primary"
            }
        }
    }
}

impl fmt::Display for Replication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sync = match self.synchronous {
            Some(n) => format!("{n} synchronous"),
            None => "synchronous or not: not visible to this role".to_owned(),
        };
        write!(
            f,
            "replication: {} standby(s) streaming ({sync}); synchronous_commit = {}; \
             synchronous_standby_names = '{}'",
            self.standbys, self.synchronous_commit, self.synchronous_standby_names
        )?;
        if let Some(t) = self.timeline {
            write!(
                f,
                "; timeline {t} (the epoch of fencing tokens granted now)"
            )?;
        }
        write!(f, "\nfencing: {}", self.fencing_guarantee())
    }
}

/// Reads the replication facts on a primary.
pub(super) async fn replication(c: &Client) -> Result<Replication> {
    let row = c
        .query_one(
            "SELECT (SELECT count(*) FROM pg_catalog.pg_stat_replication \
                      WHERE state = 'streaming' OR state IS NULL), \
                    CASE WHEN pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER') \
                           OR (SELECT rolsuper FROM pg_catalog.pg_roles \
                                WHERE rolname = current_user) \
                         THEN (SELECT count(*) FROM pg_catalog.pg_stat_replication \
                                WHERE sync_state IN ('sync', 'quorum')) END, \
                    pg_catalog.current_setting('synchronous_commit'), \
                    pg_catalog.current_setting('synchronous_standby_names')",
            &[],
        )
        .await
        .map_err(query_failed)?;
    let privileged: Option<i64> = row.get(1);
    // Any role may call the WAL functions on a stock server; a managed
    // service may revoke them: then the timeline is not shown.
    let timeline = c
        .query_one(
            "SELECT ('x' || pg_catalog.substr(pg_catalog.pg_walfile_name( \
                 pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::int8",
            &[],
        )
        .await
        .ok()
        .map(|r| r.get(0));
    Ok(Replication {
        standbys: row.get(0),
        synchronous: privileged,
        synchronous_commit: row.get(2),
        synchronous_standby_names: row.get(3),
        timeline,
    })
}

/// Which server a session reached: its address and when it started. Two
/// sessions of one endpoint that differ here reached two servers (a
/// read/write-splitting proxy, a load balancer over replicas).
pub(super) async fn server_identity(c: &Client) -> Result<String> {
    let row = c
        .query_one(
            "SELECT coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'local') || ':' || \
                    coalesce(pg_catalog.inet_server_port()::text, '') || ', up since ' || \
                    pg_catalog.pg_postmaster_start_time()::text",
            &[],
        )
        .await
        .map_err(query_failed)?;
    Ok(row.get(0))
}
