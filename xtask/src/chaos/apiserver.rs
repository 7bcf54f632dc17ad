//! Scenario `apiserver-restart`: kube-apiserver is SIGKILLed and restarted on the same etcd, twice,
//! while 500 Nodes are registered and initialized and 100 LoadBalancer Services are created and
//! half of them deleted. Afterwards every Node must be initialized, every live Service must have
//! its load balancer (an ingress), and no deleted Service may be left stuck with its finalizer.
//! The audit log must show no two leaders (one replica, restarted if it exits).

use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::Context;
use super::report::Outcome;
use super::world::{self, World};
use crate::bench::lbs::{has_ingress, lb_service};
use crate::bench::support::{Implementation, pause};
use crate::process::Interrupt;

/// Nodes registered.
const NODES: usize = 500;

/// LoadBalancer Services created (besides the workload's own); every second one is deleted again.
const SERVICES: usize = 100;

/// How long the run may take to converge after the last restart.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(420);

/// The name of the `index`-th Service.
pub fn service_name(index: usize) -> String {
    format!("chaos-lb-{index:03}")
}

/// Whether the `index`-th Service is deleted during the run.
pub fn deleted(index: usize) -> bool {
    index % 2 == 1
}

/// What is wrong with the Services: live ones without an ingress, deleted ones still present
/// (`name` and whether it has a deletion timestamp, i.e. is stuck on its finalizer).
pub fn service_problems(live: &[(String, bool, bool)]) -> Vec<String> {
    let mut problems = Vec::new();
    for index in 0..SERVICES {
        let name = service_name(index);
        let found = live.iter().find(|(n, _, _)| *n == name);
        match (deleted(index), found) {
            (true, Some((_, _, true))) => {
                problems.push(format!("{name}: stuck with its finalizer"))
            }
            (true, Some(_)) => problems.push(format!("{name}: still exists after its delete")),
            (false, None) => problems.push(format!("{name}: missing")),
            (false, Some((_, false, _))) => problems.push(format!("{name}: no load balancer")),
            _ => {}
        }
    }
    problems
}

/// Runs the scenario once.
///
/// # Errors
/// If the set-up fails, the API server does not come back, or the cluster does not converge.
pub async fn run(context: &Context, label: &str, interrupt: &Interrupt) -> anyhow::Result<Outcome> {
    let mut world = World::start(label, NODES, interrupt).await?;
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
    let churn = {
        let services = services.clone();
        tokio::spawn(async move {
            for index in 0..SERVICES {
                world::create_retrying(&services, &lb_service(&service_name(index))).await?;
            }
            for index in (0..SERVICES).filter(|i| deleted(*i)) {
                world::delete_retrying(&services, &service_name(index)).await?;
            }
            anyhow::Ok(())
        })
    };

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
    let problems = loop {
        let list = services.list(&Default::default()).await?;
        let live: Vec<(String, bool, bool)> = list
            .items
            .iter()
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap_or_default(),
                    has_ingress(s),
                    s.metadata.deletion_timestamp.is_some(),
                )
            })
            .collect();
        let problems = service_problems(&live);
        if problems.is_empty() || faults_over.elapsed() >= CONVERGE_TIMEOUT {
            break problems;
        }
        pause(Duration::from_millis(500), interrupt).await?;
    };
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
            "{NODES} nodes initialized, {} Services with a load balancer, {} deleted Services gone \
             (the fake cloud's own load-balancer list is not inspected here; cloud-faults reads it \
             from the cloud's state file)",
            SERVICES / 2,
            SERVICES / 2
        )],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn converged() -> Vec<(String, bool, bool)> {
        (0..SERVICES)
            .filter(|i| !deleted(*i))
            .map(|i| (service_name(i), true, false))
            .collect()
    }

    #[test]
    fn a_converged_set_of_services_has_no_problem() {
        assert_eq!(service_problems(&converged()), Vec::<String>::new());
        assert_eq!(service_name(7), "chaos-lb-007");
        assert!(deleted(7) && !deleted(8));
    }

    #[test]
    fn missing_load_balancers_leftovers_and_stuck_finalizers_are_reported() {
        let mut live = converged();
        live[0].1 = false; // chaos-lb-000 without an ingress
        live.remove(1); // chaos-lb-002 missing
        live.push((service_name(1), true, true)); // deleted, stuck on its finalizer
        live.push((service_name(3), true, false)); // delete never happened
        let problems = service_problems(&live);
        assert_eq!(
            problems,
            [
                "chaos-lb-000: no load balancer",
                "chaos-lb-001: stuck with its finalizer",
                "chaos-lb-002: missing",
                "chaos-lb-003: still exists after its delete",
            ]
        );
    }
}
