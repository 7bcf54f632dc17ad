//! The Kubernetes API client limit against a real kube-apiserver (v1.36, API Priority and Fairness on by default):
//! with --kube-api-qps/--kube-api-burst unset the runtime detects APF and runs without a client-side limit; set,
//! they are honoured exactly. This file checks what the runtime says in `/configz` and `/metrics`; the request
//! timings of the client factory are unit tests of `ccm-app/src/client` (`apiserver_tests.rs`).

mod support;

use ccm_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

use support::{TIMEOUT, ccm, fake_cloud, flags, https_get, metric};

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
