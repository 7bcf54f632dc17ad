//! Fault injection (once, N times, always, targeted), the retry-after error, latency and the call log.

mod common;

use std::sync::Arc;
use std::time::Duration;

use ccm_core::{CloudError, CloudProvider, ErrorKind, InitializeContext, Route};
use ccm_provider_fake::{Call, FakeCloud, FakeInstance, Fault, InjectedError, Operation, Times};
use common::{node, service};

#[tokio::test]
async fn fault_once_fails_one_call_then_the_cloud_answers_again() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a"));
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    cloud.inject(
        Operation::InstanceExists,
        Fault::once(InjectedError::Other("api down".into())),
    );
    assert_eq!(cloud.pending_faults(Operation::InstanceExists), 1);
    let err = v2.instance_exists(&node("node-a", "")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert_eq!(
        err.to_string(),
        "injected failure of instance-exists: api down"
    );
    assert!(v2.instance_exists(&node("node-a", "")).await.unwrap());
    assert_eq!(cloud.pending_faults(Operation::InstanceExists), 0);
    // both calls were logged, the failed one too
    assert_eq!(cloud.call_count(Operation::InstanceExists), 2);
}

#[tokio::test]
async fn fault_n_times_fails_exactly_n_calls() {
    let cloud = FakeCloud::new();
    let lbs = CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone())).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        Operation::EnsureLoadBalancer,
        Fault::times(InjectedError::Throttled, 3),
    );
    for attempt in 0..3 {
        let err = lbs
            .ensure_load_balancer("kubernetes", &svc, &[])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Throttled, "attempt {attempt}");
        assert!(
            cloud.load_balancer("default/web").is_none(),
            "a failed call changes nothing"
        );
    }
    lbs.ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert!(cloud.load_balancer("default/web").is_some());
    assert_eq!(cloud.call_count(Operation::EnsureLoadBalancer), 4);
}

#[tokio::test]
async fn fault_always_fails_until_cleared_and_only_its_operation() {
    let cloud = FakeCloud::new();
    let r = CloudProvider::routes(std::sync::Arc::new(cloud.clone())).unwrap();
    cloud.inject(
        Operation::ListRoutes,
        Fault {
            error: InjectedError::Timeout,
            times: Times::Always,
        },
    );
    for _ in 0..10 {
        let err = r.list_routes("kubernetes").await.unwrap_err();
        assert!(
            matches!(err, CloudError::Timeout { operation, .. } if operation == Operation::ListRoutes),
            "{err}"
        );
    }
    r.create_route("kubernetes", "h", &Route::new("n", "10.244.0.0/24"))
        .await
        .unwrap();
    cloud.clear_faults();
    assert_eq!(r.list_routes("kubernetes").await.unwrap().len(), 1);
}

#[tokio::test]
async fn faults_of_one_operation_fire_in_order() {
    let cloud = FakeCloud::new();
    let lbs = CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone())).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        Operation::EnsureLoadBalancer,
        Fault::once(InjectedError::Retry(Duration::from_secs(5))),
    );
    cloud.inject(
        Operation::EnsureLoadBalancer,
        Fault::once(InjectedError::ImplementedElsewhere),
    );
    let kinds = [
        lbs.ensure_load_balancer("k", &svc, &[])
            .await
            .unwrap_err()
            .kind(),
        lbs.ensure_load_balancer("k", &svc, &[])
            .await
            .unwrap_err()
            .kind(),
    ];
    assert_eq!(kinds, [ErrorKind::Retry, ErrorKind::ImplementedElsewhere]);
    assert!(lbs.ensure_load_balancer("k", &svc, &[]).await.is_ok());
}

#[tokio::test]
async fn retry_after_error_carries_its_delay() {
    let cloud = FakeCloud::new();
    let lbs = CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone())).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        Operation::EnsureLoadBalancer,
        Fault::once(InjectedError::Retry(Duration::from_secs(42))),
    );
    let err = lbs
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Retry);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(42)));
    // wrapping keeps it detectable
    assert_eq!(
        err.context("syncing default/web").retry_after(),
        Some(Duration::from_secs(42))
    );

    cloud.inject(
        Operation::EnsureLoadBalancer,
        Fault::once(InjectedError::ThrottledFor(Duration::from_secs(7))),
    );
    let err = lbs
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Throttled);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn every_injected_error_kind_reaches_the_caller() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a"));
    let v1 = CloudProvider::instances(std::sync::Arc::new(cloud.clone())).unwrap();
    let cases = [
        (InjectedError::InstanceNotFound, ErrorKind::InstanceNotFound),
        (InjectedError::NotImplemented, ErrorKind::NotImplemented),
        (
            InjectedError::ImplementedElsewhere,
            ErrorKind::ImplementedElsewhere,
        ),
        (InjectedError::Throttled, ErrorKind::Throttled),
        (InjectedError::Timeout, ErrorKind::Timeout),
        (
            InjectedError::Retry(Duration::from_secs(1)),
            ErrorKind::Retry,
        ),
        (InjectedError::Other("x".into()), ErrorKind::Other),
    ];
    for (injected, kind) in cases {
        cloud.inject(Operation::InstanceId, Fault::once(injected.clone()));
        assert_eq!(
            v1.instance_id("node-a").await.unwrap_err().kind(),
            kind,
            "{injected:?}"
        );
    }
    assert_eq!(v1.instance_id("node-a").await.unwrap(), "node-a");
}

#[tokio::test]
async fn targeted_fault_fails_only_calls_about_its_target() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a"));
    cloud.add_instance(FakeInstance::new("node-b"));
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    cloud.inject_for(
        Operation::InstanceMetadata,
        "node-b",
        Fault::always(InjectedError::Throttled),
    );
    assert!(v2.instance_metadata(&node("node-a", "")).await.is_ok());
    assert!(v2.instance_metadata(&node("node-b", "")).await.is_err());
    assert!(v2.instance_metadata(&node("node-b", "")).await.is_err());
    // a node with a providerID is targeted by its providerID
    cloud.inject_for(
        Operation::InstanceExists,
        "fake://node-a",
        Fault::once(InjectedError::Throttled),
    );
    assert!(v2.instance_exists(&node("node-a", "")).await.is_ok());
    assert!(
        v2.instance_exists(&node("node-a", "fake://node-a"))
            .await
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn latency_delays_the_answer_in_paused_time() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a"));
    cloud.set_latency(Operation::InstanceExists, Duration::from_secs(30));
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let start = tokio::time::Instant::now();
    let call = tokio::spawn({
        let v2 = v2.clone();
        async move { v2.instance_exists(&node("node-a", "")).await }
    });
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(!call.is_finished(), "still waiting after 29 s");
    // the call is logged on arrival, before its latency
    assert_eq!(
        cloud.calls(),
        [Call::new(Operation::InstanceExists, "node-a")]
    );
    assert!(call.await.unwrap().unwrap());
    assert_eq!(start.elapsed(), Duration::from_secs(30));

    // other operations are not delayed
    let start = tokio::time::Instant::now();
    v2.instance_shutdown(&node("node-a", "")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn default_latency_timeout_error_and_clearing() {
    let cloud = FakeCloud::new();
    cloud.set_default_latency(Duration::from_millis(250));
    cloud.set_latency(Operation::ListClusters, Duration::from_secs(2));
    let clusters = std::sync::Arc::new(cloud.clone()).clusters().unwrap();
    let zones = std::sync::Arc::new(cloud.clone()).zones().unwrap();

    let start = tokio::time::Instant::now();
    let _ = zones.get_zone().await;
    assert_eq!(start.elapsed(), Duration::from_millis(250));

    cloud.inject(Operation::ListClusters, Fault::once(InjectedError::Timeout));
    let start = tokio::time::Instant::now();
    let err = clusters.list_clusters().await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert!(
        matches!(err, CloudError::Timeout { after, .. } if after == Duration::from_secs(2)),
        "{err}"
    );

    cloud.clear_latency();
    let start = tokio::time::Instant::now();
    clusters.list_clusters().await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);

    cloud.set_latency(Operation::ListClusters, Duration::from_secs(1));
    cloud.inject(
        Operation::ListClusters,
        Fault::always(InjectedError::Throttled),
    );
    cloud.clear_faults();
    let start = tokio::time::Instant::now();
    clusters.list_clusters().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "clear_faults removes latencies too"
    );
}

#[tokio::test]
async fn clones_share_the_call_log_and_faults() {
    let cloud = FakeCloud::new();
    let provider: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
    let other_handle = cloud.clone();
    other_handle.inject(
        Operation::ListClusters,
        Fault::once(InjectedError::NotImplemented),
    );
    let clusters = provider.clusters().unwrap();
    assert!(clusters.list_clusters().await.is_err());
    assert!(clusters.master("x").await.is_err());
    assert_eq!(
        cloud.call_ops(),
        [Operation::ListClusters, Operation::Master]
    );
    assert_eq!(cloud.call_targets(Operation::Master), ["x"]);
    other_handle.clear_calls();
    assert!(cloud.calls().is_empty());
}

#[tokio::test]
async fn initialize_is_logged_and_can_fail() {
    let cloud = FakeCloud::new();
    let client = kube_client();
    let ctx = InitializeContext::new(client, tokio_util_token());
    cloud.initialize(ctx.clone()).await.unwrap();
    cloud.inject(
        Operation::Initialize,
        Fault::once(InjectedError::Other("no credentials".into())),
    );
    let err = cloud.initialize(ctx).await.unwrap_err();
    assert!(err.to_string().contains("no credentials"), "{err}");
    assert_eq!(
        cloud.call_ops(),
        [Operation::Initialize, Operation::Initialize]
    );
}

/// A client that is never used to send anything (it points at an address nothing listens on).
fn kube_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a valid URL"));
    kube::Client::try_from(config).expect("a client from a plain HTTP config")
}

fn tokio_util_token() -> tokio_util::sync::CancellationToken {
    tokio_util::sync::CancellationToken::new()
}

/// The fake cloud has no operation names of its own: its inventory takes exactly the names of ccm-core's
/// `Operation` table.
#[test]
fn the_inventory_takes_every_operation_name_of_ccm_core() {
    for op in Operation::ALL {
        let yaml = format!(
            "latency: {{{name}: 1s}}\nfaults:\n  - {{operation: {name}, error: timeout, times: 1}}\n",
            name = op.as_str()
        );
        let cloud = FakeCloud::from_inventory_str(&yaml, "inventory.yaml")
            .unwrap_or_else(|e| panic!("{op:?}: {e}"));
        assert_eq!(cloud.pending_faults(op), 1, "{op:?}");
    }
    let err = FakeCloud::from_inventory_str("latency: {instance-metadata: 1s}\n", "inventory.yaml")
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with(&format!("known operations: {}", Operation::names())),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn wait_for_calls_resolves_when_the_call_arrives() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a"));
    let waiter = tokio::spawn({
        let cloud = cloud.clone();
        async move { cloud.wait_for_calls(Operation::InstanceExists, 2).await }
    });
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    v2.instance_exists(&node("node-a", "")).await.unwrap();
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished(), "one call is not enough");
    v2.instance_exists(&node("node-a", "")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("woken by the second call")
        .unwrap();
    // already satisfied: returns at once
    tokio::time::timeout(
        Duration::from_millis(1),
        cloud.wait_for_calls(Operation::InstanceExists, 1),
    )
    .await
    .unwrap();
    // never satisfied: times out
    assert!(
        tokio::time::timeout(
            Duration::from_secs(5),
            cloud.wait_for_calls(Operation::Master, 1)
        )
        .await
        .is_err()
    );
}

#[tokio::test]
async fn failed_load_balancer_calls_are_recorded_with_their_hosts() {
    let cloud = FakeCloud::new();
    let lbs = CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone())).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        Operation::EnsureLoadBalancer,
        Fault::once(InjectedError::Throttled),
    );
    let _ = lbs
        .ensure_load_balancer("k", &svc, &common::nodes(&["b", "a"]))
        .await;
    let calls = cloud.load_balancer_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].op, calls[0].service.as_str()),
        (Operation::EnsureLoadBalancer, "default/web")
    );
    assert_eq!(calls[0].hosts, ["a", "b"]);
    assert!(cloud.load_balancer("default/web").is_none());
}
