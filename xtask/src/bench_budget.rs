//! `cargo xtask bench budget`: the cloud calls of the node controllers, for sizing a CCM's cloud-call budget
//! (`docs/cloud-budget.md`). Builds the control-plane binaries and the runner
//! (`examples --example bench-budget`), starts a local kube-apiserver + etcd, and runs the benchmark
//! against it: cloud calls per node initialization, per address-sync period and per lifecycle period, with and
//! without native bulk calls and the instance cache, for each node count (default 1,000 and 5,000).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context as _;
use ccm_testenv::controlplane::Supervision;
use clap::Args;

use crate::controlplane::{self, BuildArgs};
use crate::paths;
use crate::process::{self, Interrupt, Stopwatch};

/// The runner: an example of the `examples` crate.
const RUNNER: &str = "bench-budget";

/// Arguments of `cargo xtask bench budget`.
#[derive(Debug, Args, Default)]
pub struct BudgetArgs {
    /// Node counts to measure (repeatable); default 1000 and 5000.
    #[arg(long = "nodes", value_name = "N")]
    pub nodes: Vec<usize>,
    /// Percentage of the nodes that are NotReady (default 10).
    #[arg(long, value_name = "PERCENT")]
    pub not_ready_percent: Option<usize>,
    /// The cloud-call budgets to initialize through, repeatable: `fixed` (a token bucket of `--init-qps`),
    /// `adaptive` (the runtime's default), `none` (default: fixed).
    #[arg(long = "init-budget", value_name = "BUDGET")]
    pub init_budgets: Vec<String>,
    /// The rate of the `fixed` budget, calls per second, 0 = unlimited (default 45).
    #[arg(long, value_name = "QPS")]
    pub init_qps: Option<f64>,
    /// The burst of the `fixed` budget (default 40).
    #[arg(long, value_name = "N")]
    pub init_burst: Option<u32>,
    /// The fake cloud's quota during initialization, requests per second, 0 = none (default 50).
    #[arg(long, value_name = "RPS")]
    pub quota_rps: Option<f64>,
    /// The burst of that quota (default: the rate, rounded up).
    #[arg(long, value_name = "N")]
    pub quota_burst: Option<u32>,
    /// Initialization runs per budget, taking turns (default 1).
    #[arg(long, value_name = "N")]
    pub repeat: Option<usize>,
    /// Measure initialization only, not the address-sync and lifecycle periods.
    #[arg(long)]
    pub skip_periods: bool,
    /// Build and run the runner with optimizations.
    #[arg(long)]
    pub release: bool,
}

/// The runner's command-line arguments for `args`.
pub fn runner_args(args: &BudgetArgs) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    for n in &args.nodes {
        out.push("--nodes".into());
        out.push(n.to_string().into());
    }
    for budget in &args.init_budgets {
        out.push("--init-budget".into());
        out.push(budget.into());
    }
    let optional = [
        (
            "--not-ready-percent",
            args.not_ready_percent.map(|p| p.to_string()),
        ),
        ("--init-qps", args.init_qps.map(|q| q.to_string())),
        ("--init-burst", args.init_burst.map(|b| b.to_string())),
        ("--quota-rps", args.quota_rps.map(|q| q.to_string())),
        ("--quota-burst", args.quota_burst.map(|b| b.to_string())),
        ("--repeat", args.repeat.map(|r| r.to_string())),
    ];
    for (flag, value) in optional {
        if let Some(value) = value {
            out.push(flag.into());
            out.push(value.into());
        }
    }
    if args.skip_periods {
        out.push("--skip-periods".into());
    }
    out
}

fn runner_binary(release: bool) -> PathBuf {
    paths::target_dir()
        .join(if release { "release" } else { "debug" })
        .join("examples")
        .join(RUNNER)
}

/// Runs `cargo xtask bench budget`.
///
/// # Errors
/// If a build fails, the control plane does not start, or the benchmark fails.
pub async fn run(args: &BudgetArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    controlplane::build(&BuildArgs::default(), interrupt).await?;
    let mut build = process::cargo();
    build.args(["build", "-p", "examples", "--example", RUNNER]);
    if args.release {
        build.arg("--release");
    }
    process::run(build, interrupt, "").await?;

    let dir = paths::target_dir()
        .join("controlplane")
        .join(format!("bench-budget-{}", std::process::id()));
    let control_plane = controlplane::launch(&dir, Supervision::Watchdog, interrupt).await?;
    let stopwatch = Stopwatch::start();
    let mut runner = tokio::process::Command::new(runner_binary(args.release));
    runner
        .args(runner_args(args))
        .env("KUBECONFIG", &control_plane.env().kubeconfig);
    let result = process::run(runner, interrupt, "").await;
    let stopped = control_plane.stop();
    result.context("the budget benchmark failed")?;
    stopped.context("stopping the control plane")?;
    eprintln!(
        "budget benchmark finished in {}",
        process::seconds(stopwatch.elapsed())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: BudgetArgs,
    }

    #[test]
    fn arguments_reach_the_runner() {
        let args = Cli::try_parse_from([
            "budget",
            "--nodes",
            "1000",
            "--nodes",
            "5000",
            "--init-qps",
            "0",
            "--init-budget",
            "adaptive",
            "--init-budget",
            "none",
            "--quota-burst",
            "100",
            "--repeat",
            "3",
            "--skip-periods",
            "--release",
        ])
        .expect("parses")
        .args;
        assert!(args.release);
        let shown: Vec<String> = runner_args(&args)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            shown,
            [
                "--nodes",
                "1000",
                "--nodes",
                "5000",
                "--init-budget",
                "adaptive",
                "--init-budget",
                "none",
                "--init-qps",
                "0",
                "--quota-burst",
                "100",
                "--repeat",
                "3",
                "--skip-periods"
            ]
        );
        assert!(runner_binary(true).ends_with("release/examples/bench-budget"));
    }

    #[test]
    fn the_subcommand_is_wired() {
        crate::Cli::try_parse_from(["xtask", "bench", "budget", "--nodes", "10"])
            .expect("cargo xtask bench budget parses");
    }

    #[test]
    fn defaults_are_the_runners() {
        assert!(runner_args(&BudgetArgs::default()).is_empty());
        assert!(runner_binary(false).ends_with("debug/examples/bench-budget"));
    }
}
