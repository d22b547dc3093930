//! A segmented projection's base name given to `projection status` or
//! `projection dlq list`: the base name has no checkpoint (nor parked
//! events) of its own, its segments (`NAME/segment-I-of-N`) have. The
//! status shows each segment's line and an aggregate; `dlq list` lists the
//! segments' parked events.

use std::collections::BTreeMap;

use pgcoord::readmodels::postgres::{projection_status, ProjectionStatus};
use tokio_postgres::Client;

use crate::db::answered;
use crate::printable::printable;
use crate::projection_args::ProjectionStatusArgs;

/// The names in `table` (its `projection` column) of `base`'s segments,
/// in (count, index) order; none when the table is not there.
pub async fn segment_names(
    client: &Client,
    table: &str,
    base: &str,
) -> pgcoord::Result<Vec<String>> {
    let prefix = format!("{base}/segment-");
    let rows = answered(async {
        let sql = format!(
            r#"SELECT DISTINCT "projection" FROM "{table}" WHERE left("projection", length($1)) = $1"#
        );
        match client.query(sql.as_str(), &[&prefix]).await {
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
                Ok(Vec::new())
            }
            other => other.map_err(pgcoord::Error::from),
        }
    })
    .await?;
    let mut found: Vec<((u32, u32), String)> = rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter_map(|n| Some((index_and_count(&n[prefix.len()..])?, n)))
        .collect();
    found.sort_by_key(|((i, n), _)| (*n, *i));
    Ok(found.into_iter().map(|(_, n)| n).collect())
}

/// `(i, n)` of a tail `{i}-of-{n}` with `i < n`.
fn index_and_count(tail: &str) -> Option<(u32, u32)> {
    let (i, n) = tail.split_once("-of-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(i) || !digits(n) {
        return None;
    }
    let (i, n) = (i.parse::<u32>().ok()?, n.parse::<u32>().ok()?);
    (i < n).then_some((i, n))
}

/// The status of each of `base`'s segments, rendered (text or JSON);
/// `None` when `base` has no segment checkpoints.
pub async fn segments_report(
    client: &Client,
    args: &ProjectionStatusArgs,
    standby: bool,
) -> pgcoord::Result<Option<String>> {
    let names = segment_names(client, "eventsource_projection_checkpoints", &args.name).await?;
    if names.is_empty() {
        return Ok(None);
    }
    let mut statuses = Vec::with_capacity(names.len());
    for name in &names {
        let table = args.events_table.as_deref();
        statuses.push(answered(projection_status(client, name, table)).await?);
    }
    Ok(Some(match args.json {
        true => json(&args.name, &statuses, standby),
        false => text(&args.name, &statuses, standby),
    }))
}

/// Holder label -> segments held; and how many segments none holds.
fn runners(statuses: &[ProjectionStatus]) -> (BTreeMap<String, usize>, usize) {
    let mut held = BTreeMap::new();
    let mut free = 0;
    for s in statuses {
        match &s.runner {
            Some(r) => {
                let who = r
                    .holder_id
                    .clone()
                    .unwrap_or_else(|| format!("server pid {}", r.backend_pid));
                *held.entry(who).or_insert(0) += 1;
            }
            None => free += 1,
        }
    }
    (held, free)
}

fn text(base: &str, statuses: &[ProjectionStatus], standby: bool) -> String {
    let mut out = format!(
        "projection {} is segmented: no checkpoint of its own, {} segment checkpoint(s)\n",
        printable(base),
        statuses.len()
    );
    for s in statuses {
        let tail = &s.projection[base.len() + 1..];
        let checkpoint = s.checkpoint.map_or("none yet".into(), |c| c.to_string());
        let lag = s
            .lag_events
            .map_or(String::new(), |l| format!(", lag {l} events"));
        let runner = match (&s.runner, standby) {
            (_, true) => "?".to_owned(),
            (Some(r), false) => r
                .holder_id
                .as_deref()
                .map_or(format!("server pid {}", r.backend_pid), printable),
            (None, false) => "none".to_owned(),
        };
        let stalled = s.stalled_since.map_or(String::new(), |t| {
            format!(
                ", stalled since {}",
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )
        });
        out += &format!(
            "  {:<22} checkpoint {checkpoint}{lag}, runner {runner}, parked {}{stalled}\n",
            printable(tail),
            s.parked
        );
    }
    if let Some(max) = statuses.iter().filter_map(|s| s.lag_events).max() {
        out += &format!(
            "  total        lag up to {max} events (the segment furthest behind; a segment's lag counts every event past its checkpoint, of any segment)\n"
        );
    }
    out += &format!(
        "  parked       {}\n",
        statuses.iter().map(|s| s.parked).sum::<i64>()
    );
    if standby {
        out += "  runners      unknown on a standby (locks live on the primary)\n";
        return out;
    }
    let (held, free) = runners(statuses);
    let mut who: Vec<String> = held
        .iter()
        .map(|(h, n)| format!("{} ({n})", printable(h)))
        .collect();
    if who.is_empty() {
        who.push("none".into());
    }
    out += &format!(
        "  runners      {}; {free} segment(s) held by none\n",
        who.join(", ")
    );
    out
}

fn json(base: &str, statuses: &[ProjectionStatus], standby: bool) -> String {
    let (held, free) = runners(statuses);
    let segments: Vec<serde_json::Value> = statuses
        .iter()
        .map(|s| {
            serde_json::from_str(&crate::projection_render::json(s, None, standby)).expect("JSON")
        })
        .collect();
    let value = serde_json::json!({
        "projection": base,
        "segmented": true,
        "segments": segments,
        "lag_events_max": statuses.iter().filter_map(|s| s.lag_events).max(),
        "parked": statuses.iter().map(|s| s.parked).sum::<i64>(),
        "runners": if standby { serde_json::Value::Null } else { serde_json::json!(held) },
        "unheld_segments": if standby { serde_json::Value::Null } else { serde_json::json!(free) },
        "in_recovery": standby,
    });
    format!("{value}\n")
}
