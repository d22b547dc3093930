//! `sslnegotiation=direct` (or `PGSSLNEGOTIATION=direct`) with a mode that
//! may go without TLS (`disable`, `allow`, `prefer`, the default) is a bad
//! setting, as libpq says ("weak sslmode ... may not be used with
//! sslnegotiation=direct"): exit 2 before anything is connected, naming
//! the parameters and where they came from, never an unreachable server
//! retried until `--timeout`.

use crate::common::*;

/// One case: what it is, the URL's query (`None`: no URL, libpq's
/// environment alone), the environment, and a part of the message.
type Case<'a> = (&'a str, Option<&'a str>, &'a [(&'a str, &'a str)], &'a str);

#[tokio::test]
async fn direct_negotiation_with_a_weak_sslmode_is_a_usage_error() {
    // No server at that port: a setting that got as far as connecting
    // would fail there (exit 69), not with the usage error.
    let port = pgcoord_testkit::pg::free_port().unwrap();
    let base = format!("postgres://app@127.0.0.1:{port}/app");
    let cases: [Case<'_>; 4] = [
        (
            "PGSSLNEGOTIATION alone",
            None,
            &[("PGSSLNEGOTIATION", "direct")],
            "from PGSSLNEGOTIATION",
        ),
        (
            "in the URL",
            Some("?sslnegotiation=direct&sslmode=allow"),
            &[],
            "weak sslmode \"allow\"",
        ),
        (
            "PGSSLMODE=disable",
            Some("?sslnegotiation=direct"),
            &[("PGSSLMODE", "disable")],
            "`sslmode` from PGSSLMODE",
        ),
        (
            "prefer in the URL",
            Some("?sslmode=prefer"),
            &[("PGSSLNEGOTIATION", "direct")],
            "weak sslmode \"prefer\"",
        ),
    ];
    for (what, query, env, names) in cases {
        let mut c = eventsource(None);
        c.args(["lock", "run", "--timeout", "10m", "k", "--", "true"]);
        if let Some(q) = query {
            c.env("DATABASE_URL", format!("{base}{q}"));
        }
        for (k, v) in env {
            c.env(k, v);
        }
        let out = output(&mut c).await;
        assert_eq!(out.code, 2, "{what}: {out:?}");
        for part in [
            names,
            "sslnegotiation=direct",
            "require, verify-ca or verify-full",
        ] {
            assert!(
                out.stderr.contains(part),
                "{what}: {part:?} missing: {out:?}"
            );
        }
        assert!(!out.stderr.contains("retrying"), "{what}: {out:?}");
    }
    // Strong enough: it goes on to connect (and finds no server there).
    let mut c = eventsource(None);
    c.args(["lock", "run", "k", "--", "true"]).env(
        "DATABASE_URL",
        format!("{base}?sslnegotiation=direct&sslmode=require"),
    );
    let out = output(&mut c).await;
    assert_eq!(out.code, 69, "require: {out:?}");
}
