//! Scenario `etcd-freeze`: etcd is SIGSTOPped for 20 s while a leader works, then resumed. No
//! Lease write can succeed meanwhile, so the leader must step down on its own (renew deadline)
//! *before* its lease could expire on a follower: its step-down (from its log) must come less
//! than the lease duration after its last successful Lease write (from the audit log). Then the
//! audit log must show no two leaders once etcd is back.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use super::Context;
use super::replicas::LEASE_DURATION;
use super::report::Outcome;
use super::world::{World, now_micros};
use crate::bench::support::{Implementation, pause};
use crate::process::Interrupt;

/// Nodes registered during the run.
const NODES: usize = 20;

/// How long etcd stays frozen.
pub const FROZEN: Duration = Duration::from_secs(20);

/// How long the run may take to converge after etcd is back.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(120);

/// The line the Rust CCM logs when its elector gives up the lease.
const STEP_DOWN_LINE: &str = "leader election lost";

/// When the Rust CCM logged its step-down: the RFC 3339 time opening the first line saying
/// "leader election lost", in microseconds since the epoch.
pub fn step_down_micros(log: &str) -> Option<i64> {
    let line = log.lines().find(|l| l.contains(STEP_DOWN_LINE))?;
    let stamp = line.split_whitespace().next()?;
    let time: MicroTime = serde_json::from_value(serde_json::Value::from(stamp)).ok()?;
    Some(time.0.as_microsecond())
}

/// Runs the scenario once.
///
/// # Errors
/// If the set-up fails, no replica leads, or the cluster does not converge.
pub async fn run(context: &Context, label: &str, interrupt: &Interrupt) -> anyhow::Result<Outcome> {
    let world = World::start(label, NODES, interrupt).await?;
    let program = context.program(Implementation::Rust)?;
    let mut replicas = vec![
        world.replica("rust-1", Implementation::Rust, &program)?,
        world.replica("rust-2", Implementation::Rust, &program)?,
    ];
    let result = scenario(&world, &mut replicas, interrupt).await;
    // etcd must run again for the replicas to shut down cleanly, whatever happened.
    let resumed = world.signal_etcd("CONT").await;
    let outcome = super::conclude(world, &mut replicas, result).await?;
    resumed?;
    Ok(outcome)
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
    let workload = world.start_workload(Duration::from_millis(500)).await?;
    pause(Duration::from_secs(3), interrupt).await?;

    let stopped_at = now_micros();
    world.signal_etcd("STOP").await?;
    eprintln!("  froze etcd; {leader} leads");
    pause(FROZEN, interrupt).await?;
    world.signal_etcd("CONT").await?;
    let resumed_at = now_micros();
    let faults_over = Instant::now();
    eprintln!("  resumed etcd after {} s", FROZEN.as_secs());
    workload.finish().await?;
    let converge = world
        .converge(replicas, faults_over, CONVERGE_TIMEOUT, interrupt)
        .await?;

    let proof = world.proof(replicas)?;
    let mut overlaps: Vec<String> = proof.check().iter().map(ToString::to_string).collect();
    let last_write = proof
        .lease_writes
        .iter()
        .filter(|w| w.user == leader && w.received < stopped_at)
        .map(|w| w.received)
        .max()
        .context("the leader's Lease writes are not in the audit log")?;
    let log_path = world.dir.join(format!("{leader}.log"));
    let step_down = step_down_micros(&read(&log_path)?);
    let mut notes = Vec::new();
    match step_down {
        None => overlaps.push(format!(
            "{leader} never stepped down while etcd was frozen (no {STEP_DOWN_LINE:?} in {})",
            log_path.display()
        )),
        Some(at) => {
            let expiry = last_write + i64::try_from(LEASE_DURATION.as_micros()).unwrap_or(0);
            let margin_ms = (expiry - at) / 1000;
            if at >= expiry {
                overlaps.push(format!(
                    "{leader} stepped down {} ms after its lease could expire on a follower",
                    -margin_ms
                ));
            } else {
                notes.push(format!(
                    "{leader} stepped down {:.1} s after its last renewal, {margin_ms} ms before \
                     its lease could expire on a follower",
                    (at - last_write) as f64 / 1e6
                ));
            }
        }
    }
    if step_down.is_some_and(|at| at < stopped_at) {
        bail!(
            "{leader} stepped down before etcd was frozen; see {}",
            log_path.display()
        );
    }
    // Nobody can take over while etcd is frozen, so the takeover is timed from its resumption;
    // it is not a failover time comparable with the others.
    match proof.failover_after(resumed_at, &leader) {
        Some(us) => notes.push(format!(
            "the next leader's Lease write came {:.1} s after etcd resumed",
            us as f64 / 1e6
        )),
        None => notes.push("no other replica took over after etcd resumed".to_owned()),
    }
    Ok(Outcome {
        faults: 1,
        overlaps,
        leaks: 0,
        converge,
        failovers: Vec::new(),
        no_failover: 0,
        notes,
    })
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_down_time_is_read_from_the_first_matching_line() {
        let log = "\
2026-11-23T14:11:00.732505Z  INFO ccm_core::runtime::events: event reason=\"Synced\"
2026-11-23T14:11:06.622489Z ERROR ccm_leaderelection::elector: leader election lost lease=kube-system/cloud-controller-manager
2026-11-23T14:11:06.633654Z ERROR ccm_app::app::supervisor: leaderelection lost reason=x
";
        let synced = step_down_micros("2026-11-23T14:11:00.732505Z ERROR x: leader election lost")
            .expect("a time");
        let lost = step_down_micros(log).expect("a time");
        assert_eq!(lost - synced, 5_889_984);
        assert_eq!(step_down_micros("2026-11-23T14:11:00Z INFO leading"), None);
        assert_eq!(step_down_micros("garbage leader election lost"), None);
        assert_eq!(step_down_micros(""), None);
    }
}
