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
    let mut stale = match cargo_home() {
        Some(home) => overlay_extractions(&home.join("registry").join("src"))?,
        None => Vec::new(),
    };
    let fingerprints = crate::paths::target_dir()
        .join("debug")
        .join(".fingerprint");
    stale.extend(overlay_builds(&fingerprints, &members()?)?);
    for stale in stale {
        std::fs::remove_dir_all(&stale)
            .with_context(|| format!("removing the stale package build {}", stale.display()))?;
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

/// The members of the workspace, as listed in its `Cargo.toml` (each directory is named after its package).
///
/// # Errors
/// If the workspace's `Cargo.toml` cannot be read.
pub fn members() -> anyhow::Result<Vec<String>> {
    let path = crate::paths::workspace_root().join("Cargo.toml");
    let workspace =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(workspace
        .lines()
        .skip_while(|line| !line.starts_with("members"))
        .skip(1)
        .take_while(|line| !line.starts_with(']'))
        .map(|line| {
            line.trim()
                .trim_end_matches(',')
                .trim_matches('"')
                .to_owned()
        })
        .collect())
}

/// The fingerprints under `fingerprints` (`<target>/debug/.fingerprint`) of workspace members built from the
/// overlay registry while verifying: `<member>-<hash>` whose dep-info names no `.rs` file, which is how cargo
/// tracks a registry package (its sources are taken as immutable, so it is never rebuilt once built). Without
/// removing them, a later run at the same path would verify a crate against its dependencies' old builds and
/// report, for example, an item removed since as missing.
///
/// # Errors
/// If `fingerprints` exists but cannot be listed.
pub fn overlay_builds(fingerprints: &Path, members: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(fingerprints) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("listing {}", fingerprints.display())),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", fingerprints.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let member = name
            .rsplit_once('-')
            .is_some_and(|(package, _hash)| members.iter().any(|m| m == package));
        if member && tracks_no_source(&entry.path()) {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// Whether a fingerprint directory has a dep-info file (`dep-*`) and none of them names a `.rs` file.
fn tracks_no_source(dir: &Path) -> bool {
    let dep_infos: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|file| file.file_name().to_string_lossy().starts_with("dep-"))
        .filter_map(|file| std::fs::read(file.path()).ok())
        .collect();
    !dep_infos.is_empty()
        && !dep_infos
            .iter()
            .any(|info| info.windows(3).any(|w| w == b".rs"))
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
    fn only_the_members_built_from_the_overlay_are_stale() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        assert!(
            overlay_builds(&dir.path().join("absent"), &[])
                .unwrap()
                .is_empty()
        );
        let fingerprint = |name: &str, dep_info: &[u8]| {
            std::fs::create_dir_all(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("dep-lib-x"), dep_info).unwrap();
        };
        let registry = b"\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
        let path = b"\x01\x00\x00\x00\x01\x00\x00\x00\x00\x0asrc/lib.rs";
        fingerprint("ccm-core-e50f4c4b9680d6b5", registry);
        fingerprint("ccm-core-24adcbc2b5aeaa73", path);
        fingerprint("tokio-0123456789abcdef", registry);
        fingerprint("ccm-provider-fake-fedcba9876543210", registry);
        std::fs::create_dir_all(dir.path().join("ccm-app-00112233aabbccdd")).unwrap();
        let members = ["ccm-core".to_owned(), "ccm-provider-fake".to_owned()];
        assert_eq!(
            overlay_builds(dir.path(), &members).unwrap(),
            [
                dir.path().join("ccm-core-e50f4c4b9680d6b5"),
                dir.path().join("ccm-provider-fake-fedcba9876543210")
            ]
        );
    }

    #[test]
    fn unpublished_members_are_the_ones_marked_so() {
        let root = crate::paths::workspace_root();
        let members = members().expect("the workspace's members");
        assert!(members.len() > UNPUBLISHED.len(), "{members:?}");
        for member in members.iter().map(String::as_str) {
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
