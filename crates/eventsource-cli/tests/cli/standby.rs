//! A hot standby: `lock doctor` fails with the reason (its advisory locks
//! exclude only its own sessions), `lock run` refuses it unless
//! `--allow-standby`. The standby is a `pg_basebackup
//! -R` of a private primary, started on a port of its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use eventsource_testkit::pg::TestCluster;

use crate::common::*;

/// The server binaries' directory, as the harness finds it.
fn bin_dir() -> PathBuf {
    let from_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .filter_map(|d| std::fs::canonicalize(d.join("pg_basebackup")).ok())
            .filter_map(|c| c.parent().map(Path::to_path_buf))
            // Not a wrapper (Debian's postgresql-common): the real directory.
            .find(|d| d.join("pg_ctl").is_file() && d.join("initdb").is_file())
    });
    from_path.unwrap_or_else(|| {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL server binaries")
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|b| b.join("pg_basebackup").is_file())
            .collect();
        dirs.sort();
        dirs.pop().expect("pg_basebackup")
    })
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs a server program, as the `postgres` user when we are root.
fn pg(program: &str) -> Command {
    let exe = bin_dir().join(program);
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A standby server; stopped and removed on drop.
struct Standby {
    dir: PathBuf,
    port: u16,
}

impl Standby {
    fn start(primary: &TestCluster) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "eventsource-cli-standby-{}-{}",
            std::process::id(),
            primary.port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(&dir));
        }
        let data = dir.join("data");
        run(pg("pg_basebackup")
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-X",
                "stream",
                "-R",
                "--checkpoint=fast",
            ])
            .arg("-p")
            .arg(primary.port().to_string())
            .arg("-D")
            .arg(&data));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        run(pg("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-o")
            .arg(format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c hot_standby=on -c max_connections=400",
                dir.display()
            ))
            .arg("-l")
            .arg(dir.join("server.log"))
            .args(["-w", "-t", "60", "start"]));
        Standby { dir, port }
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        let _ = pg("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn doctor_fails_on_a_hot_standby_with_the_reason() {
    let (cluster, db) = private_db(&[]).await;
    let primary = cluster.clone();
    let standby = tokio::task::spawn_blocking(move || Standby::start(&primary))
        .await
        .unwrap();
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/{}",
        standby.port,
        db.name()
    );
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the standby accepts connections");
    tokio::spawn(conn);
    let in_recovery: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .unwrap()
        .get(0);
    assert!(in_recovery, "a standby");

    let out = output(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "doctor"]),
    )
    .await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("FAILED"), "{}", out.stderr);
    assert!(out.stderr.contains("standby"), "{}", out.stderr);
    assert!(out.stderr.contains("pg_is_in_recovery"), "{}", out.stderr);
    // `lock run` refuses it (69, the reason on stderr), unless told.
    let out = output(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "run",
        "on-standby",
        "--",
        "echo",
        "ran",
    ]))
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("hot standby"), "{}", out.stderr);
    assert!(out.stderr.contains("--allow-standby"), "{}", out.stderr);
    let out = output(eventsource(None).env("DATABASE_URL", &url).args([
        "lock",
        "run",
        "--allow-standby",
        "on-standby",
        "--",
        "echo",
        "ran",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "ran\n");
    // The primary passes.
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
}
