//! `cargo xtask e2e --scale`: the steady state at scale in the cluster in a box
//! (`ccm_testenv::cluster`). N kwok-simulated nodes heartbeat while one CCM runs; once it has
//! initialized every node and stopped writing, a window of `--duration` measures its CPU time,
//! peak RSS, API writes (from the API server's audit log, by the CCM's own user) and cloud calls
//! (`cloudprovider_api_requests_total` of its `/metrics`), per address-sync period
//! (`--node-status-update-frequency`). The Rust reference CCM runs first, then the Go reference CCM
//! in a fresh cluster of the same size; the table puts them side by side with issue 15's goals.
//! A measurement, not a test: it is not part of `cargo xtask ci` (docs/benchmarks.md).
//!
//! The end-to-end tests themselves are cargo tests (`cargo test -p examples --test cluster`).

mod figures;
mod scale;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use ccm_core::duration::GoDuration;
use clap::Args;

use crate::bench::support::Implementation;
use crate::process::Interrupt;

/// Arguments of `cargo xtask e2e`.
#[derive(Debug, Args)]
pub struct E2eArgs {
    /// The steady state at scale: N heartbeating nodes, the Rust CCM then the Go CCM, each in a
    /// fresh cluster in a box (the only mode; the end-to-end tests run as cargo tests).
    #[arg(long)]
    scale: bool,
    /// Nodes to register (kwok simulates their kubelets).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10000))]
    nodes: u32,
    /// The steady window measured after every node is initialized (a Go duration, e.g. 10m).
    #[arg(long, default_value = "10m")]
    duration: GoDuration,
    /// Both CCMs' --node-status-update-frequency: the address-sync period the figures are given per.
    #[arg(long, default_value = "5m")]
    node_status_update_frequency: GoDuration,
    /// The CCMs to run, comma-separated: rust, go.
    #[arg(long = "impl", value_enum, value_delimiter = ',', default_values_t = [Implementation::Rust, Implementation::Go])]
    implementations: Vec<Implementation>,
    /// Both CCMs' --controllers.
    #[arg(long, default_value = "cloud-node,cloud-node-lifecycle")]
    controllers: String,
    /// How long the CCM's API writes must have stopped before the window begins, in seconds.
    #[arg(long, default_value_t = 30)]
    quiet_seconds: u64,
    /// The longest the cluster's start, the nodes' initialization and the settling may each take,
    /// in seconds.
    #[arg(long, default_value_t = 1200)]
    timeout_seconds: u64,
    /// Let the Rust CCM's fake provider answer InstancesV2 bulk calls natively (inventory
    /// `supportsBulk: true`); Go's fake has no bulk calls. Off by default: one call per node, like Go.
    #[arg(long)]
    rust_bulk: bool,
    /// Run this reference-ccm binary instead of building `examples --example reference-ccm`
    /// (release).
    #[arg(long, value_name = "PATH")]
    rust_ccm: Option<PathBuf>,
    /// Use the binaries already built (control plane, cluster components, reference-ccm).
    #[arg(long)]
    no_build: bool,
}

impl E2eArgs {
    fn validate(&self) -> anyhow::Result<()> {
        if !self.scale {
            bail!(
                "give --scale (the steady state at scale); the end-to-end tests run with \
                 `cargo xtask test -p examples -- cluster`"
            );
        }
        if self.implementations.is_empty() {
            bail!("--impl needs at least one of rust, go");
        }
        if self.duration.get() < Duration::from_secs(1) {
            bail!("--duration must be at least 1s");
        }
        if self.node_status_update_frequency.get().is_zero() {
            bail!("--node-status-update-frequency must be greater than 0s");
        }
        if self.timeout_seconds == 0 {
            bail!("--timeout-seconds must be greater than 0");
        }
        if self.controllers.trim().is_empty() {
            bail!("--controllers needs at least one controller, e.g. cloud-node");
        }
        Ok(())
    }
}

/// Runs `cargo xtask e2e`.
///
/// # Errors
/// Bad options, a failed build, a missing binary, or a failed run (after the table).
pub async fn run(args: &E2eArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    args.validate()?;
    scale::run(args, interrupt).await
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::{Cli, Command};

    fn e2e(argv: &[&str]) -> super::E2eArgs {
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let Command::E2e(args) = cli.command else {
            panic!("not the e2e command");
        };
        args
    }

    #[test]
    fn defaults_follow_the_issue() {
        let args = e2e(&["xtask", "e2e", "--scale"]);
        assert!(args.validate().is_ok());
        assert_eq!(args.nodes, 1000);
        assert_eq!(args.duration.get(), std::time::Duration::from_secs(600));
        assert_eq!(
            args.node_status_update_frequency.get(),
            std::time::Duration::from_secs(300)
        );
        assert_eq!(
            args.implementations,
            [super::Implementation::Rust, super::Implementation::Go]
        );
        assert_eq!(args.controllers, "cloud-node,cloud-node-lifecycle");
    }

    #[test]
    fn options_parse() {
        let args = e2e(&[
            "xtask",
            "e2e",
            "--scale",
            "--nodes",
            "300",
            "--duration",
            "3m",
            "--node-status-update-frequency",
            "1m",
            "--impl",
            "go",
            "--no-build",
            "--rust-bulk",
        ]);
        assert!(args.validate().is_ok());
        assert_eq!(args.nodes, 300);
        assert_eq!(args.duration.get(), std::time::Duration::from_secs(180));
        assert_eq!(
            args.node_status_update_frequency.get(),
            std::time::Duration::from_secs(60)
        );
        assert_eq!(args.implementations, [super::Implementation::Go]);
        assert!(args.no_build);
        assert!(args.rust_bulk);
        assert!(!e2e(&["xtask", "e2e", "--scale"]).rust_bulk);
    }

    #[test]
    fn bad_values_are_rejected() {
        for argv in [
            &["xtask", "e2e", "--scale", "--nodes", "0"][..],
            &["xtask", "e2e", "--scale", "--duration", "10"],
            &["xtask", "e2e", "--scale", "--duration", "-1m"],
            &["xtask", "e2e", "--scale", "--impl", "java"],
        ] {
            assert!(Cli::try_parse_from(argv).is_err(), "{argv:?} was accepted");
        }
        let message = |argv: &[&str]| e2e(argv).validate().expect_err("rejected").to_string();
        assert!(message(&["xtask", "e2e"]).contains("--scale"));
        assert!(message(&["xtask", "e2e", "--scale", "--duration", "0s"]).contains("--duration"));
        assert!(
            message(&[
                "xtask",
                "e2e",
                "--scale",
                "--node-status-update-frequency",
                "0s"
            ])
            .contains("--node-status-update-frequency")
        );
        assert!(
            message(&["xtask", "e2e", "--scale", "--controllers", " "]).contains("--controllers")
        );
    }
}
