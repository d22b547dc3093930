//! `eventsource lock top`: a refreshing terminal view of the advisory
//! locks, or one plain listing when standard output is not a terminal.

use std::io::{IsTerminal, Write};

use chrono::Utc;
use crossterm::cursor::{Hide, MoveTo, Show};
use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::Print;
use crossterm::terminal::{self, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{execute, queue};
use futures_util::StreamExt;
use pgcoord::inspect::HoldersQuery;

use super::args::TopArgs;
use super::frame::{frame, Header};
use super::inspect::{Inspector, KeyNames};
use super::track::Tracker;
use crate::db::refresh_within;
use crate::db::{self, Database};
use crate::semaphore_hint;
use crate::signals::Signals;
use crate::{exit, report};

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
        let lines = build(Some(usable_size(terminal::size()?)));
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

/// The size to draw for: the terminal's, or 80x24 when it reports 0 in
/// either dimension (a pty nobody sized: `docker exec -t`, some CI
/// runners), where drawing for 0 would print escape codes alone.
fn usable_size((w, h): (u16, u16)) -> (usize, usize) {
    match (w, h) {
        (0, _) | (_, 0) => (80, 24),
        (w, h) => (usize::from(w), usize::from(h)),
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
    let names = match KeyNames::load(&args.only_keys, &args.names) {
        Ok(n) => n,
        Err(code) => return code,
    };
    // No KEYs: every lock.
    let inspector = match Inspector::open(&db, HoldersQuery::keys(&args.only_keys)).await {
        Ok(i) => i,
        Err(code) => return code,
    };
    let mut locks = match inspector.snapshot(&names).await {
        Ok(l) => l,
        Err(e) => return db::fail("cannot list lock holders", Some(&db), &e),
    };
    // A key given that is not held may name a semaphore in use.
    let notes = match semaphore_hint::notes(&inspector, &args.only_keys, &locks).await {
        Ok(n) => n,
        Err(e) => return db::fail("cannot list lock holders", Some(&db), &e),
    };
    let mut seen = Tracker::default();
    // How many times a new session reached another server.
    let mut server_changes = inspector.server_changes().0;
    // When the rows shown were listed.
    let mut listed_at = Utc::now();
    seen.update(&locks, listed_at);
    let shown = db.shown();
    let mut header = Header {
        database: &shown,
        fence_table: inspector.fence_table(),
        interval: args.interval,
        error: None,
        rows_as_of: None,
        interactive: false,
        only_keys: args.only_keys.len(),
        notes,
    };
    if !std::io::stdout().is_terminal() {
        let mut text = frame(&locks, &seen, &header, Utc::now(), None).join("\n");
        text.push('\n');
        return crate::print_stdout(&text).err().unwrap_or(0);
    }
    header.interactive = true;
    // As every watch: a signal the tool was started with ignored stays
    // ignored (`nohup eventsource lock top`).
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
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
    // A refresh that does not return in time fails like any other.
    let within = refresh_within(args.interval);
    let outcome: Result<i32, String> = loop {
        if let Err(e) = screen.draw(|size| frame(&locks, &seen, &header, Utc::now(), size)) {
            break Err(format!("cannot write to the terminal: {e}"));
        }
        let listing = async {
            tokio::time::sleep_until(next).await;
            let locks = inspector.snapshot_within(&names, within).await?;
            let notes = semaphore_hint::notes(&inspector, &args.only_keys, &locks).await?;
            Ok::<_, pgcoord::Error>((locks, notes))
        };
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Event::Key(k))) if quits(&k) => break Ok(0),
                Some(Ok(_)) => {} // a resize, another key: draw again
                Some(Err(e)) => break Err(format!("cannot read the terminal: {e}")),
                None => break Ok(0),
            },
            sig = signals.recv() => break Ok(exit::watch_ended_by(sig)),
            result = listing => {
                next = (next + args.interval).max(tokio::time::Instant::now());
                let now = Utc::now();
                match result {
                    Ok((l, notes)) => {
                        header.notes = notes;
                        let changes = inspector.server_changes().0;
                        if changes != server_changes {
                            // Another server's listing is a fresh start, as
                            // at top's own: a lock held there shows the `<=`
                            // bound, not the time since the switch.
                            server_changes = changes;
                            seen = Tracker::default();
                        }
                        seen.update(&l, now);
                        locks = l;
                        // Looked up again with a new session.
                        header.fence_table = inspector.fence_table();
                        listed_at = now;
                        header.error = None;
                        header.rows_as_of = None;
                    }
                    Err(e) => {
                        // The rows stay, as they were at their listing
                        // (their ages stop), and the line says so first:
                        // a long error is cut at the window's edge.
                        header.error = Some(format!(
                            "refresh failed at {}, rows as of {}: {}",
                            now.format("%H:%M:%S"),
                            listed_at.format("%H:%M:%S"),
                            db::describe_failure("", Some(&db), &e)
                        ));
                        header.rows_as_of = Some(listed_at);
                    }
                }
            }
        }
    };
    drop(screen);
    match outcome {
        Ok(code) => code,
        Err(message) => {
            report!("{message}");
            exit::IO_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn an_unsized_pty_is_drawn_for_80x24() {
        assert_eq!(usable_size((0, 0)), (80, 24));
        assert_eq!(usable_size((0, 50)), (80, 24));
        assert_eq!(usable_size((120, 0)), (80, 24));
        assert_eq!(usable_size((120, 50)), (120, 50));
        assert_eq!(usable_size((1, 1)), (1, 1));
    }
}
