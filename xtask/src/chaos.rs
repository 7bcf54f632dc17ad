//! `cargo xtask chaos`: fault scenarios against a real kube-apiserver and etcd, with the API
//! server's audit log as the proof that there were never two leaders (docs/reliability.md).
//!
//! Each run gets a fresh control plane with audit logging, CCM replicas that each authenticate
//! as their own user, a workload that keeps the leader writing, and a bounded fault plan. After
//! the faults, the cluster must converge, and [`proof`] checks the audit log.
//!
//! - `leader-freeze` ([`freeze`]): the leader SIGSTOPped longer than the lease duration.
//! - `random-faults` ([`kills`]): three Rust replicas, random SIGKILL / SIGTERM / SIGSTOP+CONT.
//! - `random-kills` ([`kills`]): random-faults without SIGSTOP (the CI version).
//! - `mixed-kills` ([`kills`]): Rust and Go replicas on one Lease, random SIGKILL / SIGTERM.
//! - `apiserver-restart` ([`apiserver`]): kube-apiserver killed and restarted on the same etcd
//!   under load (500 Nodes, 100 LoadBalancer Services created and half deleted).
//! - `etcd-freeze` ([`etcd`]): etcd SIGSTOPped for 20 s under a working leader.
//! - `cloud-faults` ([`cloud`]): the fake cloud fails 30 % of the calls and delays each by
//!   200 ms ± 150 ms for 60 s under 200 Nodes and 50 LoadBalancer Services; no leaked load
//!   balancer, no deleted Node, convergence within one resync period.
//! - `failover` ([`failover`]): the Go CCM's lease settings (15 s / 10 s / 2 s); the leader SIGKILLed 10
//!   times, each failover measured from the audit log against the lease duration + 1 s.

mod apiserver;
mod cloud;
mod etcd;
mod failover;
mod freeze;
mod kills;
mod plan;
mod proof;
mod replicas;
mod report;
mod services;
mod world;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use ccm_testenv::controlplane::Binaries;
use clap::{Args, ValueEnum};

use self::replicas::{LEASE_DURATION, RETRY_PERIOD, Replica};
use self::report::{Outcome, ScenarioRuns};
use crate::bench::support::Implementation;
use crate::gobuild::GO_CCM;
use crate::paths;
use crate::process::{self, Interrupt};

/// The scenarios, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// The leader is frozen (SIGSTOP) for longer than the lease duration, then resumed.
    LeaderFreeze,
    /// Three Rust replicas; random SIGKILL, SIGTERM and SIGSTOP+CONT, mostly at the leader.
    RandomFaults,
    /// Like random-faults without SIGSTOP: SIGKILL and SIGTERM only.
    RandomKills,
    /// Two Rust replicas and the Go reference CCM on one Lease; random SIGKILL and SIGTERM.
    MixedKills,
    /// kube-apiserver SIGKILLed and restarted twice while 500 Nodes initialize and 100
    /// LoadBalancer Services are created and half of them deleted.
    ApiserverRestart,
    /// etcd frozen (SIGSTOP) for 20 s under a working leader, then resumed.
    EtcdFreeze,
    /// The fake cloud fails 30 % of the calls and delays each by 200 ms ± 150 ms for 60 s
    /// while 200 Nodes and 50 LoadBalancer Services are created (10 deleted).
    CloudFaults,
    /// Three replicas with the Go CCM's lease settings (15 s, 10 s, 2 s); the leader SIGKILLed 10
    /// times; each failover (kill to the new leader's first Lease write) against lease + 1 s.
    Failover,
}

impl Scenario {
    /// The name in tables (the `--scenario` value).
    pub fn name(self) -> &'static str {
        match self {
            Scenario::LeaderFreeze => "leader-freeze",
            Scenario::RandomFaults => "random-faults",
            Scenario::RandomKills => "random-kills",
            Scenario::MixedKills => "mixed-kills",
            Scenario::ApiserverRestart => "apiserver-restart",
            Scenario::EtcdFreeze => "etcd-freeze",
            Scenario::CloudFaults => "cloud-faults",
            Scenario::Failover => "failover",
        }
    }
}

/// Faults per run of the kill scenarios with `--short` (CI).
pub const SHORT_EVENTS: usize = 6;

/// Arguments of `cargo xtask chaos`.
#[derive(Debug, Clone, Args)]
pub struct ChaosArgs {
    /// The scenarios to run, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenario: Vec<Scenario>,
    /// Runs of each scenario.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub runs: u32,
    /// Faults per run of random-faults and mixed-kills.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=500))]
    pub events: u64,
    /// Seed of the fault plans (default: from the clock; printed, so a run can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The CI version: random-kills with 6 faults, plus mixed-kills with 6 faults if the Go CCM
    /// is built; one run each.
    #[arg(long)]
    pub short: bool,
    /// Run the release build of the reference CCM (default: the debug build, which `cargo xtask
    /// test` builds anyway).
    #[arg(long)]
    pub release: bool,
    /// Use the binaries already built.
    #[arg(long)]
    pub no_build: bool,
    /// Run this reference-ccm binary instead of building one.
    #[arg(long, value_name = "PATH")]
    pub rust_ccm: Option<PathBuf>,
    /// The CCM whose two replicas leader-freeze runs: rust (the reference CCM) or go (the Go
    /// reference CCM, for comparison).
    #[arg(long, value_enum, default_value_t = Implementation::Rust)]
    pub freeze_impl: Implementation,
    /// The CCM whose three replicas failover runs: rust (the reference CCM) or go (the Go
    /// reference CCM, for comparison).
    #[arg(long, value_enum, default_value_t = Implementation::Rust)]
    pub failover_impl: Implementation,
}

impl Default for ChaosArgs {
    /// The command-line defaults.
    fn default() -> Self {
        ChaosArgs {
            scenario: Vec::new(),
            runs: 1,
            events: 20,
            seed: None,
            short: false,
            release: false,
            no_build: false,
            rust_ccm: None,
            freeze_impl: Implementation::Rust,
            failover_impl: Implementation::Rust,
        }
    }
}

/// What every scenario needs: the CCM binaries.
#[derive(Debug, Clone)]
pub struct Context {
    /// The Rust reference CCM.
    pub rust_ccm: PathBuf,
    /// The Go reference CCM (next to kube-apiserver).
    pub go_ccm: PathBuf,
    /// The CCM of leader-freeze's replicas.
    pub freeze_impl: Implementation,
    /// The CCM of failover's replicas.
    pub failover_impl: Implementation,
}

impl Context {
    /// The binary of `implementation`.
    ///
    /// # Errors
    /// If it is missing (the message says how to build it).
    pub fn program(&self, implementation: Implementation) -> anyhow::Result<PathBuf> {
        let path = match implementation {
            Implementation::Rust => &self.rust_ccm,
            Implementation::Go => &self.go_ccm,
        };
        if !path.is_file() {
            bail!(
                "{} is missing: {}",
                path.display(),
                match implementation {
                    Implementation::Rust => "run without --no-build, or check --rust-ccm",
                    Implementation::Go =>
                        "run `cargo xtask controlplane build --go-ccm`, or leave out mixed-kills",
                }
            );
        }
        Ok(path.clone())
    }
}

/// Shuts every replica down; returns how many did not exit on SIGTERM in time.
///
/// # Errors
/// If a replica cannot be signalled.
pub async fn shut_down_all(replicas: &mut [Replica]) -> anyhow::Result<usize> {
    let mut leaks = 0;
    for replica in replicas.iter_mut() {
        if replica.shut_down().await? {
            leaks += 1;
        }
    }
    Ok(leaks)
}

/// Ends a run: shuts every replica down, stops the world, and adds the replicas that did not exit on
/// SIGTERM in time to `result`'s leaks. The scenario's own error comes first, then the stop's.
///
/// # Errors
/// The scenario's error, or a failure to stop a replica or the world.
pub async fn conclude(
    world: world::World,
    replicas: &mut [Replica],
    result: anyhow::Result<Outcome>,
) -> anyhow::Result<Outcome> {
    let leaks = shut_down_all(replicas).await;
    let stopped = world.stop();
    let mut outcome = result?;
    stopped?;
    outcome.leaks += leaks?;
    Ok(outcome)
}

/// The scenarios to run: the given ones; with `--short` leader-freeze (Rust), random-faults,
/// random-kills and (if the Go CCM is built) mixed-kills; otherwise all.
fn selected(args: &ChaosArgs, go_built: bool) -> Vec<Scenario> {
    if !args.scenario.is_empty() {
        return args.scenario.clone();
    }
    if args.short {
        let mut short = vec![
            Scenario::LeaderFreeze,
            Scenario::RandomFaults,
            Scenario::RandomKills,
        ];
        if go_built {
            short.push(Scenario::MixedKills);
        }
        return short;
    }
    vec![
        Scenario::LeaderFreeze,
        Scenario::RandomFaults,
        Scenario::RandomKills,
        Scenario::MixedKills,
        Scenario::ApiserverRestart,
        Scenario::EtcdFreeze,
        Scenario::CloudFaults,
        Scenario::Failover,
    ]
}

async fn prepare(args: &ChaosArgs, interrupt: &Interrupt) -> anyhow::Result<Context> {
    let profile = if args.release { "release" } else { "debug" };
    let rust_ccm = args.rust_ccm.as_deref().map_or_else(
        || {
            paths::target_dir()
                .join(profile)
                .join("examples")
                .join("reference-ccm")
        },
        paths::absolute,
    );
    if !args.no_build && args.rust_ccm.is_none() {
        let mut build = process::cargo();
        build.args(["build", "-p", "examples", "--example", "reference-ccm"]);
        if args.release {
            build.arg("--release");
        }
        process::run(build, interrupt, "").await?;
    }
    let binaries = Binaries::find().context("the control plane binaries")?;
    let bin_dir = binaries
        .etcd
        .parent()
        .context("the control plane's binary directory")?;
    Ok(Context {
        rust_ccm,
        go_ccm: bin_dir.join(GO_CCM.name),
        freeze_impl: args.freeze_impl,
        failover_impl: args.failover_impl,
    })
}

/// Runs `cargo xtask chaos`.
///
/// # Errors
/// If a build fails, or any run found an overlap or a leak or could not finish (after the
/// table).
pub async fn run(args: &ChaosArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let context = prepare(args, interrupt).await?;
    context.program(Implementation::Rust)?;
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let events = if args.short {
        SHORT_EVENTS
    } else {
        usize::try_from(args.events).unwrap_or(20)
    };
    let runs = if args.short { 1 } else { args.runs };
    let scenarios = selected(args, context.go_ccm.is_file());
    eprintln!(
        "chaos: {} run(s) of {}; seed {seed}; lease {} s, retry {} s; reference-ccm {}",
        runs,
        scenarios
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
        LEASE_DURATION.as_secs(),
        RETRY_PERIOD.as_secs(),
        context.rust_ccm.display()
    );
    let mut results = Vec::new();
    for scenario in scenarios {
        let mut outcomes = Vec::new();
        for run in 1..=runs {
            let label = format!("{}-{run}", scenario.name());
            eprintln!("\n== {label}");
            let run_seed = seed.wrapping_add(u64::from(run));
            let outcome = match scenario {
                Scenario::LeaderFreeze => freeze::run(&context, &label, interrupt).await,
                Scenario::RandomFaults => {
                    let setup = kills::random_faults(events, run_seed);
                    kills::run(&context, &setup, &label, interrupt).await
                }
                Scenario::RandomKills => {
                    let setup = kills::random_kills(events, run_seed);
                    kills::run(&context, &setup, &label, interrupt).await
                }
                Scenario::MixedKills => {
                    let setup = kills::mixed_kills(events, run_seed);
                    kills::run(&context, &setup, &label, interrupt).await
                }
                Scenario::ApiserverRestart => apiserver::run(&context, &label, interrupt).await,
                Scenario::EtcdFreeze => etcd::run(&context, &label, interrupt).await,
                Scenario::CloudFaults => cloud::run(&context, &label, run_seed, interrupt).await,
                Scenario::Failover => {
                    let implementation = context.failover_impl;
                    failover::run(&context, implementation, &label, run_seed, interrupt).await
                }
            };
            interrupt.check()?;
            report_run(&label, &outcome);
            outcomes.push(outcome.map_err(|e| format!("{e:#}")));
        }
        results.push(ScenarioRuns {
            name: scenario.name(),
            runs: outcomes,
            failover_bound: if scenario == Scenario::Failover {
                failover::bound()
            } else {
                failover_bound()
            },
        });
    }
    println!(
        "\nChaos scenarios (lease {} s, renew deadline {} s, retry {} s, failover bound = lease + \
         retry = {} s; failover: lease {} s, renew deadline {} s, retry {} s, bound = lease + 1 s; \
         audit logs and replica logs under {}):\n",
        LEASE_DURATION.as_secs(),
        replicas::RENEW_DEADLINE.as_secs(),
        RETRY_PERIOD.as_secs(),
        failover_bound().as_secs(),
        failover::LEASE_DURATION.as_secs(),
        failover::RENEW_DEADLINE.as_secs(),
        failover::RETRY_PERIOD.as_secs(),
        paths::target_dir().join("chaos").display()
    );
    println!("{}", report::table(&results).render());
    if !report::all_passed(&results) {
        bail!("a chaos scenario failed (see the table and the details above)");
    }
    Ok(())
}

fn report_run(label: &str, outcome: &anyhow::Result<Outcome>) {
    match outcome {
        Ok(o) => {
            eprintln!(
                "  {label}: {} overlaps, {} leaks, converged in {}, failovers {:?}, {} leader \
                 faults without a takeover",
                o.overlaps.len(),
                o.leaks,
                process::seconds(o.converge),
                o.failovers
                    .iter()
                    .map(|d| format!("{:.1}s", d.as_secs_f64()))
                    .collect::<Vec<_>>(),
                o.no_failover
            );
            for line in o.overlaps.iter().chain(&o.notes) {
                eprintln!("    {line}");
            }
        }
        Err(err) => eprintln!("  {label}: could not finish: {err:#}"),
    }
}

/// The bound the failovers are compared with.
pub fn failover_bound() -> Duration {
    LEASE_DURATION + RETRY_PERIOD
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::{Cli, Command};

    fn chaos(argv: &[&str]) -> ChaosArgs {
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let Command::Chaos(args) = cli.command else {
            panic!("not the chaos command");
        };
        args
    }

    #[test]
    fn defaults_run_every_scenario_once_with_twenty_faults() {
        let args = chaos(&["xtask", "chaos"]);
        let default = ChaosArgs::default();
        assert_eq!(
            (default.runs, default.events, default.freeze_impl),
            (args.runs, args.events, args.freeze_impl)
        );
        assert_eq!(args.runs, 1);
        assert_eq!(args.events, 20);
        assert_eq!(
            selected(&args, false),
            [
                Scenario::LeaderFreeze,
                Scenario::RandomFaults,
                Scenario::RandomKills,
                Scenario::MixedKills,
                Scenario::ApiserverRestart,
                Scenario::EtcdFreeze,
                Scenario::CloudFaults,
                Scenario::Failover
            ]
        );
    }

    #[test]
    fn short_leaves_out_the_go_scenario_without_the_go_binary() {
        let args = chaos(&["xtask", "chaos", "--short"]);
        let rust_only = [
            Scenario::LeaderFreeze,
            Scenario::RandomFaults,
            Scenario::RandomKills,
        ];
        assert_eq!(selected(&args, false), rust_only);
        assert_eq!(
            selected(&args, true),
            [rust_only.as_slice(), &[Scenario::MixedKills]].concat()
        );
    }

    #[test]
    fn scenarios_runs_and_seed_parse() {
        let args = chaos(&[
            "xtask",
            "chaos",
            "--scenario",
            "random-faults,mixed-kills",
            "--runs",
            "3",
            "--seed",
            "9",
            "--events",
            "5",
        ]);
        assert_eq!(
            selected(&args, false),
            [Scenario::RandomFaults, Scenario::MixedKills]
        );
        assert_eq!((args.runs, args.seed, args.events), (3, Some(9), 5));
        for bad in [
            &["xtask", "chaos", "--scenario", "nope"][..],
            &["xtask", "chaos", "--runs", "0"],
            &["xtask", "chaos", "--events", "0"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(Scenario::LeaderFreeze.name(), "leader-freeze");
        assert_eq!(failover_bound(), Duration::from_secs(5));
    }
}
