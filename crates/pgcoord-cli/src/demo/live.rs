//! What the demo shows while it runs: [`Live`], the holders and queues
//! PostgreSQL reports for the demo's keys, and [`Status`], the status line
//! (redrawn in place on a terminal, printed every few seconds otherwise).

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use pgcoord::inspect::query_holders;

/// The live view the status line shows.
#[derive(Debug, Default)]
pub(super) struct Live {
    pub(super) acquisitions: u64,
    /// Per key: holder (worker id) and how many wait, as PostgreSQL sees it.
    pub(super) db_view: BTreeMap<String, (Option<String>, usize)>,
    pub(super) running: usize,
    pub(super) killed: Option<(u32, String)>,
}

fn short_key(key: &str) -> &str {
    key.rsplit(':').next().unwrap_or(key)
}

fn short_holder(holder_id: &str) -> String {
    holder_id
        .strip_prefix("demo-worker-")
        .map(|n| format!("w{n}"))
        .unwrap_or_else(|| holder_id.to_owned())
}

impl Live {
    /// Reads each key's holder and queue from PostgreSQL (bounded; on
    /// failure the previous view stays).
    pub(super) async fn refresh(&mut self, inspector: &tokio_postgres::Client, keys: &[String]) {
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        if let Ok(Ok(locks)) =
            tokio::time::timeout(Duration::from_secs(1), query_holders(inspector, &refs)).await
        {
            self.db_view = locks
                .into_iter()
                .filter_map(|l| {
                    let holder = l.holders.first().map(|h| {
                        h.holder_id
                            .clone()
                            .unwrap_or_else(|| format!("pid {}", h.pid))
                    });
                    Some((l.key?, (holder, l.waiters.len())))
                })
                .collect();
        }
    }

    pub(super) fn line(&self, elapsed: Duration, keys: &[String]) -> String {
        let plural = if self.acquisitions == 1 { "" } else { "s" };
        let mut parts = vec![format!(
            "[{:5.1}s] {} acquisition{plural}",
            elapsed.as_secs_f64(),
            self.acquisitions
        )];
        let waiting = |n: &usize| match n {
            0 => String::new(),
            n => format!(", {n} waiting"),
        };
        let keys: Vec<String> = keys
            .iter()
            .map(|k| match self.db_view.get(k) {
                Some((Some(holder), n)) => {
                    format!(
                        "{}: {} holds{}",
                        short_key(k),
                        short_holder(holder),
                        waiting(n)
                    )
                }
                Some((None, n)) => format!("{}: free{}", short_key(k), waiting(n)),
                None => format!("{}: free", short_key(k)),
            })
            .collect();
        parts.push(keys.join(", "));
        parts.push(format!("{} workers running", self.running));
        if let Some((w, k)) = &self.killed {
            parts.push(format!("w{w} killed on {}", short_key(k)));
        }
        parts.join(" | ")
    }
}

/// The status line: redrawn in place on a terminal, printed every few
/// seconds otherwise.
#[derive(Debug)]
pub(super) struct Status {
    pub(super) tty: bool,
    pub(super) drawn: bool,
}

impl Status {
    pub(super) fn show(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// Prints a line of its own without garbling the status line.
    pub(super) fn note(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty && self.drawn {
            let _ = write!(err, "\r\x1b[2K");
            self.drawn = false;
        }
        let _ = writeln!(err, "{line}");
        let _ = err.flush();
    }

    pub(super) fn finish(&mut self) {
        if self.tty && self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
        }
    }
}
