//! `cargo xtask manifests [--check]`: regenerate (or verify) the generated files — the deployment manifests
//! under `deploy/`, the Helm chart's default cloud config `deploy/chart/files/cloud-config/` and the
//! config-file schema `docs/schema/ccm-config.schema.json`.
//!
//! The generator is the `manifests` example of the `examples` crate (the manifests are built from
//! `ccm_app::deploy`), so xtask itself stays free of the SDK crates.

use clap::Args;

use crate::paths;
use crate::process::{self, Interrupt};

/// Arguments of `cargo xtask manifests`.
#[derive(Debug, Args, Default)]
pub struct ManifestsArgs {
    /// Only check that the committed files are current (fails if not).
    #[arg(long)]
    pub check: bool,
}

/// The `cargo` arguments that run the generator.
pub fn generator_args(args: &ManifestsArgs) -> Vec<String> {
    let mut argv: Vec<String> = [
        "run",
        "--quiet",
        "-p",
        "examples",
        "--example",
        "manifests",
        "--",
        "--root",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    argv.push(paths::workspace_root().display().to_string());
    if args.check {
        argv.push("--check".to_owned());
    }
    argv
}

/// Runs `cargo xtask manifests`.
///
/// # Errors
/// If the generator cannot be built or run, or (with `--check`) a file is stale.
pub async fn run(args: &ManifestsArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let mut command = process::cargo();
    command.args(generator_args(args));
    process::run(command, interrupt, "").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_command_line() {
        let argv = generator_args(&ManifestsArgs { check: true });
        assert_eq!(
            &argv[..6],
            ["run", "--quiet", "-p", "examples", "--example", "manifests"]
        );
        assert_eq!(argv.last().map(String::as_str), Some("--check"));
        let argv = generator_args(&ManifestsArgs::default());
        assert!(!argv.contains(&"--check".to_owned()));
        assert!(argv.contains(&"--root".to_owned()));
    }
}
