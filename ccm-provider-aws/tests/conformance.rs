//! The AWS provider against the conformance suite, through the AWS SDK and the moto emulator this test binary
//! starts itself: one test per clause (strict mode passes: the capabilities it lacks are declared), the
//! error-kind clauses armed through an SDK interceptor answering AWS error documents, and the SDK-level checks
//! the suite does not make (one request per call: no SDK retries; an internal error stays `other`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_conformance::{
    Clause, ConformanceFixture, ConformanceSubject, InstanceRef, LoadBalancerInspector, run_all,
};
use ccm_core::intercept::Capability;
use ccm_core::{BoxError, CloudProvider, ErrorKind, InstancesV2};
use ccm_provider_aws::AwsCloud;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service};

use support::faults::{Fault, FaultQueue, Injector};
use support::{Machine, cluster_route_table, cluster_subnet, registered_targets, world};

fn instance_ref(machine: &Machine) -> InstanceRef {
    InstanceRef::new(&machine.dns)
        .with_provider_id(machine.provider_id())
        .with_internal_ip(&machine.ip)
}

/// The node names behind a Service's load balancer, read from ELBv2.
struct Inspector {
    elbv2: aws_sdk_elasticloadbalancingv2::Client,
    machines: Vec<Machine>,
}

#[async_trait]
impl LoadBalancerInspector for Inspector {
    async fn backend_nodes(
        &self,
        _cluster: &str,
        service: &Service,
    ) -> Result<Option<Vec<String>>, BoxError> {
        let name = ccm_core::helpers::default_load_balancer_name(service);
        Ok(registered_targets(&self.elbv2, &name).await.map(|ids| {
            ids.iter()
                .filter_map(|id| self.machines.iter().find(|m| &m.id == id))
                .map(|m| m.dns.clone())
                .collect()
        }))
    }
}

/// A fresh provider for one clause, with a cluster of its own (its tagged subnet and route table), so clauses
/// running at once share the emulator without seeing each other's load balancers and routes.
async fn subject_with(faults: FaultQueue) -> (ConformanceSubject, Arc<AwsCloud>) {
    let world = world().await;
    let clients = support::clients(&faults).await;
    let cluster = format!("conf-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    cluster_subnet(&clients.ec2, &world.vpc, &cluster).await;
    cluster_route_table(&clients.ec2, &world.vpc, &cluster).await;
    let m = &world.machines;
    let fixture = ConformanceFixture::new()
        .with_cluster_name(&cluster)
        .with_other_cluster_name(format!("{cluster}-other"))
        .with_running(instance_ref(&m[0]))
        .with_stopped(instance_ref(&m[1]))
        .with_unknown(
            InstanceRef::new("ip-10-0-63-254.ec2.internal")
                .with_provider_id("aws:///us-east-1a/i-0000000000deadbee"),
        )
        .with_backend_nodes(vec![
            instance_ref(&m[0]),
            instance_ref(&m[2]),
            instance_ref(&m[3]),
        ])
        .with_call_timeout(Duration::from_secs(30))
        .with_ready_timeout(Duration::from_secs(30))
        .with_clause_timeout(Duration::from_secs(300))
        .without_capabilities([
            Capability::Instances,
            Capability::Zones,
            Capability::Clusters,
        ]);
    let cloud = Arc::new(AwsCloud::new(clients.clone(), cluster.clone(), cluster));
    let subject = ConformanceSubject::new(Arc::clone(&cloud) as Arc<dyn CloudProvider>, fixture)
        .with_inspector(Inspector {
            elbv2: clients.elbv2.clone(),
            machines: m.clone(),
        })
        .with_error_injector(Injector(faults));
    (subject, cloud)
}

async fn factory() -> Result<ConformanceSubject, BoxError> {
    Ok(subject_with(FaultQueue::default()).await.0)
}

ccm_conformance::provider_conformance_tests!(factory);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_conforms_with_only_its_absent_capabilities_not_applicable() {
    let report = run_all(factory).await;
    assert_eq!(report.provider, "aws");
    assert!(report.is_success(), "{report}");
    assert!(report.skipped().is_empty(), "{report}");
    for clause in report.not_applicable() {
        // The provider does not list its load balancers (docs/aws-example.md, "Takeover"): a starting controller
        // ensures every Service, as Go's does, so the listing clause does not apply.
        assert!(
            clause == Clause::LoadBalancerListingReportsEnsured
                || matches!(
                    clause.capability(),
                    Some(Capability::Instances | Capability::Zones | Capability::Clusters)
                ),
            "{clause} is not applicable:\n{report}"
        );
    }
}

fn node_with_provider_id(machine: &Machine) -> Node {
    let mut node = Node::default();
    node.metadata.name = Some(machine.dns.clone());
    node.spec = Some(NodeSpec {
        provider_id: Some(machine.provider_id()),
        ..Default::default()
    });
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_is_one_request_and_kind_throttled_with_a_retry_after() {
    let faults = FaultQueue::default();
    let (_, cloud) = subject_with(faults.clone()).await;
    let node = node_with_provider_id(&world().await.machines[0]);
    let before = *faults.answers.lock().unwrap();
    faults.arm(Fault::Throttling);
    let err = cloud.instance_metadata(&node).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Throttled, "{err}");
    assert_eq!(
        err.retry_after(),
        Some(ccm_provider_aws::errors::THROTTLE_RETRY_AFTER)
    );
    assert!(err.to_string().contains("RequestLimitExceeded"), "{err}");
    // The SDK did not retry: exactly one answer for the call.
    assert_eq!(*faults.answers.lock().unwrap() - before, 1);
    // The next call goes through.
    assert!(cloud.instance_metadata(&node).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_error_is_other_and_not_retried_by_the_sdk() {
    let faults = FaultQueue::default();
    let (_, cloud) = subject_with(faults.clone()).await;
    let node = node_with_provider_id(&world().await.machines[0]);
    let before = *faults.answers.lock().unwrap();
    faults.arm(Fault::Internal);
    let err = cloud.instance_exists(&node).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other, "{err}");
    assert!(err.to_string().contains("InternalError"), "{err}");
    assert_eq!(*faults.answers.lock().unwrap() - before, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_instance_answer_is_instance_not_found() {
    let faults = FaultQueue::default();
    let (_, cloud) = subject_with(faults.clone()).await;
    let node = node_with_provider_id(&world().await.machines[0]);
    faults.arm(Fault::NotFound);
    let err = cloud.instance_metadata(&node).await.unwrap_err();
    assert!(err.is_instance_not_found(), "{err}");
    faults.arm(Fault::NotFound);
    assert!(!cloud.instance_exists(&node).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_lookups_answer_like_single_ones_in_one_request() {
    let faults = FaultQueue::default();
    let (_, cloud) = subject_with(faults.clone()).await;
    let world = world().await;
    let mut nodes: Vec<Node> = world.machines.iter().map(node_with_provider_id).collect();
    let mut by_name = Node::default();
    by_name.metadata.name = Some(world.machines[2].dns.clone());
    nodes.push(by_name);
    let mut ghost = node_with_provider_id(&world.machines[0]);
    ghost.spec.as_mut().unwrap().provider_id = Some("aws:///us-east-1a/i-0000000000deadbee".into());
    nodes.push(ghost);
    assert!(cloud.supports_bulk());
    let before = *faults.answers.lock().unwrap();
    let bulk = cloud.instance_metadata_bulk(&nodes).await.unwrap();
    // One request for the providerIDs, one for the name.
    assert_eq!(*faults.answers.lock().unwrap() - before, 2);
    for (node, answer) in nodes.iter().zip(&bulk) {
        let single = cloud.instance_metadata(node).await;
        match (answer, single) {
            (Ok(a), Ok(b)) => assert_eq!(a, &b),
            (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind()),
            (a, b) => panic!("bulk {a:?} and single {b:?} disagree"),
        }
    }
    assert!(bulk[5].as_ref().unwrap_err().is_instance_not_found());
    let exists = cloud.instance_exists_bulk(&nodes).await.unwrap();
    let exists: Vec<bool> = exists.into_iter().map(Result::unwrap).collect();
    assert_eq!(exists, [true, true, true, true, true, false]);
    // shut down: the stopped instance (index 1) only; the ghost is not found
    let before = *faults.answers.lock().unwrap();
    let shutdown = cloud.instance_shutdown_bulk(&nodes).await.unwrap();
    assert_eq!(*faults.answers.lock().unwrap() - before, 2);
    for (node, answer) in nodes.iter().zip(&shutdown) {
        let single = cloud.instance_shutdown(node).await;
        match (answer, single) {
            (Ok(a), Ok(b)) => assert_eq!(*a, b),
            (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind()),
            (a, b) => panic!("bulk {a:?} and single {b:?} disagree"),
        }
    }
    let stopped: Vec<bool> = shutdown[..5].iter().map(|a| *a.as_ref().unwrap()).collect();
    assert_eq!(stopped, [false, true, false, false, false]);
    assert!(shutdown[5].as_ref().unwrap_err().is_instance_not_found());
    assert!(!Arc::new((*cloud).clone().with_bulk_lookups(false)).supports_bulk());
}
