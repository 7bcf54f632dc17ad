//! Scenario `cloud-faults`: the fake cloud fails 30 % of the calls of every operation and delays
//! every call by 200 ms ± 150 ms for the first 60 s of the CCM's life (the inventory's
//! `randomFaults`, seeded from the run's seed), while 200 Nodes register and 50 LoadBalancer
//! Services are created and 10 of them deleted again. One replica, leader election on.
//!
//! After the faults stop, within [`CONVERGE_BOUND`]: every Node is initialized, every live
//! Service has an ingress and exactly one load balancer in the fake cloud (read from the cloud's
//! state file), the cloud holds no load balancer without a Service, and no Node was deleted
//! (counted in the audit log) although the node lifecycle controller runs.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use ccm_provider_fake::Operation;
use ccm_testenv::audit::AuditEvent;
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::Context;
use super::report::Outcome;
use super::services::{Churn, state_file, state_file_yaml};
use super::world::World;
use crate::bench::support::{Implementation, pause};
use crate::process::Interrupt;

/// Nodes registered.
pub const NODES: usize = 200;

/// LoadBalancer Services created (besides the workload's own, `chaos-web`).
pub const SERVICES: usize = 50;

/// How long the faults last, from the cloud's creation (the CCM loading its inventory).
pub const FAULT_WINDOW: Duration = Duration::from_secs(60);

/// Chance that a cloud call fails during the window.
pub const ERROR_PROBABILITY: f64 = 0.3;

/// Mean delay of every cloud call during the window, in milliseconds.
pub const LATENCY_MS: u64 = 200;

/// The delay is uniform in [`LATENCY_MS`] ± this, in milliseconds.
pub const JITTER_MS: u64 = 150;

/// The bound on convergence after the faults stop: one resync period, the CCM's
/// `--node-status-update-frequency` default (5 m), which is also the service controller's
/// retry cap (Go's `maxRetryDelay`), the longest a failed Service waits for its next attempt.
pub const CONVERGE_BOUND: Duration = Duration::from_secs(300);

/// The controllers of the replica: the chaos set plus the node lifecycle controller, the one
/// that deletes Nodes whose instance is gone (every `--node-monitor-period`, 5 s): under cloud
/// errors it must not delete any.
pub const CONTROLLERS: &str = "cloud-node,cloud-node-lifecycle,service";

/// The Services created during the faults: `faults-lb-00` to `faults-lb-49`, every fifth deleted.
pub const CHURN: Churn = Churn {
    prefix: "faults-lb",
    count: SERVICES,
    width: 2,
    delete_every: 5,
};

/// The inventory keys of the fault profile: every operation except `initialize` (whose failure
/// is fatal by design, in Go too, so it is not a convergence question), and the state file.
pub fn profile_yaml(seed: u64, dir: &Path) -> String {
    let operations: Vec<&str> = Operation::ALL
        .into_iter()
        .filter(|op| *op != Operation::Initialize)
        .map(Operation::as_str)
        .collect();
    format!(
        "randomFaults:\n  seed: {seed}\n  rules:\n    - operations: [{}]\n      errorProbability: \
         {ERROR_PROBABILITY}\n      latency: {LATENCY_MS}ms\n      jitter: {JITTER_MS}ms\n      \
         stopAfter: {}s\n{}",
        operations.join(", "),
        FAULT_WINDOW.as_secs(),
        state_file_yaml(dir)
    )
}

/// The successful Node deletions in the audit log, as `user deleted node name`.
pub fn node_deletions(events: &[AuditEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| (e.verb == "delete" || e.verb == "deletecollection") && e.succeeded())
        .filter_map(|e| {
            let object = e.object_ref.as_ref()?;
            (object.resource == "nodes" && object.api_group.is_empty()).then(|| {
                format!(
                    "{} deleted node {}",
                    e.user.username,
                    if object.name.is_empty() {
                        "(collection)"
                    } else {
                        &object.name
                    }
                )
            })
        })
        .collect()
}

/// Runs the scenario once with fault seed `seed`.
///
/// # Errors
/// If the set-up fails, or the cluster does not converge within the bound, or a Node was
/// deleted, or a load balancer leaked.
pub async fn run(
    context: &Context,
    label: &str,
    seed: u64,
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    let mut world =
        World::start_with(label, NODES, |dir| profile_yaml(seed, dir), interrupt).await?;
    let program = context.program(Implementation::Rust)?;
    let replica = world
        .replica("rust-1", Implementation::Rust, &program)?
        .with_controllers(CONTROLLERS);
    let mut replicas = vec![replica];
    let result = scenario(&mut world, &mut replicas, seed, interrupt).await;
    super::conclude(world, &mut replicas, result).await
}

async fn scenario(
    world: &mut World,
    replicas: &mut [super::replicas::Replica],
    seed: u64,
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    // The window starts when the CCM creates its cloud, a little after this: the faults end at
    // the latest `FAULT_WINDOW` after the process start plus that delay, so measuring from here
    // overstates, never understates, the convergence time.
    let launched = Instant::now();
    for replica in replicas.iter_mut() {
        world.start_replica(replica)?;
    }
    world
        .wait_for_leader(replicas, None, Duration::from_secs(90), interrupt)
        .await?;
    let workload = world.start_workload(Duration::ZERO).await?;
    let services: Api<Service> = Api::namespaced(world.client.clone(), "default");
    let churn = CHURN.spawn(services.clone());
    workload.finish().await?;
    churn.await??;
    let created = launched.elapsed();
    if created >= FAULT_WINDOW {
        bail!(
            "the workload took {} s, longer than the fault window",
            created.as_secs()
        );
    }
    eprintln!(
        "  {NODES} Nodes and {SERVICES} Services created, {} deleted, {:.1} s into the faults",
        CHURN.deleted_count(),
        created.as_secs_f64()
    );
    pause(FAULT_WINDOW - created, interrupt).await?;
    let faults_over = Instant::now();
    eprintln!("  faults over");

    let nodes_converged = world
        .converge(replicas, faults_over, CONVERGE_BOUND, interrupt)
        .await?;
    let problems = CHURN
        .wait(
            &services,
            &state_file(&world.dir),
            faults_over,
            CONVERGE_BOUND,
            interrupt,
        )
        .await?;
    let converge = nodes_converged.max(faults_over.elapsed());
    if !problems.is_empty() {
        bail!(
            "not converged {} s after the faults: {}",
            CONVERGE_BOUND.as_secs(),
            problems.join("; ")
        );
    }
    let deletions = node_deletions(&world.audit()?);
    if !deletions.is_empty() {
        bail!(
            "{} Nodes were deleted: {}",
            deletions.len(),
            deletions.join("; ")
        );
    }
    let proof = world.proof(replicas)?;
    let restarts = replicas.iter().map(|r| r.users.len()).sum::<usize>() - replicas.len();
    let mut notes = vec![format!(
        "seed {seed}: {NODES} nodes initialized, {} Services with exactly one load balancer, 0 \
         leaked, 0 Nodes deleted; converged {:.1} s after the faults (bound {} s)",
        SERVICES - CHURN.deleted_count() + 1,
        converge.as_secs_f64(),
        CONVERGE_BOUND.as_secs()
    )];
    if restarts > 0 {
        notes.push(format!(
            "the replica restarted {restarts} times (each restart re-creates the cloud and its window)"
        ));
    }
    Ok(Outcome {
        faults: 1,
        overlaps: proof.check().iter().map(ToString::to_string).collect(),
        leaks: 0,
        converge,
        failovers: Vec::new(),
        no_failover: 0,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use ccm_provider_fake::{FakeCloud, Inventory};

    use super::*;

    fn event(verb: &str, resource: &str, name: &str, code: u16) -> AuditEvent {
        let line = serde_json::json!({
            "responseStatus": {"code": code},
            "auditID": "1", "stage": "ResponseComplete", "verb": verb,
            "user": {"username": "rust-1.1"},
            "objectRef": {"resource": resource, "name": name},
            "requestReceivedTimestamp": "2026-01-01T00:00:00.000000Z",
            "stageTimestamp": "2026-01-01T00:00:00.000000Z"
        });
        ccm_testenv::audit::parse_log(&line.to_string(), Path::new("audit.log"))
            .expect("a valid audit event")
            .remove(0)
    }

    #[test]
    fn only_node_deletions_count() {
        let events = [
            event("delete", "nodes", "node-7", 200),
            event("delete", "nodes", "node-9", 404),
            event("delete", "services", "web", 200),
            event("update", "nodes", "node-8", 200),
            event("deletecollection", "nodes", "", 200),
        ];
        assert_eq!(
            node_deletions(&events),
            [
                "rust-1.1 deleted node node-7",
                "rust-1.1 deleted node (collection)"
            ]
        );
    }

    #[test]
    fn the_profile_is_a_valid_inventory() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let state = state_file(dir.path());
        let yaml = profile_yaml(5, dir.path());
        let inventory = Inventory::from_yaml_str(&yaml, "profile").expect("a valid inventory");
        let profile = inventory.random_faults.clone().expect("randomFaults");
        assert_eq!(profile.seed, 5);
        assert_eq!(profile.rules[0].operations.len(), Operation::ALL.len() - 1);
        assert!(
            !profile.rules[0]
                .operations
                .contains(&"initialize".to_owned())
        );
        assert_eq!(profile.rules[0].error_probability, ERROR_PROBABILITY);
        FakeCloud::from_inventory(inventory, "profile").expect("a valid cloud");
        assert!(state.is_file(), "the state file is written at creation");
    }
}
