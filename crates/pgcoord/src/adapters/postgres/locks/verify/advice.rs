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

/// Above this keepalive idle time (s) the server is slow to notice a
/// client lost to the network.
const MAX_KEEPALIVE_IDLE_S: i64 = 300;

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
    // On a TCP session the server shows the socket's value: the kernel
    // default (7200 s) when the setting is 0.
    match get("tcp_keepalives_idle") {
        Some(s) if s > 0 && s <= MAX_KEEPALIVE_IDLE_S => {}
        shown => out.push(format!(
            "tcp_keepalives_idle is {}: the server frees the locks of a client cut off by the \
             network only that late; set tcp_keepalives_idle, _interval and _count (and \
             tcp_user_timeout) on the server",
            match shown {
                Some(s) if s > 0 => format!("{s} s"),
                _ => "the kernel default (usually 2 hours)".to_owned(),
            }
        )),
    }
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
        // Defaults: no lease, kernel keepalives (shown as 0 or as 7200).
        for idle in [0, 7200] {
            let w = advice(
                &s(&[("idle_session_timeout", 0), ("tcp_keepalives_idle", idle)]),
                interval,
                100,
                Some(6400),
            );
            assert_eq!(w.len(), 2, "{w:?}");
            assert!(w[0].contains("frozen holder") && w[1].contains("tcp_keepalives_idle"));
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
