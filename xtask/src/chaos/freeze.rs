//! Scenario `leader-freeze`: the leader is SIGSTOPped for longer than the lease duration, then
//! resumed. Another replica must take over, and the resumed one must write nothing (proved from
//! the audit log) — it has to notice that its lease is gone before acting.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use super::Context;
use super::replicas::{LEASE_DURATION, Signal};
use super::report::Outcome;
use super::world::{World, now_micros};
use crate::bench::support::pause;
use crate::process::Interrupt;

/// Nodes registered during the run.
const NODES: usize = 20;

/// How long the scenario may take to converge at the end.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the scenario once.
///
/// # Errors
/// If the set-up fails, no replica leads, nobody takes over, or the cluster does not converge.
pub async fn run(context: &Context, label: &str, interrupt: &Interrupt) -> anyhow::Result<Outcome> {
    let world = World::start(label, NODES, interrupt).await?;
    let mut replicas = Vec::new();
    let implementation = context.freeze_impl;
    let program = context.program(implementation)?;
    for number in 1..=2 {
        let name = format!("{}-{number}", implementation.label().to_lowercase());
        replicas.push(world.replica(&name, implementation, &program)?);
    }
    let result = scenario(&world, &mut replicas, interrupt).await;
    super::conclude(world, &mut replicas, result).await
}

async fn scenario(
    world: &World,
    replicas: &mut [super::replicas::Replica],
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    for replica in replicas.iter_mut() {
        world.start_replica(replica)?;
    }
    let leader = world
        .wait_for_leader(replicas, None, Duration::from_secs(90), interrupt)
        .await?;
    let workload = world.start_workload(Duration::from_millis(300)).await?;
    pause(Duration::from_secs(2), interrupt).await?;

    let index = replicas
        .iter()
        .position(|r| r.current_user() == Some(leader.as_str()))
        .context("the leader is not a running replica")?;
    let stopped_at = now_micros();
    replicas[index].signal(Signal::Stop).await?;
    eprintln!("  froze the leader {leader}");
    let successor = world
        .wait_for_leader(replicas, Some(&leader), LEASE_DURATION * 4, interrupt)
        .await?;
    // Let the new leader work for a moment, then wake the old one up.
    pause(Duration::from_secs(1), interrupt).await?;
    let resumed_at = now_micros();
    replicas[index].resume().await?;
    let faults_over = Instant::now();
    let frozen = Duration::from_micros(u64::try_from(resumed_at - stopped_at).unwrap_or(0));
    eprintln!(
        "  resumed {leader} after {:.1} s; {successor} leads",
        frozen.as_secs_f64()
    );
    if frozen <= LEASE_DURATION {
        bail!("the leader was frozen for only {frozen:?}, not longer than the lease duration");
    }

    // The resumed replica must notice the lost lease and exit (both CCMs exit on a lost lease).
    let mut notes = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while replicas[index].is_running() && tokio::time::Instant::now() < deadline {
        pause(Duration::from_millis(200), interrupt).await?;
    }
    if replicas[index].is_running() {
        notes.push(format!("{leader} still ran 15 s after it was resumed"));
    }
    workload.finish().await?;
    let converge = world
        .converge(replicas, faults_over, CONVERGE_TIMEOUT, interrupt)
        .await?;

    let proof = world.proof(replicas)?;
    let violations = proof.check();
    let mut overlaps: Vec<String> = violations.iter().map(ToString::to_string).collect();
    for write in proof.writes_by_since(&leader, resumed_at) {
        if violations.iter().any(|v| v.write() == Some(write)) {
            continue;
        }
        overlaps.push(format!(
            "write after resuming: {} {} {} at {}",
            write.user, write.verb, write.object, write.received
        ));
    }
    let failovers = proof
        .failover_after(stopped_at, &leader)
        .map(|us| Duration::from_micros(u64::try_from(us).unwrap_or(0)))
        .into_iter()
        .collect();
    Ok(Outcome {
        faults: 1,
        overlaps,
        leaks: 0,
        converge,
        failovers,
        no_failover: 0,
        notes,
    })
}
