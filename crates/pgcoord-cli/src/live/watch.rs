//! `eventsource lock holders --watch`: one line per change in who holds
//! and who waits, flushed as it is seen ([`Tracker`] finds the changes
//! between one listing and the next, every `--interval`).

use std::io::Write;
use std::time::Duration;

use chrono::Utc;

use super::inspect::{Inspector, KeyNames};
use super::track::Tracker;
use crate::db::refresh_within;
use crate::db::{self, Database};
use crate::reader_gone::stdout_reader_gone;
use crate::signals::Signals;
use crate::{exit, report};

/// Writes `text`; `Err` carries the exit code: 0 when the reader went away
/// (EPIPE), [`exit::IO_ERROR`] for other failures (reported).
fn emit(text: &str) -> Result<(), i32> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(0),
        Err(e) => {
            report!("cannot write to standard output: {e}");
            Err(exit::IO_ERROR)
        }
    }
}

/// Runs the watch until a signal or a closed stdout; returns the exit code.
///
/// The signals are those every watch catches ([`Signals`]): one the tool
/// was started with ignored (`nohup`, `cmd &` in a script) stays ignored.
/// A reader that went away is noticed at every `interval`, not only at the
/// next change ([`stdout_reader_gone`]).
pub async fn watch(
    db: &Database,
    inspector: &Inspector,
    names: &KeyNames,
    json: bool,
    interval: Duration,
) -> i32 {
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    let mut tracker = Tracker::default();
    let mut server_changes = inspector.server_changes().0;
    let mut failing = false;
    let mut sessions_ended = inspector.sessions_ended();
    let mut next = tokio::time::Instant::now();
    // A refresh that does not return in time fails like any other.
    let within = refresh_within(interval);
    loop {
        let listing = async {
            tokio::time::sleep_until(next).await;
            inspector.snapshot_within(names, within).await
        };
        let result = tokio::select! {
            sig = signals.recv() => return exit::watch_ended_by(sig),
            r = listing => r,
        };
        next = (next + interval).max(tokio::time::Instant::now());
        if stdout_reader_gone() {
            // As a write's EPIPE: the reader left (`| head -n 2`).
            return 0;
        }
        let locks = match result {
            Ok(locks) => locks,
            Err(e) => {
                if !failing {
                    report!(
                        "{}; trying again every {}",
                        db::describe_failure("cannot list lock holders", Some(db), &e),
                        crate::duration::format_duration(interval)
                    );
                    failing = true;
                }
                continue;
            }
        };
        let ended = std::mem::replace(&mut sessions_ended, inspector.sessions_ended());
        if failing {
            report!("listing lock holders again");
            failing = false;
        } else if ended != sessions_ended {
            // Reopened without a failed listing: said all the same.
            report!(
                "the session listing lock holders ended (a terminated backend, a server \
                 restart); listing on a new one"
            );
        }
        let (changes, server) = inspector.server_changes();
        if changes != server_changes {
            // Sessions of two servers are not one another's: no release,
            // grant or departure is inferred across them.
            server_changes = changes;
            tracker = Tracker::default();
            report!(
                "the listing now comes from another server ({}): what follows is its state, \
                 not compared with the last server's (a failover, or the URL's next host)",
                server.as_deref().unwrap_or("unknown")
            );
        }
        let mut text = String::new();
        for event in tracker.update(&locks, Utc::now()) {
            if json {
                match serde_json::to_string(&event) {
                    Ok(line) => text.push_str(&line),
                    Err(e) => {
                        report!("cannot encode JSON: {e}");
                        return exit::SOFTWARE;
                    }
                }
            } else {
                text.push_str(&event.line());
            }
            text.push('\n');
        }
        if !text.is_empty() {
            if let Err(code) = emit(&text) {
                return code;
            }
        }
    }
}
