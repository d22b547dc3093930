//! `eventsource lock top`: a refreshing terminal view of the advisory
//! locks, or one plain listing when standard output is not a terminal.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;
use crossterm::cursor::{Hide, MoveTo, Show};
use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::Print;
use crossterm::terminal::{self, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{execute, queue};
use eventsource::adapters::postgres::{AdvisoryLock, HoldersQuery, LockSession};
use futures_util::StreamExt;
use tokio::signal::unix::{signal, SignalKind};

use crate::db::{self, Database};
use crate::duration::format_duration;
use crate::holders::{columns, lock_label, parse_interval, Inspector, KeyNameArgs, KeyNames};
use crate::messages::session_name;
use crate::watch::{Slot, Tracker};
use crate::{exit, report};

/// `lock top --help`.
pub const TOP_LONG_ABOUT: &str = "\
A live view of the database's advisory locks, like top: one row per session
that holds or waits for a lock, refreshed every --interval. Locks with
waiters come first, the longest wait first; then held locks, the longest
held first. q, Esc or Ctrl-C quits and gives the terminal back as it was.

Columns: KEY (the key, when named with --key / --key-file or recorded by
the fencing table, else the lock id; (K1,K2) for a two-int lock), STATE
(held / waiting), PID (the backend; SELECT pg_terminate_backend(PID) frees
its locks), HOLDER (the holder id of an eventsource session, else its
application_name), CLIENT (its address), FOR (how long it has held or
waited), BLOCKED BY (for a waiter, the pids it waits behind) and, when the
table eventsource_lock_fences is in the search_path, FENCE (the lock's
current fencing token).

FOR for a waiter counts from when it started waiting (PostgreSQL 14 and
later). PostgreSQL does not record when a lock was granted: for a grant
this view saw, FOR counts from the refresh that first showed it; for a lock
already held when the view started, FOR shows `<=` and the age of the
holder's session, the longest it can have been held.

Each refresh is one query (pg_locks joined with pg_stat_activity). When
standard output is not a terminal, one listing is printed and the command
exits 0. Exit codes: 0 quit, 2 bad usage (a bad --interval, an unreadable
--key-file), 69 the database cannot be reached, 74 the terminal cannot be
written.";

/// `eventsource lock top`
#[derive(Debug, Args)]
pub struct TopArgs {
    /// How often to refresh (at least 100ms).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1s",
        value_parser = parse_interval,
        allow_hyphen_values = true
    )]
    pub interval: Duration,

    #[command(flatten)]
    pub names: KeyNameArgs,
}

/// What the header says besides the locks.
struct Header<'a> {
    database: &'a str,
    fence_table: Option<&'a str>,
    interval: Duration,
    /// The last refresh failed: why, and when.
    error: Option<String>,
    interactive: bool,
}

fn age(since: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (now - since).to_std().unwrap_or_default()
}

fn whole(d: Duration) -> String {
    format_duration(Duration::from_secs(d.as_secs()))
}

/// How long a session has held its lock: known (`None` bound) when the
/// grant was seen, else at most its session's age.
fn held_for(
    lock: &AdvisoryLock,
    s: &LockSession,
    seen: &Tracker,
    now: DateTime<Utc>,
) -> Option<(Duration, bool)> {
    match seen.granted_seen(&Slot::of(lock, s)) {
        Some(t) => Some((age(t, now), false)),
        None => s.backend_start.map(|t| (age(t, now), true)),
    }
}

fn longest_wait(lock: &AdvisoryLock, now: DateTime<Utc>) -> Duration {
    lock.waiters
        .iter()
        .filter_map(|w| w.since.map(|t| age(t, now)))
        .max()
        .unwrap_or_default()
}

/// The view as lines of text: header, column titles, rows; at most `rows`
/// lines and `width` characters each when given.
fn frame(
    locks: &[AdvisoryLock],
    seen: &Tracker,
    header: &Header<'_>,
    now: DateTime<Utc>,
    size: Option<(usize, usize)>,
) -> Vec<String> {
    let held: usize = locks.iter().map(|l| l.holders.len()).sum();
    let waiting: usize = locks.iter().map(|l| l.waiters.len()).sum();
    let mut lines = vec![format!(
        "eventsource lock top - {} - {} UTC - every {}{}",
        header.database,
        now.format("%H:%M:%S"),
        format_duration(header.interval),
        if header.interactive { " - q quits" } else { "" }
    )];
    let plural = if locks.len() == 1 { "" } else { "s" };
    let mut summary = format!(
        "{} lock{plural}: {held} held, {waiting} waiting",
        locks.len()
    );
    if let Some(longest) = locks
        .iter()
        .map(|l| longest_wait(l, now))
        .max()
        .filter(|_| waiting > 0)
    {
        summary.push_str(&format!("; longest wait {}", whole(longest)));
    }
    if let Some(table) = header.fence_table {
        summary.push_str(&format!("; fence tokens from {table}"));
    }
    lines.push(summary);
    lines.push(header.error.clone().unwrap_or_default());

    let mut order: Vec<&AdvisoryLock> = locks.iter().collect();
    let hold_age = |l: &AdvisoryLock| {
        l.holders
            .iter()
            .filter_map(|h| held_for(l, h, seen, now).map(|(d, _)| d))
            .max()
            .unwrap_or_default()
    };
    order.sort_by(|a, b| {
        (!b.waiters.is_empty(), longest_wait(b, now), hold_age(b))
            .cmp(&(!a.waiters.is_empty(), longest_wait(a, now), hold_age(a)))
            .then(a.lock_id.cmp(&b.lock_id))
    });
    let fences = header.fence_table.is_some();
    let mut rows = vec![[
        "KEY",
        "STATE",
        "PID",
        "HOLDER",
        "CLIENT",
        "FOR",
        "BLOCKED BY",
    ]
    .map(str::to_owned)
    .to_vec()];
    if fences {
        rows[0].push("FENCE".into());
    }
    let mut bounded = false;
    for lock in order {
        for (i, s) in lock.holders.iter().chain(lock.waiters.iter()).enumerate() {
            let since = if s.granted {
                match held_for(lock, s, seen, now) {
                    Some((d, true)) => {
                        bounded = true;
                        format!("<={}", whole(d))
                    }
                    Some((d, false)) => whole(d),
                    None => "-".into(),
                }
            } else {
                s.since.map_or("-".into(), |t| whole(age(t, now)))
            };
            let blockers: Vec<String> = s.blocked_by.iter().map(i32::to_string).collect();
            let mut row = vec![
                if i == 0 {
                    lock_label(lock)
                } else {
                    String::new()
                },
                if s.granted { "held" } else { "waiting" }.to_owned(),
                s.pid.to_string(),
                session_name(s),
                s.client_addr.clone().unwrap_or_else(|| "-".into()),
                since,
                blockers.join(","),
            ];
            if fences {
                row.push(match (i, lock.fence) {
                    (0, Some(f)) => f.to_string(),
                    (0, None) => "-".into(),
                    _ => String::new(),
                });
            }
            rows.push(row);
        }
    }
    let mut footer = Vec::new();
    if locks.is_empty() {
        footer.push("no advisory locks are held or awaited in this database".to_owned());
    }
    if bounded {
        footer.push(
            "<=: held when top started; at most the age of the holder's session \
             (PostgreSQL does not record when a lock was granted)"
                .to_owned(),
        );
    }
    let mut table = if locks.is_empty() {
        Vec::new()
    } else {
        columns(&rows)
    };
    if let Some((_, height)) = size {
        let room = height.saturating_sub(lines.len() + footer.len());
        if table.len() > room {
            let hidden = table.len() - room.saturating_sub(1);
            table.truncate(room.saturating_sub(1));
            table.push(format!(
                "... {hidden} more rows (a taller window shows more)"
            ));
        }
    }
    lines.extend(table);
    lines.extend(footer);
    if let Some((width, _)) = size {
        for line in &mut lines {
            if line.chars().count() > width {
                *line = line.chars().take(width).collect();
            }
        }
    }
    lines
}

/// Raw mode and the alternate screen while it lives; the terminal is
/// given back as it was when it is dropped (also on a panic).
struct Screen;

impl Screen {
    fn enter() -> std::io::Result<Self> {
        terminal::enable_raw_mode()?;
        let screen = Screen;
        execute!(std::io::stdout(), EnterAlternateScreen, Hide)?;
        Ok(screen)
    }

    fn draw(
        &self,
        build: impl FnOnce(Option<(usize, usize)>) -> Vec<String>,
    ) -> std::io::Result<()> {
        let (w, h) = terminal::size()?;
        let lines = build(Some((usize::from(w), usize::from(h))));
        let mut out = std::io::stdout().lock();
        for (i, line) in lines.iter().enumerate() {
            let row = u16::try_from(i).unwrap_or(u16::MAX);
            queue!(
                out,
                MoveTo(0, row),
                Print(line),
                Clear(ClearType::UntilNewLine)
            )?;
        }
        queue!(out, Clear(ClearType::FromCursorDown))?;
        out.flush()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), Show, LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

fn quits(key: &KeyEvent) -> bool {
    key.kind != KeyEventKind::Release
        && match key.code {
            KeyCode::Char('q' | 'Q') | KeyCode::Esc => true,
            KeyCode::Char('c') => key.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

/// Runs `lock top`; returns the exit code.
pub async fn top(args: TopArgs, db: Database) -> i32 {
    let names = match KeyNames::load(&args.names) {
        Ok(n) => n,
        Err(code) => return code,
    };
    let inspector = match Inspector::open(&db, HoldersQuery::all()).await {
        Ok(i) => i,
        Err(code) => return code,
    };
    let mut locks = match inspector.snapshot(&names).await {
        Ok(l) => l,
        Err(e) => return db::fail("cannot list lock holders", Some(&db), &e),
    };
    let mut seen = Tracker::default();
    seen.update(&locks, Utc::now());
    let shown = db.shown();
    let mut header = Header {
        database: &shown,
        fence_table: inspector.fence_table(),
        interval: args.interval,
        error: None,
        interactive: false,
    };
    if !std::io::stdout().is_terminal() {
        let mut text = frame(&locks, &seen, &header, Utc::now(), None).join("\n");
        text.push('\n');
        return crate::print_stdout(&text).err().unwrap_or(0);
    }
    header.interactive = true;
    let (mut term, mut hup, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(h), Ok(i)) => (t, h, i),
        _ => {
            report!("cannot catch signals");
            return exit::SOFTWARE;
        }
    };
    let screen = match Screen::enter() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot set up the terminal: {e}");
            return exit::IO_ERROR;
        }
    };
    let mut keys = EventStream::new();
    let mut next = tokio::time::Instant::now() + args.interval;
    let outcome: Result<(), String> = loop {
        if let Err(e) = screen.draw(|size| frame(&locks, &seen, &header, Utc::now(), size)) {
            break Err(format!("cannot write to the terminal: {e}"));
        }
        let listing = async {
            tokio::time::sleep_until(next).await;
            inspector.snapshot(&names).await
        };
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Event::Key(k))) if quits(&k) => break Ok(()),
                Some(Ok(_)) => {} // a resize, another key: draw again
                Some(Err(e)) => break Err(format!("cannot read the terminal: {e}")),
                None => break Ok(()),
            },
            _ = term.recv() => break Ok(()),
            _ = hup.recv() => break Ok(()),
            _ = int.recv() => break Ok(()),
            result = listing => {
                next = (next + args.interval).max(tokio::time::Instant::now());
                let now = Utc::now();
                match result {
                    Ok(l) => {
                        seen.update(&l, now);
                        locks = l;
                        header.error = None;
                    }
                    Err(e) => {
                        header.error = Some(format!(
                            "refresh failed at {}: {}; showing the last listing",
                            now.format("%H:%M:%S"),
                            db::describe_failure("", Some(&db), &e)
                        ));
                    }
                }
            }
        }
    };
    drop(screen);
    match outcome {
        Ok(()) => 0,
        Err(message) => {
            report!("{message}");
            exit::IO_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn session(pid: i32, holder: &str, granted: bool, secs: u32) -> LockSession {
        LockSession {
            pid,
            mode: "ExclusiveLock".into(),
            granted,
            application_name: Some(format!("eventsource/{holder}")),
            holder_id: Some(holder.into()),
            client_addr: Some("10.0.0.1".into()),
            backend_start: Some(Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap()),
            since: Some(Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, secs).unwrap()),
            blocked_by: if granted { vec![] } else { vec![pid - 1] },
        }
    }

    fn lock(
        id: i64,
        key: Option<&str>,
        holders: Vec<LockSession>,
        waiters: Vec<LockSession>,
    ) -> AdvisoryLock {
        AdvisoryLock {
            lock_id: id,
            int_pair: None,
            key: key.map(str::to_owned),
            fence: Some(id * 10),
            holders,
            waiters,
        }
    }

    #[test]
    fn longest_waits_come_first_and_unseen_grants_are_bounds() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 1, 0).unwrap();
        let locks = vec![
            lock(1, Some("quiet"), vec![session(10, "a", true, 0)], vec![]),
            lock(
                2,
                None,
                vec![session(20, "b", true, 0)],
                vec![session(21, "c", false, 50)],
            ),
            lock(
                3,
                Some("busy"),
                vec![session(30, "d", true, 0)],
                vec![session(31, "e", false, 0)],
            ),
        ];
        let mut seen = Tracker::default();
        seen.update(&locks, now);
        let header = Header {
            database: "app@db/app",
            fence_table: Some("public.eventsource_lock_fences"),
            interval: Duration::from_secs(1),
            error: None,
            interactive: true,
        };
        let lines = frame(&locks, &seen, &header, now, None);
        assert_eq!(
            lines[0],
            "eventsource lock top - app@db/app - 09:01:00 UTC - every 1s - q quits"
        );
        assert_eq!(lines[1], "3 locks: 3 held, 2 waiting; longest wait 1m; fence tokens from public.eventsource_lock_fences");
        let table: Vec<&str> = lines[3..9].iter().map(String::as_str).collect();
        assert_eq!(
            table,
            [
                "KEY    STATE    PID  HOLDER  CLIENT    FOR     BLOCKED BY  FENCE",
                "busy   held     30   d       10.0.0.1  <=1h1m              30",
                "       waiting  31   e       10.0.0.1  1m      30",
                "2      held     20   b       10.0.0.1  <=1h1m              20",
                "       waiting  21   c       10.0.0.1  10s     20",
                "quiet  held     10   a       10.0.0.1  <=1h1m              10",
            ]
        );
        assert!(lines[9].starts_with("<=: held when top started"));
        let small = frame(&locks, &seen, &header, now, Some((30, 8)));
        assert_eq!(small.len(), 8, "{small:#?}");
        assert!(small.iter().all(|l| l.chars().count() <= 30), "{small:#?}");
        assert!(small[6].starts_with("... 3 more rows"), "{small:#?}");
    }

    #[test]
    fn a_grant_seen_counts_from_when_it_was_seen() {
        let t = |m, s| Utc.with_ymd_and_hms(2026, 12, 1, 9, m, s).unwrap();
        let mut seen = Tracker::default();
        seen.update(&[], t(0, 0));
        let locks = vec![lock(7, Some("k"), vec![session(10, "a", true, 0)], vec![])];
        seen.update(&locks, t(0, 5));
        let header = Header {
            database: "d",
            fence_table: None,
            interval: Duration::from_secs(1),
            error: Some("refresh failed".into()),
            interactive: false,
        };
        let lines = frame(&locks, &seen, &header, t(2, 5), None);
        assert_eq!(lines[2], "refresh failed");
        assert_eq!(lines[4], "k    held   10   a       10.0.0.1  2m");
        assert!(!lines
            .iter()
            .any(|l| l.contains("q quits") || l.contains("FENCE") || l.starts_with("<=")));
    }

    #[test]
    fn q_esc_and_ctrl_c_quit() {
        assert!(quits(&KeyEvent::new(
            KeyCode::Char('q'),
            KeyModifiers::NONE
        )));
        assert!(quits(&KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(quits(&KeyEvent::new(
            KeyCode::Char('c'),
            KeyModifiers::CONTROL
        )));
        assert!(!quits(&KeyEvent::new(
            KeyCode::Char('c'),
            KeyModifiers::NONE
        )));
    }
}
