//! A hot standby of a throwaway cluster (`pg_basebackup -R`), for tests
//! of what the lock manager and `verify()` do on a server in recovery.

use std::process::Command;
use std::sync::atomic::Ordering;

use pgcoord::Result;

use crate::{free_port, harness_error, TestCluster, COUNTER};

impl TestCluster {
    /// Starts a hot standby of this cluster: a base backup streamed from it
    /// (`pg_basebackup -R`, so it follows this cluster) in a directory of
    /// its own, on a port of its own. Its databases are this cluster's;
    /// `pg_is_in_recovery()` is true there. Dropping it stops and removes it.
    pub fn start_standby(&self) -> Result<TestCluster> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let data_dir = std::env::temp_dir().join(format!(
            "eventsource-pg-standby-{}-{n}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| harness_error(format!("cannot create {}: {e}", data_dir.display())))?;
        let mut standby = TestCluster {
            bin_dir: self.bin_dir.clone(),
            data_dir,
            port: 0,
            settings: self.settings.clone(),
            runuser: self.runuser.clone(),
        };
        if standby.runuser.is_some() {
            standby.run_checked(
                Command::new("chown")
                    .arg("postgres:")
                    .arg(&standby.data_dir),
            )?;
        }
        let mut backup = standby.pg_command("pg_basebackup");
        backup
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "-p",
            ])
            .arg(self.port.to_string())
            .arg("-D")
            .arg(standby.data_dir.join("data"));
        standby.run_checked(&mut backup)?;
        standby.spawn_reaper();
        let mut last_err = None;
        for _ in 0..5 {
            standby.port = free_port()?;
            match standby.pg_ctl_start() {
                Ok(()) => return Ok(standby),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| harness_error("standby did not start")))
    }

    /// Promotes this standby to a primary (`pg_ctl promote -w`): it leaves
    /// recovery on a new WAL timeline and accepts writes once this returns.
    pub fn promote(&self) -> Result<()> {
        let mut cmd = self.pg_command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir.join("data"))
            .args(["-w", "-t", "60", "promote"]);
        self.run_checked(&mut cmd)
    }
}
