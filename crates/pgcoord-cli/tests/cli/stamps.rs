//! Did two holders' COMMANDs overlap? The first holder's COMMAND ignores
//! SIGTERM and writes a time stamp every 50 ms; the next holder's COMMAND
//! writes one when it starts. The files live in a directory of their own,
//! removed on drop.

use std::path::PathBuf;

pub struct StampLogs {
    dir: PathBuf,
    holder: PathBuf,
    next: PathBuf,
}

/// Nanoseconds since the epoch, as `date +%s%N` wrote them.
fn stamps(path: &std::path::Path) -> Vec<u128> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

impl StampLogs {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("stamps-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            holder: dir.join("holder"),
            next: dir.join("next"),
            dir,
        }
    }

    /// The first holder's COMMAND (for `sh -c`): prints `ready`, ignores
    /// SIGTERM, stamps every 50 ms until killed.
    pub fn stubborn_holder(&self) -> String {
        format!(
            "trap '' TERM; echo ready; while :; do date +%s%N >> {}; sleep 0.05; done",
            self.holder.display()
        )
    }

    /// The next holder's COMMAND (for `sh -c`): one stamp as it starts.
    pub fn next_holder(&self) -> String {
        format!("date +%s%N > {}", self.next.display())
    }

    /// Asserts that the first holder's last stamp came before the next
    /// holder's start; `context` is printed on failure.
    pub fn assert_no_overlap(&self, context: &str) {
        let (held, entered) = (stamps(&self.holder), stamps(&self.next));
        let last = *held.last().expect("the first COMMAND ran");
        let start = *entered.first().expect("the next COMMAND ran");
        assert!(
            last < start,
            "the cut-off COMMAND wrote {} ms after the next holder's COMMAND started: {context}",
            (last - start) / 1_000_000
        );
    }
}

impl Drop for StampLogs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
