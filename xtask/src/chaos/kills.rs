//! Scenarios `random-faults` (three Rust replicas; SIGKILL, SIGTERM and SIGSTOP+CONT), its
//! kill-only variant `random-kills`, and
//! `mixed-kills` (Rust and Go replicas on one Lease; SIGKILL and SIGTERM): a seeded plan of
//! faults, mostly at the leader; replicas that exited are restarted before each fault (as a
//! kubelet would). Afterwards the audit log must show no two leaders, and each fault at the
//! leader gives one failover time.

use std::time::{Duration, Instant};

use super::Context;
use super::plan::{self, Target};
use super::replicas::{Replica, Signal};
use super::report::Outcome;
use super::world::{World, now_micros};
use crate::bench::support::{Implementation, pause};
use crate::process::Interrupt;

/// Nodes registered during a run.
const NODES: usize = 30;

/// How long a run may take to converge after the last fault.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(180);

/// What differs between the two scenarios.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The replicas: user name and CCM.
    pub replicas: Vec<(&'static str, Implementation)>,
    /// The faults drawn from.
    pub signals: &'static [Signal],
    /// How many faults.
    pub events: usize,
    /// The plan's seed.
    pub seed: u64,
}

/// Scenario b: three Rust replicas, every kind of fault.
pub fn random_faults(events: usize, seed: u64) -> Setup {
    Setup {
        replicas: vec![
            ("rust-1", Implementation::Rust),
            ("rust-2", Implementation::Rust),
            ("rust-3", Implementation::Rust),
        ],
        signals: &[Signal::Kill, Signal::Term, Signal::Stop],
        events,
        seed,
    }
}

/// The CI variant of scenario b: three Rust replicas, SIGKILL and SIGTERM only (no freezes,
/// which hit the resume race described in docs/reliability.md).
pub fn random_kills(events: usize, seed: u64) -> Setup {
    Setup {
        signals: &[Signal::Kill, Signal::Term],
        ..random_faults(events, seed)
    }
}

/// Scenario c: two Rust replicas and one Go replica, kills only.
pub fn mixed_kills(events: usize, seed: u64) -> Setup {
    Setup {
        replicas: vec![
            ("rust-1", Implementation::Rust),
            ("go-1", Implementation::Go),
            ("rust-2", Implementation::Rust),
        ],
        signals: &[Signal::Kill, Signal::Term],
        events,
        seed,
    }
}

/// Runs one scenario run.
///
/// # Errors
/// If the set-up fails, no replica leads, or the cluster does not converge.
pub async fn run(
    context: &Context,
    setup: &Setup,
    label: &str,
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    let world = World::start(label, NODES, interrupt).await?;
    let mut replicas = Vec::new();
    for (user, implementation) in &setup.replicas {
        let program = context.program(*implementation)?;
        replicas.push(world.replica(user, *implementation, &program)?);
    }
    let result = scenario(&world, &mut replicas, setup, interrupt).await;
    super::conclude(world, &mut replicas, result).await
}

async fn scenario(
    world: &World,
    replicas: &mut [Replica],
    setup: &Setup,
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    for replica in replicas.iter_mut() {
        world.start_replica(replica)?;
    }
    world
        .wait_for_leader(replicas, None, Duration::from_secs(90), interrupt)
        .await?;
    let faults = plan::plan(setup.seed, setup.events, setup.signals);
    // Spread the Nodes over the faults, so that the leader has work at every fault.
    let planned_ms: u64 = faults.iter().map(|f| f.gap_ms + f.frozen_ms).sum();
    let every = Duration::from_millis((planned_ms / NODES as u64).max(100));
    let workload = world.start_workload(every).await?;
    let mut leader_faults: Vec<(i64, String)> = Vec::new();
    for (number, fault) in faults.iter().enumerate() {
        pause(Duration::from_millis(fault.gap_ms), interrupt).await?;
        world.restart_exited(replicas).await?;
        // The incarnation holding the Lease, if it still runs.
        let holder = world
            .proof(replicas)?
            .holder_at(i64::MAX)
            .map(str::to_owned);
        let leader_index = holder
            .as_deref()
            .and_then(|h| replicas.iter().position(|r| r.current_user() == Some(h)));
        let leader_index = leader_index.filter(|i| replicas[*i].is_running());
        let victim = match (fault.target, leader_index) {
            (Target::Leader, Some(index)) => index,
            (Target::Leader, None) => 0,
            (Target::Follower(n), _) => {
                let others: Vec<usize> = (0..replicas.len())
                    .filter(|i| Some(*i) != leader_index)
                    .collect();
                others[n % others.len()]
            }
        };
        let at = now_micros();
        let victim_user = replicas[victim]
            .current_user()
            .unwrap_or_default()
            .to_owned();
        if Some(victim) == leader_index {
            leader_faults.push((at, victim_user.clone()));
        }
        eprintln!(
            "  fault {}/{}: SIG{} {}{}",
            number + 1,
            faults.len(),
            fault.signal.name(),
            victim_user,
            if Some(victim) == leader_index {
                " (leader)"
            } else {
                ""
            }
        );
        replicas[victim].signal(fault.signal).await?;
        if fault.signal == Signal::Stop {
            pause(Duration::from_millis(fault.frozen_ms), interrupt).await?;
            replicas[victim].resume().await?;
        }
    }
    let faults_over = Instant::now();
    workload.finish().await?;
    let converge = world
        .converge(replicas, faults_over, CONVERGE_TIMEOUT, interrupt)
        .await?;

    let proof = world.proof(replicas)?;
    let overlaps = proof.check().iter().map(ToString::to_string).collect();
    let mut failovers = Vec::new();
    let mut no_failover = 0;
    for (i, (at, victim)) in leader_faults.iter().enumerate() {
        // A takeover after the next leader fault belongs to that one.
        let window = leader_faults
            .get(i + 1)
            .map_or(i64::MAX, |(next, _)| next - at);
        match proof.failover_after(*at, victim) {
            Some(us) if us <= window => {
                failovers.push(Duration::from_micros(u64::try_from(us).unwrap_or(0)));
            }
            _ => no_failover += 1,
        }
    }
    let tenures = proof.tenures();
    let notes = vec![format!(
        "{} leader faults, {} tenures: {}",
        leader_faults.len(),
        tenures.len(),
        tenures
            .iter()
            .map(|t| t.user.as_str())
            .collect::<Vec<_>>()
            .join(" -> ")
    )];
    Ok(Outcome {
        faults: faults.len(),
        overlaps,
        leaks: 0,
        converge,
        failovers,
        no_failover,
        notes,
    })
}
