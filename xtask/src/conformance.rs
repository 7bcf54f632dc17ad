//! `cargo xtask conformance`: the provider conformance run for the fake provider. Builds the control-plane
//! binaries and the runner (`ccm-conformance --example conformance-fake`), starts a local kube-apiserver + etcd,
//! and runs every contract clause and the controller scenarios (node initialization, node lifecycle, load
//! balancer, routes) with the real controllers, printing a pass/fail table for each. Fails if anything failed.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context as _;
use ccm_testenv::controlplane::Supervision;
use ccm_testenv::envfile;
use clap::Args;

use crate::controlplane::{self, BuildArgs};
use crate::paths;
use crate::process::{self, Interrupt, Stopwatch};

/// The runner example's name.
const RUNNER: &str = "conformance-fake";

/// Arguments of `cargo xtask conformance`.
#[derive(Debug, Args, Default)]
pub struct ConformanceArgs {
    /// Run only this controller scenario (repeatable): node-initialization, node-lifecycle, load-balancer,
    /// routes.
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    /// Fault rules for the provider the controllers use, e.g. `create=retry:2s*1; *=latency:50ms` (see
    /// docs/conformance.md).
    #[arg(long, value_name = "RULES")]
    pub faults: Option<String>,
    /// How long each awaited state of a scenario may take, in seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout_seconds: u64,
    /// Skip the contract clauses; run the controller scenarios only.
    #[arg(long)]
    pub no_contract: bool,
}

/// The runner's command-line arguments for `args`.
pub fn runner_args(args: &ConformanceArgs) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    for scenario in &args.scenarios {
        out.push("--scenario".into());
        out.push(scenario.into());
    }
    if let Some(faults) = &args.faults {
        out.push("--faults".into());
        out.push(faults.into());
    }
    out.push("--timeout-seconds".into());
    out.push(args.timeout_seconds.to_string().into());
    if args.no_contract {
        out.push("--no-contract".into());
    }
    out
}

fn runner_binary() -> PathBuf {
    paths::target_dir()
        .join("debug")
        .join("examples")
        .join(RUNNER)
}

/// Runs `cargo xtask conformance`.
///
/// # Errors
/// If a build fails, the control plane does not start, or a clause or scenario fails.
pub async fn run(args: &ConformanceArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    controlplane::build(&BuildArgs::default(), interrupt).await?;
    let mut build = process::cargo();
    build.args(["build", "-p", "ccm-conformance", "--example", RUNNER]);
    process::run(build, interrupt, "").await?;

    let dir = paths::target_dir()
        .join("controlplane")
        .join(format!("conformance-{}", std::process::id()));
    let control_plane = controlplane::launch(&dir, Supervision::Watchdog, interrupt).await?;
    let stopwatch = Stopwatch::start();
    let mut runner = tokio::process::Command::new(runner_binary());
    runner
        .args(runner_args(args))
        .env(envfile::ENV_VAR, control_plane.env_file_path());
    let result = process::run(runner, interrupt, "").await;
    let stopped = control_plane.stop();
    result.context("the conformance run failed (see the tables above)")?;
    stopped.context("stopping the control plane")?;
    eprintln!(
        "conformance run passed in {}",
        process::seconds(stopwatch.elapsed())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[test]
    fn arguments_reach_the_runner() {
        let cli = crate::Cli::try_parse_from([
            "xtask",
            "conformance",
            "--scenario",
            "routes",
            "--scenario",
            "load-balancer",
            "--faults",
            "create=retry:2s*1",
            "--timeout-seconds",
            "30",
            "--no-contract",
        ])
        .expect("parses");
        let crate::Command::Conformance(args) = cli.command else {
            panic!("not the conformance command");
        };
        let shown: Vec<String> = runner_args(&args)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            shown,
            [
                "--scenario",
                "routes",
                "--scenario",
                "load-balancer",
                "--faults",
                "create=retry:2s*1",
                "--timeout-seconds",
                "30",
                "--no-contract"
            ]
        );
    }

    #[test]
    fn defaults_run_everything() {
        let shown: Vec<String> = runner_args(&ConformanceArgs {
            timeout_seconds: 60,
            ..Default::default()
        })
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
        assert_eq!(shown, ["--timeout-seconds", "60"]);
        assert!(runner_binary().ends_with("debug/examples/conformance-fake"));
    }
}
