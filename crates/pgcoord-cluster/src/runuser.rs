//! Where `runuser` is: started as root, the cluster runs the server's
//! programs as `postgres` through it. It lives in `/usr/sbin` or `/sbin`,
//! which a minimal `PATH` (cron's `/usr/bin:/bin`) leaves out.

use std::path::{Path, PathBuf};

use pgcoord::Result;

use crate::harness_error;

/// Where `runuser` is looked for after `PATH`.
const FALLBACK_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The path of `runuser`: the first on `PATH`, else in one of the usual
/// system directories.
pub(crate) fn find_runuser() -> Result<PathBuf> {
    find_in(std::env::var_os("PATH").as_deref(), FALLBACK_DIRS).ok_or_else(|| {
        harness_error(
            "runuser (util-linux) not found on PATH nor in /usr/sbin, /sbin, /usr/bin or \
             /bin; needed to run PostgreSQL as the postgres user when started as root",
        )
    })
}

fn find_in(path: Option<&std::ffi::OsStr>, fallback: &[&str]) -> Option<PathBuf> {
    let on_path = path.into_iter().flat_map(std::env::split_paths);
    on_path
        .chain(fallback.iter().map(PathBuf::from))
        .map(|dir| dir.join("runuser"))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "pgcoord-cluster-runuser-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fake_runuser(dir: &Path, mode: u32) -> PathBuf {
        let exe = dir.join("runuser");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(mode)).unwrap();
        exe
    }

    #[test]
    fn a_directory_left_out_of_path_is_searched_after_it() {
        let on_path = scratch("path");
        let sbin = scratch("sbin");
        let exe = fake_runuser(&sbin, 0o755);
        let path = std::env::join_paths([&on_path]).unwrap();
        let fallback = [sbin.to_str().unwrap()];
        assert_eq!(find_in(Some(&path), &fallback), Some(exe.clone()));
        assert_eq!(find_in(None, &fallback), Some(exe));
        // PATH comes first.
        let first = fake_runuser(&on_path, 0o755);
        assert_eq!(find_in(Some(&path), &fallback), Some(first));
        std::fs::remove_dir_all(&on_path).unwrap();
        std::fs::remove_dir_all(&sbin).unwrap();
    }

    #[test]
    fn a_file_that_cannot_be_run_is_no_runuser() {
        let dir = scratch("noexec");
        fake_runuser(&dir, 0o644);
        assert_eq!(find_in(None, &[dir.to_str().unwrap()]), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
