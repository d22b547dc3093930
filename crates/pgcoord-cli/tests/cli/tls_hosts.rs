//! TLS and the hosts of a connection as libpq treats them: a host given by
//! address alone (`hostaddr`), several hosts where one fails TLS,
//! `channel_binding=require` unmet, `sslrootcert=system`, and version-1
//! revocation lists. Each through the real binary against private clusters
//! (`tls.rs`'s: role `app` may connect over TLS only).

use pgcoord_testkit::pg::free_port;

use crate::common::*;
use crate::tls::{cluster_and_db, tls_server, TlsServer};

/// `lock run --timeout 30s` with `conninfo` and no `PGHOST`: a failure
/// that waiting cannot mend must end the run at once, without the
/// "retrying until --timeout" line.
async fn run(conninfo: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = eventsource(None);
    cmd.args(["lock", "run", "--timeout", "30s", "tls-hosts", "--", "true"])
        .env_remove("PGHOST")
        .env("DATABASE_URL", conninfo);
    for (k, v) in env {
        cmd.env(k, v);
    }
    output(&mut cmd).await
}

fn fails_at_once(out: &Output, what: &str) {
    assert_eq!(out.code, 69, "{what}: {out:?}");
    assert!(
        !out.stderr.contains("retrying until --timeout"),
        "{what}: {out:?}"
    );
    assert!(!out.stderr.contains("server runs"), "{what}: {out:?}");
}

/// `hostaddr` without `host` (or `PGHOSTADDR` alone) connects over TLS as
/// libpq does under prefer, require and verify-ca; verify-full, with no
/// name to check, is refused at once in words that say so.
#[tokio::test]
async fn a_host_given_by_address_alone_connects_over_tls_as_libpq_does() {
    let TlsServer {
        cluster, db, good, ..
    } = tls_server("hostaddr").await;
    let base = format!(
        "hostaddr=127.0.0.1 port={} user=app dbname={}",
        cluster.port(),
        db.name()
    );
    let ca = format!("sslrootcert={}", good.display());
    for extra in ["", "sslmode=require", &format!("sslmode=verify-ca {ca}")] {
        let out = run(&format!("{base} {extra}"), &[]).await;
        assert_eq!(out.code, 0, "{extra:?}: {out:?}");
    }
    let port = cluster.port().to_string();
    let mut cmd = eventsource(None);
    cmd.args(["lock", "run", "tls-hosts", "--", "true"])
        .env_remove("PGHOST")
        .env("PGHOSTADDR", "127.0.0.1")
        .env("PGPORT", &port)
        .env("PGUSER", "app")
        .env("PGDATABASE", db.name());
    let out = output(&mut cmd).await;
    assert_eq!(out.code, 0, "PGHOSTADDR alone: {out:?}");

    let out = run(&format!("{base} sslmode=verify-full {ca}"), &[]).await;
    fails_at_once(&out, "verify-full without a host name");
    assert!(
        out.stderr.contains("given by address alone") && out.stderr.contains("verify-full"),
        "{out:?}"
    );
    // The message names the server by its address.
    assert!(out.stderr.contains("@127.0.0.1:"), "{out:?}");
}

/// With several hosts, a TLS failure on one ends the walk with that error,
/// as in libpq, whatever the other hosts are: a certificate for another
/// name first, a server without TLS first under `require`, and a TLS
/// failure before or after a closed port, under `--timeout`.
#[tokio::test]
async fn a_tls_failure_on_one_of_several_hosts_ends_the_walk() {
    let TlsServer {
        cluster, db, good, ..
    } = tls_server("hosts").await;
    let (plain, plain_db) = cluster_and_db(true).await;
    let (port, name) = (cluster.port(), db.name());
    let verify = format!(
        "user=app dbname={name} sslmode=verify-full sslrootcert={}",
        good.display()
    );
    // 127.0.0.1 is not a name the certificate (localhost only) carries;
    // the second host is the same server by its right name.
    let out = run(
        &format!("host=127.0.0.1,localhost port={port},{port} {verify}"),
        &[],
    )
    .await;
    fails_at_once(&out, "another host's certificate first");
    assert!(out.stderr.contains("does not name the host"), "{out:?}");
    assert!(out.stderr.contains("1 later host not tried"), "{out:?}");

    let out = run(
        &format!(
            "host=127.0.0.1,localhost port={},{port} user=app dbname={} sslmode=require",
            plain.port(),
            plain_db.name()
        ),
        &[],
    )
    .await;
    fails_at_once(&out, "no TLS on the first host under require");
    assert!(out.stderr.contains("does not offer TLS"), "{out:?}");
    assert!(out.stderr.contains("1 later host not tried"), "{out:?}");

    let closed = free_port().unwrap();
    for hosts in [
        format!("host=127.0.0.1,127.0.0.1 port={port},{closed}"),
        format!("host=127.0.0.1,127.0.0.1 port={closed},{port}"),
    ] {
        let out = run(&format!("{hosts} {verify}"), &[]).await;
        fails_at_once(&out, &hosts);
        assert!(out.stderr.contains("check the TLS settings"), "{out:?}");
    }
}

/// `channel_binding=require` unmet is no unreachable server: the run ends
/// at once, saying whether TLS was in use, with a hint naming the setting.
#[tokio::test]
async fn channel_binding_required_and_unmet_ends_a_run_at_once() {
    let TlsServer { cluster, db, .. } = tls_server("binding").await;
    let (plain, plain_db) = cluster_and_db(false).await;
    let cases = [
        (
            format!(
                "host=127.0.0.1 port={} dbname={} user=postgres",
                plain.port(),
                plain_db.name()
            ),
            "TLS was not in use (sslmode=prefer",
        ),
        (
            format!(
                "host={} port={} dbname={} user=postgres",
                plain.dir().display(),
                plain.port(),
                plain_db.name()
            ),
            "Unix-domain socket",
        ),
        // Over TLS, but the login is `trust`: nothing to bind.
        (
            format!(
                "host=localhost port={} dbname={} user=app sslmode=require",
                cluster.port(),
                db.name()
            ),
            "TLS was in use",
        ),
    ];
    for (conninfo, why) in cases {
        let out = run(&format!("{conninfo} channel_binding=require"), &[]).await;
        fails_at_once(&out, &conninfo);
        assert!(out.stderr.contains(why), "{conninfo}: {out:?}");
        assert!(
            out.stderr.contains("PGCHANNELBINDING"),
            "{conninfo}: {out:?}"
        );
        // The same from the environment.
        let out = run(&conninfo, &[("PGCHANNELBINDING", "require")]).await;
        fails_at_once(&out, &conninfo);
        assert!(out.stderr.contains(why), "{conninfo}: {out:?}");
    }
}

/// `sslrootcert=system` (libpq 16's operating-system CA store, which this
/// client lacks) is refused whatever the sslmode, never a plaintext or
/// unchecked session: a usage error, before connecting, as the other
/// settings the client cannot honour.
#[tokio::test]
async fn sslrootcert_system_is_refused_in_every_mode() {
    let (plain, db) = cluster_and_db(false).await;
    let base = format!(
        "host=127.0.0.1 port={} dbname={} user=postgres sslrootcert=system",
        plain.port(),
        db.name()
    );
    for mode in [
        "",
        "sslmode=prefer",
        "sslmode=disable",
        "sslmode=verify-full",
    ] {
        let out = run(&format!("{base} {mode}"), &[]).await;
        assert_eq!(out.code, 2, "{mode}: {out:?}");
        assert!(
            out.stderr.contains("`sslrootcert`")
                && out.stderr.contains("`system` is not supported"),
            "{mode}: {out:?}"
        );
    }
    let out = run(
        &format!("host=127.0.0.1 port={} dbname={}", plain.port(), db.name()),
        &[("PGSSLROOTCERT", "system")],
    )
    .await;
    assert_eq!(out.code, 2, "PGSSLROOTCERT=system: {out:?}");
    assert!(out.stderr.contains("PGSSLROOTCERT"), "{out:?}");
}

/// DER: `tag`, its length, `content`.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n < 0x100 => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend(content);
    out
}

/// A version-1 revocation list (no version field, no extensions), what
/// `openssl ca -gencrl` writes without `crlnumber`, as PEM. Its signature
/// is not checked: the list is refused before it could be.
fn v1_crl_pem() -> String {
    let alg = der(
        0x30,
        &der(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]),
    );
    let cn = [der(0x06, &[0x55, 0x04, 0x03]), der(0x0c, b"cli test CA")].concat();
    let issuer = der(0x30, &der(0x31, &der(0x30, &cn)));
    let tbs = der(
        0x30,
        &[
            alg.clone(),
            issuer,
            der(0x17, b"240101000000Z"),
            der(0x18, b"21240101000000Z"),
        ]
        .concat(),
    );
    let crl = der(0x30, &[tbs, alg, der(0x03, &[0x00, 0x01])].concat());
    let b64 = base64(&crl);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN X509 CRL-----\n{}\n-----END X509 CRL-----\n",
        lines.join("\n")
    )
}

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        out.push_str(&"=".repeat(3 - chunk.len()));
    }
    out
}

/// A version-1 list, which rustls cannot read, is refused at once by a
/// message that names its file and says how to make a version-2 one, as
/// `sslcrl`, in `sslcrldir`, and as the default `~/.postgresql/root.crl`.
#[tokio::test]
async fn a_version_1_revocation_list_is_named_with_how_to_replace_it() {
    let TlsServer {
        cluster,
        db,
        dir,
        good,
        ..
    } = tls_server("crl-v1").await;
    let crl = dir.join("v1.crl");
    std::fs::write(&crl, v1_crl_pem()).unwrap();
    let crl_dir = dir.join("crls");
    std::fs::create_dir_all(&crl_dir).unwrap();
    std::fs::write(crl_dir.join("0a1b2c3d.r0"), v1_crl_pem()).unwrap();
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".postgresql")).unwrap();
    std::fs::write(home.join(".postgresql/root.crl"), v1_crl_pem()).unwrap();
    let base = format!(
        "host=localhost port={} user=app dbname={} sslmode=verify-full sslrootcert={}",
        cluster.port(),
        db.name(),
        good.display()
    );
    let home_str = home.display().to_string();
    let cases = [
        (
            format!("{base} sslcrl={}", crl.display()),
            crl.clone(),
            None,
        ),
        (
            format!("{base} sslcrldir={}", crl_dir.display()),
            crl_dir.join("0a1b2c3d.r0"),
            None,
        ),
        (
            base.clone(),
            home.join(".postgresql/root.crl"),
            Some(home_str.as_str()),
        ),
    ];
    for (conninfo, file, home) in cases {
        let env: Vec<(&str, &str)> = home.map(|h| ("HOME", h)).into_iter().collect();
        let out = run(&conninfo, &env).await;
        fails_at_once(&out, &conninfo);
        let err = &out.stderr;
        assert!(
            err.contains(&file.display().to_string()),
            "{conninfo}: {err}"
        );
        assert!(err.contains("version-1"), "{conninfo}: {err}");
        assert!(err.contains("crlnumber"), "{conninfo}: {err}");
        assert!(!err.contains("ParseError"), "{conninfo}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
