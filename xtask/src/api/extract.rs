//! The public API of a library crate read from its sources with `syn` (stable toolchain, nothing built): one
//! line per public item, its signature without docs or bodies, prefixed with the module it is declared in.
//!
//! What counts as public: a `pub` item in a module reachable through `pub mod` from the crate root, or one a
//! `pub use` of such a module re-exports (by name, or by a glob over its module), listed at the path it is
//! public at (so moving an item to another file behind a re-export changes nothing); other crates' items
//! re-exported; the `pub` methods and constants of inherent impls of those types; the headers of trait impls for
//! them or of their traits. Items under `#[cfg(test)]` or `#[doc(hidden)]` are left out. Comments and
//! formatting do not change a line; a changed signature, field, variant, derive or path does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use quote::ToTokens as _;
use syn::{Attribute, Fields, ImplItem, Item, TraitItem, UseTree, Visibility};

/// One module of the crate: its path from the root, whether that path is public, and its items.
struct Module {
    path: Vec<String>,
    public: bool,
    items: Vec<Item>,
}

/// The public API of the crate whose library root is `lib_rs`, one sorted line per item.
///
/// # Errors
/// If a module file cannot be read or parsed.
pub fn crate_api(lib_rs: &Path) -> anyhow::Result<Vec<String>> {
    let mut modules = Vec::new();
    load(lib_rs, true, Vec::new(), true, &mut modules)?;
    Ok(api_of(&modules))
}

/// The API lines of one source text as the crate root (for tests).
#[cfg(test)]
pub fn api_of_source(source: &str) -> anyhow::Result<Vec<String>> {
    let file = syn::parse_file(source)?;
    let mut modules = Vec::new();
    collect_inline(file.items, Vec::new(), true, &mut modules);
    Ok(api_of(&modules))
}

fn load(
    file: &Path,
    owns_dir: bool,
    path: Vec<String>,
    public: bool,
    modules: &mut Vec<Module>,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let parsed = syn::parse_file(&text).with_context(|| format!("parsing {}", file.display()))?;
    // `mod x;` in `lib.rs`/`mod.rs` lives next to it; in `a.rs`, under `a/`.
    let dir: PathBuf = if owns_dir {
        file.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        let stem = file.file_stem().unwrap_or_default();
        file.parent().unwrap_or(Path::new("")).join(stem)
    };
    let mut items = Vec::new();
    for item in parsed.items {
        match item {
            Item::Mod(module) if !hidden(&module.attrs) => {
                let name = module.ident.to_string();
                let mut child = path.clone();
                child.push(name.clone());
                let child_public = public && is_pub(&module.vis);
                if let Some((_, content)) = module.content {
                    collect_inline(content, child, child_public, modules);
                } else if let Some(explicit) = path_attr(&module.attrs) {
                    load(&dir.join(explicit), true, child, child_public, modules)?;
                } else {
                    let flat = dir.join(format!("{name}.rs"));
                    if flat.is_file() {
                        load(&flat, false, child, child_public, modules)?;
                    } else {
                        load(
                            &dir.join(&name).join("mod.rs"),
                            true,
                            child,
                            child_public,
                            modules,
                        )?;
                    }
                }
            }
            Item::Mod(_) => {}
            other if !hidden(item_attrs(&other)) => items.push(other),
            _ => {}
        }
    }
    modules.push(Module {
        path,
        public,
        items,
    });
    Ok(())
}

fn collect_inline(items: Vec<Item>, path: Vec<String>, public: bool, modules: &mut Vec<Module>) {
    let mut own = Vec::new();
    for item in items {
        match item {
            Item::Mod(module) if !hidden(&module.attrs) => {
                if let Some((_, content)) = module.content {
                    let mut child = path.clone();
                    child.push(module.ident.to_string());
                    collect_inline(content, child, public && is_pub(&module.vis), modules);
                }
            }
            Item::Mod(_) => {}
            other if !hidden(item_attrs(&other)) => own.push(other),
            _ => {}
        }
    }
    modules.push(Module {
        path,
        public,
        items: own,
    });
}

/// `#[cfg(test)]` or `#[doc(hidden)]`.
fn hidden(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let text = attr.to_token_stream().to_string().replace(' ', "");
        text == "#[cfg(test)]" || text == "#[doc(hidden)]"
    })
}

fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| {
        let syn::Meta::NameValue(value) = &attr.meta else {
            return None;
        };
        if !value.path.is_ident("path") {
            return None;
        }
        match &value.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) => Some(text.value()),
            _ => None,
        }
    })
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The name and visibility of a nameable item.
fn name_of(item: &Item) -> Option<(String, &Visibility)> {
    let (ident, vis) = match item {
        Item::Const(i) => (&i.ident, &i.vis),
        Item::Enum(i) => (&i.ident, &i.vis),
        Item::Fn(i) => (&i.sig.ident, &i.vis),
        Item::Static(i) => (&i.ident, &i.vis),
        Item::Struct(i) => (&i.ident, &i.vis),
        Item::Trait(i) => (&i.ident, &i.vis),
        Item::Type(i) => (&i.ident, &i.vis),
        Item::Union(i) => (&i.ident, &i.vis),
        _ => return None,
    };
    Some((ident.to_string(), vis))
}

/// A `pub use` of a crate-local module or item: what it names and where it makes it public.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Reexport {
    /// The module the target lives in.
    module: Vec<String>,
    /// The item (None: everything public in `module`, a glob or a re-exported module).
    item: Option<String>,
    /// The public path the target is reachable at.
    at: Vec<String>,
}

fn flatten_use(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, bool)>) {
    match tree {
        UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            flatten_use(&path.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(name) => {
            let mut full = prefix.clone();
            full.push(name.ident.to_string());
            out.push((full, false));
        }
        UseTree::Rename(rename) => {
            let mut full = prefix.clone();
            full.push(rename.ident.to_string());
            out.push((full, false));
        }
        UseTree::Glob(_) => out.push((prefix.clone(), true)),
        UseTree::Group(group) => {
            for tree in &group.items {
                flatten_use(tree, prefix, out);
            }
        }
    }
}

/// The `pub use` items of public modules, split into re-exports of items of private modules (listed at the path
/// they are public at) and the rendered lines of the other re-exports: other crates' items, and second paths to
/// items of public modules (both are API in their own right).
fn reexports(modules: &[Module]) -> (Vec<Reexport>, Vec<(Vec<String>, String)>) {
    let module_paths: BTreeSet<&[String]> = modules.iter().map(|m| m.path.as_slice()).collect();
    let public_modules: BTreeSet<&[String]> = modules
        .iter()
        .filter(|m| m.public)
        .map(|m| m.path.as_slice())
        .collect();
    let mut local = Vec::new();
    let mut foreign = Vec::new();
    for module in modules.iter().filter(|m| m.public) {
        for item in &module.items {
            let Item::Use(use_item) = item else { continue };
            if !is_pub(&use_item.vis) {
                continue;
            }
            let mut paths = Vec::new();
            flatten_use(&use_item.tree, &mut Vec::new(), &mut paths);
            for (path, glob) in paths {
                let Some(absolute) = absolute_path(&module.path, &path, &module_paths) else {
                    let mut text = path.join("::");
                    if glob {
                        text.push_str("::*");
                    }
                    foreign.push((module.path.clone(), format!("pub use {text}")));
                    continue;
                };
                // A second path to what a public module already exports (a prelude) is API of its own.
                let target_module = if glob || module_paths.contains(absolute.as_slice()) {
                    absolute.as_slice()
                } else {
                    &absolute[..absolute.len().saturating_sub(1)]
                };
                if public_modules.contains(target_module) {
                    let mut text = format!("crate::{}", absolute.join("::"));
                    if glob {
                        text.push_str("::*");
                    }
                    foreign.push((module.path.clone(), format!("pub use {text}")));
                    continue;
                }
                if glob {
                    local.push(Reexport {
                        module: absolute,
                        item: None,
                        at: module.path.clone(),
                    });
                } else if module_paths.contains(absolute.as_slice()) {
                    let mut at = module.path.clone();
                    at.extend(absolute.last().cloned());
                    local.push(Reexport {
                        module: absolute,
                        item: None,
                        at,
                    });
                } else if let Some((item, parent)) = absolute.split_last() {
                    local.push(Reexport {
                        module: parent.to_vec(),
                        item: Some(item.clone()),
                        at: module.path.clone(),
                    });
                }
            }
        }
    }
    follow_private_chains(modules, &module_paths, &mut local);
    (local, foreign)
}

/// Re-exports through private modules: `pub use app::Builder` at the root where `app` (private) has
/// `pub use builder::Builder`. Each `pub use` of a private module whose own item is public somewhere (an entry of
/// `local`) makes its target public at the same path, until nothing changes.
fn follow_private_chains(
    modules: &[Module],
    module_paths: &BTreeSet<&[String]>,
    local: &mut Vec<Reexport>,
) {
    loop {
        let mut added = Vec::new();
        for module in modules.iter().filter(|m| !m.public) {
            for item in &module.items {
                let Item::Use(use_item) = item else { continue };
                if !is_pub(&use_item.vis) {
                    continue;
                }
                let mut paths = Vec::new();
                flatten_use(&use_item.tree, &mut Vec::new(), &mut paths);
                for (path, glob) in paths {
                    let Some(absolute) = absolute_path(&module.path, &path, module_paths) else {
                        continue;
                    };
                    if glob || module_paths.contains(absolute.as_slice()) {
                        continue;
                    }
                    let Some((name, parent)) = absolute.split_last() else {
                        continue;
                    };
                    let exposed = local.iter().find(|r| {
                        r.module == module.path && r.item.as_deref().is_none_or(|item| item == name)
                    });
                    let Some(exposed) = exposed else { continue };
                    let known = local
                        .iter()
                        .chain(&added)
                        .any(|r: &Reexport| r.module == parent && r.item.as_deref() == Some(name));
                    if !known {
                        added.push(Reexport {
                            module: parent.to_vec(),
                            item: Some(name.clone()),
                            at: exposed.at.clone(),
                        });
                    }
                }
            }
        }
        if added.is_empty() {
            return;
        }
        local.extend(added);
    }
}

/// `path` as used in module `current`, from the crate root; `None` for another crate's path.
fn absolute_path(
    current: &[String],
    path: &[String],
    modules: &BTreeSet<&[String]>,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => current.to_vec(),
        "super" => current[..current.len().saturating_sub(1)].to_vec(),
        name => {
            let mut child = current.to_vec();
            child.push(name.to_owned());
            if !modules.contains(child.as_slice()) {
                return None;
            }
            child
        }
    };
    let mut rest = rest;
    while let Some((segment, tail)) = rest.split_first() {
        if segment == "super" {
            base.pop();
        } else if segment != "self" {
            base.push(segment.clone());
        }
        rest = tail;
    }
    Some(base)
}

fn module_label(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_owned()
    } else {
        format!("crate::{}", path.join("::"))
    }
}

fn api_of(modules: &[Module]) -> Vec<String> {
    let (reexported, foreign) = reexports(modules);
    // The public path of an item of `module` named `name`, if it has one.
    let public_at = |module: &Module, name: &str| -> Option<Vec<String>> {
        if module.public {
            return Some(module.path.clone());
        }
        reexported
            .iter()
            .find(|r| r.module == module.path && r.item.as_deref().is_none_or(|item| item == name))
            .map(|r| r.at.clone())
    };
    // Names of the public types and traits: their impls are API too.
    let mut names = BTreeSet::new();
    for module in modules {
        for item in &module.items {
            if let Some((name, vis)) = name_of(item)
                && is_pub(vis)
                && public_at(module, &name).is_some()
            {
                names.insert(name);
            }
        }
    }
    let mut lines: BTreeSet<String> = foreign
        .into_iter()
        .map(|(at, line)| format!("{}: {line}", module_label(&at)))
        .collect();
    for module in modules {
        for item in &module.items {
            match item {
                Item::Impl(impl_item) => lines.extend(impl_lines(impl_item, &names)),
                Item::Macro(mac) if exported_macro(mac) => {
                    let name = mac
                        .ident
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    lines.insert(format!("crate: macro_rules! {name}"));
                }
                other => {
                    if let Some((name, vis)) = name_of(other)
                        && is_pub(vis)
                        && let Some(at) = public_at(module, &name)
                    {
                        lines.insert(format!("{}: {}", module_label(&at), render_item(other)));
                    }
                }
            }
        }
    }
    lines.into_iter().collect()
}

fn exported_macro(mac: &syn::ItemMacro) -> bool {
    mac.ident.is_some()
        && mac
            .attrs
            .iter()
            .any(|attr| attr.path().is_ident("macro_export"))
}

/// Tokens as one line, without the spaces `proc_macro2` puts around punctuation (and without trailing commas),
/// so a line reads like the source rustfmt writes.
fn render(tokens: &impl quote::ToTokens) -> String {
    let mut text = tokens.to_token_stream().to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" : ", ": "),
        (" ,", ","),
        (" ;", ";"),
        ("& ", "&"),
        (" < ", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
        ("# [", "#["),
        (" [", "["),
        ("[ ", "["),
        (" ]", "]"),
        (",)", ")"),
        (",]", "]"),
        (",>", ">"),
        (", }", " }"),
    ] {
        text = text.replace(from, to);
    }
    text
}

/// Only the attributes that are API: derives, `non_exhaustive`, `repr`, `cfg`.
fn keep_api_attrs(attrs: &mut Vec<Attribute>) {
    attrs.retain(|attr| {
        let path = attr.path();
        path.is_ident("derive")
            || path.is_ident("non_exhaustive")
            || path.is_ident("repr")
            || path.is_ident("cfg")
    });
}

fn strip_fields(fields: &mut Fields, only_pub: bool) {
    for field in fields.iter_mut() {
        keep_api_attrs(&mut field.attrs);
        if only_pub && !is_pub(&field.vis) {
            // A private field: only that there is one matters (it stops struct literals).
            field.ty = syn::parse_quote!(_);
            field.ident = field.ident.as_ref().map(|_| syn::parse_quote!(_private));
        }
    }
    if let Fields::Named(named) = fields {
        let mut seen_private = false;
        named.named = std::mem::take(&mut named.named)
            .into_pairs()
            .filter(|pair| {
                let private = pair.value().ident.as_ref().is_some_and(|i| i == "_private");
                let keep = !private || !seen_private;
                seen_private |= private;
                keep
            })
            .collect();
    }
}

fn render_item(item: &Item) -> String {
    let mut item = item.clone();
    match &mut item {
        Item::Const(i) => {
            keep_api_attrs(&mut i.attrs);
            return format!("pub const {}: {}", i.ident, render(&i.ty));
        }
        Item::Static(i) => {
            keep_api_attrs(&mut i.attrs);
            return format!("pub static {}: {}", i.ident, render(&i.ty));
        }
        Item::Fn(i) => {
            keep_api_attrs(&mut i.attrs);
            return format!("pub {}", render(&i.sig));
        }
        Item::Struct(i) => {
            keep_api_attrs(&mut i.attrs);
            strip_fields(&mut i.fields, true);
        }
        Item::Enum(i) => {
            keep_api_attrs(&mut i.attrs);
            for variant in &mut i.variants {
                keep_api_attrs(&mut variant.attrs);
                strip_fields(&mut variant.fields, false);
                variant.discriminant = None;
            }
        }
        Item::Union(i) => {
            keep_api_attrs(&mut i.attrs);
        }
        Item::Type(i) => keep_api_attrs(&mut i.attrs),
        Item::Trait(i) => {
            keep_api_attrs(&mut i.attrs);
            for member in &mut i.items {
                match member {
                    TraitItem::Fn(f) => {
                        keep_api_attrs(&mut f.attrs);
                        // A provided method keeps an empty body: provided vs required is API.
                        if f.default.is_some() {
                            f.default = Some(syn::parse_quote!({}));
                        }
                    }
                    TraitItem::Const(c) => {
                        keep_api_attrs(&mut c.attrs);
                        c.default = None;
                    }
                    TraitItem::Type(t) => keep_api_attrs(&mut t.attrs),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    render(&item)
}

/// The type name an impl is for: the last segment of its self type's path.
fn self_type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        syn::Type::Reference(reference) => self_type_name(&reference.elem),
        _ => None,
    }
}

fn impl_lines(item: &syn::ItemImpl, names: &BTreeSet<String>) -> Vec<String> {
    let self_name = self_type_name(&item.self_ty);
    let ours = self_name.as_ref().is_some_and(|name| names.contains(name));
    let generics = render(&item.generics);
    let where_clause = item
        .generics
        .where_clause
        .as_ref()
        .map(|w| format!(" {}", render(w)))
        .unwrap_or_default();
    if let Some((_, trait_path, _)) = &item.trait_ {
        let trait_ours = trait_path
            .segments
            .last()
            .is_some_and(|s| names.contains(&s.ident.to_string()));
        if !(ours || trait_ours) {
            return Vec::new();
        }
        return vec![format!(
            "impl{generics} {} for {}{where_clause}",
            render(trait_path),
            render(&item.self_ty)
        )];
    }
    if !ours {
        return Vec::new();
    }
    let self_ty = render(&item.self_ty);
    item.items
        .iter()
        .filter_map(|member| match member {
            ImplItem::Fn(f) if is_pub(&f.vis) && !hidden(&f.attrs) => Some(format!(
                "impl{generics} {self_ty}{where_clause}: pub {}",
                render(&f.sig)
            )),
            ImplItem::Const(c) if is_pub(&c.vis) && !hidden(&c.attrs) => Some(format!(
                "impl{generics} {self_ty}{where_clause}: pub const {}: {}",
                c.ident,
                render(&c.ty)
            )),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(source: &str) -> Vec<String> {
        api_of_source(source).expect("parses")
    }

    #[test]
    fn public_items_of_public_modules_are_listed_without_docs_or_bodies() {
        let lines = api(r#"
            /// Docs do not count.
            pub fn add(a: u32, b: u32) -> u32 { a + b }
            fn private() {}
            pub(crate) fn internal() {}
            pub mod outer {
                /// A struct.
                #[derive(Debug, Clone)]
                #[non_exhaustive]
                pub struct Thing { pub name: String, secret: u8, other: u16 }
                pub const LIMIT: usize = 3;
            }
            mod hidden_away { pub fn unreachable() {} }
            #[cfg(test)]
            mod tests { pub fn test_only() {} }
        "#);
        assert_eq!(
            lines,
            [
                "crate: pub fn add(a: u32, b: u32) -> u32",
                "crate::outer: #[derive(Debug, Clone)] #[non_exhaustive] pub struct Thing { pub name: String, _private: _ }",
                "crate::outer: pub const LIMIT: usize",
            ]
        );
    }

    #[test]
    fn reexports_through_private_modules_are_followed() {
        let lines = api(r#"
            mod app {
                mod builder {
                    pub struct Builder;
                    impl Builder { pub fn run(self) {} }
                    pub struct Hidden;
                }
                pub use builder::{Builder, Hidden};
            }
            pub use app::Builder;
        "#);
        assert_eq!(
            lines,
            vec![
                "crate: pub struct Builder;".to_owned(),
                "impl Builder: pub fn run(self)".to_owned()
            ]
        );
    }

    #[test]
    fn reexports_make_items_of_private_modules_public() {
        let lines = api(r#"
            mod inner {
                pub struct Named;
                pub struct Other;
                pub fn helper() {}
            }
            mod globbed { pub enum Kind { A, B(u8) } }
            pub use inner::Named;
            pub use self::globbed::*;
            pub use std::time::Duration;
        "#);
        assert!(
            lines.contains(&"crate: pub struct Named;".to_owned()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"crate: pub enum Kind { A, B(u8) }".to_owned()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"crate: pub use std::time::Duration".to_owned()),
            "{lines:#?}"
        );
        assert_eq!(lines.len(), 3, "{lines:#?}");
        // Moving an item behind its re-export changes nothing.
        let moved = api(r#"
            mod elsewhere { pub struct Named; }
            mod globbed { pub enum Kind { A, B(u8) } }
            pub use elsewhere::Named;
            pub use globbed::*;
            pub use std::time::Duration;
        "#);
        assert_eq!(lines, moved);
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("Other") || l.contains("helper")),
            "{lines:#?}"
        );
    }

    #[test]
    fn impls_of_public_types_and_traits_are_listed() {
        let lines = api(r#"
            pub struct Budget;
            struct Private;
            impl Budget {
                pub fn new() -> Self { Budget }
                fn internal(&self) {}
                pub const MAX: u32 = 1;
            }
            impl Private { pub fn hidden(&self) {} }
            impl Default for Budget { fn default() -> Self { Budget } }
            impl Clone for Private { fn clone(&self) -> Self { Private } }
            pub trait Provider: Send {
                fn required(&self) -> u32;
                fn provided(&self) -> u32 { 1 }
            }
            impl Provider for Private { fn required(&self) -> u32 { 0 } }
        "#);
        assert!(
            lines.contains(&"impl Budget: pub fn new() -> Self".to_owned()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"impl Budget: pub const MAX: u32".to_owned()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"impl Default for Budget".to_owned()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"impl Provider for Private".to_owned()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(
                &"crate: pub trait Provider: Send { fn required(&self) -> u32; fn provided(&self) -> u32 { } }"
                    .to_owned()
            ),
            "{lines:#?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("internal")
                || l.contains("hidden")
                || l.contains("Clone for Private")),
            "{lines:#?}"
        );
    }

    #[test]
    fn formatting_and_comments_do_not_change_the_api_but_signatures_do() {
        let before = api("pub fn f(a: u32) -> u32 { a }");
        let reformatted =
            api("// a comment\n/// docs\npub fn f(\n    a: u32,\n) -> u32 {\n    a + 0\n}");
        assert_eq!(before, reformatted);
        let changed = api("pub fn f(a: u64) -> u32 { 0 }");
        assert_ne!(before, changed);
    }
}
