//! `cargo xtask udeps`: dependencies that a workspace member declares but never uses.
//!
//! The check needs no extra tool and compiles nothing. It reads `cargo metadata --no-deps` and, for every normal,
//! dev and build dependency of every workspace member, looks for the dependency's crate name (the package name with
//! `-` replaced by `_`, or its `package =` rename) used as a crate in the Rust files that could use it:
//!
//! - a normal dependency in the code of the library, binaries and examples (`src/`, `examples/`) outside
//!   `#[cfg(test)]`; one used only by tests (`tests/`, `benches/`, `#[cfg(test)]` code, doctests) belongs in
//!   `[dev-dependencies]`, and one used only by `build.rs` in `[build-dependencies]`;
//! - a dev-dependency in any of those files;
//! - a build dependency in the build script.
//!
//! "Used as a crate" means a path that starts with it (`name::`, `::name::`, `#[name::...]`), `use name`,
//! `extern crate name` or a macro call `name!(...)`. Comments, string and character literals do not count; the Rust
//! code blocks of doc comments count as tests (they are doctests). A local module with a dependency's name would hide
//! that dependency; none exists.
//!
//! It also checks that every entry of the root `[workspace.dependencies]` is inherited (`workspace = true`) by some
//! member.
//!
//! A dependency that is needed but never named in code (listed only to enable a feature of a crate further down,
//! such as a k8s-openapi version feature) is allowed explicitly in the member's `Cargo.toml`, with a comment saying
//! why:
//!
//! ```toml
//! [package.metadata.xtask]
//! # k8s-openapi is listed only to select the Kubernetes API version (feature v1_36).
//! unused-dependencies-allowed = ["k8s-openapi"]
//! ```
//!
//! An allow-list entry that is not needed (the dependency is used, or not declared) is reported too, so the list stays
//! as small as possible.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use serde_json::Value;

use crate::process::{self, Interrupt, Interrupted};

/// The `[package.metadata.xtask]` key of the allow-list.
pub const ALLOW_LIST_KEY: &str = "unused-dependencies-allowed";

/// Arguments of `cargo xtask udeps`.
#[derive(Debug, Args, Default)]
pub struct UdepsArgs {}

/// Runs `cargo xtask udeps`.
///
/// # Errors
/// If `cargo metadata` fails, a file cannot be read, or any dependency is unused.
pub async fn run(_args: &UdepsArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let metadata = cargo_metadata(interrupt).await?;
    let workspace = Workspace::from_metadata(&metadata)?;
    let findings = workspace.check()?;
    if findings.is_empty() {
        eprintln!(
            "udeps: every dependency of the {} workspace members is used",
            workspace.members.len()
        );
        return Ok(());
    }
    for finding in &findings {
        eprintln!("{finding}");
    }
    bail!(
        "{} unused dependenc{} (see above)",
        findings.len(),
        if findings.len() == 1 { "y" } else { "ies" }
    )
}

async fn cargo_metadata(interrupt: &Interrupt) -> anyhow::Result<Value> {
    let mut command = process::cargo();
    command
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let shown = process::display_command(&command);
    let output = tokio::select! {
        output = command.output() => output.with_context(|| format!("cannot run `{shown}`"))?,
        () = interrupt.interrupted() => return Err(Interrupted.into()),
    };
    if !output.status.success() {
        bail!("`{shown}` failed with {}", output.status);
    }
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("`{shown}` printed invalid JSON"))
}

/// The kind of a dependency, as `cargo metadata` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    /// `[dependencies]`
    Normal,
    /// `[dev-dependencies]`
    Dev,
    /// `[build-dependencies]`
    Build,
}

impl DepKind {
    fn table(self) -> &'static str {
        match self {
            DepKind::Normal => "dependencies",
            DepKind::Dev => "dev-dependencies",
            DepKind::Build => "build-dependencies",
        }
    }
}

/// One dependency declaration of a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The package depended on.
    pub package: String,
    /// The key in `Cargo.toml` when it differs from the package (`key = { package = "..." }`).
    pub rename: Option<String>,
    /// Which table declares it.
    pub kind: DepKind,
    /// The platform of a `[target.'...'.dependencies]` table.
    pub platform: Option<String>,
}

impl Dependency {
    /// The key of the dependency in `Cargo.toml`.
    pub fn key(&self) -> &str {
        self.rename.as_deref().unwrap_or(&self.package)
    }

    /// The name code uses for the crate.
    pub fn crate_ident(&self) -> String {
        self.key().replace('-', "_")
    }

    /// The `Cargo.toml` table that declares it, e.g. `[dev-dependencies]`.
    pub fn section(&self) -> String {
        match &self.platform {
            Some(platform) => format!("[target.'{platform}'.{}]", self.kind.table()),
            None => format!("[{}]", self.kind.table()),
        }
    }
}

/// What a target compiles its files as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Roles {
    /// Library, binary or example code.
    normal: bool,
    /// Integration tests and benchmarks.
    test: bool,
    /// The build script.
    build: bool,
}

/// A workspace member.
#[derive(Debug, Clone)]
pub struct Member {
    /// Package name.
    pub name: String,
    /// The directory of its `Cargo.toml`.
    pub dir: PathBuf,
    /// Its dependency declarations.
    pub dependencies: Vec<Dependency>,
    /// `(target kinds, crate root)` of each target.
    pub targets: Vec<(Vec<String>, PathBuf)>,
    /// `[package.metadata.xtask] unused-dependencies-allowed`.
    pub allowed: Vec<String>,
}

/// The crates a member's code uses, by where they are used.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Usage {
    /// In library, binary and example code outside `#[cfg(test)]`.
    pub normal: BTreeSet<String>,
    /// In tests, benchmarks, `#[cfg(test)]` code and doctests.
    pub test: BTreeSet<String>,
    /// In the build script.
    pub build: BTreeSet<String>,
}

/// The workspace as `cargo metadata` describes it.
#[derive(Debug)]
pub struct Workspace {
    /// The workspace root.
    pub root: PathBuf,
    /// Its members.
    pub members: Vec<Member>,
}

impl Workspace {
    /// Reads the output of `cargo metadata --format-version 1 --no-deps`.
    ///
    /// # Errors
    /// If a field is missing or malformed.
    pub fn from_metadata(metadata: &Value) -> anyhow::Result<Self> {
        let root = PathBuf::from(str_field(metadata, "workspace_root")?);
        let member_ids: BTreeSet<&str> = metadata["workspace_members"]
            .as_array()
            .context("cargo metadata: no workspace_members")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut members = Vec::new();
        for package in metadata["packages"]
            .as_array()
            .context("cargo metadata: no packages")?
        {
            if !member_ids.contains(str_field(package, "id")?) {
                continue;
            }
            members.push(member_from_metadata(package)?);
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Self { root, members })
    }

    /// Every unused dependency and needless allow-list entry, one message each.
    ///
    /// # Errors
    /// If a manifest or source file cannot be read.
    pub fn check(&self) -> anyhow::Result<Vec<String>> {
        let mut findings = Vec::new();
        for member in &self.members {
            let usage = member_usage(member)?;
            findings.extend(evaluate(member, &usage, &self.relative(&member.dir)));
        }
        findings.extend(self.check_workspace_dependencies()?);
        Ok(findings)
    }

    fn check_workspace_dependencies(&self) -> anyhow::Result<Vec<String>> {
        let root_manifest = self.root.join("Cargo.toml");
        let text = read(&root_manifest)?;
        let mut inherited = BTreeSet::new();
        for member in &self.members {
            inherited.extend(inherited_dependencies(&read(
                &member.dir.join("Cargo.toml"),
            )?));
        }
        Ok(workspace_dependencies(&text)
            .into_iter()
            .filter(|name| !inherited.contains(name))
            .map(|name| {
                format!(
                    "workspace: dependency {name} is declared but never used (remove it from \
                     [workspace.dependencies] in Cargo.toml)"
                )
            })
            .collect())
    }

    fn relative(&self, path: &Path) -> String {
        let relative = path.strip_prefix(&self.root).unwrap_or(path);
        if relative.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            relative.display().to_string()
        }
    }
}

fn str_field<'a>(value: &'a Value, field: &str) -> anyhow::Result<&'a str> {
    value[field]
        .as_str()
        .with_context(|| format!("cargo metadata: no string field `{field}`"))
}

fn member_from_metadata(package: &Value) -> anyhow::Result<Member> {
    let name = str_field(package, "name")?.to_owned();
    let manifest = PathBuf::from(str_field(package, "manifest_path")?);
    let dir = manifest
        .parent()
        .with_context(|| format!("{name}: manifest path without a directory"))?
        .to_path_buf();
    let mut dependencies = Vec::new();
    for dependency in package["dependencies"].as_array().into_iter().flatten() {
        let kind = match dependency["kind"].as_str() {
            None | Some("normal") => DepKind::Normal,
            Some("dev") => DepKind::Dev,
            Some("build") => DepKind::Build,
            Some(other) => bail!("{name}: unknown dependency kind {other}"),
        };
        dependencies.push(Dependency {
            package: str_field(dependency, "name")?.to_owned(),
            rename: dependency["rename"].as_str().map(str::to_owned),
            kind,
            platform: dependency["target"].as_str().map(str::to_owned),
        });
    }
    let mut targets = Vec::new();
    for target in package["targets"].as_array().into_iter().flatten() {
        let kinds = target["kind"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        targets.push((kinds, PathBuf::from(str_field(target, "src_path")?)));
    }
    let allowed = match &package["metadata"]["xtask"][ALLOW_LIST_KEY] {
        Value::Null => Vec::new(),
        Value::Array(entries) => entries
            .iter()
            .map(|entry| {
                entry.as_str().map(str::to_owned).with_context(|| {
                    format!("{name}: {ALLOW_LIST_KEY} must be a list of dependency names")
                })
            })
            .collect::<anyhow::Result<_>>()?,
        _ => bail!("{name}: {ALLOW_LIST_KEY} must be a list of dependency names"),
    };
    Ok(Member {
        name,
        dir,
        dependencies,
        targets,
        allowed,
    })
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The roles of each target kind.
fn target_roles(kinds: &[String]) -> Roles {
    let mut roles = Roles::default();
    for kind in kinds {
        match kind.as_str() {
            "test" | "bench" => roles.test = true,
            "custom-build" => roles.build = true,
            _ => roles.normal = true,
        }
    }
    roles
}

/// The Rust files of a member, with what they are compiled as.
fn member_files(member: &Member) -> anyhow::Result<BTreeMap<PathBuf, Roles>> {
    let mut files: BTreeMap<PathBuf, Roles> = BTreeMap::new();
    for (kinds, root) in &member.targets {
        let roles = target_roles(kinds);
        let dir = root.parent().unwrap_or(&member.dir);
        // A crate root next to Cargo.toml (build.rs) is one file; otherwise every file in its directory.
        let target_files = if dir == member.dir {
            vec![root.clone()]
        } else {
            let mut found = Vec::new();
            rust_files(dir, &mut found)?;
            found
        };
        for file in target_files {
            let entry = files.entry(file).or_default();
            entry.normal |= roles.normal;
            entry.test |= roles.test;
            entry.build |= roles.build;
        }
    }
    Ok(files)
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        if path.is_dir() {
            rust_files(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    Ok(())
}

/// The crates a member uses, read from its files.
fn member_usage(member: &Member) -> anyhow::Result<Usage> {
    let files = member_files(member)?;
    let crate_roots: BTreeSet<&Path> = member
        .targets
        .iter()
        .map(|(_, root)| root.as_path())
        .collect();
    let mut scans = BTreeMap::new();
    // Files and directories of modules declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`).
    let mut test_paths: Vec<PathBuf> = Vec::new();
    for path in files.keys() {
        let scan = scan_source(&read(path)?);
        let owner = module_dir(path, crate_roots.contains(path.as_path()));
        for module in &scan.test_modules {
            test_paths.push(owner.join(format!("{module}.rs")));
            test_paths.push(owner.join(module));
        }
        scans.insert(path.clone(), scan);
    }
    let mut usage = Usage::default();
    for (path, roles) in &files {
        let scan = &scans[path];
        let test_only = test_paths.iter().any(|test| path.starts_with(test));
        if roles.normal {
            if test_only {
                usage.test.extend(scan.normal.iter().cloned());
            } else {
                usage.normal.extend(scan.normal.iter().cloned());
            }
            usage.test.extend(scan.test.iter().cloned());
        }
        if roles.test {
            usage.test.extend(scan.normal.iter().cloned());
            usage.test.extend(scan.test.iter().cloned());
        }
        if roles.build {
            usage.build.extend(scan.normal.iter().cloned());
        }
    }
    Ok(usage)
}

/// The directory holding the files of the modules that `file` declares.
fn module_dir(file: &Path, crate_root: bool) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if crate_root || matches!(stem, "lib" | "main" | "mod") {
        dir
    } else {
        dir.join(stem)
    }
}

/// Where something went wrong with one dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Used,
    Unused,
    OnlyTests,
    OnlyBuild,
}

fn verdict(dependency: &Dependency, usage: &Usage) -> Verdict {
    let ident = dependency.crate_ident();
    let in_normal = usage.normal.contains(&ident);
    let in_test = usage.test.contains(&ident);
    let in_build = usage.build.contains(&ident);
    match dependency.kind {
        DepKind::Normal if in_normal => Verdict::Used,
        DepKind::Normal if in_test => Verdict::OnlyTests,
        DepKind::Normal if in_build => Verdict::OnlyBuild,
        DepKind::Dev if in_normal || in_test => Verdict::Used,
        DepKind::Build if in_build => Verdict::Used,
        _ => Verdict::Unused,
    }
}

/// The findings for one member: unused dependencies and needless allow-list entries.
pub fn evaluate(member: &Member, usage: &Usage, relative_dir: &str) -> Vec<String> {
    let manifest = if relative_dir == "." {
        "Cargo.toml".to_owned()
    } else {
        format!("{relative_dir}/Cargo.toml")
    };
    let is_allowed = |dependency: &Dependency| {
        member
            .allowed
            .iter()
            .any(|name| name == dependency.key() || name == &dependency.package)
    };
    let mut findings = Vec::new();
    for dependency in &member.dependencies {
        if is_allowed(dependency) {
            continue;
        }
        let name = dependency.key();
        let section = dependency.section();
        let message = match verdict(dependency, usage) {
            Verdict::Used => continue,
            Verdict::Unused => format!(
                "dependency {name} is declared but never used (remove it from {section} in {manifest})"
            ),
            Verdict::OnlyTests => format!(
                "dependency {name} is used only by tests (move it from {section} to [dev-dependencies] in \
                 {manifest})"
            ),
            Verdict::OnlyBuild => format!(
                "dependency {name} is used only by the build script (move it from {section} to \
                 [build-dependencies] in {manifest})"
            ),
        };
        findings.push(format!("{}: {message}", member.name));
    }
    for name in &member.allowed {
        let declared: Vec<&Dependency> = member
            .dependencies
            .iter()
            .filter(|d| d.key() == name || &d.package == name)
            .collect();
        if declared.is_empty() {
            findings.push(format!(
                "{}: {name} is in {ALLOW_LIST_KEY} but not a dependency (remove it from \
                 [package.metadata.xtask] in {manifest})",
                member.name
            ));
        } else if declared.iter().all(|d| verdict(d, usage) == Verdict::Used) {
            findings.push(format!(
                "{}: {name} is in {ALLOW_LIST_KEY} but the code uses it (remove it from \
                 [package.metadata.xtask] in {manifest})",
                member.name
            ));
        }
    }
    findings
}

// ---------------------------------------------------------------------------------------------------------------
// Rust sources

/// The crates one source file uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileScan {
    /// Crate names used outside `#[cfg(test)]`.
    pub normal: BTreeSet<String>,
    /// Crate names used in `#[cfg(test)]` code and doctests.
    pub test: BTreeSet<String>,
    /// Modules declared as `#[cfg(test)] mod name;` (their files are test code).
    pub test_modules: Vec<String>,
}

/// Finds the crate names `source` uses, split by test and non-test code.
pub fn scan_source(source: &str) -> FileScan {
    let stripped = strip(source);
    let tokens = tokenize(&stripped.code);
    let (test_flags, test_modules) = test_regions(&tokens);
    let mut scan = FileScan {
        test_modules,
        ..FileScan::default()
    };
    for (index, name) in crate_uses(&tokens) {
        if test_flags[index] {
            scan.test.insert(name.to_owned());
        } else {
            scan.normal.insert(name.to_owned());
        }
    }
    if !stripped.doctests.is_empty() {
        let doctests = strip(&stripped.doctests);
        let tokens = tokenize(&doctests.code);
        scan.test.extend(
            crate_uses(&tokens)
                .into_iter()
                .map(|(_, name)| name.to_owned()),
        );
    }
    scan
}

/// Source with comments and literals blanked out.
#[derive(Debug, Default)]
struct Stripped {
    /// The source with every comment, string and character literal replaced by spaces (newlines kept).
    code: String,
    /// The Rust code blocks of the doc comments.
    doctests: String,
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn blank(out: &mut String, chars: &[char]) {
    out.extend(chars.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
}

/// The index after a string literal whose opening quote is just before `start`.
fn string_end(chars: &[char], start: usize) -> usize {
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// The number of `#` of a raw string starting at `start` (just after the `r`), if one starts there.
fn raw_string_hashes(chars: &[char], start: usize) -> Option<usize> {
    let hashes = chars[start..].iter().take_while(|&&c| c == '#').count();
    (chars.get(start + hashes) == Some(&'"')).then_some(hashes)
}

fn strip(source: &str) -> Stripped {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Stripped::default();
    let mut fence: Option<bool> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            let end = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |n| i + n);
            let line: String = chars[i..end].iter().collect();
            doc_line(&line, &mut fence, &mut out.doctests);
            blank(&mut out.code, &chars[i..end]);
            i = end;
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            let mut j = i;
            while j < chars.len() {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            let j = j.min(chars.len());
            blank(&mut out.code, &chars[i..j]);
            i = j;
        } else if c == '"' {
            let end = string_end(&chars, i + 1);
            blank(&mut out.code, &chars[i..end]);
            i = end;
        } else if c == 'r'
            && (i == 0
                || !is_ident_char(chars[i - 1])
                || (matches!(chars[i - 1], 'b' | 'c') && (i < 2 || !is_ident_char(chars[i - 2]))))
            && let Some(hashes) = raw_string_hashes(&chars, i + 1)
        {
            let body = i + 1 + hashes + 1;
            let mut end = chars.len();
            let mut j = body;
            while j < chars.len() {
                if chars[j] == '"'
                    && chars[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == '#')
                        .count()
                        == hashes
                {
                    end = j + 1 + hashes;
                    break;
                }
                j += 1;
            }
            blank(&mut out.code, &chars[i..end]);
            i = end;
        } else if c == '\'' {
            // A character literal, or a lifetime / label (kept).
            let end = if next == Some('\\') {
                chars[i + 3.min(chars.len() - i)..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map_or(chars.len(), |n| i + 3 + n + 1)
            } else if chars.get(i + 2) == Some(&'\'') {
                i + 3
            } else {
                i + 1
            };
            if end == i + 1 {
                out.code.push(c);
            } else {
                blank(&mut out.code, &chars[i..end.min(chars.len())]);
            }
            i = end;
        } else {
            out.code.push(c);
            i += 1;
        }
    }
    out
}

/// Collects the Rust code blocks of doc comments (`///`, `//!`); `fence` is whether a block is open and is Rust.
fn doc_line(comment: &str, fence: &mut Option<bool>, doctests: &mut String) {
    let text = if let Some(rest) = comment.strip_prefix("///") {
        if rest.starts_with('/') {
            return;
        }
        rest
    } else if let Some(rest) = comment.strip_prefix("//!") {
        rest
    } else {
        return;
    };
    if let Some(info) = text.trim_start().strip_prefix("```") {
        *fence = match fence {
            Some(_) => None,
            None => Some(is_rust_block(info)),
        };
        return;
    }
    if *fence == Some(true) {
        doctests.push_str(text);
        doctests.push('\n');
    }
}

/// Whether a fenced block with this info string is a compiled Rust doctest.
fn is_rust_block(info: &str) -> bool {
    info.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|word| !word.is_empty() && !word.starts_with(['{', '.']))
        .all(|word| {
            matches!(
                word,
                "rust"
                    | "no_run"
                    | "should_panic"
                    | "compile_fail"
                    | "test_harness"
                    | "standalone_crate"
            ) || word.starts_with("edition")
                || word.starts_with("ignore-")
        })
}

/// A token of stripped source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Ident(&'a str),
    /// A punctuation character, and whether the next character directly follows it (no space).
    Punct(char, bool),
}

fn tokenize(code: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if is_ident_char(c) {
            let mut end = start + c.len_utf8();
            while let Some(&(index, c)) = chars.peek() {
                if !is_ident_char(c) {
                    break;
                }
                end = index + c.len_utf8();
                chars.next();
            }
            tokens.push(Token::Ident(&code[start..end]));
        } else {
            let joint = chars.peek().is_some_and(|&(_, next)| !next.is_whitespace());
            tokens.push(Token::Punct(c, joint));
        }
    }
    tokens
}

fn is_punct(token: Option<&Token<'_>>, want: char) -> bool {
    matches!(token, Some(Token::Punct(c, _)) if *c == want)
}

/// Whether `tokens[at]` and `tokens[at + 1]` are `::`.
fn is_path_sep(tokens: &[Token<'_>], at: usize) -> bool {
    matches!(tokens.get(at), Some(Token::Punct(':', true))) && is_punct(tokens.get(at + 1), ':')
}

/// Keywords after which `::name` starts a path (rather than continuing one).
const BEFORE_ABSOLUTE_PATH: &[&str] = &[
    "as", "use", "in", "return", "mut", "dyn", "impl", "for", "where", "break", "else", "match",
    "if",
];

/// Path roots that are never dependencies: path keywords and tool attribute namespaces.
const NOT_CRATES: &[&str] = &[
    "crate",
    "self",
    "super",
    "Self",
    "clippy",
    "rustfmt",
    "rustdoc",
    "diagnostic",
];

/// The index and name of every identifier used as a crate name.
fn crate_uses<'a>(tokens: &[Token<'a>]) -> Vec<(usize, &'a str)> {
    let mut uses = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        let Token::Ident(name) = *token else {
            continue;
        };
        let previous = index.checked_sub(1).and_then(|i| tokens.get(i));
        if is_punct(previous, '.')
            || NOT_CRATES.contains(&name)
            || BEFORE_ABSOLUTE_PATH.contains(&name)
        {
            continue;
        }
        // `a::name` is a path segment; `::name` at the start of a path is the crate.
        if index >= 2 && is_path_sep(tokens, index - 2) {
            let leading = match index.checked_sub(3).and_then(|i| tokens.get(i)) {
                None => true,
                Some(Token::Ident(word)) => BEFORE_ABSOLUTE_PATH.contains(word),
                Some(Token::Punct(c, _)) => !matches!(c, '>' | ')' | ']'),
            };
            if leading {
                uses.push((index, name));
            }
            continue;
        }
        let is_use = matches!(previous, Some(Token::Ident("use")))
            || (matches!(previous, Some(Token::Ident("crate")))
                && matches!(
                    index.checked_sub(2).and_then(|i| tokens.get(i)),
                    Some(Token::Ident("extern"))
                ));
        let is_path = is_path_sep(tokens, index + 1);
        let is_macro = matches!(tokens.get(index + 1), Some(Token::Punct('!', _)))
            && matches!(
                tokens.get(index + 2),
                Some(Token::Punct('(' | '[' | '{', _))
            );
        if is_use || is_path || is_macro {
            uses.push((index, name));
        }
    }
    uses
}

/// Matches `#[cfg(test)]` (or `#![cfg(test)]` when `inner`) at `at`; returns the index after it.
fn cfg_test_at(tokens: &[Token<'_>], at: usize, inner: bool) -> Option<usize> {
    let mut i = at;
    if !is_punct(tokens.get(i), '#') {
        return None;
    }
    i += 1;
    if inner {
        if !is_punct(tokens.get(i), '!') {
            return None;
        }
        i += 1;
    }
    let expected = [
        Some(Token::Punct('[', false)),
        Some(Token::Ident("cfg")),
        Some(Token::Punct('(', false)),
        Some(Token::Ident("test")),
        Some(Token::Punct(')', false)),
        Some(Token::Punct(']', false)),
    ];
    for want in expected {
        let got = tokens.get(i).map(|token| match token {
            Token::Punct(c, _) => Token::Punct(*c, false),
            other => *other,
        });
        if got != want {
            return None;
        }
        i += 1;
    }
    Some(i)
}

/// The index after the bracketed group that opens at `at`.
fn group_end(tokens: &[Token<'_>], at: usize) -> usize {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(at) {
        match token {
            Token::Punct('(' | '[' | '{', _) => depth += 1,
            Token::Punct(')' | ']' | '}', _) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index after the item (or statement) that starts at `at`: after its `;` or its closing `}`, or at the `}`
/// that closes the enclosing block.
fn item_end(tokens: &[Token<'_>], at: usize) -> usize {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(at) {
        match token {
            Token::Punct('(' | '[' | '{', _) => depth += 1,
            Token::Punct(')' | ']', _) => depth = depth.saturating_sub(1),
            Token::Punct('}', _) => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Punct(';', _) if depth == 0 => return i + 1,
            _ => {}
        }
    }
    tokens.len()
}

/// The index of the `}` that closes the block enclosing `at` (the end for the top level).
fn block_end(tokens: &[Token<'_>], at: usize) -> usize {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(at) {
        match token {
            Token::Punct('(' | '[' | '{', _) => depth += 1,
            Token::Punct('}', _) if depth == 0 => return i,
            Token::Punct(')' | ']' | '}', _) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    tokens.len()
}

/// Which tokens are `#[cfg(test)]` code, and the modules declared as `#[cfg(test)] mod name;`.
fn test_regions(tokens: &[Token<'_>]) -> (Vec<bool>, Vec<String>) {
    let mut flags = vec![false; tokens.len()];
    let mut modules = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if let Some(after) = cfg_test_at(tokens, i, true) {
            // An inner attribute: the rest of the enclosing module.
            let end = block_end(tokens, after);
            flags[i..end].iter_mut().for_each(|flag| *flag = true);
            i = end;
            continue;
        }
        let Some(mut start) = cfg_test_at(tokens, i, false) else {
            i += 1;
            continue;
        };
        // Further attributes of the same item.
        while is_punct(tokens.get(start), '#') && is_punct(tokens.get(start + 1), '[') {
            start = group_end(tokens, start + 1);
        }
        let mut word = start;
        if matches!(tokens.get(word), Some(Token::Ident("pub"))) {
            word += 1;
            if is_punct(tokens.get(word), '(') {
                word = group_end(tokens, word);
            }
        }
        if let (Some(Token::Ident("mod")), Some(Token::Ident(name))) =
            (tokens.get(word), tokens.get(word + 1))
            && is_punct(tokens.get(word + 2), ';')
        {
            modules.push((*name).to_owned());
        }
        let end = item_end(tokens, start).max(start);
        flags[i..end].iter_mut().for_each(|flag| *flag = true);
        i = end.max(i + 1);
    }
    (flags, modules)
}

// ---------------------------------------------------------------------------------------------------------------
// Cargo.toml

/// `(table, key, value)` of each `key = value` line of a TOML document outside arrays and inline tables.
fn toml_entries(text: &str) -> Vec<(String, String, String)> {
    let mut entries = Vec::new();
    let mut table = String::new();
    let mut depth = 0i32;
    for raw_line in text.lines() {
        let line = strip_toml_comment(raw_line);
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if depth == 0 && trimmed.starts_with('[') {
            table = trimmed
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .to_owned();
            continue;
        }
        let value = if depth == 0
            && let Some((key, value)) = trimmed.split_once('=')
        {
            entries.push((table.clone(), unquote_key(key), value.trim().to_owned()));
            value
        } else {
            trimmed
        };
        depth += bracket_balance(value);
    }
    entries
}

/// Removes a `#` comment (outside strings).
fn strip_toml_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

/// `[`/`{` minus `]`/`}` outside strings.
fn bracket_balance(value: &str) -> i32 {
    let mut quote: Option<char> = None;
    let mut balance = 0;
    for c in value.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '[' | '{') => balance += 1,
            (None, ']' | '}') => balance -= 1,
            _ => {}
        }
    }
    balance
}

/// A dotted key with its segments unquoted and joined by `.`.
fn unquote_key(key: &str) -> String {
    key.split('.')
        .map(|segment| segment.trim().trim_matches('"').trim_matches('\''))
        .collect::<Vec<_>>()
        .join(".")
}

/// The entries of `[workspace.dependencies]` in a root manifest.
pub fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (table, key, _) in toml_entries(manifest) {
        let name = if table == "workspace.dependencies" {
            key.split('.').next().unwrap_or_default().to_owned()
        } else if let Some(name) = table.strip_prefix("workspace.dependencies.") {
            name.to_owned()
        } else {
            continue;
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn is_dependency_table(table: &str) -> bool {
    let table = table
        .strip_prefix("target.")
        .and_then(|rest| rest.rsplit_once('.').map(|(_, last)| last))
        .unwrap_or(table);
    matches!(
        table,
        "dependencies"
            | "dev-dependencies"
            | "build-dependencies"
            | "dev_dependencies"
            | "build_dependencies"
    )
}

/// The dependencies a member manifest inherits from the workspace (`workspace = true`).
pub fn inherited_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (table, key, value) in toml_entries(manifest) {
        let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        if is_dependency_table(&table) {
            let (name, rest) = key.split_once('.').unwrap_or((&key, ""));
            if (rest == "workspace" && compact == "true") || compact.contains("workspace=true") {
                names.insert(name.to_owned());
            }
        } else if let Some((dependency_table, name)) = table.rsplit_once('.')
            && is_dependency_table(dependency_table)
            && key == "workspace"
            && compact == "true"
        {
            names.insert(name.to_owned());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn paths_use_and_macros_count_as_uses() {
        let scan = scan_source(
            r#"
            use serde::Deserialize;
            pub use ::tokio_util;
            extern crate alloc_crate;
            use thiserror as errors;
            #[tokio::main]
            async fn main() {
                let value = serde_json::json!({"a": 1});
                let v: Vec<ipnet::IpNet> = Vec::new();
                anyhow!("x");
                tracing::info!("done");
                let x = <T as ::rand::Rng>::next();
            }
            "#,
        );
        assert_eq!(
            scan.normal,
            set(&[
                "Vec",
                "alloc_crate",
                "anyhow",
                "ipnet",
                "rand",
                "serde",
                "serde_json",
                "thiserror",
                "tokio",
                "tokio_util",
                "tracing"
            ])
        );
        assert!(scan.test.is_empty());
    }

    #[test]
    fn plain_identifiers_path_segments_and_fields_do_not_count() {
        let scan = scan_source(
            r#"
            fn f(futures: u8, rand: Rand) -> u8 {
                let http = crate::http::get();
                let a = self.tracing::x;
                let b = config.serde.value;
                let c = Vec::<u8>::prometheus_client::new();
                if futures != 0 { return rand.next(); }
                uuid
            }
            "#,
        );
        assert_eq!(scan.normal, set(&["Vec"]), "{scan:?}");
    }

    #[test]
    fn comments_strings_and_chars_are_ignored() {
        let scan = scan_source(
            r####"
            // use rand::Rng;
            /* futures::join!(a, b) /* nested: tokio::spawn */ uuid::Uuid */
            let s = "serde_json::json!({})";
            let r = r#"ipnet::IpNet " still inside"#;
            let b = br"async_trait::x";
            let c = '"'; let d = '\''; let l: &'static str = "";
            'outer: loop { break 'outer; }
            let after = http::Method::GET;
            "####,
        );
        assert_eq!(scan.normal, set(&["http"]), "{scan:?}");
    }

    #[test]
    fn doc_comment_code_blocks_are_doctests() {
        let scan = scan_source(
            r#"
            //! Uses `tower::Service` in prose only.
            //!
            //! ```
            //! use tempfile::tempdir;
            //! ```
            //!
            //! ```text
            //! mockall::mock!
            //! ```
            /// ```ignore
            /// anyhow::bail!("not compiled");
            /// ```
            /// ```no_run
            /// # use jsonschema::validate;
            /// ```
            //// ```
            //// four slashes: a plain comment, rand::random()
            pub fn f() {}
            "#,
        );
        assert!(scan.normal.is_empty(), "{scan:?}");
        assert_eq!(scan.test, set(&["jsonschema", "tempfile"]));
    }

    #[test]
    fn cfg_test_code_is_test_code() {
        let scan = scan_source(
            r#"
            use kube::Api;
            #[cfg(test)]
            use mockall::automock;

            #[cfg(test)]
            #[allow(clippy::unwrap_used)]
            pub(crate) mod tests {
                use tempfile::TempDir;
                fn f() { let _ = [0u8; 4]; tower::ServiceExt::ready(); }
            }

            #[cfg(test)]
            mod helpers;

            #[cfg(any(test, feature = "mock"))]
            pub fn mocks() { mockall_double::x(); }

            pub fn after() { serde::de::x(); }
            "#,
        );
        assert_eq!(scan.normal, set(&["kube", "mockall_double", "serde"]));
        assert_eq!(scan.test, set(&["mockall", "tempfile", "tower"]));
        assert_eq!(scan.test_modules, ["helpers"]);

        let scan = scan_source("#![cfg(test)]\nuse rand::Rng;\nfn f() { uuid::Uuid::new_v4(); }\n");
        assert!(scan.normal.is_empty());
        assert_eq!(scan.test, set(&["rand", "uuid"]));
    }

    fn member(dependencies: Vec<Dependency>, allowed: &[&str]) -> Member {
        Member {
            name: "ccm-x".into(),
            dir: PathBuf::from("/ws/ccm-x"),
            dependencies,
            targets: Vec::new(),
            allowed: allowed.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    fn dependency(package: &str, rename: Option<&str>, kind: DepKind) -> Dependency {
        Dependency {
            package: package.into(),
            rename: rename.map(str::to_owned),
            kind,
            platform: None,
        }
    }

    #[test]
    fn crate_names_follow_renames_and_dashes() {
        assert_eq!(
            dependency("tokio-util", None, DepKind::Normal).crate_ident(),
            "tokio_util"
        );
        let renamed = dependency("k8s-openapi", Some("k8s"), DepKind::Normal);
        assert_eq!(renamed.crate_ident(), "k8s");
        assert_eq!(renamed.key(), "k8s");

        let usage = Usage {
            normal: set(&["k8s", "k8s_openapi_other"]),
            ..Usage::default()
        };
        let findings = evaluate(
            &member(
                vec![renamed, dependency("k8s-openapi", None, DepKind::Normal)],
                &[],
            ),
            &usage,
            "ccm-x",
        );
        assert_eq!(
            findings,
            [
                "ccm-x: dependency k8s-openapi is declared but never used (remove it from [dependencies] in \
              ccm-x/Cargo.toml)"
            ]
        );
    }

    #[test]
    fn verdicts_by_dependency_kind() {
        let usage = Usage {
            normal: set(&["kube"]),
            test: set(&["tempfile", "rand"]),
            build: set(&["cc"]),
        };
        let mut platform = dependency("libc", None, DepKind::Normal);
        platform.platform = Some("cfg(unix)".into());
        let findings = evaluate(
            &member(
                vec![
                    dependency("kube", None, DepKind::Normal),
                    dependency("kube", None, DepKind::Dev),
                    dependency("tempfile", None, DepKind::Dev),
                    dependency("rand", None, DepKind::Normal),
                    dependency("cc", None, DepKind::Build),
                    dependency("cc", None, DepKind::Normal),
                    dependency("kube", None, DepKind::Build),
                    platform,
                ],
                &[],
            ),
            &usage,
            "ccm-x",
        );
        assert_eq!(
            findings,
            [
                "ccm-x: dependency rand is used only by tests (move it from [dependencies] to \
                 [dev-dependencies] in ccm-x/Cargo.toml)",
                "ccm-x: dependency cc is used only by the build script (move it from [dependencies] to \
                 [build-dependencies] in ccm-x/Cargo.toml)",
                "ccm-x: dependency kube is declared but never used (remove it from [build-dependencies] in \
                 ccm-x/Cargo.toml)",
                "ccm-x: dependency libc is declared but never used (remove it from \
                 [target.'cfg(unix)'.dependencies] in ccm-x/Cargo.toml)",
            ]
        );
    }

    #[test]
    fn the_allow_list_excuses_and_must_stay_minimal() {
        let usage = Usage {
            normal: set(&["kube"]),
            ..Usage::default()
        };
        let findings = evaluate(
            &member(
                vec![
                    dependency("k8s-openapi", None, DepKind::Normal),
                    dependency("kube", None, DepKind::Normal),
                ],
                &["k8s-openapi", "kube", "gone"],
            ),
            &usage,
            ".",
        );
        assert_eq!(
            findings,
            [
                "ccm-x: kube is in unused-dependencies-allowed but the code uses it (remove it from \
                 [package.metadata.xtask] in Cargo.toml)",
                "ccm-x: gone is in unused-dependencies-allowed but not a dependency (remove it from \
                 [package.metadata.xtask] in Cargo.toml)",
            ]
        );
    }

    #[test]
    fn workspace_dependencies_and_inheritance() {
        let root = r#"
            [workspace]
            members = [
                "a",
                "b = c",
            ]

            [workspace.dependencies]
            # a comment = not a key
            kube = { version = "5", features = ["client", "x = y"] }
            "tokio-util" = "0.7"
            serde.version = "1"
            serde.features = ["derive"]

            [workspace.dependencies.backon]
            version = "1.6"

            [profile.dev]
            debug = false
        "#;
        assert_eq!(
            workspace_dependencies(root),
            ["kube", "tokio-util", "serde", "backon"]
        );

        let member = r#"
            [package]
            name = "a"
            version.workspace = true

            [dependencies]
            kube.workspace = true
            tokio-util = { workspace = true, features = ["rt"] }
            serde = "1"

            [target.'cfg(unix)'.dev-dependencies]
            backon = { workspace = true }

            [dev-dependencies.rand]
            workspace = true

            [features]
            default = ["kube/x"]
        "#;
        assert_eq!(
            inherited_dependencies(member),
            set(&["backon", "kube", "rand", "tokio-util"])
        );
    }

    #[test]
    fn module_files_of_a_declaring_file() {
        assert_eq!(
            module_dir(Path::new("/c/src/lib.rs"), true),
            Path::new("/c/src")
        );
        assert_eq!(
            module_dir(Path::new("/c/src/runtime.rs"), false),
            Path::new("/c/src/runtime")
        );
        assert_eq!(
            module_dir(Path::new("/c/src/runtime/mod.rs"), false),
            Path::new("/c/src/runtime")
        );
        assert_eq!(
            module_dir(Path::new("/c/tests/scenarios.rs"), true),
            Path::new("/c/tests")
        );
    }
}
