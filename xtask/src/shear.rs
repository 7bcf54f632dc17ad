//! `cargo xtask shear`: dependencies that a workspace member declares but never uses, or declares in the
//! wrong table, found by [cargo-shear](https://github.com/Boshen/cargo-shear) at a pinned version.
//!
//! cargo-shear reads the sources (it builds nothing) and reports, for every workspace member:
//!
//! - a dependency no Rust file names;
//! - a normal dependency that only tests use (it belongs in `[dev-dependencies]`);
//! - a `[workspace.dependencies]` entry that no member inherits;
//! - a Rust file no target includes (warnings fail the check too: `--deny-warnings`).
//!
//! The tool is installed by this command when missing (or at another version) with
//! `cargo install --locked --root <target dir>/tools cargo-shear --version <pinned>`, next to the other
//! tools xtask installs (`<target dir>/tools/bin`): a clean clone needs only the crate registry.
//!
//! A dependency that is needed but never named in code (listed only to enable a feature of a crate further
//! down) is ignored in the member's `Cargo.toml`, with a comment saying why, as cargo-shear expects:
//!
//! ```toml
//! [package.metadata.cargo-shear]
//! # k8s-openapi is listed only to select the Kubernetes API version (feature v1_36).
//! ignored = ["k8s-openapi"]
//! ```
//!
//! and a file that only `#[path = "..."]` includes (cargo-shear does not follow it) in `ignored-paths` (as in
//! `examples/Cargo.toml`).

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use crate::paths;
use crate::process::{self, Interrupt, Stopwatch};

/// The cargo-shear version the project runs (bump it here; the next run installs it). 1.14.0's locked
/// dependencies (rust-analyzer's parser crates) need a newer rustc than the workspace's toolchain.
pub const CARGO_SHEAR_VERSION: &str = "1.13.0";

/// Arguments of `cargo xtask shear`.
#[derive(Debug, Args, Default)]
pub struct ShearArgs {
    /// Let cargo-shear remove the unused dependencies from the manifests (`cargo shear --fix`) instead of
    /// failing on them.
    #[arg(long)]
    pub fix: bool,
}

/// `<target dir>/tools`, the `--root` of `cargo install`.
pub fn tools_root() -> PathBuf {
    paths::target_dir().join("tools")
}

/// The installed cargo-shear binary.
pub fn cargo_shear_path() -> PathBuf {
    paths::tools_bin_dir().join("cargo-shear")
}

/// Whether `cargo install`'s record of installed packages (`<root>/.crates.toml`) lists cargo-shear at `version`
/// (the binary itself prints `Version: dev`).
pub fn records_version(crates_toml: &str, version: &str) -> bool {
    let wanted = format!("\"cargo-shear {version} (");
    crates_toml.lines().any(|line| line.starts_with(&wanted))
}

/// Installs the pinned cargo-shear into `<target dir>/tools` unless that version is there already; returns
/// the binary's path.
///
/// # Errors
/// If `cargo install` fails (it needs the crate registry), or on Ctrl-C.
pub async fn ensure_installed(interrupt: &Interrupt) -> anyhow::Result<PathBuf> {
    let binary = cargo_shear_path();
    let record = std::fs::read_to_string(tools_root().join(".crates.toml")).unwrap_or_default();
    if binary.is_file() && records_version(&record, CARGO_SHEAR_VERSION) {
        return Ok(binary);
    }
    let stopwatch = Stopwatch::start();
    let mut install = process::cargo();
    install
        .args(["install", "--locked", "--root"])
        .arg(tools_root())
        .args(["cargo-shear", "--version", CARGO_SHEAR_VERSION]);
    process::run(install, interrupt, "").await?;
    eprintln!(
        "installed cargo-shear {CARGO_SHEAR_VERSION} in {}",
        process::seconds(stopwatch.elapsed())
    );
    if !binary.is_file() {
        bail!(
            "`cargo install` succeeded but {} is missing",
            binary.display()
        );
    }
    Ok(binary)
}

/// Runs `cargo xtask shear`.
///
/// # Errors
/// If cargo-shear cannot be installed or run, or finds an unused or misplaced dependency.
pub async fn run(args: &ShearArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let binary = ensure_installed(interrupt).await?;
    // Run as cargo runs a subcommand: the subcommand's name first.
    let mut command = tokio::process::Command::new(&binary);
    command
        .args(["shear", "--deny-warnings"])
        .current_dir(paths::workspace_root())
        .env(
            "CARGO",
            std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
        );
    if args.fix {
        command.arg("--fix");
    }
    let shown = process::display_command(&command);
    let status = process::run_status(command, interrupt, "").await?;
    if !status.success() {
        bail!(
            "`{shown}` found unused or misplaced dependencies (see above): remove them, move them to the \
             table cargo-shear names, or, for a dependency needed only for its features, list it in \
             `[package.metadata.cargo-shear] ignored` of that crate with a comment saying why"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_version_is_read_from_cargo_install_s_record() {
        let record = "[v1]\n\"cargo-shear 1.13.0 (registry+https://example.invalid/index)\" = [\"cargo-shear\"]\n";
        assert!(records_version(record, "1.13.0"));
        assert!(!records_version(record, "1.13"));
        assert!(!records_version(record, "1.14.0"));
        assert!(!records_version("", "1.13.0"));
        assert!(!records_version(
            "[v1]\n\"other 1.13.0 (registry+x)\" = [\"other\"]\n",
            "1.13.0"
        ));
    }

    #[test]
    fn the_tool_lives_with_the_other_tools() {
        assert_eq!(
            cargo_shear_path(),
            tools_root().join("bin").join("cargo-shear")
        );
        assert!(cargo_shear_path().starts_with(paths::target_dir()));
    }
}
