//! [`projection_status`]: how far behind a projection is, from the
//! database alone (any process can ask; `eventsource projection status`
//! does).

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Client;

use super::dead_letters::DEAD_LETTER_TABLE;
use super::event_table::check_table_name;
use super::projection::PROGRESS_TABLE;
use super::source::query_error;
use crate::adapters::postgres::locks::holders::query_holders;
use crate::ports::error::{Error, Result};

/// A projection's progress, as [`projection_status`] found it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectionStatus {
    /// The projection's name.
    pub projection: String,
    /// The committed checkpoint (`None`: no event applied yet).
    pub checkpoint: Option<i64>,
    /// When the checkpoint last moved.
    pub checkpoint_updated_at: Option<DateTime<Utc>>,
    /// The highest committed position of the event table (with one).
    pub head: Option<i64>,
    /// Events of the event table beyond the checkpoint (with one).
    pub lag_events: Option<i64>,
    /// How long the oldest event not applied yet has waited, in seconds
    /// (0 when caught up; with an event table).
    pub lag_seconds: Option<f64>,
    /// Events applied per second over about the last minute (from the
    /// runner's checkpoint samples, each taken before a batch, at the
    /// checkpoint the batch starts from). `None` while unknown: no
    /// checkpoint, no samples table yet, a recent sample under a second
    /// old, or a checkpoint that moved in the last minute without a sample
    /// from before the move to say how far (a runner that stopped before
    /// taking one); `0.0` only when the checkpoint did not move in the last
    /// minute (nothing was applied in it).
    pub events_per_second: Option<f64>,
    /// Since when the checkpoint has stood still while events wait (with
    /// an event table): set when events are pending and neither the
    /// checkpoint nor the oldest pending event has moved or arrived in the
    /// last [`STALL_SECONDS`]; the later of the two instants. No ETA is
    /// given then: the rate of the last minute is from before the stall.
    pub stalled_since: Option<DateTime<Utc>>,
    /// The runner holding the projection's lock, if one does.
    pub runner: Option<RunnerInfo>,
    /// Events parked in the dead-letter table (0 before the table exists).
    pub parked: i64,
    /// The version a rebuild is building, with its checkpoint (`None`: no
    /// rebuild started, or it switched).
    pub rebuild: Option<RebuildProgress>,
}

/// A rebuild's progress, as [`projection_status`] found it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RebuildProgress {
    /// The version being built.
    pub version: u32,
    /// Its checkpoint (`None`: no event applied to it yet).
    pub checkpoint: Option<i64>,
}

impl ProjectionStatus {
    /// Seconds until the checkpoint reaches the head at the current rate
    /// (`None` without a lag or a rate, behind with no runner holding the
    /// projection, or [stalled](Self::stalled_since): the rate of the last
    /// minute is then from before the checkpoint stopped, and nothing
    /// moves it now).
    pub fn eta_seconds(&self) -> Option<f64> {
        match (self.lag_events, self.events_per_second) {
            (Some(0), _) => Some(0.0),
            _ if self.runner.is_none() || self.stalled_since.is_some() => None,
            (Some(lag), Some(rate)) if rate > 0.0 => Some(lag as f64 / rate),
            _ => None,
        }
    }
}

/// The process holding a projection's runner lock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunnerInfo {
    /// The lock manager's holder label (by default `HOSTNAME:PID`).
    pub holder_id: Option<String>,
    /// The host, when the label has the default form.
    pub host: Option<String>,
    /// The process id, when the label has the default form.
    pub pid: Option<u32>,
    /// The server process of the lock's session.
    pub backend_pid: i32,
    /// The client address the session came from.
    pub client_addr: Option<String>,
    /// When its session was last active (`xact_start`, else
    /// `state_change` of `pg_stat_activity`): it moves with the lock
    /// manager's own statements, so it is not when the lock was taken.
    pub since: Option<DateTime<Utc>>,
}

/// How long the checkpoint and the oldest pending event must have stood
/// still before a status calls the projection stalled, in seconds (three
/// of the runner's 5 s progress samples).
pub const STALL_SECONDS: f64 = 15.0;

/// Reads `projection`'s status on `client` (the read-model database, where
/// its runner's lock is taken too); `events_table` names a
/// [`PostgresEventTable`](super::PostgresEventTable) for the head and the
/// lag. Only reads; needs SELECT on the tables involved.
///
/// # Cancel safety
///
/// Cancel safe: reads only.
pub async fn projection_status(
    client: &Client,
    projection: &str,
    events_table: Option<&str>,
) -> Result<ProjectionStatus> {
    if let Some(t) = events_table {
        check_table_name(t)?;
    }
    let present = client
        .query_one(
            "SELECT to_regclass('eventsource_projection_checkpoints') IS NOT NULL, \
             to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL",
            &[&PROGRESS_TABLE, &DEAD_LETTER_TABLE],
        )
        .await
        .map_err(query_error)?;
    let (has_checkpoints, has_progress, has_parked): (bool, bool, bool) =
        (present.get(0), present.get(1), present.get(2));
    let (checkpoint, checkpoint_updated_at, moved_ago) = if has_checkpoints {
        let row = client
            .query_opt(
                r#"SELECT "position", "updated_at", extract(epoch FROM now() - "updated_at")::float8 FROM "eventsource_projection_checkpoints" WHERE "projection" = $1"#,
                &[&projection],
            )
            .await
            .map_err(query_error)?;
        (
            row.as_ref().map(|r| r.get(0)),
            row.as_ref().map(|r| r.get(1)),
            row.as_ref().map(|r| r.get::<_, f64>(2)),
        )
    } else {
        (None, None, None)
    };
    let mut status = ProjectionStatus {
        projection: projection.to_owned(),
        checkpoint,
        checkpoint_updated_at,
        head: None,
        lag_events: None,
        lag_seconds: None,
        events_per_second: None,
        stalled_since: None,
        runner: None,
        parked: 0,
        rebuild: None,
    };
    if let Some(t) = events_table {
        let row = client
            .query_one(
                &format!(
                    "SELECT max(\"position\"), count(*) FILTER (WHERE \"position\" > $1), \
                     coalesce(extract(epoch FROM now() - min(\"recorded_at\") FILTER (WHERE \"position\" > $1)), 0)::float8 \
                     FROM \"{t}\""
                ),
                &[&checkpoint.unwrap_or(0)],
            )
            .await
            .map_err(|e| events_table_error(t, e))?;
        status.head = row.get(0);
        status.lag_events = Some(row.get(1));
        status.lag_seconds = Some(row.get(2));
        status.stalled_since = stalled_since(&status, moved_ago);
    }
    if has_progress {
        if let Some(checkpoint) = checkpoint {
            let oldest = oldest_sample(client, projection).await?;
            status.events_per_second = rate(checkpoint, oldest, moved_ago);
        }
    }
    let key = format!("projection:{projection}");
    let locks = query_holders(client, &[key.as_str()]).await?;
    status.runner = locks
        .iter()
        .flat_map(|l| l.holders.iter())
        .find(|s| s.granted)
        .map(|s| {
            let (host, pid) = split_holder(s.holder_id.as_deref());
            RunnerInfo {
                holder_id: s.holder_id.clone(),
                host,
                pid,
                backend_pid: s.pid,
                client_addr: s.client_addr.clone(),
                since: s.since,
            }
        });
    status.rebuild = rebuild_progress(client, projection).await?;
    if has_parked {
        let row = client
            .query_one(
                &format!("SELECT count(*) FROM \"{DEAD_LETTER_TABLE}\" WHERE \"projection\" = $1"),
                &[&projection],
            )
            .await
            .map_err(query_error)?;
        status.parked = row.get(0);
    }
    Ok(status)
}

/// The building version of `projection` and its checkpoint (none before
/// the versions table exists).
async fn rebuild_progress(client: &Client, projection: &str) -> Result<Option<RebuildProgress>> {
    let row = client
        .query_one(
            "SELECT to_regclass('eventsource_projection_versions') IS NOT NULL",
            &[],
        )
        .await
        .map_err(query_error)?;
    if !row.get::<_, bool>(0) {
        return Ok(None);
    }
    let row = client
        .query_opt(
            r#"SELECT v."building", c."position" FROM "eventsource_projection_versions" v LEFT JOIN "eventsource_projection_checkpoints" c ON c."projection" = v."projection" || '@v' || v."building" WHERE v."projection" = $1 AND v."building" IS NOT NULL"#,
            &[&projection],
        )
        .await
        .map_err(query_error)?;
    Ok(row.map(|r| RebuildProgress {
        version: r.get::<_, i32>(0) as u32,
        checkpoint: r.get(1),
    }))
}

/// How far back the rate looks, in seconds: a minute, and the width of
/// one of the runner's sample slots.
const WINDOW_SECONDS: f64 = 65.0;

/// The oldest sample of about the last minute: its position and its age
/// in seconds (on the server's clock, as the checkpoint's age).
async fn oldest_sample(client: &Client, projection: &str) -> Result<Option<(i64, f64)>> {
    let row = client
        .query_opt(
            r#"SELECT "position", extract(epoch FROM now() - "at")::float8 FROM "eventsource_projection_progress"
               WHERE "projection" = $1 AND "at" > now() - make_interval(secs => $2) ORDER BY "at" LIMIT 1"#,
            &[&projection, &WINDOW_SECONDS],
        )
        .await
        .map_err(query_error)?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

/// Events per second since the `oldest` sample of the window, given the
/// `checkpoint` and how many seconds ago it moved; `None` when that
/// cannot be told.
fn rate(checkpoint: i64, oldest: Option<(i64, f64)>, moved_ago: Option<f64>) -> Option<f64> {
    let moved_in_window = moved_ago.is_none_or(|ago| ago < WINDOW_SECONDS);
    match oldest {
        // A sample under a second old measures too short a time.
        Some((position, age)) if checkpoint > position => {
            (age >= 1.0).then(|| (checkpoint - position) as f64 / age)
        }
        // The checkpoint moved in the window, but no sample in it is from
        // before the move (a sample taken after a batch, at the checkpoint
        // it reached, or none at all): events were applied, and nothing
        // says how many.
        _ if moved_in_window => None,
        // The checkpoint did not move in the window: nothing was applied.
        _ => Some(0.0),
    }
}

/// See [`ProjectionStatus::stalled_since`]: the later of the
/// checkpoint's last move and the oldest pending event's arrival, when
/// both are [`STALL_SECONDS`] old or more (on the server's clock).
fn stalled_since(status: &ProjectionStatus, moved_ago: Option<f64>) -> Option<DateTime<Utc>> {
    let (Some(lag), Some(waited), Some(ago), Some(moved)) = (
        status.lag_events,
        status.lag_seconds,
        moved_ago,
        status.checkpoint_updated_at,
    ) else {
        return None;
    };
    if lag == 0 || waited < STALL_SECONDS || ago < STALL_SECONDS {
        return None;
    }
    let later = chrono::Duration::milliseconds(((ago - waited).max(0.0) * 1000.0) as i64);
    Some(moved + later)
}

/// `host:pid` (the default holder label) into its parts.
fn split_holder(holder: Option<&str>) -> (Option<String>, Option<u32>) {
    match holder.and_then(|h| h.rsplit_once(':')) {
        Some((host, pid)) => match pid.parse() {
            Ok(pid) if !host.is_empty() => (Some(host.to_owned()), Some(pid)),
            _ => (None, None),
        },
        None => (None, None),
    }
}

fn events_table_error(table: &str, e: tokio_postgres::Error) -> Error {
    if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) {
        return Error::InvalidArgument(format!("there is no event table {table:?}"));
    }
    query_error(e)
}

#[cfg(test)]
mod tests {
    use super::{rate, split_holder};

    #[test]
    fn a_sample_under_a_second_old_gives_no_rate_and_an_older_one_does() {
        assert_eq!(rate(100, Some((90, 0.4)), Some(0.4)), None);
        assert_eq!(rate(100, Some((90, 2.0)), Some(0.4)), Some(5.0));
        assert_eq!(
            rate(100, Some((100, 30.0)), Some(3600.0)),
            Some(0.0),
            "sampled, and the checkpoint has not moved for an hour"
        );
        assert_eq!(
            rate(100, Some((100, 0.2)), Some(3600.0)),
            Some(0.0),
            "a fresh sample, and the checkpoint has not moved for an hour"
        );
    }

    #[test]
    fn a_sample_at_the_checkpoint_after_a_move_in_the_window_has_no_rate_not_zero() {
        // 300 events applied in one batch 40 s ago, sampled after the
        // batch at 300: not 0.0 events/s.
        assert_eq!(rate(300, Some((300, 39.0)), Some(40.0)), None);
        assert_eq!(rate(300, Some((300, 39.0)), None), None);
    }

    #[test]
    fn a_checkpoint_moved_in_the_window_without_a_sample_has_no_rate_not_zero() {
        assert_eq!(rate(597, None, Some(20.0)), None);
        assert_eq!(rate(597, None, Some(0.0)), None);
        assert_eq!(rate(597, None, None), None, "no time: unknown");
        assert_eq!(
            rate(597, None, Some(3600.0)),
            Some(0.0),
            "neither moved in the window: nothing applied"
        );
    }

    #[test]
    fn behind_with_no_runner_has_no_eta() {
        let mut status = super::ProjectionStatus {
            projection: "p".into(),
            checkpoint: Some(10),
            checkpoint_updated_at: None,
            head: Some(110),
            lag_events: Some(100),
            lag_seconds: Some(5.0),
            events_per_second: Some(20.0),
            stalled_since: None,
            runner: None,
            parked: 0,
            rebuild: None,
        };
        assert_eq!(status.eta_seconds(), None, "nothing runs it");
        status.lag_events = Some(0);
        assert_eq!(status.eta_seconds(), Some(0.0), "caught up");
        status.lag_events = Some(100);
        status.runner = Some(super::RunnerInfo {
            holder_id: None,
            host: None,
            pid: None,
            backend_pid: 42,
            client_addr: None,
            since: None,
        });
        assert_eq!(status.eta_seconds(), Some(5.0));
        status.stalled_since = status.checkpoint_updated_at.or(Some(chrono::Utc::now()));
        assert_eq!(status.eta_seconds(), None, "stalled: no ETA");
    }

    #[test]
    fn the_default_holder_label_splits_into_host_and_pid() {
        assert_eq!(
            split_holder(Some("web-1:4242")),
            (Some("web-1".into()), Some(4242))
        );
        assert_eq!(split_holder(Some("custom")), (None, None));
        assert_eq!(split_holder(Some("a:b")), (None, None));
        assert_eq!(split_holder(None), (None, None));
    }
}
