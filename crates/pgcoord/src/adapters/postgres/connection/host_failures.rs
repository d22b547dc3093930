//! What a connect over several hosts reports when none could be used, and
//! which failures end the walk over them before the last host.

use crate::ports::error::{BackendError, BackendErrorKind};

/// Whether the server refused the role's credentials (SQLSTATE class 28:
/// `28P01` a wrong password, `28000` no `pg_hba.conf` entry allows it or
/// its client certificate does not name the user).
pub(super) fn refused_login(e: &BackendError) -> bool {
    e.code().is_some_and(|c| c.code().starts_with("28"))
}

/// The error of a connect where no host could be used, of `hosts` in
/// all: the one host's own error, or each tried host's, in order; each
/// named by its host and port (a driver's "Connection refused" does not
/// say whose). A TLS failure (which ends the walk) gives its kind whatever
/// came before it, and a refused login (which ends it too) its SQLSTATE,
/// so that neither is retried as an unreachable server would be.
pub(super) fn every_host_failed(
    mut failures: Vec<(String, BackendError)>,
    hosts: usize,
) -> BackendError {
    if hosts <= 1 && failures.len() == 1 {
        let (host, e) = failures.pop().expect("one failure");
        return e.in_context(&host);
    }
    let login = failures
        .last()
        .filter(|(_, e)| refused_login(e))
        .and_then(|(_, e)| e.code().cloned());
    let tls = failures
        .iter()
        .any(|(_, e)| e.kind() == BackendErrorKind::Tls);
    let kind = match tls {
        true => BackendErrorKind::Tls,
        false => failures
            .last()
            .map_or(BackendErrorKind::Connect, |(_, e)| e.kind()),
    };
    let each: Vec<String> = failures
        .iter()
        .map(|(host, e)| format!("{host}: {}", e.message()))
        .collect();
    let ended_by = match login {
        Some(_) => "a refused login",
        None => "a TLS failure",
    };
    let untried = match hosts.saturating_sub(failures.len()) {
        0 => String::new(),
        n => format!(
            "; {ended_by} ends the walk, as in libpq: {n} later host{} not tried",
            if n == 1 { "" } else { "s" }
        ),
    };
    let e = BackendError::new(
        kind,
        format!("no host could be used ({}{untried})", each.join("; ")),
    );
    match login {
        Some(code) => e.with_code(code),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(host: &str) -> (String, BackendError) {
        let e = BackendError::new(BackendErrorKind::Connect, "Connection refused");
        (host.to_owned(), e)
    }

    #[test]
    fn a_refused_login_ends_the_walk_with_its_sqlstate() {
        let login = || {
            BackendError::new(
                BackendErrorKind::Connect,
                "password authentication failed for user \"app\"",
            )
            .with_code("28P01")
        };
        let e = every_host_failed(vec![refused("a:1"), ("b:2".into(), login())], 3);
        assert_eq!(e.code().map(|c| c.code()), Some("28P01"), "{e}");
        assert_eq!(e.kind(), BackendErrorKind::Connect);
        let text = e.to_string();
        assert!(
            text.contains("a:1: Connection refused")
                && text.contains("b:2: password authentication failed")
                && text
                    .contains("a refused login ends the walk, as in libpq: 1 later host not tried"),
            "{text}"
        );
        assert!(refused_login(&login()));
        assert!(!refused_login(&refused("c:3").1));
    }

    #[test]
    fn hosts_that_could_not_be_reached_carry_no_sqlstate() {
        let e = every_host_failed(vec![refused("a:1"), refused("b:2")], 2);
        assert_eq!(e.code(), None, "retried as an unreachable server");
        assert!(!e.to_string().contains("not tried"), "{e}");
    }
}
