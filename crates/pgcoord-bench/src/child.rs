//! The bench's own child processes (`contention` workers, the
//! `election_failover` leader): their spec, which holds the connection URL
//! and so its password, goes through an environment variable, never the
//! command line, which any local user can read (`/proc/<pid>/cmdline`,
//! `ps`). A process's environment is readable by its own user only.

use std::path::Path;

use serde::Serialize;

use crate::Res;

/// The environment variable that carries a child's spec (JSON).
pub const SPEC_VAR: &str = "PGCOORD_BENCH_SPEC";

/// The command that starts this binary (`exe`) in `mode` (a hidden flag
/// such as `--contention-worker`) with `spec`.
pub fn command(exe: &Path, mode: &str, spec: &impl Serialize) -> Res<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg(mode).env(SPEC_VAR, serde_json::to_string(spec)?);
    Ok(cmd)
}

/// The spec a child was started with (see [`command`]).
pub fn spec() -> Res<String> {
    std::env::var(SPEC_VAR).map_err(|_| {
        format!("{SPEC_VAR} is not set: this mode is for the bench's own child processes").into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contention::{Impl, Spec};
    use crate::election_leader::LeaderSpec;
    use crate::transport::Transport;

    const URL: &str = "postgres://app:S3cret-pw@db.example:5432/app";

    fn argv(cmd: &tokio::process::Command) -> Vec<String> {
        let std = cmd.as_std();
        std::iter::once(std.get_program())
            .chain(std.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn env_spec(cmd: &tokio::process::Command) -> String {
        let (_, v) = cmd
            .as_std()
            .get_envs()
            .find(|(k, _)| *k == SPEC_VAR)
            .expect("the spec in the environment");
        v.unwrap().to_string_lossy().into_owned()
    }

    #[test]
    fn the_password_is_not_on_a_childs_command_line() {
        let worker = Spec {
            imp: Impl::Sqlx,
            url: URL.into(),
            transport: Transport::Plaintext,
            app: "bench/contention_sqlx-p0".into(),
            tasks: 16,
            keys: vec!["bench/k".into()],
            start_unix_ns: 1,
            measure_ns: 1,
            batched_sessions: None,
        };
        let leader = LeaderSpec {
            url: URL.into(),
            transport: Transport::Plaintext,
            election: "bench/election_failover".into(),
            holder_id: "bench-election-leader".into(),
            batched_sessions: None,
        };
        let exe = Path::new("/usr/bin/pgcoord-bench");
        for cmd in [
            command(exe, "--contention-worker", &worker).unwrap(),
            command(exe, "--election-leader", &leader).unwrap(),
        ] {
            let args = argv(&cmd);
            assert!(args.iter().all(|a| !a.contains("S3cret")), "{args:?}");
            assert!(args.iter().all(|a| !a.contains("postgres://")), "{args:?}");
            assert!(env_spec(&cmd).contains(URL));
        }
    }
}
