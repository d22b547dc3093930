//! How `eventsource projection status` shows a status: the one-shot
//! report, a `--watch` line, JSON, and the progress bars on a terminal.

use std::io::Write;

use pgcoord::readmodels::postgres::ProjectionStatus;

use crate::printable::printable;

/// The library's status as JSON, with `eta_seconds`, and the rebuild's
/// lag, rate, ETA and runner in its `rebuild` object; `in_recovery`
/// true on a hot standby, where `runner` is null whoever runs it.
pub fn json(s: &ProjectionStatus, rebuild: Option<&ProjectionStatus>, standby: bool) -> String {
    let mut value = serde_json::to_value(s).expect("plain data");
    value["eta_seconds"] = serde_json::json!(s.eta_seconds());
    value["in_recovery"] = serde_json::json!(standby);
    if standby {
        // A standby session holding the key is no runner of the primary's.
        value["runner"] = serde_json::Value::Null;
    }
    if let (Some(r), Some(obj)) = (rebuild, value["rebuild"].as_object_mut()) {
        obj.insert("lag_events".into(), serde_json::json!(r.lag_events));
        obj.insert("lag_seconds".into(), serde_json::json!(r.lag_seconds));
        obj.insert(
            "events_per_second".into(),
            serde_json::json!(r.events_per_second),
        );
        obj.insert("eta_seconds".into(), serde_json::json!(r.eta_seconds()));
        let runner = r.runner.as_ref().filter(|_| !standby);
        obj.insert("runner".into(), serde_json::json!(runner));
    }
    value.to_string()
}

fn or_dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn seconds(s: f64) -> String {
    if s < 100.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.0} s", s)
    }
}

/// The one-shot text report.
pub fn render_report(
    s: &ProjectionStatus,
    rebuild: Option<&ProjectionStatus>,
    standby: bool,
) -> String {
    let mut out = format!("projection {}\n", printable(&s.projection));
    let updated = s
        .checkpoint_updated_at
        .map(|t| {
            format!(
                " (moved {})",
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )
        })
        .unwrap_or_default();
    out += &format!(
        "  checkpoint  {}{updated}\n",
        s.checkpoint.map_or("none yet".into(), |c| c.to_string())
    );
    match (s.head, s.lag_events) {
        (head, Some(lag)) => {
            out += &format!("  head        {}\n", or_dash(head));
            out += &format!(
                "  lag         {lag} events, {}\n",
                seconds(s.lag_seconds.unwrap_or(0.0))
            );
        }
        _ => out += "  lag         unknown (give --events-table)\n",
    }
    let rate = match (s.events_per_second, s.checkpoint) {
        (Some(r), _) => format!("{r:.1} events/s over the last minute"),
        (None, None) => "unknown (nothing applied yet)".into(),
        // A sample under a second old, or a checkpoint that moved in the
        // last minute without a sample from before the move.
        (None, Some(_)) => "unknown (too few recent samples)".into(),
    };
    out += &format!("  rate        {rate}\n");
    if let Some(eta) = s.eta_seconds() {
        out += &format!("  eta         {}\n", seconds(eta));
    }
    if let Some(since) = s.stalled_since {
        out += &format!(
            "  stalled     since {}: events wait and the checkpoint has not moved (no eta)\n",
            since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
    }
    out += &format!("  runner      {}\n", runner(s, standby));
    out += &format!("  parked      {}\n", s.parked);
    if let Some(r) = &s.rebuild {
        let at = r
            .checkpoint
            .map_or("no event yet".to_owned(), |c| format!("checkpoint {c}"));
        out += &format!("  rebuild     version {} building, {at}\n", r.version);
        if let Some(b) = rebuild {
            if let Some(lag) = b.lag_events {
                out += &format!("              {lag} events behind the head");
                if let Some(eta) = b.eta_seconds() {
                    out += &format!(", eta {}", seconds(eta));
                }
                out += "\n";
            }
            if let Some(rate) = b.events_per_second {
                out += &format!("              {rate:.1} events/s over the last minute\n");
            }
            out += &format!("              runner {}\n", runner(b, standby));
        }
    }
    out
}

/// What a hot standby says of the runner: its locks are not the primary's.
const RUNNER_ON_A_STANDBY: &str = "unknown on a standby (locks live on the primary)";

/// Who holds the projection's runner lock, for the report.
fn runner(s: &ProjectionStatus, standby: bool) -> String {
    if standby {
        return RUNNER_ON_A_STANDBY.to_owned();
    }
    let Some(r) = &s.runner else {
        return format!("none holds projection:{}", printable(&s.projection));
    };
    let mut who = or_dash(r.holder_id.as_deref().map(printable));
    if let (Some(host), Some(pid)) = (&r.host, r.pid) {
        who += &format!(" (host {}, pid {pid})", printable(host));
    }
    who += &format!(", server pid {}", r.backend_pid);
    if let Some(addr) = &r.client_addr {
        who += &format!(", from {addr}");
    }
    if let Some(since) = r.since {
        // The session's last activity (it moves with the lock manager's
        // own statements), not when the lock was taken.
        who += &format!(
            ", last active {}",
            since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
    }
    who
}

/// One line per look of `--watch`.
pub fn line(s: &ProjectionStatus, rebuild: Option<&ProjectionStatus>, standby: bool) -> String {
    let runner = match standby {
        true => "?".to_owned(),
        false => or_dash(
            s.runner
                .as_ref()
                .and_then(|r| r.holder_id.as_deref().map(printable)),
        ),
    };
    let rebuilding = match (&s.rebuild, rebuild) {
        (Some(r), Some(b)) => format!(
            " rebuild=v{} rebuild_checkpoint={} rebuild_lag={} rebuild_eta={}",
            r.version,
            or_dash(b.checkpoint),
            or_dash(b.lag_events),
            or_dash(b.eta_seconds().map(|v| format!("{v:.1}"))),
        ),
        _ => String::new(),
    };
    let stalled = s.stalled_since.map_or(String::new(), |t| {
        format!(
            " stalled_since={}",
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    });
    format!(
        "checkpoint={} head={} lag={} lag_seconds={} rate={} eta={} runner={} parked={}{rebuilding}{stalled}\n",
        or_dash(s.checkpoint),
        or_dash(s.head),
        or_dash(s.lag_events),
        or_dash(s.lag_seconds.map(|v| format!("{v:.1}"))),
        or_dash(s.events_per_second.map(|v| format!("{v:.1}"))),
        or_dash(s.eta_seconds().map(|v| format!("{v:.1}"))),
        runner,
        s.parked,
    )
}

/// The bars on standard error (a terminal): the catch-up's while the
/// projection is behind, and the rebuild's while a version is built;
/// with `--watch` one `\r` line (the rebuild's while there is one).
pub fn draw_bars(s: &ProjectionStatus, rebuild: Option<&ProjectionStatus>, watching: bool) {
    let version = s.rebuild.as_ref().map(|r| r.version);
    let rebuilding = rebuild.zip(version);
    if !watching || rebuilding.is_none() {
        draw_bar(s, "catch-up", watching);
    }
    if let Some((b, v)) = rebuilding {
        draw_bar(b, &format!("rebuild v{v}"), watching);
    }
}

/// Erases the `--watch` bar (`\r`, then ANSI erase-line).
pub fn clear_bar() {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K");
    let _ = err.flush();
}

/// One bar: `label [####------]  40% position 400 of 1000, 600 events behind, eta ...`.
fn draw_bar(s: &ProjectionStatus, label: &str, watching: bool) {
    let (Some(head), Some(lag)) = (s.head, s.lag_events) else {
        return;
    };
    if lag == 0 && !watching {
        return;
    }
    // Positions, not counts: an event table's positions can have gaps
    // (a rolled-back append), and the bar says how far the checkpoint is.
    let done = s.checkpoint.unwrap_or(0).clamp(0, head.max(0));
    let fraction = if head > 0 {
        done as f64 / head as f64
    } else {
        1.0
    };
    let width = 30;
    let filled = (fraction * width as f64).round() as usize;
    let eta = s
        .eta_seconds()
        .map_or("eta unknown".into(), |e| format!("eta {}", seconds(e)));
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r{label} [{}{}] {:>3.0}% position {done} of {head}, {lag} events behind, {eta}   ",
        "#".repeat(filled),
        "-".repeat(width - filled.min(width)),
        fraction * 100.0
    );
    if !watching {
        let _ = writeln!(err);
    }
    let _ = err.flush();
}
