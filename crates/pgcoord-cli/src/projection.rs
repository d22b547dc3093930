//! `eventsource projection status`: the library's `projection_status`,
//! as text, JSON and a progress bar on a terminal.

use std::io::{IsTerminal, Write};

use pgcoord::readmodels::postgres::{projection_status, ProjectionStatus};
use pgcoord::Error;

use crate::db::{self, Database};
use crate::projection_args::{ProjectionCommand, ProjectionStatusArgs};
use crate::signals::Signals;
use crate::{exit, report};

/// Runs `eventsource projection ...`; returns the exit code.
pub async fn projection(command: ProjectionCommand, db: Database) -> i32 {
    match command {
        ProjectionCommand::Status(args) => status(args, db).await,
        ProjectionCommand::Dlq(command) => crate::projection_dlq::dlq(command, db).await,
    }
}

async fn status(args: ProjectionStatusArgs, db: Database) -> i32 {
    let client = match db.connect().await {
        Ok(c) => c,
        Err(e) => return db::fail("cannot read the projection's status", Some(&db), &e),
    };
    let bar = std::io::stderr().is_terminal();
    let mut signals = match args.watch.then(Signals::catch).transpose() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    loop {
        let status =
            match projection_status(&client, &args.name, args.events_table.as_deref()).await {
                Ok(s) => s,
                Err(Error::InvalidArgument(msg)) => {
                    report!("{msg}");
                    return exit::USAGE;
                }
                Err(e) => return db::fail("cannot read the projection's status", Some(&db), &e),
            };
        let text = match (args.json, args.watch) {
            (true, _) => format!("{}\n", serde_json::to_string(&status).expect("plain data")),
            (false, true) => line(&status),
            (false, false) => render_report(&status),
        };
        if bar {
            draw_bar(&status, args.watch);
        }
        if let Err(code) = crate::print_stdout(&text) {
            return code;
        }
        let Some(signals) = signals.as_mut() else {
            return 0;
        };
        tokio::select! {
            sig = signals.recv() => {
                if bar {
                    eprintln!();
                }
                return exit::SIGNAL_BASE + sig as i32;
            }
            _ = tokio::time::sleep(args.every) => {}
        }
    }
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
fn render_report(s: &ProjectionStatus) -> String {
    let mut out = format!("projection {}\n", s.projection);
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
    out += &format!(
        "  rate        {}\n",
        s.events_per_second
            .map_or("unknown (no recent sample)".into(), |r| format!(
                "{r:.1} events/s over the last minute"
            ))
    );
    if let Some(eta) = s.eta_seconds() {
        out += &format!("  eta         {}\n", seconds(eta));
    }
    match &s.runner {
        Some(r) => {
            let mut who = or_dash(r.holder_id.as_deref());
            if let (Some(host), Some(pid)) = (&r.host, r.pid) {
                who += &format!(" (host {host}, pid {pid})");
            }
            who += &format!(", server pid {}", r.backend_pid);
            if let Some(addr) = &r.client_addr {
                who += &format!(", from {addr}");
            }
            if let Some(since) = r.since {
                who += &format!(
                    ", since {}",
                    since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                );
            }
            out += &format!("  runner      {who}\n");
        }
        None => {
            out += "  runner      none holds projection:{name}\n"
                .replace("{name}", &s.projection)
                .as_str()
        }
    }
    out += &format!("  parked      {}\n", s.parked);
    if let Some(r) = &s.rebuild {
        let at = r
            .checkpoint
            .map_or("no event yet".to_owned(), |c| format!("checkpoint {c}"));
        out += &format!("  rebuild     version {} building, {at}\n", r.version);
    }
    out
}

/// One line per look of `--watch`.
fn line(s: &ProjectionStatus) -> String {
    format!(
        "checkpoint={} head={} lag={} lag_seconds={} rate={} eta={} runner={} parked={}\n",
        or_dash(s.checkpoint),
        or_dash(s.head),
        or_dash(s.lag_events),
        or_dash(s.lag_seconds.map(|v| format!("{v:.1}"))),
        or_dash(s.events_per_second.map(|v| format!("{v:.1}"))),
        or_dash(s.eta_seconds().map(|v| format!("{v:.1}"))),
        or_dash(s.runner.as_ref().and_then(|r| r.holder_id.clone())),
        s.parked,
    )
}

/// A one-line `\r` bar on standard error (a terminal) while behind.
fn draw_bar(s: &ProjectionStatus, watching: bool) {
    let (Some(head), Some(lag)) = (s.head, s.lag_events) else {
        return;
    };
    if lag == 0 && !watching {
        return;
    }
    let done = (head - lag).max(0);
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
        "\r[{}{}] {:>3.0}% {done}/{head} events, {eta}   ",
        "#".repeat(filled),
        "-".repeat(width - filled.min(width)),
        fraction * 100.0
    );
    if !watching {
        let _ = writeln!(err);
    }
    let _ = err.flush();
}
