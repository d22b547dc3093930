//! `check-layering [SRC_DIR ...]`: prints the layering problems (import
//! cycles between the files of one folder, files over 400 lines) of the
//! given `src/` folders, by default every `crates/*/src` of the workspace
//! it is run in; exits 1 when it finds any.

use std::path::PathBuf;

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let srcs = if args.is_empty() {
        pgcoord_layering::workspace_sources(std::path::Path::new("."))
    } else {
        args
    };
    if srcs.is_empty() {
        eprintln!("check-layering: no crates/*/src here; run it at the workspace root or name the folders");
        std::process::exit(2);
    }
    let problems: Vec<String> = srcs
        .iter()
        .flat_map(|s| pgcoord_layering::check_src(s))
        .collect();
    for p in &problems {
        println!("{p}");
    }
    if problems.is_empty() {
        println!("no import cycles, no file over budget");
    } else {
        println!("{} layering problem(s)", problems.len());
        std::process::exit(1);
    }
}
