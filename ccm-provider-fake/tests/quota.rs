//! The API quota: token-bucket semantics under paused time, what counts against it, the inventory's `quota:`
//! key, and (the point of it) that ccm-core's cloud-call budget keeps a caller inside it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use ccm_core::budget::{CloudBudget, RateLimitInterceptor};
use ccm_core::intercept::InterceptedProvider;
use ccm_core::{CloudProvider, ErrorKind, InitializeContext};
use ccm_provider_fake::{FakeCloud, FakeInstance, InventoryError, Operation, QuotaError};
use common::{node, nodes};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn cloud_with(names: &[&str]) -> FakeCloud {
    let cloud = FakeCloud::new();
    for name in names {
        cloud.add_instance(FakeInstance::new(*name));
    }
    cloud
}

#[tokio::test(start_paused = true)]
async fn calls_beyond_the_bucket_are_throttled_logged_and_counted() {
    let cloud = cloud_with(&["a"]);
    cloud.set_quota(10.0, 3).unwrap();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let a = node("a", "");
    for _ in 0..3 {
        assert!(v2.instance_exists(&a).await.unwrap());
    }
    let err = v2.instance_metadata(&a).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Throttled);
    let wait = err.retry_after().expect("a retry-after hint");
    assert!(
        wait.abs_diff(Duration::from_millis(100)) < Duration::from_micros(1),
        "{wait:?}"
    );
    assert!(
        err.to_string().contains("exceeded by instance-metadata"),
        "{err}"
    );
    assert_eq!(cloud.throttled_count(), 1);
    // the rejected call is in the log like any other
    assert_eq!(cloud.call_count(Operation::InstanceMetadata), 1);
    assert_eq!(cloud.call_count(Operation::InstanceExists), 3);

    // after the hint, one more call fits
    tokio::time::advance(wait).await;
    assert!(v2.instance_exists(&a).await.unwrap());
    assert!(v2.instance_exists(&a).await.is_err());
    assert_eq!(cloud.throttled_count(), 2);

    cloud.clear_calls();
    assert_eq!(cloud.throttled_count(), 0, "clear_calls resets the count");
    cloud.clear_quota();
    for _ in 0..100 {
        assert!(v2.instance_exists(&a).await.unwrap());
    }
    assert_eq!(cloud.throttled_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_throttled_call_fails_before_latency_and_faults() {
    let cloud = cloud_with(&["a"]);
    cloud.set_quota(1.0, 1).unwrap();
    cloud.set_latency(Operation::InstanceExists, Duration::from_secs(5));
    cloud.inject(
        Operation::InstanceExists,
        ccm_provider_fake::Fault::once(ccm_provider_fake::InjectedError::NotImplemented),
    );
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let a = node("a", "");
    // the first call takes the token, waits its latency and gets the injected fault
    let start = Instant::now();
    assert_eq!(
        v2.instance_exists(&a).await.unwrap_err().kind(),
        ErrorKind::NotImplemented
    );
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    // 5 s later the bucket holds one token again (its burst), no more
    cloud.clear_latency();
    assert!(v2.instance_exists(&a).await.unwrap());
    let start = Instant::now();
    assert_eq!(
        v2.instance_exists(&a).await.unwrap_err().kind(),
        ErrorKind::Throttled
    );
    assert_eq!(start.elapsed(), Duration::ZERO, "rejected at once");
}

#[tokio::test(start_paused = true)]
async fn a_bulk_call_takes_one_token_and_initialize_takes_none() {
    let names = ["a", "b", "c", "d", "e"];
    let cloud = cloud_with(&names);
    cloud.set_bulk(true);
    cloud.set_quota(1.0, 1).unwrap();
    // never contacted
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:9".parse().expect("a valid URL"),
    ))
    .expect("a client");
    for _ in 0..3 {
        cloud
            .initialize(InitializeContext::new(
                client.clone(),
                CancellationToken::new(),
            ))
            .await
            .expect("initialize is not an API request");
    }
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let answers = v2.instance_exists_bulk(&nodes(&names)).await.unwrap();
    assert_eq!(answers.len(), 5);
    assert!(answers.into_iter().all(|a| a.unwrap()));
    assert_eq!(
        v2.instance_metadata_bulk(&nodes(&names))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Throttled
    );
    assert_eq!(cloud.throttled_count(), 1);
}

#[test]
fn an_invalid_quota_is_refused_and_the_old_one_kept() {
    let cloud = cloud_with(&[]);
    cloud.set_quota(5.0, 5).unwrap();
    assert_eq!(
        cloud.set_quota(0.0, 5).unwrap_err(),
        QuotaError::InvalidRate(0.0)
    );
    assert_eq!(cloud.set_quota(5.0, 0).unwrap_err(), QuotaError::ZeroBurst);
    assert!(matches!(
        cloud.set_quota(f64::INFINITY, 5),
        Err(QuotaError::InvalidRate(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn the_inventory_sets_a_quota() {
    let cloud = FakeCloud::from_inventory_str(
        "instances: [{name: a}]\nquota: {requestsPerSecond: 2.5}\n",
        "inventory.yaml",
    )
    .unwrap();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let a = node("a", "");
    // the burst defaults to the rate rounded up: 3
    for _ in 0..3 {
        assert!(v2.instance_exists(&a).await.unwrap());
    }
    assert!(v2.instance_exists(&a).await.is_err());
    assert_eq!(cloud.throttled_count(), 1);

    let cloud = FakeCloud::from_inventory_str(
        "quota: {requestsPerSecond: 100, burst: 1}\n",
        "inventory.yaml",
    )
    .unwrap();
    cloud.add_instance(FakeInstance::new("a"));
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    assert!(v2.instance_exists(&a).await.is_ok());
    assert!(v2.instance_exists(&a).await.is_err());
}

#[test]
fn inventory_quota_errors_name_the_field() {
    let err = |yaml: &str| match FakeCloud::from_inventory_str(yaml, "inventory.yaml") {
        Ok(_) => panic!("expected an error for {yaml}"),
        Err(err) => err,
    };
    let e = err("quota: {requestsPerSecond: 0}\n");
    assert!(
        matches!(e, InventoryError::Invalid { ref path, .. } if path == "quota.requestsPerSecond"),
        "{e}"
    );
    assert!(e.to_string().contains("greater than 0"), "{e}");
    let e = err("quota: {requestsPerSecond: 10, burst: 0}\n");
    assert!(
        matches!(e, InventoryError::Invalid { ref path, .. } if path == "quota.burst"),
        "{e}"
    );
    let e = err("quota: {rps: 10}\n");
    assert!(e.to_string().contains("rps"), "{e}");
    let e = err("quota: {burst: 10}\n");
    assert!(e.to_string().contains("requestsPerSecond"), "{e}");
}

/// One `instance_exists` call per node, all at once, each from its own task.
async fn exists_concurrently(
    cloud: &Arc<dyn CloudProvider>,
    fleet: &[k8s_openapi::api::core::v1::Node],
) -> Vec<Result<bool, ccm_core::CloudError>> {
    let v2 = Arc::clone(cloud).instances_v2().expect("InstancesV2");
    let mut tasks = tokio::task::JoinSet::new();
    for node in fleet {
        let (v2, node) = (v2.clone(), node.clone());
        tasks.spawn(async move { v2.instance_exists(&node).await });
    }
    tasks.join_all().await
}

/// 1,000 concurrent callers against a quota of 50 requests per second: through ccm-core's budget at 45 per
/// second none is throttled (they wait instead); without it, everything beyond the burst is.
#[tokio::test(start_paused = true)]
async fn the_budget_keeps_a_caller_inside_the_quota() {
    let names: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
    let fleet: Vec<_> = names.iter().map(|n| node(n, "")).collect();
    let cloud = FakeCloud::new();
    for name in &names {
        cloud.add_instance(FakeInstance::new(name.clone()));
    }
    cloud.set_quota(50.0, 50).unwrap();

    let budget = CloudBudget::default().with_qps(45.0).with_burst(40);
    let limited: Arc<dyn CloudProvider> = Arc::new(
        InterceptedProvider::new(Arc::new(cloud.clone())).with_interceptor(
            RateLimitInterceptor::new(&budget, CancellationToken::new()).unwrap(),
        ),
    );
    let start = Instant::now();
    let results = exists_concurrently(&limited, &fleet).await;
    let took = start.elapsed();
    assert!(results.iter().all(|r| matches!(r, Ok(true))));
    assert_eq!(cloud.throttled_count(), 0);
    // 40 at once, then 960 more at 45 per second
    let expected = Duration::from_secs_f64(960.0 / 45.0);
    assert!(
        took.abs_diff(expected) < Duration::from_millis(50),
        "{took:?}"
    );

    // the same callers without a budget: only the burst gets through
    tokio::time::advance(Duration::from_secs(60)).await;
    cloud.clear_calls();
    let raw: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
    let results = exists_concurrently(&raw, &fleet).await;
    let throttled = results
        .iter()
        .filter(|r| matches!(r, Err(e) if e.kind() == ErrorKind::Throttled))
        .count();
    assert_eq!(throttled, 950);
    assert_eq!(cloud.throttled_count(), 950);
}
