//! The paths one file names into its own crate: every `use` tree, groups
//! expanded (`use crate::{a, b::{c, d}}` is `crate::a`, `crate::b::c`,
//! `crate::b::d`), and every path in its code and in its macro calls, made
//! absolute from the module it is written in (`super::`, `self::`, and a
//! relative path that starts with a child module).

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::tree::{is_test_only, ModPath};
use crate::use_tree::expand_named;

/// What a path names, from the module it is written in: `Some` with the
/// absolute path when it starts in this crate.
pub fn absolute(
    from: &ModPath,
    children: &dyn Fn(&ModPath, &str) -> bool,
    path: &[String],
) -> Option<ModPath> {
    let first = path.first()?;
    let (mut base, rest) = match first.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (from.clone(), &path[1..]),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let keep = from.len().checked_sub(ups)?;
            (from[..keep].to_vec(), &path[ups..])
        }
        name if children(from, name) => (from.clone(), path),
        _ => return None,
    };
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// Collects the absolute paths a file names, with its inline modules
/// tracked so that `super::` inside them resolves right.
pub struct Paths<'a> {
    module: ModPath,
    children: &'a dyn Fn(&ModPath, &str) -> bool,
    pub found: Vec<ModPath>,
}

impl<'a> Paths<'a> {
    pub fn new(module: ModPath, children: &'a dyn Fn(&ModPath, &str) -> bool) -> Self {
        Paths {
            module,
            children,
            found: Vec::new(),
        }
    }

    fn add(&mut self, path: &[String]) {
        if let Some(p) = absolute(&self.module, self.children, path) {
            self.found.push(p);
        }
    }

    /// `crate::a::b`, `super::a`, `self::a` sequences in a macro call's
    /// tokens (not `$crate`, a macro's own crate).
    fn scan(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.scan(g.stream()),
                TokenTree::Ident(id)
                    if ["crate", "super", "self"].contains(&id.to_string().as_str()) =>
                {
                    let after_dollar = i > 0
                        && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(next)),
                    ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(next.to_string());
                        j += 3;
                    }
                    if !after_dollar && path.len() > 1 {
                        self.add(&path);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_none() {
            return; // its own file, read on its own
        }
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_some() {
            return; // `use ::name`: another crate
        }
        let mut named = Vec::new();
        expand_named(&u.tree, &mut Vec::new(), &mut named);
        for (_, path) in named {
            self.add(&path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.add(&segments);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}
