//! Scenario `failover`: three replicas with the Go CCM's leader-election settings (lease 15 s, renew
//! deadline 10 s, retry 2 s); the leader is SIGKILLed [`KILLS`] times, each time at a random point of its
//! renewal cycle, and each failover is measured from the audit log: from the kill to the API server's
//! receipt of the new leader's first Lease write naming itself (its acquisition). The killed replica is
//! restarted (as a kubelet would) and given time to campaign before the next kill. The audit log must show no
//! two leaders, as in every scenario.

use std::time::{Duration, Instant};

use anyhow::bail;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

use super::Context;
use super::replicas::{Replica, Signal};
use super::report::Outcome;
use super::world::{World, now_micros};
use crate::bench::support::{Implementation, load_average, pause};
use crate::process::Interrupt;

/// The Go CCM's `--leader-elect-lease-duration`.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// The Go CCM's `--leader-elect-renew-deadline`.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// The Go CCM's `--leader-elect-retry-period`.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Leader kills per run.
pub const KILLS: usize = 10;

/// The bound of issue 24: a failover after SIGKILL takes at most the lease duration + 1 s.
pub fn bound() -> Duration {
    LEASE_DURATION + Duration::from_secs(1)
}

/// How long a restarted replica gets to start and campaign before the next kill.
const SETTLE: Duration = Duration::from_secs(4);

/// How long a takeover may take before the run is given up.
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// Nodes in the inventory (none are registered: only the election is measured).
const NODES: usize = 1;

/// Runs one run of the scenario with replicas of `implementation`.
///
/// # Errors
/// If the set-up fails, no replica leads, or a kill is not followed by a takeover in time.
pub async fn run(
    context: &Context,
    implementation: Implementation,
    label: &str,
    seed: u64,
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    let world = World::start(label, NODES, interrupt).await?;
    let program = context.program(implementation)?;
    let prefix = match implementation {
        Implementation::Rust => "rust",
        Implementation::Go => "go",
    };
    let mut replicas = Vec::new();
    for n in 1..=3 {
        let replica = world.replica(&format!("{prefix}-{n}"), implementation, &program)?;
        replicas.push(replica.with_leader_election(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD));
    }
    let result = scenario(&world, &mut replicas, seed, interrupt).await;
    super::conclude(world, &mut replicas, result).await
}

async fn scenario(
    world: &World,
    replicas: &mut [Replica],
    seed: u64,
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    for replica in replicas.iter_mut() {
        world.start_replica(replica)?;
    }
    world
        .wait_for_leader(replicas, None, Duration::from_secs(90), interrupt)
        .await?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failovers = Vec::new();
    let mut loads = Vec::new();
    for kill in 1..=KILLS {
        world.restart_exited(replicas).await?;
        // Let a restarted replica start and begin to campaign, then kill at a random point of the leader's
        // renewal cycle.
        let phase = Duration::from_millis(rng.random_range(0..RETRY_PERIOD.as_millis() as u64));
        pause(SETTLE + phase, interrupt).await?;
        let holder = world
            .proof(replicas)?
            .holder_at(i64::MAX)
            .map(str::to_owned);
        let Some(victim) = holder
            .as_deref()
            .and_then(|h| replicas.iter().position(|r| r.current_user() == Some(h)))
        else {
            bail!("kill {kill}: no replica holds the Lease");
        };
        let victim_user = replicas[victim]
            .current_user()
            .unwrap_or_default()
            .to_owned();
        let load = load_average();
        let at = now_micros();
        replicas[victim].signal(Signal::Kill).await?;
        let killed = Instant::now();
        let took = loop {
            if let Some(us) = world.proof(replicas)?.failover_after(at, &victim_user) {
                break Duration::from_micros(u64::try_from(us).unwrap_or(0));
            }
            if killed.elapsed() > TAKEOVER_TIMEOUT {
                bail!(
                    "kill {kill}: nobody took over from {victim_user} within {} s",
                    TAKEOVER_TIMEOUT.as_secs()
                );
            }
            pause(Duration::from_millis(250), interrupt).await?;
        };
        eprintln!(
            "  kill {kill}/{KILLS}: SIGKILL {victim_user} (leader): taken over after {:.2} s (load average {})",
            took.as_secs_f64(),
            load.map_or_else(|| "-".to_owned(), |l| format!("{l:.2}"))
        );
        failovers.push(took);
        loads.push(load);
    }
    let proof = world.proof(replicas)?;
    let overlaps = proof.check().iter().map(ToString::to_string).collect();
    let tenures = proof.tenures();
    let notes = vec![
        format!(
            "failovers (s): {}",
            failovers
                .iter()
                .map(|d| format!("{:.2}", d.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "1-minute load average at each kill: {}",
            loads
                .iter()
                .map(|l| l.map_or_else(|| "-".to_owned(), |l| format!("{l:.2}")))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "{} tenures: {}",
            tenures.len(),
            tenures
                .iter()
                .map(|t| t.user.as_str())
                .collect::<Vec<_>>()
                .join(" -> ")
        ),
    ];
    Ok(Outcome {
        faults: KILLS,
        overlaps,
        leaks: 0,
        converge: Duration::ZERO,
        failovers,
        no_failover: 0,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_are_the_go_ccms_and_the_bound_is_the_issues() {
        assert_eq!(
            (LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        assert_eq!(bound(), Duration::from_secs(16));
        assert_eq!(KILLS, 10);
    }
}
