//! Fault injection (once, N times, always, targeted), the retry-after error, latency and the call log.

mod common;

use std::sync::Arc;
use std::time::Duration;

use ccm_core::{CloudError, CloudProvider, ErrorKind, InitializeContext, Route};
use ccm_provider_fake::{Call, FakeCloud, FakeInstance, Fault, InjectedError, Times, ops};
use common::{node, service};

#[tokio::test]
async fn fault_once_fails_one_call_then_the_cloud_answers_again() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a"));
    let v2 = cloud.instances_v2().unwrap();
    cloud.inject(
        ops::INSTANCE_EXISTS,
        Fault::once(InjectedError::Other("api down".into())),
    );
    assert_eq!(cloud.pending_faults(ops::INSTANCE_EXISTS), 1);
    let err = v2.instance_exists(&node("node-a", "")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert_eq!(
        err.to_string(),
        "injected failure of instance-exists: api down"
    );
    assert!(v2.instance_exists(&node("node-a", "")).await.unwrap());
    assert_eq!(cloud.pending_faults(ops::INSTANCE_EXISTS), 0);
    // both calls were logged, the failed one too
    assert_eq!(cloud.call_count(ops::INSTANCE_EXISTS), 2);
}

#[tokio::test]
async fn fault_n_times_fails_exactly_n_calls() {
    let cloud = FakeCloud::new();
    let lbs = CloudProvider::load_balancer(&cloud).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        ops::ENSURE_LOAD_BALANCER,
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
    assert_eq!(cloud.call_count(ops::ENSURE_LOAD_BALANCER), 4);
}

#[tokio::test]
async fn fault_always_fails_until_cleared_and_only_its_operation() {
    let cloud = FakeCloud::new();
    let r = CloudProvider::routes(&cloud).unwrap();
    cloud.inject(
        ops::LIST_ROUTES,
        Fault {
            error: InjectedError::Timeout,
            times: Times::Always,
        },
    );
    for _ in 0..10 {
        let err = r.list_routes("kubernetes").await.unwrap_err();
        assert!(
            matches!(err, CloudError::Timeout { ref operation, .. } if operation == "list-routes"),
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
    let lbs = CloudProvider::load_balancer(&cloud).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        ops::ENSURE_LOAD_BALANCER,
        Fault::once(InjectedError::Retry(Duration::from_secs(5))),
    );
    cloud.inject(
        ops::ENSURE_LOAD_BALANCER,
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
    let lbs = CloudProvider::load_balancer(&cloud).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        ops::ENSURE_LOAD_BALANCER,
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
        ops::ENSURE_LOAD_BALANCER,
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
    let v1 = CloudProvider::instances(&cloud).unwrap();
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
        cloud.inject(ops::INSTANCE_ID, Fault::once(injected.clone()));
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
    let v2 = cloud.instances_v2().unwrap();
    cloud.inject_for(
        ops::INSTANCE_METADATA,
        "node-b",
        Fault::always(InjectedError::Throttled),
    );
    assert!(v2.instance_metadata(&node("node-a", "")).await.is_ok());
    assert!(v2.instance_metadata(&node("node-b", "")).await.is_err());
    assert!(v2.instance_metadata(&node("node-b", "")).await.is_err());
    // a node with a providerID is targeted by its providerID
    cloud.inject_for(
        ops::INSTANCE_EXISTS,
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
    cloud.set_latency(ops::INSTANCE_EXISTS, Duration::from_secs(30));
    let v2 = cloud.instances_v2().unwrap();
    let start = tokio::time::Instant::now();
    let call = tokio::spawn({
        let v2 = v2.clone();
        async move { v2.instance_exists(&node("node-a", "")).await }
    });
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(!call.is_finished(), "still waiting after 29 s");
    // the call is logged on arrival, before its latency
    assert_eq!(cloud.calls(), [Call::new(ops::INSTANCE_EXISTS, "node-a")]);
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
    cloud.set_latency(ops::LIST_CLUSTERS, Duration::from_secs(2));
    let clusters = cloud.clusters().unwrap();
    let zones = cloud.zones().unwrap();

    let start = tokio::time::Instant::now();
    let _ = zones.get_zone().await;
    assert_eq!(start.elapsed(), Duration::from_millis(250));

    cloud.inject(ops::LIST_CLUSTERS, Fault::once(InjectedError::Timeout));
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

    cloud.set_latency(ops::LIST_CLUSTERS, Duration::from_secs(1));
    cloud.inject(ops::LIST_CLUSTERS, Fault::always(InjectedError::Throttled));
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
        ops::LIST_CLUSTERS,
        Fault::once(InjectedError::NotImplemented),
    );
    let clusters = provider.clusters().unwrap();
    assert!(clusters.list_clusters().await.is_err());
    assert!(clusters.master("x").await.is_err());
    assert_eq!(cloud.call_ops(), [ops::LIST_CLUSTERS, ops::MASTER]);
    assert_eq!(cloud.call_ops(), ["list", "master"]);
    assert_eq!(cloud.call_targets(ops::MASTER), ["x"]);
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
        ops::INITIALIZE,
        Fault::once(InjectedError::Other("no credentials".into())),
    );
    let err = cloud.initialize(ctx).await.unwrap_err();
    assert!(err.to_string().contains("no credentials"), "{err}");
    assert_eq!(cloud.call_ops(), ["initialize", "initialize"]);
}

/// A client that is never used to send anything (it points at an address nothing listens on).
fn kube_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a valid URL"));
    kube::Client::try_from(config).expect("a client from a plain HTTP config")
}

fn tokio_util_token() -> tokio_util::sync::CancellationToken {
    tokio_util::sync::CancellationToken::new()
}

#[test]
fn every_operation_name_matches_ccm_core() {
    use ccm_core::intercept::Operation;
    for op in Operation::ALL {
        assert!(
            ops::ALL.contains(&op.as_str()),
            "{op:?} = {} is missing from ops::ALL",
            op.as_str()
        );
    }
    for name in ops::ALL {
        assert!(
            Operation::from_name(name).is_some() || *name == ops::INITIALIZE,
            "{name} is unknown to ccm-core"
        );
    }
    assert_eq!(ops::ALL.len(), Operation::ALL.len() + 1);
    let expected = [
        (ops::ENSURE_LOAD_BALANCER, "create"),
        (ops::UPDATE_LOAD_BALANCER, "update"),
        (ops::ENSURE_LOAD_BALANCER_DELETED, "delete"),
        (ops::GET_LOAD_BALANCER, "get-load-balancer"),
        (ops::NODE_ADDRESSES, "node-addresses"),
        (
            ops::NODE_ADDRESSES_BY_PROVIDER_ID,
            "node-addresses-by-provider-id",
        ),
        (ops::INSTANCE_ID, "instance-id"),
        (ops::INSTANCE_TYPE, "instance-type"),
        (
            ops::INSTANCE_TYPE_BY_PROVIDER_ID,
            "instance-type-by-provider-id",
        ),
        (
            ops::INSTANCE_EXISTS_BY_PROVIDER_ID,
            "instance-exists-by-provider-id",
        ),
        (
            ops::INSTANCE_SHUTDOWN_BY_PROVIDER_ID,
            "instance-shutdown-by-provider-id",
        ),
        (ops::INSTANCE_EXISTS, "instance-exists"),
        (ops::INSTANCE_SHUTDOWN, "instance-shutdown"),
        (ops::INSTANCE_METADATA, "instance-metadata-by-provider-id"),
        (ops::GET_ZONE, "get-zone"),
        (ops::GET_ZONE_BY_PROVIDER_ID, "get-zone-by-provider-id"),
        (ops::GET_ZONE_BY_NODE_NAME, "get-zone-by-node-name"),
        (ops::LIST_CLUSTERS, "list"),
        (ops::MASTER, "master"),
        (ops::LIST_ROUTES, "list-routes"),
        (ops::CREATE_ROUTE, "create-route"),
        (ops::DELETE_ROUTE, "delete-route"),
        (ops::INITIALIZE, "initialize"),
    ];
    for (constant, name) in expected {
        assert_eq!(constant, name);
    }
    assert!(ops::is_known("create"));
    assert!(!ops::is_known("ensure"));
}

#[tokio::test(start_paused = true)]
async fn wait_for_calls_resolves_when_the_call_arrives() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a"));
    let waiter = tokio::spawn({
        let cloud = cloud.clone();
        async move { cloud.wait_for_calls(ops::INSTANCE_EXISTS, 2).await }
    });
    let v2 = cloud.instances_v2().unwrap();
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
        cloud.wait_for_calls(ops::INSTANCE_EXISTS, 1),
    )
    .await
    .unwrap();
    // never satisfied: times out
    assert!(
        tokio::time::timeout(Duration::from_secs(5), cloud.wait_for_calls(ops::MASTER, 1))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn failed_load_balancer_calls_are_recorded_with_their_hosts() {
    let cloud = FakeCloud::new();
    let lbs = CloudProvider::load_balancer(&cloud).unwrap();
    let svc = service("default", "web", &[80]);
    cloud.inject(
        ops::ENSURE_LOAD_BALANCER,
        Fault::once(InjectedError::Throttled),
    );
    let _ = lbs
        .ensure_load_balancer("k", &svc, &common::nodes(&["b", "a"]))
        .await;
    let calls = cloud.load_balancer_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].op.as_str(), calls[0].service.as_str()),
        ("create", "default/web")
    );
    assert_eq!(calls[0].hosts, ["a", "b"]);
    assert!(cloud.load_balancer("default/web").is_none());
}
