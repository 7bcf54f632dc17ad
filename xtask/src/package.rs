//! `cargo xtask package`: `cargo package` of every library crate of the workspace, interdependent crates
//! resolved against each other (cargo packages them in dependency order with a local overlay registry), each
//! package verified by building it from its `.crate` file.
//!
//! Not packaged, because they are never published (`publish = false`): [`UNPUBLISHED`].

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use crate::process::{self, Interrupt};

/// The workspace members that are not libraries for vendors: `examples` (the reference CCM, benchmarks,
/// generators), `ccm-provider-aws` (an example provider on the AWS SDK, whose compile time stays out of
/// packaging) and `xtask` (this tool).
pub const UNPUBLISHED: &[&str] = &["examples", "ccm-provider-aws", "xtask"];

/// Arguments of `cargo xtask package`.
#[derive(Debug, Args, Default)]
pub struct PackageArgs {
    /// Skip building each package from its `.crate` file (faster; only checks the metadata and file lists).
    #[arg(long)]
    pub no_verify: bool,
    /// Package even with uncommitted changes in the working tree.
    #[arg(long)]
    pub allow_dirty: bool,
}

/// The `cargo` arguments.
pub fn cargo_args(args: &PackageArgs) -> Vec<String> {
    let mut argv = vec!["package".to_owned(), "--workspace".to_owned()];
    for name in UNPUBLISHED {
        argv.push("--exclude".to_owned());
        argv.push((*name).to_owned());
    }
    if args.no_verify {
        argv.push("--no-verify".to_owned());
    }
    if args.allow_dirty {
        argv.push("--allow-dirty".to_owned());
    }
    argv
}

/// Runs `cargo xtask package`.
///
/// # Errors
/// If `cargo package` fails (missing metadata, a file outside the package, a package that does not build).
pub async fn run(args: &PackageArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    if let Some(home) = cargo_home() {
        for stale in overlay_extractions(&home.join("registry").join("src"))? {
            std::fs::remove_dir_all(&stale).with_context(|| {
                format!("removing the stale package sources {}", stale.display())
            })?;
        }
    }
    let mut command = process::cargo();
    command.args(cargo_args(args));
    process::run(command, interrupt, "").await
}

/// `$CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
}

/// The directories under `registry_src` where cargo extracted the packages of a local overlay registry (named
/// `-<hash>`: the overlay has no name, and the hash depends only on its path).
///
/// `cargo package` verifies each crate against the others' `.crate` files through such an overlay and extracts
/// them there, but never extracts a name and version again once present: after the sources changed without a
/// version bump, a later run from a checkout at the same path would verify against the old sources. So every
/// run starts without them (they are re-extracted in seconds).
///
/// # Errors
/// If `registry_src` exists but cannot be listed.
pub fn overlay_extractions(registry_src: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(registry_src) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => {
            return Err(err).with_context(|| format!("listing {}", registry_src.display()));
        }
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", registry_src.display()))?;
        let overlay = entry.file_name().to_string_lossy().starts_with('-');
        if overlay && entry.path().is_dir() {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_every_library_and_verifies_by_default() {
        let argv = cargo_args(&PackageArgs::default());
        assert_eq!(
            argv,
            [
                "package",
                "--workspace",
                "--exclude",
                "examples",
                "--exclude",
                "ccm-provider-aws",
                "--exclude",
                "xtask"
            ]
        );
        let argv = cargo_args(&PackageArgs {
            no_verify: true,
            allow_dirty: true,
        });
        assert!(argv.ends_with(&["--no-verify".to_owned(), "--allow-dirty".to_owned()]));
    }

    /// The members left out are exactly the ones marked `publish = false`, and every other member has the
    /// metadata a published crate needs.
    #[test]
    fn only_the_overlay_extractions_are_stale() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        assert!(
            overlay_extractions(&dir.path().join("absent"))
                .unwrap()
                .is_empty()
        );
        for name in [
            "-22c3805da5a543b4",
            "index.crates.io-1949cf8c6b5b557f",
            "-484b8990b521de4b",
        ] {
            std::fs::create_dir_all(dir.path().join(name).join("ccm-core-0.1.0")).unwrap();
        }
        std::fs::write(dir.path().join("-not-a-dir"), "").unwrap();
        assert_eq!(
            overlay_extractions(dir.path()).unwrap(),
            [
                dir.path().join("-22c3805da5a543b4"),
                dir.path().join("-484b8990b521de4b")
            ]
        );
    }

    #[test]
    fn unpublished_members_are_the_ones_marked_so() {
        let root = crate::paths::workspace_root();
        let workspace = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
        let members: Vec<&str> = workspace
            .lines()
            .skip_while(|line| !line.starts_with("members"))
            .skip(1)
            .take_while(|line| !line.starts_with(']'))
            .map(|line| line.trim().trim_end_matches(',').trim_matches('"'))
            .collect();
        assert!(members.len() > UNPUBLISHED.len(), "{members:?}");
        for member in members {
            let manifest =
                std::fs::read_to_string(root.join(member).join("Cargo.toml")).expect("manifest");
            let unpublished = manifest
                .lines()
                .any(|line| line.trim() == "publish = false");
            assert_eq!(
                unpublished,
                UNPUBLISHED.contains(&member),
                "{member}: publish = false exactly for the members xtask package leaves out"
            );
            if !unpublished {
                for key in [
                    "description",
                    "license",
                    "repository",
                    "documentation",
                    "readme",
                    "keywords",
                    "categories",
                ] {
                    assert!(
                        manifest.lines().any(|line| line.starts_with(key)),
                        "{member} has no `{key}`"
                    );
                }
                assert!(
                    root.join(member).join("README.md").is_file(),
                    "{member}/README.md"
                );
                assert!(
                    root.join(member).join("LICENSE").is_file(),
                    "{member}/LICENSE"
                );
            }
        }
    }
}
