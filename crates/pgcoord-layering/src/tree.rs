//! A crate's module tree, read the way rustc reads it: from the crate root
//! (`lib.rs`, `main.rs`, `bin/*.rs`) along its `mod name;` items (and their
//! `#[path]`), down to every source file. Items under `#[cfg(test)]` are
//! left out: a test module may import what it tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::{Attribute, Item};

/// A module's path from its crate root (`[]` for the root itself).
pub type ModPath = Vec<String>;

/// One source file of a crate: its module and its parsed items.
pub struct SourceFile {
    pub path: PathBuf,
    pub module: ModPath,
    pub syntax: syn::File,
}

/// What a module (a file's or an inline one) holds: the file, the names
/// of the items it defines, and its `use` names (local name -> the path as
/// written; globs apart).
#[derive(Default)]
pub struct Module {
    pub file: usize,
    pub defined: BTreeSet<String>,
    pub uses: BTreeMap<String, Vec<String>>,
    pub globs: Vec<Vec<String>>,
}

/// A crate: its files and its modules (inline ones included).
#[derive(Default)]
pub struct Crate {
    pub files: Vec<SourceFile>,
    pub modules: BTreeMap<ModPath, Module>,
}

/// The name an item defines in its module, if any.
fn defined_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::ExternCrate(i) => i.rename.as_ref().map_or(&i.ident, |(_, r)| r),
        Item::Fn(i) => &i.sig.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        Item::Mod(i) => &i.ident,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::TraitAlias(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The module's record of `items`: what they define and import.
fn record(module: &mut Module, items: &[Item]) {
    for item in items {
        if let Some(name) = defined_name(item) {
            module.defined.insert(name);
        }
        if let Item::Use(u) = item {
            if u.leading_colon.is_some() || is_test_only(&u.attrs) {
                continue;
            }
            let mut named = Vec::new();
            crate::use_tree::expand_named(&u.tree, &mut Vec::new(), &mut named);
            for (name, path) in named {
                match name {
                    Some(n) => {
                        module.uses.insert(n, path);
                    }
                    None => module.globs.push(path),
                }
            }
        }
    }
}

/// Whether `attrs` holds `#[cfg(test)]`.
pub fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.path().is_ident("path"))
        .and_then(|a| {
            let syn::Meta::NameValue(nv) = &a.meta else {
                return None;
            };
            match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            }
        })
}

impl Crate {
    /// Reads the crate whose root file is `root`.
    pub fn read(root: &Path) -> Result<Crate, String> {
        let mut krate = Crate::default();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        krate.add_file(root, Vec::new(), &dir)?;
        Ok(krate)
    }

    /// Adds `path` as module `module`; its `mod x;` children are looked for
    /// in `children_dir`.
    fn add_file(
        &mut self,
        path: &Path,
        module: ModPath,
        children_dir: &Path,
    ) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let syntax = syn::parse_file(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let index = self.files.len();
        let items = syntax.items.clone();
        let mut record_of = Module {
            file: index,
            ..Module::default()
        };
        record(&mut record_of, &items);
        self.modules.insert(module.clone(), record_of);
        self.files.push(SourceFile {
            path: path.to_path_buf(),
            module: module.clone(),
            syntax,
        });
        let file_dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        self.add_items(index, &items, &module, children_dir, &file_dir)
    }

    fn add_items(
        &mut self,
        index: usize,
        items: &[Item],
        module: &ModPath,
        children_dir: &Path,
        file_dir: &Path,
    ) -> Result<(), String> {
        for item in items {
            let Item::Mod(m) = item else { continue };
            if is_test_only(&m.attrs) {
                continue;
            }
            let mut child = module.clone();
            child.push(m.ident.to_string());
            let name = m.ident.to_string();
            match &m.content {
                Some((_, inner)) => {
                    let mut record_of = Module {
                        file: index,
                        ..Module::default()
                    };
                    record(&mut record_of, inner);
                    self.modules.insert(child.clone(), record_of);
                    let dir = children_dir.join(&name);
                    self.add_items(index, inner, &child, &dir, file_dir)?;
                }
                None => {
                    let (file, dir) = match path_attr(&m.attrs) {
                        Some(p) => {
                            let file = file_dir.join(p);
                            let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
                            (file, dir)
                        }
                        None if children_dir.join(format!("{name}.rs")).is_file() => (
                            children_dir.join(format!("{name}.rs")),
                            children_dir.join(&name),
                        ),
                        None => (
                            children_dir.join(&name).join("mod.rs"),
                            children_dir.join(&name),
                        ),
                    };
                    self.add_file(&file, child, &dir)?;
                }
            }
        }
        Ok(())
    }
}
