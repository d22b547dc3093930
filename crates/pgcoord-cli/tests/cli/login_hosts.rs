//! A refused login behind a URL of several hosts ends the walk over them,
//! as in libpq, and fails at once: no retry until `--timeout` runs out,
//! which repeated the same refused credentials (an account lockout's
//! count) and kept a candidate started with `--timeout 100d` from ever
//! exiting.

use crate::common::*;
use crate::libpq_env::password_cluster;

#[tokio::test]
async fn a_wrong_password_over_two_hosts_fails_at_once_without_retrying() {
    let (cluster, db) = password_cluster().await;
    let port = cluster.port();
    let url = format!(
        "postgres://app:Wrong-Pw-3@127.0.0.1:{port},127.0.0.1:{port}/{}",
        db.name()
    );
    for args in [
        &["lock", "run", "--timeout", "30s", "k", "--", "true"][..],
        &["leader", "run", "--timeout", "30s", "e", "--", "true"][..],
    ] {
        let out = output(eventsource(None).env("DATABASE_URL", &url).args(args)).await;
        assert_eq!(out.code, 69, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("password authentication failed")
                && out.stderr.contains("a refused login ends the walk")
                && out.stderr.contains("1 later host not tried"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("retrying"),
            "{args:?}: retried a refused login: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("Wrong-Pw-3"), "{}", out.stderr);
    }
}
