//! The builder's range checks (`config.rs`).

use super::*;

fn builder() -> PostgresLockManagerBuilder {
    PostgresLockManager::builder("postgres://app@db.invalid/app".parse().unwrap())
}

#[test]
fn out_of_range_settings_are_refused_by_name_never_clamped() {
    let ms = Duration::from_millis;
    let cases: Vec<(&str, PostgresLockManagerBuilder)> = vec![
        ("max_held_locks", builder().max_held_locks(0)),
        ("batched_sessions", builder().batched_sessions(0)),
        (
            "max_batched_sessions",
            builder().batched_sessions(4).max_batched_sessions(2),
        ),
        ("max_wait_sessions", builder().max_wait_sessions(0)),
        ("liveness_interval", builder().liveness_interval(ms(5))),
        ("liveness_timeout", builder().liveness_timeout(ms(9))),
        ("lease", builder().lease(ms(999))),
        // Longer than the server's largest idle_session_timeout.
        ("lease", builder().lease(ms(i32::MAX as u64 + 1))),
        ("lease", builder().lease(Duration::MAX)),
        ("connect_timeout", builder().connect_timeout(Duration::ZERO)),
        // Direct TLS negotiation weakened after parsing, as libpq refuses it.
        (
            "sslnegotiation=direct",
            PostgresLockManager::builder(
                "postgres://app@db.invalid/app?sslnegotiation=direct&sslmode=require"
                    .parse()
                    .unwrap(),
            )
            .ssl_mode(SslMode::Prefer),
        ),
    ];
    for (name, b) in cases {
        let err = b.build().unwrap_err();
        assert!(
            matches!(err, crate::Error::InvalidArgument(_)),
            "{name}: {err:?}"
        );
        assert!(err.to_string().contains(name), "{name}: {err}");
    }
}

#[test]
fn in_range_settings_build_as_given() {
    let m = builder()
        .max_held_locks(1)
        .batched_sessions(12)
        .liveness_interval(Duration::from_millis(10))
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let s = &m.ctx().settings;
    assert_eq!((s.max_held_locks, s.batched_sessions), (1, 12));
    assert_eq!(
        s.max_batched_sessions, 12,
        "follows batched_sessions up when unset"
    );
    assert_eq!(s.lease, Some(Duration::from_secs(1)));
    let longest = Duration::from_millis(i32::MAX as u64);
    assert!(builder().lease(longest).build().is_ok());
}
