//! libpq's whole precedence (`ConnectOptions::resolve`) over a fuzzed
//! connection string, service file and password file: no panic, and a
//! service file's value keeps every character but the ASCII spaces libpq
//! trims (C's `isspace`).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pgcoord::postgres::LibpqEnv;
use pgcoord::ConnectOptions;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::var_os("PGCOORD_FUZZ_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("pgcoord-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fn write(name: &str, bytes: &[u8]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir().join(name);
    std::fs::write(&path, bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

fuzz_target!(|data: &[u8]| {
    // The string, the service file and the password file, split at NULs.
    let mut parts = data.splitn(3, |b| *b == 0);
    let (Some(s), service, pass) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let Ok(s) = std::str::from_utf8(s) else {
        return;
    };
    let service_file = write("service.conf", service.unwrap_or(b""));
    let pass_file = write("pgpass", pass.unwrap_or(b""));
    let env = LibpqEnv::from_vars([
        ("PGSERVICEFILE", service_file.as_str()),
        ("PGSYSCONFDIR", dir().to_str().unwrap()),
        ("PGPASSFILE", pass_file.as_str()),
        ("PGSERVICE", "s"),
        ("PGUSER", "u"),
    ]);
    let _ = ConnectOptions::resolve(Some(s), &env);

    // One value of a service file, as libpq reads it.
    let Some(value) = service.and_then(|v| std::str::from_utf8(v).ok()) else {
        return;
    };
    if value.contains(['\n', '\r']) {
        return;
    }
    write(
        "one.conf",
        format!("[s]\napplication_name={value}\n").as_bytes(),
    );
    let env = LibpqEnv::from_vars([
        ("PGSERVICEFILE", dir().join("one.conf").to_str().unwrap()),
        ("PGSYSCONFDIR", dir().to_str().unwrap()),
        ("PGSERVICE", "s"),
        ("PGUSER", "u"),
    ]);
    if let Ok(o) = ConnectOptions::resolve(None, &env) {
        // This crate takes spaces after `=` too (libpq would not).
        let want = value.trim_matches(is_c_space);
        let got = o.config().get_application_name().unwrap_or("");
        assert_eq!(got, want, "service file value {value:?}");
    }
});
