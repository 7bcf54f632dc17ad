//! `cargo xtask bench ...`: benchmarks that print the SDK's figures side by side with the Go
//! reference CCM (`k8s.io/cloud-provider` with its fake cloud), each run against a fresh local
//! control plane. They are measurements, not tests: nothing here runs in `cargo xtask ci`, and
//! nothing asserts a time. `docs/benchmarks.md` has the method and recorded results.
//!
//! - `bench nodes`: node initialization (time, API writes, cloud calls, memory, CPU).
//! - `bench lbs`: load balancers (time to ingress, `UpdateLoadBalancer` calls after a node burst).
//! - `bench aws`: node initialization through the EC2 emulator with `aws-ccm`, bulk lookups on and off.
//! - `bench budget` (in `bench_budget.rs`): cloud calls per period and per node, for sizing the cloud-call
//!   budget (Rust only: the Go reference has no budget, bulk calls or cache).

pub(crate) mod aws;
mod identity;
pub(crate) mod lbs;
pub(crate) mod nodes;
mod probe;
mod prom;
mod skeleton;
pub(crate) mod support;

use clap::{Args, Subcommand};

use crate::process::Interrupt;

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Node initialization: N tainted Nodes, the Rust reference CCM vs the Go reference CCM
    /// (--controllers=cloud-node), at the default and at raised API limits.
    Nodes(nodes::NodesArgs),
    /// Load balancers: time for N LoadBalancer Services to get an ingress, then the
    /// UpdateLoadBalancer calls after a burst of node changes, Rust vs Go (--controllers=service).
    Lbs(lbs::LbsArgs),
    /// The cloud-call budget: cloud calls per node initialization, address-sync period and lifecycle
    /// period, with and without native bulk calls and the instance cache (docs/cloud-budget.md).
    Budget(crate::bench_budget::BudgetArgs),
    /// Node initialization through a real cloud API: N EC2 emulator instances and tainted Nodes, aws-ccm
    /// (--controllers=cloud-node), with the provider's bulk lookups on and off.
    Aws(aws::AwsArgs),
}

/// Runs `cargo xtask bench ...`.
///
/// # Errors
/// Whatever the chosen benchmark reports.
pub async fn run(args: BenchArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Nodes(args) => nodes::run(&args, interrupt).await,
        BenchCommand::Lbs(args) => lbs::run(&args, interrupt).await,
        BenchCommand::Budget(args) => crate::bench_budget::run(&args, interrupt).await,
        BenchCommand::Aws(args) => aws::run(&args, interrupt).await,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::{Cli, Command};

    fn bench(argv: &[&str]) -> super::BenchArgs {
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let Command::Bench(args) = cli.command else {
            panic!("not the bench command");
        };
        args
    }

    #[test]
    fn nodes_defaults_follow_the_task() {
        let super::BenchCommand::Nodes(args) = bench(&["xtask", "bench", "nodes"]).command else {
            panic!("not nodes");
        };
        assert_eq!(args.nodes, 1000);
        assert_eq!(args.workers, [1, 10]);
        assert_eq!(
            args.common.implementations,
            [
                super::support::Implementation::Rust,
                super::support::Implementation::Go
            ]
        );
        assert_eq!(
            args.common.limits,
            [
                super::support::LimitMode::Shipped,
                super::support::LimitMode::Default,
                super::support::LimitMode::Raised
            ]
        );
    }

    #[test]
    fn lbs_options_parse() {
        let super::BenchCommand::Lbs(args) = bench(&[
            "xtask",
            "bench",
            "lbs",
            "--services",
            "50",
            "--node-changes",
            "10",
            "--impl",
            "go",
            "--limits",
            "raised",
            "--workers",
            "1,4",
            "--rust-arg=--cloud-api-qps=0",
            "--rust-arg",
            "--v=2",
            "--burst-interval-ms",
            "50",
        ])
        .command
        else {
            panic!("not lbs");
        };
        assert_eq!(args.services, 50);
        assert_eq!(args.node_changes, 10);
        assert_eq!(args.workers, [1, 4]);
        assert_eq!(args.burst_interval_ms, 50);
        assert_eq!(args.common.rust_args, ["--cloud-api-qps=0", "--v=2"]);
        assert!(args.common.go_args.is_empty());
        assert_eq!(
            args.common.implementations,
            [super::support::Implementation::Go]
        );
        assert_eq!(args.common.limits, [super::support::LimitMode::Raised]);
    }

    #[test]
    fn bad_values_are_rejected_by_the_parser() {
        for argv in [
            &["xtask", "bench", "nodes", "--nodes", "0"][..],
            &["xtask", "bench", "nodes", "--workers", "1,0"],
            &["xtask", "bench", "nodes", "--impl", "java"],
            &["xtask", "bench", "lbs", "--services", "3000"],
            &["xtask", "bench", "lbs", "--limits", "huge"],
        ] {
            assert!(Cli::try_parse_from(argv).is_err(), "{argv:?} was accepted");
        }
    }
}
