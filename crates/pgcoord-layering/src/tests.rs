use std::path::{Path, PathBuf};

use super::*;

/// The workspace itself: what `cargo test` enforces.
#[test]
fn the_workspace_keeps_its_layering() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let srcs = workspace_sources(&root);
    assert!(srcs.len() >= 7, "the crates' src folders: {srcs:?}");
    let problems: Vec<String> = srcs.iter().flat_map(|s| check_src(s)).collect();
    assert!(
        problems.is_empty(),
        "layering problems:\n{}",
        problems.join("\n")
    );
}

/// A crate in a temporary folder: `files` as (path under src/, text).
fn fixture(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for (path, text) in files {
        let p = src.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    (dir, src)
}

fn cycles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let (_dir, src) = fixture(files);
    let found = cycles(&src.join("main.rs")).unwrap();
    found.into_iter().map(|c| c.members).collect()
}

/// The shape the CLI once had: `db.rs` imports `exit` in a `use crate::{..}`
/// group, and `exit.rs` names a function through `db`, which re-exports it
/// from a third file.
#[test]
fn a_cycle_through_a_use_group_and_a_re_export_is_found() {
    let found = cycles_of(&[
        (
            "main.rs",
            "mod db;\nmod error_line;\nmod exit;\nmod report;\nfn main() {}\n",
        ),
        (
            "db.rs",
            "pub use crate::error_line::error_chain;\nuse crate::{exit, report};\n\
             pub fn fail() -> i32 { exit::USAGE }\n",
        ),
        ("error_line.rs", "pub fn error_chain() {}\n"),
        (
            "exit.rs",
            "pub const USAGE: i32 = 2;\nfn hint() { let _ = crate::db::error_chain; }\n",
        ),
        ("report.rs", ""),
    ]);
    assert_eq!(found, vec![vec!["db".to_string(), "exit".to_string()]]);
}

/// An item named through the folder's `mod.rs` counts for the file that
/// defines it: `a` and `b` import each other only through `super::`.
#[test]
fn a_cycle_through_the_folders_re_exports_is_found() {
    let found = cycles_of(&[
        ("main.rs", "mod m;\nfn main() {}\n"),
        ("m/mod.rs", "mod a;\nmod b;\npub use a::A;\npub use b::*;\n"),
        ("m/a.rs", "pub struct A(super::B);\n"),
        ("m/b.rs", "pub struct B;\nfn f(_: super::A) {}\n"),
    ]);
    assert_eq!(found, vec![vec!["m::a".to_string(), "m::b".to_string()]]);
}

#[test]
fn nested_groups_super_self_and_macro_calls_count() {
    // a -> b through a nested group, b -> c through `super::`, c -> a
    // through a path inside a macro call.
    let found = cycles_of(&[
        ("main.rs", "mod m;\nfn main() {}\n"),
        ("m/mod.rs", "mod a;\nmod b;\nmod c;\n"),
        ("m/a.rs", "use crate::m::{x::Y, b::{self as bee}};\n"),
        ("m/b.rs", "fn f() { super::c::g(); }\n"),
        (
            "m/c.rs",
            "pub fn g() { println!(\"{}\", crate::m::a::N); }\n",
        ),
    ]);
    assert_eq!(
        found,
        vec![vec![
            "m::a".to_string(),
            "m::b".to_string(),
            "m::c".to_string()
        ]]
    );
}

#[test]
fn one_way_imports_test_modules_and_macro_crate_paths_are_no_cycle() {
    let found = cycles_of(&[
        ("main.rs", "mod a;\nmod b;\nfn main() {}\n"),
        (
            "a.rs",
            "use crate::b::B;\nmacro_rules! m { () => { $crate::a::X } }\n",
        ),
        (
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::X;\n}\n",
        ),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_file_over_budget_is_reported() {
    let long = "// x\n".repeat(MAX_LINES + 1);
    let (_dir, src) = fixture(&[("lib.rs", "mod big;\n"), ("big.rs", &long)]);
    let problems = check_src(&src);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].ends_with(&format!(
        "big.rs: {} lines (budget {MAX_LINES})",
        MAX_LINES + 1
    )));
}
