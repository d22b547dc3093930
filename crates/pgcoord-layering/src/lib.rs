//! The layering rule of this workspace, as a check `cargo test` runs:
//!
//! - no import cycle between the files of one folder of a crate's `src/`
//!   (a file and its siblings, and the folder's `mod.rs` / `lib.rs` /
//!   `main.rs`): imports between them point one way;
//! - no source file over 400 lines.
//!
//! The sources are parsed with `syn`, the module tree is followed from each
//! crate root along its `mod` items, and every path into the crate counts:
//! `use` trees with their groups expanded, `super::`, `self::`, paths in
//! code and in macro calls. `tools/check-layering` runs the same check from
//! the command line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::graphmap::DiGraphMap;
use syn::visit::Visit;

mod imports;
mod tree;
mod use_tree;

use tree::Crate;
pub use tree::ModPath;

/// The line budget of one source file.
pub const MAX_LINES: usize = 400;

/// The crate roots in a `src/` folder: `lib.rs`, `main.rs`, `bin/*.rs`,
/// `bin/*/main.rs`.
fn crate_roots(src: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        for entry in bins.flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|e| e == "rs") {
                roots.push(p);
            } else if p.join("main.rs").is_file() {
                roots.push(p.join("main.rs"));
            }
        }
    }
    roots.sort();
    roots
}

/// The files a path into the crate leads through: the file of the module
/// it names, and on through `use` re-exports to the file of the item
/// (`crate::db::error_chain`, where `db.rs` has `pub use
/// crate::error_line::error_chain`, is `db.rs` and `error_line.rs`).
fn resolve(
    krate: &Crate,
    children: &dyn Fn(&ModPath, &str) -> bool,
    path: &[String],
    through: &mut Vec<usize>,
) {
    let Some(n) = (0..=path.len())
        .rev()
        .find(|&n| krate.modules.contains_key(&path[..n]))
    else {
        return;
    };
    let (at, module) = (path[..n].to_vec(), &krate.modules[&path[..n]]);
    through.push(module.file);
    let Some(next) = path.get(n) else {
        return;
    };
    if through.len() > 8 || module.defined.contains(next) {
        return;
    }
    let mut further = |mut to: ModPath, rest: &[String]| {
        to.extend_from_slice(rest);
        resolve(krate, children, &to, through);
    };
    if let Some(used) = module.uses.get(next) {
        if let Some(to) = imports::absolute(&at, children, used) {
            return further(to, &path[n + 1..]);
        }
    }
    for glob in &module.globs {
        let Some(to) = imports::absolute(&at, children, glob) else {
            continue;
        };
        if let Some(m) = krate.modules.get(&to) {
            if m.defined.contains(next) || m.uses.contains_key(next) {
                return further(to, &path[n..]);
            }
        }
    }
}

/// An import from module `a` to module `b` as an edge of the graph: only
/// between two files (or folders) of one folder, not between a folder's
/// own module (`mod.rs`, the crate root) and what is in it, nor into or
/// out of another folder.
fn siblings(a: &ModPath, b: &ModPath) -> Option<(ModPath, ModPath)> {
    let same_folder = a.len() == b.len() && !a.is_empty() && a[..a.len() - 1] == b[..b.len() - 1];
    (same_folder && a != b).then(|| (a.clone(), b.clone()))
}

/// An import cycle: its members (module paths), and for each import
/// between two of them, one place that makes it.
#[derive(Debug)]
pub struct Cycle {
    pub members: Vec<String>,
    pub edges: Vec<String>,
}

/// The import cycles between files (or folders) of one folder of the crate
/// rooted at `root`, each as its members' module paths, sorted.
pub fn cycles(root: &Path) -> Result<Vec<Cycle>, String> {
    let krate = Crate::read(root)?;
    let modules: BTreeSet<ModPath> = krate.modules.keys().cloned().collect();
    let children = |m: &ModPath, name: &str| {
        let mut c = m.clone();
        c.push(name.to_owned());
        modules.contains(&c)
    };
    let mut names: Vec<ModPath> = Vec::new();
    let mut node = |m: ModPath| match names.iter().position(|n| *n == m) {
        Some(i) => i,
        None => {
            names.push(m);
            names.len() - 1
        }
    };
    let mut graph = DiGraphMap::<usize, ()>::new();
    let mut why: BTreeMap<(usize, usize), String> = BTreeMap::new();
    for file in &krate.files {
        let mut paths = imports::Paths::new(file.module.clone(), &children);
        paths.visit_file(&file.syntax);
        for path in paths.found {
            let mut through = Vec::new();
            resolve(&krate, &children, &path, &mut through);
            for target in through {
                let Some((from, to)) = siblings(&file.module, &krate.files[target].module) else {
                    continue;
                };
                let (from, to) = (node(from), node(to));
                graph.add_edge(from, to, ());
                why.entry((from, to)).or_insert_with(|| {
                    format!("{} names {}", file.path.display(), path.join("::"))
                });
            }
        }
    }
    let mut found: Vec<Cycle> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut members: Vec<String> = c.iter().map(|&i| names[i].join("::")).collect();
            members.sort();
            let mut edges: Vec<String> = why
                .iter()
                .filter(|((a, b), _)| c.contains(a) && c.contains(b))
                .map(|((a, b), w)| {
                    format!("{} -> {}: {w}", names[*a].join("::"), names[*b].join("::"))
                })
                .collect();
            edges.sort();
            Cycle { members, edges }
        })
        .collect();
    found.sort_by(|a, b| a.members.cmp(&b.members));
    Ok(found)
}

/// Every problem in one `src/` folder, one line each: its crates' import
/// cycles and its files over [`MAX_LINES`].
pub fn check_src(src: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for root in crate_roots(src) {
        match cycles(&root) {
            Ok(cycles) => problems.extend(cycles.into_iter().map(|c| {
                format!(
                    "cycle in {}: {}\n    {}",
                    root.display(),
                    c.members.join(", "),
                    c.edges.join("\n    ")
                )
            })),
            Err(e) => problems.push(format!("cannot read {}: {e}", root.display())),
        }
    }
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    for f in files {
        let lines = std::fs::read_to_string(&f).map_or(0, |t| t.lines().count());
        if lines > MAX_LINES {
            problems.push(format!(
                "{}: {lines} lines (budget {MAX_LINES})",
                f.display()
            ));
        }
    }
    problems
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The `src/` folders of every crate of the workspace at `root`
/// (`crates/*/src`).
pub fn workspace_sources(root: &Path) -> Vec<PathBuf> {
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path().join("src"))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    srcs.sort();
    srcs
}

#[cfg(test)]
mod tests;
