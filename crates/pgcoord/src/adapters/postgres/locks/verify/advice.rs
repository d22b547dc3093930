//! Advice from the server's settings, for [`VerifyReport::warnings`](super::VerifyReport).

use std::time::Duration;

/// Settings read from `pg_settings` for the report.
pub(super) const REPORTED: [&str; 6] = [
    "idle_session_timeout",
    "tcp_keepalives_idle",
    "tcp_keepalives_interval",
    "tcp_keepalives_count",
    "tcp_user_timeout",
    "client_connection_check_interval",
];

/// Advice from the server's settings (values in the units of `pg_settings`:
/// ms for the timeouts, s for keepalives).
pub(crate) fn advice(
    settings: &[(String, i64)],
    liveness_interval: Duration,
    budget: usize,
    capacity: Option<i64>,
) -> Vec<String> {
    let get = |name: &str| settings.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let mut out = Vec::new();
    match get("idle_session_timeout") {
        Some(ms) if ms > 0 && (ms as u128) <= 2 * liveness_interval.as_millis() => {
            out.push(format!(
            "idle_session_timeout ({ms} ms) is not above twice the manager's liveness interval \
             ({} ms): lock sessions may be cut while idle and their locks lost",
            liveness_interval.as_millis()
        ))
        }
        Some(0) | None => out.push(
            "idle_session_timeout is off: a frozen holder (stopped, not dead) keeps its locks \
             until it resumes; set it for the locking role (ALTER ROLE ... SET \
             idle_session_timeout) above the liveness interval to turn sessions into leases"
                .to_owned(),
        ),
        Some(_) => {}
    }
    // No advice on the TCP keepalives and `tcp_user_timeout`: every
    // session the manager opens lowers them to about 15 s itself
    // (`connection/tcp_timeouts.rs`), whatever the server's defaults.
    if let Some(cap) = capacity {
        if (budget as i64) > cap / 2 {
            out.push(format!(
                "the manager's budget ({budget} locks) is over half the server's lock table \
                 (about {cap}); when that table fills, the whole server refuses new connections"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_names_the_settings_that_bound_a_lost_holder() {
        let s = |v: &[(&str, i64)]| {
            v.iter()
                .map(|(n, x)| (n.to_string(), *x))
                .collect::<Vec<_>>()
        };
        let interval = Duration::from_millis(500);
        // Defaults: no lease, kernel keepalives (shown as 0 or as 7200),
        // which the manager's sessions lower themselves: no advice on them.
        for idle in [0, 7200] {
            let w = advice(
                &s(&[("idle_session_timeout", 0), ("tcp_keepalives_idle", idle)]),
                interval,
                100,
                Some(6400),
            );
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(w[0].contains("frozen holder"), "{w:?}");
        }
        // A lease too short for the pings.
        let w = advice(
            &s(&[("idle_session_timeout", 800), ("tcp_keepalives_idle", 5)]),
            interval,
            100,
            Some(6400),
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("800 ms"));
        // Recommended settings, budget within the table: no advice.
        let w = advice(
            &s(&[("idle_session_timeout", 30_000), ("tcp_keepalives_idle", 5)]),
            interval,
            100,
            Some(6400),
        );
        assert!(w.is_empty(), "{w:?}");
        // A budget that could fill the server's lock table.
        let w = advice(
            &s(&[("idle_session_timeout", 30_000), ("tcp_keepalives_idle", 5)]),
            interval,
            4096,
            Some(6400),
        );
        assert!(w[0].contains("lock table"), "{w:?}");
    }
}
