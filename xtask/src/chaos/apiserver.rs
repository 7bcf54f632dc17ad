//! Scenario `apiserver-restart`: kube-apiserver is SIGKILLed and restarted on the same etcd, twice,
//! while 500 Nodes are registered and initialized and 100 LoadBalancer Services are created and
//! half of them deleted. Afterwards every Node must be initialized, every live Service must have
//! its load balancer (an ingress) and exactly one load balancer in the fake cloud (read from the
//! cloud's state file), no deleted Service may be left stuck with its finalizer, and the cloud may
//! hold no load balancer without a Service. The audit log must show no two leaders (one replica,
//! restarted if it exits; the fake cloud lives in the replica's memory, so a restarted replica
//! starts with an empty cloud and must re-create the load balancers of the live Services).

use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::Context;
use super::report::Outcome;
use super::services::{Churn, state_file, state_file_yaml};
use super::world::World;
use crate::bench::support::{Implementation, pause};
use crate::process::Interrupt;

/// Nodes registered.
const NODES: usize = 500;

/// LoadBalancer Services created (besides the workload's own); every second one is deleted again.
const SERVICES: usize = 100;

/// How long the run may take to converge after the last restart.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(420);

/// The Services created during the restarts: `chaos-lb-000` to `chaos-lb-099`, every second
/// deleted.
const CHURN: Churn = Churn {
    prefix: "chaos-lb",
    count: SERVICES,
    width: 3,
    delete_every: 2,
};

/// Runs the scenario once.
///
/// # Errors
/// If the set-up fails, the API server does not come back, or the cluster does not converge.
pub async fn run(context: &Context, label: &str, interrupt: &Interrupt) -> anyhow::Result<Outcome> {
    let mut world = World::start_with(label, NODES, state_file_yaml, interrupt).await?;
    let program = context.program(Implementation::Rust)?;
    let mut replicas = vec![world.replica("rust-1", Implementation::Rust, &program)?];
    let result = scenario(&mut world, &mut replicas, interrupt).await;
    super::conclude(world, &mut replicas, result).await
}

async fn scenario(
    world: &mut World,
    replicas: &mut [super::replicas::Replica],
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    for replica in replicas.iter_mut() {
        world.start_replica(replica)?;
    }
    world
        .wait_for_leader(replicas, None, Duration::from_secs(90), interrupt)
        .await?;
    let workload = world.start_workload(Duration::ZERO).await?;
    let services: Api<Service> = Api::namespaced(world.client.clone(), "default");
    let churn = CHURN.spawn(services.clone());

    for restart in 1..=2 {
        pause(Duration::from_secs(6), interrupt).await?;
        let started = Instant::now();
        world.restart_apiserver().await?;
        eprintln!(
            "  restarted kube-apiserver ({restart}/2), ready after {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let faults_over = Instant::now();
    workload.finish().await?;
    churn.await??;
    let converge = world
        .converge(replicas, faults_over, CONVERGE_TIMEOUT, interrupt)
        .await?;
    // The Services converge on their own schedule: wait for them too, within the same bound.
    let problems = CHURN
        .wait(
            &services,
            &state_file(&world.dir),
            faults_over,
            CONVERGE_TIMEOUT,
            interrupt,
        )
        .await?;
    if !problems.is_empty() {
        bail!(
            "{} Services did not converge: {}",
            problems.len(),
            problems.join("; ")
        );
    }
    let converge = converge.max(faults_over.elapsed());
    let proof = world.proof(replicas)?;
    Ok(Outcome {
        faults: 2,
        overlaps: proof.check().iter().map(ToString::to_string).collect(),
        leaks: 0,
        converge,
        failovers: Vec::new(),
        no_failover: 0,
        notes: vec![format!(
            "{NODES} nodes initialized, {} Services with exactly one load balancer in the cloud, \
             {} deleted Services gone, 0 load balancers leaked",
            SERVICES - CHURN.deleted_count() + 1,
            CHURN.deleted_count()
        )],
    })
}
