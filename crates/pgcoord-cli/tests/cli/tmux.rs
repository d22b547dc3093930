//! A program as a person sees it on a terminal: a tmux server of the
//! test's own, one pane, captured and read. Tests that need tmux skip
//! without it (saying `SKIPPED: ...`), unless `EVENTSOURCE_REQUIRE_TMUX=1`.

use std::process::Stdio;

use tokio::process::Command;

use crate::common::*;

/// A tmux server of its own (its socket in a scratch directory), with one
/// detached session running `command` through `sh`; killed, and its socket
/// removed, on drop.
pub struct Tmux {
    socket: std::path::PathBuf,
    /// The arguments of `tmux capture-pane` (see [`Tmux::with_history`]).
    capture: &'static [&'static str],
    _dir: Scratch,
}

/// Whether `tmux` can run here; when not, prints why the test (of `what`)
/// is skipped, or panics when `EVENTSOURCE_REQUIRE_TMUX=1` (CI sets it).
pub fn tmux_or_skip(what: &str) -> bool {
    let found = std::process::Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("EVENTSOURCE_REQUIRE_TMUX").as_deref() != Ok("1"),
            "tmux is required (EVENTSOURCE_REQUIRE_TMUX=1) but not installed"
        );
        eprintln!("SKIPPED: no tmux binary to run {what} in (apt-get install tmux)");
    }
    found
}

impl Tmux {
    /// A 160x40 pane running `command`, with the database's URL in
    /// DATABASE_URL.
    pub async fn start(db: &pgcoord_testkit::pg::TestDatabase, command: &str) -> Self {
        let dir = scratch_dir();
        let tmux = Self {
            socket: dir.join("tmux.sock"),
            capture: &["capture-pane", "-p"],
            _dir: dir,
        };
        let out = tmux
            .command()
            .args(["new-session", "-d", "-x", "160", "-y", "40", command])
            .env("DATABASE_URL", db.url())
            .env_remove("EVENTSOURCE_LOG")
            // Run from inside tmux, a new session would refuse to nest.
            .env_remove("TMUX")
            .output()
            .await
            .expect("tmux runs (apt-get install tmux)");
        assert!(out.status.success(), "tmux new-session: {out:?}");
        tmux
    }

    /// Captures reach back into the pane's history, with wrapped lines
    /// joined: the whole session, one line per line written.
    pub fn with_history(mut self) -> Self {
        self.capture = &["capture-pane", "-p", "-J", "-S", "-"];
        self
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    /// What the pane shows now.
    pub async fn screen(&self) -> String {
        let out = self.command().args(self.capture).output().await.unwrap();
        assert!(out.status.success(), "tmux capture-pane: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Captures the pane until `pred` holds for it (bounded by [`BOUND`]).
    pub async fn until(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            let screen = self.screen().await;
            if pred(&screen) {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never saw {what} on the screen:\n{screen}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Presses a key (in tmux's names: `q`, `C-c`, `Enter`).
    pub async fn press(&self, key: &str) {
        let out = self
            .command()
            .args(["send-keys", key])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "tmux send-keys: {out:?}");
    }

    /// Types `text` as it is (no key names), then Enter.
    pub async fn type_line(&self, text: &str) {
        let out = self
            .command()
            .args(["send-keys", "-l", text])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "tmux send-keys -l: {out:?}");
        self.press("Enter").await;
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
}
