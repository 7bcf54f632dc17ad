//! Project automation, run as `cargo xtask <command>` (see `.cargo/config.toml`).
//!
//! - `controlplane build|start|stop`: the local kube-apiserver + etcd for tests
//!   (docs/control-plane.md).
//! - `cluster up|down`: the cluster in a box (scheduler, controller-manager, kwok nodes, reference CCM).
//! - `test`: the workspace's tests against one shared control plane.
//! - `ci`: everything CI checks (fmt, unused dependencies, the CHANGELOG check, clippy, docs, packaging,
//!   control-plane build, tests, conformance, image).
//! - `api --write`, `changelog-check`: the public API snapshots (`docs/api`) and the check that a public API
//!   change comes with a CHANGELOG entry.
//! - `shear`: dependencies that a workspace member declares but never uses (cargo-shear, pinned).
//! - `image`: the container image of the reference CCM as an OCI layout (docs/deployment.md).
//! - `package`: `cargo package` of every library crate (docs/deployment.md).
//! - `new-provider NAME --dir DIR`: a provider crate to start from (docs/vendor-guide.md).
//! - `bench nodes|lbs`: benchmarks side by side with the Go reference CCM (docs/benchmarks.md).
//! - `e2e --scale`: the steady state of N heartbeating nodes in the cluster in a box, Rust vs Go
//!   (docs/benchmarks.md).
//! - `loc`: plumbing and decision lines of each controller crate, `--runtime` the runtime's size.
//! - `chaos`: fault scenarios proving from the audit log that there were never two leaders
//!   (docs/reliability.md).
//!
//! Each command lives in its own module; add new ones (benchmarks, manifests, ...) the same way:
//! an `Args` struct, an async `run`, and a variant in [`Command`].

mod api;
mod bench;
mod bench_budget;
mod chaos;
mod ci;
mod cluster;
mod conformance;
mod controlplane;
mod demo;
mod e2e;
mod gobuild;
mod image;
mod loc;
mod manifests;
mod new_provider;
mod package;
mod paths;
mod process;
mod shear;
mod test;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::process::{INTERRUPTED_EXIT_CODE, Interrupt, Interrupted};

/// Project automation for the CCM SDK workspace.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build, start or stop the local control plane (kube-apiserver + etcd).
    Controlplane(controlplane::ControlPlaneArgs),
    /// Run the workspace's tests against one shared local control plane.
    Test(test::TestArgs),
    /// Start (`up`) or stop (`down`) the cluster in a box: the control plane plus kube-scheduler,
    /// kube-controller-manager, kwok-simulated nodes and the reference CCM.
    Cluster(cluster::ClusterArgs),
    /// Run every CI check: fmt, unused dependencies, the CHANGELOG check, clippy, docs, packaging, control-plane
    /// build, tests, conformance, image.
    Ci(ci::CiArgs),
    /// Find dependencies that a workspace member declares but never uses, or declares in the wrong table
    /// (cargo-shear at the pinned version, installed into target/tools when missing).
    Shear(shear::ShearArgs),
    /// Write (--write) or check the public API snapshots of the library crates (`docs/api/<crate>.txt`).
    Api(api::ApiArgs),
    /// Fail when a public API changed without a CHANGELOG.md entry (`## [Unreleased]`), or a snapshot in docs/api
    /// is out of date.
    ChangelogCheck(api::ChangelogCheckArgs),
    /// Run the reference CCM against a local control plane and watch it initialize nodes and provision a load
    /// balancer.
    Demo(demo::DemoArgs),
    /// Regenerate the deployment manifests (deploy/, with the chart's default cloud config) and the config-file
    /// schema; --check verifies them.
    Manifests(manifests::ManifestsArgs),
    /// Run the provider conformance suite and the controller scenarios with the fake provider against a local
    /// control plane, printing a pass/fail table for each.
    Conformance(conformance::ConformanceArgs),
    /// Build the container image of the reference CCM (a static binary on an empty base) as an OCI image
    /// layout in target/image/oci, check it by running its binary in the unpacked root filesystem, and print
    /// its digest.
    Image(image::ImageArgs),
    /// Package every library crate (`cargo package`), as a release to the crate registry would.
    Package(package::PackageArgs),
    /// Write a new provider crate (an in-memory cloud to replace, the CCM binary, the conformance suite wired)
    /// to start a cloud provider from.
    NewProvider(new_provider::NewProviderArgs),
    /// Benchmarks against a local control plane, printed side by side with the Go reference CCM
    /// (bench nodes, bench lbs); see docs/benchmarks.md.
    Bench(bench::BenchArgs),
    /// Fault scenarios (frozen, killed and restarted replicas) against a local control plane with
    /// audit logging, proving from the audit log that there were never two leaders
    /// (docs/reliability.md).
    Chaos(chaos::ChaosArgs),
    /// The steady state at scale (`--scale`): N heartbeating kwok nodes in the cluster in a box, the
    /// Rust CCM then the Go CCM, CPU, peak RSS, API writes and cloud calls per address-sync period
    /// (docs/benchmarks.md).
    E2e(e2e::E2eArgs),
    /// Plumbing and decision lines of each controller crate (--runtime: the non-test lines of the runtime's
    /// crates); see docs/architecture.md.
    Loc(loc::LocArgs),
}

async fn dispatch(command: Command, interrupt: &Interrupt) -> anyhow::Result<()> {
    match command {
        Command::Controlplane(args) => controlplane::run(args, interrupt).await,
        Command::Test(args) => test::run(&args, interrupt).await,
        Command::Cluster(args) => cluster::run(args, interrupt).await,
        Command::Ci(args) => ci::run(&args, interrupt).await,
        Command::Shear(args) => shear::run(&args, interrupt).await,
        Command::Api(args) => api::run(&args, interrupt).await,
        Command::ChangelogCheck(args) => api::check(&args, interrupt).await,
        Command::Demo(args) => demo::run(&args, interrupt).await,
        Command::Manifests(args) => manifests::run(&args, interrupt).await,
        Command::Conformance(args) => conformance::run(&args, interrupt).await,
        Command::Image(args) => image::run(&args, interrupt).await,
        Command::Package(args) => package::run(&args, interrupt).await,
        Command::NewProvider(args) => new_provider::run(&args),
        Command::Bench(args) => bench::run(args, interrupt).await,
        Command::Chaos(args) => chaos::run(&args, interrupt).await,
        Command::E2e(args) => e2e::run(&args, interrupt).await,
        Command::Loc(args) => loc::run(&args),
    }
}

/// Parses the command line. clap drops a `--` that directly follows `test` and its own options;
/// it is put back so `cargo xtask test -- --nocapture` passes `--nocapture` to the test binaries.
fn parse_cli(argv: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let mut cli = Cli::try_parse_from(&argv)?;
    if let Command::Test(args) = &mut cli.command
        && argv.get(1).is_some_and(|a| a == "test")
        && test::starts_with_separator(&argv[2..])
    {
        args.cargo_args.insert(0, "--".into());
    }
    Ok(cli)
}

fn main() -> ExitCode {
    let cli = match parse_cli(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            // kube's client logs every refused connection while the API server starts up.
            EnvFilter::try_from_env("XTASK_LOG")
                .unwrap_or_else(|_| EnvFilter::new("warn,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("xtask: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let interrupt = Interrupt::install();
        match dispatch(cli.command, &interrupt).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) if err.is::<Interrupted>() => {
                eprintln!("xtask: interrupted");
                ExitCode::from(INTERRUPTED_EXIT_CODE)
            }
            Err(err) => {
                eprintln!("xtask: error: {err:#}");
                ExitCode::FAILURE
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn test_arguments_are_passed_through() {
        let cli = Cli::try_parse_from(["xtask", "test", "-p", "ccm-core", "--", "--nocapture"])
            .expect("parses");
        let Command::Test(args) = cli.command else {
            panic!("not the test command");
        };
        assert!(!args.no_doc);
        assert_eq!(args.cargo_args, ["-p", "ccm-core", "--", "--nocapture"]);

        // A leading `--` (arguments for the test binaries only) is kept for cargo.
        for argv in [
            &["xtask", "test", "--", "--nocapture"][..],
            &[
                "xtask",
                "test",
                "--no-doc",
                "--timeout-minutes",
                "5",
                "--",
                "--nocapture",
            ],
        ] {
            let argv = argv.iter().map(std::ffi::OsString::from).collect();
            let cli = parse_cli(argv).expect("parses");
            let Command::Test(args) = cli.command else {
                panic!("not the test command");
            };
            assert_eq!(args.cargo_args, ["--", "--nocapture"]);
        }
        // A `--` after cargo arguments is kept by clap itself and not doubled.
        let argv = ["xtask", "test", "-p", "x", "--", "--nocapture"]
            .iter()
            .map(std::ffi::OsString::from)
            .collect();
        let Command::Test(args) = parse_cli(argv).expect("parses").command else {
            panic!("not the test command");
        };
        assert_eq!(args.cargo_args, ["-p", "x", "--", "--nocapture"]);

        let cli = Cli::try_parse_from(["xtask", "test", "--no-doc"]).expect("parses");
        let Command::Test(args) = cli.command else {
            panic!("not the test command");
        };
        assert!(args.no_doc);
        assert!(args.cargo_args.is_empty());
    }

    #[test]
    fn controlplane_subcommands_parse() {
        for argv in [
            &["xtask", "controlplane", "build"][..],
            &["xtask", "controlplane", "build", "--go-ccm", "--force"],
            &["xtask", "controlplane", "start", "--dir", "x"],
            &["xtask", "controlplane", "stop"],
            &["xtask", "ci", "--fail-fast"],
            &["xtask", "shear"],
            &["xtask", "shear", "--fix"],
            &["xtask", "loc"],
            &["xtask", "loc", "--runtime"],
            &["xtask", "loc", "--root", "x"],
            &["xtask", "api", "--write"],
            &["xtask", "changelog-check", "--base", "main"],
            &[
                "xtask",
                "cluster",
                "up",
                "--nodes",
                "5",
                "--control-plane-nodes",
                "2",
            ],
            &["xtask", "cluster", "down", "--dir", "x"],
            &[
                "xtask",
                "new-provider",
                "acme",
                "--dir",
                "x",
                "--sdk-version",
                "0.1.0",
            ],
        ] {
            Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
    }
}
