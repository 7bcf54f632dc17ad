//! Writes (or, with `--check`, verifies) the generated files: `deploy/*.yaml` and
//! `docs/schema/ccm-config.schema.json`. Run by `cargo xtask manifests`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Generate the deployment manifests and the config-file schema.
#[derive(Debug, Parser)]
#[command(name = "manifests")]
struct Args {
    /// The workspace root.
    #[arg(long)]
    root: PathBuf,
    /// Only check that the committed files are current; exit 1 if not.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.check {
        let stale = examples::stale_files(&args.root);
        if stale.is_empty() {
            println!("generated files are current");
            return ExitCode::SUCCESS;
        }
        for path in &stale {
            eprintln!("stale: {path}");
        }
        eprintln!("run `cargo xtask manifests` and commit the result");
        return ExitCode::FAILURE;
    }
    match examples::write_generated(&args.root) {
        Ok(changed) if changed.is_empty() => {
            println!("generated files are current");
            ExitCode::SUCCESS
        }
        Ok(changed) => {
            for path in changed {
                println!("wrote {path}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("manifests: cannot write the generated files: {err}");
            ExitCode::FAILURE
        }
    }
}
