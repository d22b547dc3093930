//! Names the build in `eventsource --version`: the package version and the
//! git commit it was built from (`0.1.0 (git 1a2b3c4d5e6f)`).
//! `EVENTSOURCE_BUILD_COMMIT` overrides the commit (a build from a source
//! archive); without git and without it, the version alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=EVENTSOURCE_BUILD_COMMIT");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let commit = std::env::var("EVENTSOURCE_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            // Rebuild when HEAD moves or the branch it names does.
            for path in ["HEAD", "packed-refs"] {
                if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            // No "-dirty" mark: this script does not rerun on every source
            // edit, so it could not keep such a mark true.
            git(&["rev-parse", "--short=12", "HEAD"])
        });
    let full = match commit {
        Some(c) => format!("{version} (git {c})"),
        None => version,
    };
    println!("cargo:rustc-env=EVENTSOURCE_VERSION={full}");
}
