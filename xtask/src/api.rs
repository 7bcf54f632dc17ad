//! The public API snapshots and the CHANGELOG check.
//!
//! - `cargo xtask api --write`: writes `docs/api/<crate>.txt` for every published library crate, the public API
//!   read from the sources ([`extract`]: `syn`, stable toolchain, nothing built), one line per item.
//! - `cargo xtask changelog-check [--base REV]` (a `cargo xtask ci` step): fails when
//!   1. a snapshot is out of date (a public signature changed without `cargo xtask api --write`), or
//!   2. a snapshot differs from the base revision while the `## [Unreleased]` section of `CHANGELOG.md` does not:
//!      a public API change needs an entry (with a **Migration** note when it breaks callers).
//!
//!   The base is `--base`, else the merge base of `HEAD` with `origin/main` (or `main`); without git history
//!   (an exported tree) only the first check runs.

pub mod extract;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use serde_json::Value;

use crate::paths;
use crate::process::{Interrupt, Interrupted};

/// Where the snapshots live, relative to the workspace root.
pub const SNAPSHOT_DIR: &str = "docs/api";
/// The changelog, relative to the workspace root.
pub const CHANGELOG: &str = "CHANGELOG.md";
/// The heading of the section a change is recorded in.
pub const UNRELEASED: &str = "## [Unreleased]";

/// Arguments of `cargo xtask api`.
#[derive(Debug, Args, Default)]
pub struct ApiArgs {
    /// Write the snapshots (otherwise print the differences and fail if there are any).
    #[arg(long)]
    pub write: bool,
}

/// Arguments of `cargo xtask changelog-check`.
#[derive(Debug, Args, Default)]
pub struct ChangelogCheckArgs {
    /// The revision to compare with (default: the merge base of HEAD with origin/main, else main).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
}

/// A published library crate: its name and library root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryCrate {
    /// The package name.
    pub name: String,
    /// `src/lib.rs` (or wherever `[lib] path` points).
    pub lib_rs: PathBuf,
}

/// The published library crates of `cargo metadata --no-deps` output (`publish` not `false`).
///
/// # Errors
/// If the metadata lacks its `packages`.
pub fn library_crates(metadata: &Value) -> anyhow::Result<Vec<LibraryCrate>> {
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata printed no packages")?;
    let mut crates = Vec::new();
    for package in packages {
        let published =
            !matches!(&package["publish"], Value::Array(registries) if registries.is_empty());
        if !published {
            continue;
        }
        let lib = package["targets"].as_array().and_then(|targets| {
            targets.iter().find(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k == "lib"))
            })
        });
        if let (Some(name), Some(lib)) = (package["name"].as_str(), lib)
            && let Some(src) = lib["src_path"].as_str()
        {
            crates.push(LibraryCrate {
                name: name.to_owned(),
                lib_rs: PathBuf::from(src),
            });
        }
    }
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crates)
}

/// A snapshot file's text: a header and the lines.
pub fn snapshot_text(crate_name: &str, lines: &[String]) -> String {
    let mut text = format!(
        "# The public API of {crate_name}, one line per item (`cargo xtask api --write`; do not edit).\n\
         # A change here needs an entry in CHANGELOG.md (## [Unreleased]).\n"
    );
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The snapshot path of `crate_name`, relative to the workspace root.
pub fn snapshot_path(crate_name: &str) -> String {
    format!("{SNAPSHOT_DIR}/{crate_name}.txt")
}

/// The `## [Unreleased]` section of a changelog (up to the next `## ` heading); empty if there is none.
pub fn unreleased_section(changelog: &str) -> &str {
    let Some(start) = changelog.find(UNRELEASED) else {
        return "";
    };
    let body = &changelog[start + UNRELEASED.len()..];
    let end = body.find("\n## ").map_or(body.len(), |at| at + 1);
    body[..end].trim()
}

/// The lines of `after` not in `before` (`+`) and of `before` not in `after` (`-`).
pub fn line_diff(before: &str, after: &str) -> Vec<String> {
    let old: std::collections::BTreeSet<&str> = before.lines().collect();
    let new: std::collections::BTreeSet<&str> = after.lines().collect();
    old.difference(&new)
        .map(|line| format!("- {line}"))
        .chain(new.difference(&old).map(|line| format!("+ {line}")))
        .collect()
}

/// What the check found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Crates whose committed snapshot is not what the sources give, with the differing lines.
    pub stale: BTreeMap<String, Vec<String>>,
    /// Crates whose API differs from the base revision's snapshot, with the differing lines.
    pub changed: BTreeMap<String, Vec<String>>,
    /// Whether the Unreleased section differs from the base revision's.
    pub changelog_changed: bool,
}

impl Findings {
    /// The failure message, or `None` when the check passes.
    pub fn failure(&self) -> Option<String> {
        let mut parts = Vec::new();
        for (name, diff) in &self.stale {
            parts.push(format!(
                "{} is out of date: the public API of {name} changed ({} line(s)):\n  {}\nrun `cargo xtask api --write` \
                 and commit the snapshot with a CHANGELOG.md entry",
                snapshot_path(name),
                diff.len(),
                diff.join("\n  ")
            ));
        }
        if !self.changed.is_empty() && !self.changelog_changed {
            for (name, diff) in &self.changed {
                parts.push(format!(
                    "the public API of {name} changed since the base revision ({} line(s)):\n  {}",
                    diff.len(),
                    diff.join("\n  ")
                ));
            }
            parts.push(format!(
                "the public API changed but the {UNRELEASED} section of {CHANGELOG} did not: add an entry under \
                 Added/Changed/Removed, with a **Migration** note for a breaking change"
            ));
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

async fn cargo_metadata(interrupt: &Interrupt) -> anyhow::Result<Value> {
    let mut command = crate::process::cargo();
    command
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let output = tokio::select! {
        output = command.output() => output.context("cannot run `cargo metadata`")?,
        () = interrupt.interrupted() => return Err(Interrupted.into()),
    };
    if !output.status.success() {
        bail!("`cargo metadata` failed with {}", output.status);
    }
    serde_json::from_slice(&output.stdout).context("`cargo metadata` printed invalid JSON")
}

/// The current snapshot text of every published library crate.
async fn current_snapshots(interrupt: &Interrupt) -> anyhow::Result<BTreeMap<String, String>> {
    let metadata = cargo_metadata(interrupt).await?;
    let mut snapshots = BTreeMap::new();
    for library in library_crates(&metadata)? {
        let lines = extract::crate_api(&library.lib_rs)
            .with_context(|| format!("reading the public API of {}", library.name))?;
        snapshots.insert(library.name.clone(), snapshot_text(&library.name, &lines));
    }
    Ok(snapshots)
}

fn committed(root: &Path, relative: &str) -> String {
    std::fs::read_to_string(root.join(relative)).unwrap_or_default()
}

/// Runs `cargo xtask api`.
///
/// # Errors
/// If a crate cannot be read, a snapshot cannot be written, or (without `--write`) a snapshot is out of date.
pub async fn run(args: &ApiArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let root = paths::workspace_root();
    let snapshots = current_snapshots(interrupt).await?;
    let mut stale = Vec::new();
    for (name, text) in &snapshots {
        let relative = snapshot_path(name);
        if committed(&root, &relative) == *text {
            continue;
        }
        if args.write {
            let path = root.join(&relative);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {relative}");
        } else {
            stale.push(relative);
        }
    }
    if !stale.is_empty() {
        bail!(
            "out of date: {} (run `cargo xtask api --write`)",
            stale.join(", ")
        );
    }
    eprintln!(
        "api: the snapshots of {} crates are current",
        snapshots.len()
    );
    Ok(())
}

/// `git` in the workspace root; `None` when it fails.
async fn git(args: &[&str]) -> Option<String> {
    let output = tokio::process::Command::new("git")
        .args(args)
        .current_dir(paths::workspace_root())
        .stderr(std::process::Stdio::null())
        .output()
        .await
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The revision to compare with: `--base`, else the merge base of HEAD with origin/main or main.
async fn base_revision(args: &ChangelogCheckArgs) -> anyhow::Result<Option<String>> {
    if let Some(base) = &args.base {
        let resolved = git(&["rev-parse", "--verify", &format!("{base}^{{commit}}")])
            .await
            .with_context(|| format!("--base {base} is not a commit of this repository"))?;
        return Ok(Some(resolved.trim().to_owned()));
    }
    for main in ["origin/main", "main"] {
        if let Some(base) = git(&["merge-base", "HEAD", main]).await {
            return Ok(Some(base.trim().to_owned()));
        }
    }
    Ok(None)
}

/// Runs `cargo xtask changelog-check`.
///
/// # Errors
/// If a snapshot is out of date, or the public API changed since the base without a CHANGELOG entry.
pub async fn check(args: &ChangelogCheckArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let root = paths::workspace_root();
    let snapshots = current_snapshots(interrupt).await?;
    let mut findings = Findings::default();
    for (name, text) in &snapshots {
        let relative = snapshot_path(name);
        let diff = line_diff(&committed(&root, &relative), text);
        if !diff.is_empty() {
            findings.stale.insert(name.clone(), diff);
        }
    }
    match base_revision(args).await? {
        Some(base) => {
            let short = &base[..base.len().min(12)];
            for (name, text) in &snapshots {
                // A crate without a snapshot at the base (new, or before the snapshots existed) is not compared.
                let Some(before) = git(&["show", &format!("{base}:{}", snapshot_path(name))]).await
                else {
                    continue;
                };
                let diff = line_diff(&before, text);
                if !diff.is_empty() {
                    findings.changed.insert(name.clone(), diff);
                }
            }
            let before = git(&["show", &format!("{base}:{CHANGELOG}")])
                .await
                .unwrap_or_default();
            let now = committed(&root, CHANGELOG);
            findings.changelog_changed = unreleased_section(&before) != unreleased_section(&now);
            eprintln!(
                "changelog-check: compared with {short}: {} crate(s) changed their public API, the Unreleased \
                 section {}",
                findings.changed.len(),
                if findings.changelog_changed {
                    "changed"
                } else {
                    "did not change"
                }
            );
        }
        None => eprintln!(
            "changelog-check: no base revision (no git history, no origin/main or main): only the snapshots are \
             checked"
        ),
    }
    if let Some(message) = findings.failure() {
        bail!("{message}");
    }
    eprintln!(
        "changelog-check: the public API of {} crates matches docs/api",
        snapshots.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unreleased_section_ends_at_the_next_release() {
        let changelog = "# Changelog\n\nintro\n\n## [Unreleased]\n\n### Added\n- a prelude\n\n## [0.1.0] - 2026-11-21\n\n- first\n";
        assert_eq!(unreleased_section(changelog), "### Added\n- a prelude");
        assert_eq!(unreleased_section("## [Unreleased]\n"), "");
        assert_eq!(unreleased_section("# Changelog\n"), "");
        let longer = changelog.replace("- a prelude", "- a prelude\n- more");
        assert_ne!(unreleased_section(changelog), unreleased_section(&longer));
        let older = changelog.replace("- first", "- first, reworded");
        assert_eq!(unreleased_section(changelog), unreleased_section(&older));
    }

    #[test]
    fn diffs_name_removed_and_added_lines() {
        let diff = line_diff("a\nb\nc\n", "a\nc\nd\n");
        assert_eq!(diff, ["- b", "+ d"]);
        assert!(line_diff("x\n", "x\n").is_empty());
    }

    #[test]
    fn an_api_change_needs_an_unreleased_entry() {
        let mut findings = Findings::default();
        assert_eq!(findings.failure(), None);
        findings.changed.insert(
            "ccm-core".to_owned(),
            vec!["+ crate: pub fn new()".to_owned()],
        );
        let message = findings.failure().expect("fails without an entry");
        assert!(message.contains("ccm-core"), "{message}");
        assert!(message.contains("[Unreleased]"), "{message}");
        findings.changelog_changed = true;
        assert_eq!(findings.failure(), None, "an entry was added");
        findings.stale.insert(
            "ccm-app".to_owned(),
            vec!["- crate: pub fn old()".to_owned()],
        );
        let message = findings.failure().expect("a stale snapshot fails anyway");
        assert!(message.contains("cargo xtask api --write"), "{message}");
        assert!(message.contains("docs/api/ccm-app.txt"), "{message}");
    }

    #[test]
    fn published_library_crates_come_from_the_metadata() {
        let metadata = serde_json::json!({"packages": [
            {"name": "ccm-core", "publish": null, "targets": [
                {"kind": ["lib"], "src_path": "/w/ccm-core/src/lib.rs"},
                {"kind": ["test"], "src_path": "/w/ccm-core/tests/a.rs"}]},
            {"name": "xtask", "publish": [], "targets": [{"kind": ["bin"], "src_path": "/w/xtask/src/main.rs"}]},
            {"name": "examples", "publish": [], "targets": [{"kind": ["lib"], "src_path": "/w/examples/src/lib.rs"}]},
            {"name": "ccm-app", "publish": null, "targets": [{"kind": ["lib"], "src_path": "/w/ccm-app/src/lib.rs"}]}
        ]});
        let crates = library_crates(&metadata).expect("crates");
        assert_eq!(
            crates,
            [
                LibraryCrate {
                    name: "ccm-app".into(),
                    lib_rs: "/w/ccm-app/src/lib.rs".into()
                },
                LibraryCrate {
                    name: "ccm-core".into(),
                    lib_rs: "/w/ccm-core/src/lib.rs".into()
                },
            ]
        );
    }

    #[test]
    fn the_workspace_s_own_crates_parse() {
        let root = paths::workspace_root();
        let lines = extract::crate_api(&root.join("ccm-core").join("src").join("lib.rs"))
            .expect("ccm-core parses");
        assert!(
            lines.iter().any(|l| l.contains("pub trait CloudProvider")),
            "the provider trait is public API"
        );
        assert!(lines.iter().all(|l| !l.contains("#[cfg(test)]")));
    }
}
