//! The Kubernetes API client limit against a real kube-apiserver (v1.36, API Priority and Fairness on by default):
//! with --kube-api-qps/--kube-api-burst unset the runtime detects APF and runs without a client-side limit; set,
//! they are honoured exactly.

mod support;

use std::time::{Duration, Instant};

use ccm_app::client::{ClientFactory, KubeApiLimitMode, KubeApiLimits, detect_apf};
use ccm_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

use support::{TIMEOUT, ccm, fake_cloud, flags, https_get, metric};

/// Send `n` cheap requests one after the other through `client`; how long they took.
async fn time_requests(client: &kube::Client, n: usize) -> Duration {
    let started = Instant::now();
    for _ in 0..n {
        client.apiserver_version().await.expect("GET /version");
    }
    started.elapsed()
}

/// Start the runtime with `extra` flags, read `/configz` and `/metrics`, and stop it.
async fn configz_and_metrics(label: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let env = TestEnv::shared().await;
    let ns = env.namespace(label).await;
    let (_cloud, registry) = fake_cloud(&[]);
    let builder = ccm(registry, env.client());
    let mut args = flags(label, &ns, label);
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let options = builder.parse_args(args).expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    let addr = running.admin_addr().expect("serving");
    let cert = running
        .admin_certificate_pem()
        .expect("a certificate")
        .to_owned();
    let (status, configz) = https_get(addr, &cert, "/configz").await;
    assert_eq!(status, 200, "{configz}");
    let (status, metrics) = https_get(addr, &cert, "/metrics").await;
    assert_eq!(status, 200);
    shutdown.cancel();
    tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("stops in time")
        .expect("a clean shutdown");
    (serde_json::from_str(&configz).expect("JSON"), metrics)
}

#[tokio::test]
async fn unset_limits_detect_apf_and_run_unlimited() {
    let env = TestEnv::shared().await;
    // Every request classified by APF carries its headers: the admin (exempt) and a ServiceAccount alike.
    assert!(detect_apf(&env.client()).await.expect("GET /version"));
    let ns = env.namespace("apf").await;
    let account = env.client_for_service_account(&ns, "ccm").await;
    assert!(detect_apf(&account).await.expect("GET /version"));

    let options = ccm_app::CcmOptions::default();
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

    // The runtime decides the same and says so in /configz.
    let (configz, metrics) = configz_and_metrics("apf-auto", &[]).await;
    assert_eq!(
        configz["cloudcontrollermanager.config.k8s.io"]["kubeApiQps"],
        "auto"
    );
    assert_eq!(
        configz["cloudcontrollermanager.config.k8s.io"]["kubeApiBurst"],
        "auto"
    );
    assert_eq!(
        configz["kubeApiClient"],
        serde_json::json!({"mode": "auto", "apf": true, "qps": "unlimited", "burst": "unlimited"})
    );
    // leader election has its own client, and so its own series
    assert_eq!(
        metric(
            &metrics,
            "rest_client_requests_throttled_total{client=\"leader-election\"}"
        ),
        Some(0.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn explicit_go_limits_are_honoured() {
    let env = TestEnv::shared().await;
    let (_cloud, registry) = fake_cloud(&[]);
    let options = ccm_app::CloudControllerManager::builder(registry)
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

    let (configz, _) =
        configz_and_metrics("go-limits", &["--kube-api-qps=20", "--kube-api-burst=30"]).await;
    assert_eq!(
        configz["cloudcontrollermanager.config.k8s.io"]["kubeApiQps"],
        20.0
    );
    assert_eq!(
        configz["cloudcontrollermanager.config.k8s.io"]["kubeApiBurst"],
        30
    );
    assert_eq!(
        configz["kubeApiClient"],
        serde_json::json!({"mode": "explicit", "apf": null, "qps": 20.0, "burst": 30})
    );
}
