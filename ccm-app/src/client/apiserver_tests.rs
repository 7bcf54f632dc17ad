//! The Kubernetes API client limit against a real kube-apiserver (v1.36, API Priority and Fairness on by default):
//! APF is detected for the admin and a ServiceAccount alike, unset limits run without a client-side limit, and
//! explicit limits (Go's rules) are honoured exactly. What the runtime shows in `/configz` for the same decisions
//! is tested through the public API in `tests/kube_api_limits.rs`.

use std::time::{Duration, Instant};

use ccm_core::ProviderRegistry;
use ccm_provider_fake::FakeCloud;
use ccm_testenv::TestEnv;

use crate::client::{ClientFactory, KubeApiLimitMode, KubeApiLimits, detect_apf};

/// Send `n` cheap requests one after the other through `client`; how long they took.
async fn time_requests(client: &kube::Client, n: usize) -> Duration {
    let started = Instant::now();
    for _ in 0..n {
        client.apiserver_version().await.expect("GET /version");
    }
    started.elapsed()
}

#[tokio::test]
async fn unset_limits_detect_apf_and_run_unlimited() {
    let env = TestEnv::shared().await;
    // Every request classified by APF carries its headers: the admin (exempt) and a ServiceAccount alike.
    assert!(detect_apf(&env.client()).await.expect("GET /version"));
    let ns = env.namespace("apf").await;
    let account = env.client_for_service_account(&ns, "ccm").await;
    assert!(detect_apf(&account).await.expect("GET /version"));

    let options = crate::CcmOptions::default();
    let limits = KubeApiLimits::resolve(&account, &options).await;
    assert_eq!(
        (limits.mode, limits.apf, limits.qps),
        (KubeApiLimitMode::Auto, Some(true), None)
    );
    // 100 requests of one client: Go's 20/30 would need 3.5 s
    let client = ClientFactory::new(account, limits, "apf-test").client("controller");
    let took = time_requests(&client, 100).await;
    assert!(
        took < Duration::from_millis(3000),
        "100 requests took {took:?}"
    );
}

#[tokio::test]
async fn explicit_go_limits_are_honoured() {
    let env = TestEnv::shared().await;
    let registry = ProviderRegistry::new();
    FakeCloud::new()
        .register_shared(&registry, "fake")
        .expect("register the fake cloud");
    let options = crate::CloudControllerManager::builder(registry)
        .parse_args([
            "ccm",
            "--cloud-provider=fake",
            "--kube-api-qps=20",
            "--kube-api-burst=30",
        ])
        .expect("flags");
    let limits = KubeApiLimits::resolve(&env.client(), &options).await;
    assert_eq!(
        (limits.mode, limits.apf, limits.qps, limits.burst),
        (KubeApiLimitMode::Explicit, None, Some(20.0), 30)
    );
    // 30 from the burst, then 20 more at 20 per second: at least 1 s
    let client = ClientFactory::new(env.client(), limits, "go-limits").client("controller");
    let took = time_requests(&client, 50).await;
    assert!(
        took >= Duration::from_millis(950),
        "50 requests took only {took:?}"
    );
}

#[tokio::test]
async fn the_client_side_qps_limit_is_enforced_against_the_apiserver() {
    let env = TestEnv::shared().await;
    let factory = ClientFactory::from_client(env.client(), 4.0, 2, "qps-test");
    let client = factory.client("limited");
    let started = std::time::Instant::now();
    for _ in 0..10 {
        client.apiserver_version().await.expect("GET /version");
    }
    // 2 from the burst, then 8 at 4 per second: at least 2 s
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1950),
        "10 requests took only {elapsed:?}"
    );
    // an unlimited client is not held back
    let unlimited = ClientFactory::from_client(env.client(), -1.0, 0, "qps-test").client("free");
    let started = std::time::Instant::now();
    for _ in 0..10 {
        unlimited.apiserver_version().await.expect("GET /version");
    }
    assert!(
        started.elapsed() < Duration::from_millis(1950),
        "{:?}",
        started.elapsed()
    );
}
