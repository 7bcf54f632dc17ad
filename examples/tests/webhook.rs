//! The reference CCM's admission webhook (`examples::lb_type_webhook`) called by a real kube-apiserver through a
//! real `ValidatingWebhookConfiguration`: a LoadBalancer Service asking for a load-balancer type the fake cloud
//! does not have is rejected with the handler's message, a valid one is admitted, the requests are counted in
//! `cloud_provider_webhook_request_total`; with the CCM stopped, `failurePolicy: Fail` rejects the create and
//! `failurePolicy: Ignore` lets it through.
//!
//! The configuration matches only the test's own namespace, so it cannot affect the other tests that share the API
//! server.

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_app::CcmStatus;
use ccm_testenv::{TestEnv, wait_for};
use examples::lb_type_webhook::{CONFIGURATION_NAME, LOAD_BALANCER_TYPE_ANNOTATION, NAME, PATH};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(60);

/// A free loopback port (the webhook port's 0 means "off", as in Go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn service(name: &str, lb_type: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(BTreeMap::from([(
                LOAD_BALANCER_TYPE_ANNOTATION.to_owned(),
                lb_type.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            ports: Some(vec![ServicePort {
                port: 80,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn configuration(
    name: &str,
    namespace: &str,
    port: u16,
    ca_pem: &str,
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: CONFIGURATION_NAME.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            side_effects: "None".to_owned(),
            failure_policy: Some("Fail".to_owned()),
            timeout_seconds: Some(5),
            client_config: WebhookClientConfig {
                url: Some(format!("https://127.0.0.1:{port}{PATH}")),
                ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
                ..WebhookClientConfig::default()
            },
            namespace_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "kubernetes.io/metadata.name".to_owned(),
                    namespace.to_owned(),
                )])),
                ..LabelSelector::default()
            }),
            rules: Some(vec![RuleWithOperations {
                operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
                api_groups: Some(vec![String::new()]),
                api_versions: Some(vec!["v1".to_owned()]),
                resources: Some(vec!["services".to_owned()]),
                ..RuleWithOperations::default()
            }]),
            ..ValidatingWebhook::default()
        }]),
    }
}

/// Create `service` (a dry run, so retries never collide): `Ok` if admitted, `Err(message)` if rejected.
async fn try_create(services: &Api<Service>, service: &Service) -> Result<(), String> {
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match services.create(&dry_run, service).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(err) => panic!("creating a Service failed without an API answer: {err}"),
    }
}

/// Retry until the API server gives the answer `check` accepts (its webhook configuration is eventually
/// consistent).
async fn until(
    what: &str,
    services: &Api<Service>,
    service: &Service,
    check: impl Fn(&Result<(), String>) -> bool,
) -> Result<(), String> {
    let last = std::sync::Mutex::new(Ok(()));
    let found = wait_for(what, TIMEOUT, || async {
        let answer = try_create(services, service).await;
        let done = check(&answer);
        *last.lock().unwrap() = answer.clone();
        done.then_some(answer)
    })
    .await;
    found.unwrap_or_else(|_| panic!("{what}: the last answer was {:?}", last.lock().unwrap()))
}

#[tokio::test]
async fn the_apiserver_calls_the_webhook_and_honours_its_failure_policy() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let ns = env.namespace("webhook").await;
    let port = free_port();
    let cert_dir = tempfile::tempdir().expect("a temporary directory");
    let builder = examples::reference_ccm()
        .expect("the reference CCM")
        .with_client(client.clone());
    let options = builder
        .parse_args([
            "reference-ccm".to_owned(),
            "--cloud-provider=fake".to_owned(),
            "--controllers=".to_owned(),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
            "--webhooks=*".to_owned(),
            "--webhook-bind-address=127.0.0.1".to_owned(),
            format!("--webhook-secure-port={port}"),
            format!("--webhook-cert-dir={}", cert_dir.path().display()),
        ])
        .expect("valid flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("the CCM starts");
    let endpoint = running
        .webhook_endpoint()
        .expect("serving webhooks")
        .clone();
    assert_eq!(endpoint.address.port(), port);
    // Go's pair name, written into --webhook-cert-dir
    let written =
        std::fs::read_to_string(cert_dir.path().join("cloud-controller-manager-webhook.crt"))
            .expect("the self-signed certificate in --webhook-cert-dir");
    assert_eq!(written, endpoint.cert_pem);
    let mut status = running.status();
    tokio::time::timeout(TIMEOUT, status.wait_for(|s| *s == CcmStatus::Running))
        .await
        .expect("running in time")
        .expect("running");

    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let config_name = env.unique_name("ccm-webhook");
    configs
        .create(
            &PostParams::default(),
            &configuration(&config_name, &ns, port, &endpoint.cert_pem),
        )
        .await
        .expect("create the ValidatingWebhookConfiguration");
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);

    // The handler's message reaches the client.
    let rejected = until(
        "the webhook to reject",
        &services,
        &service("bad", "gateway"),
        |a| {
            a.as_ref()
                .is_err_and(|m| m.contains("the fake cloud has no load-balancer type"))
        },
    )
    .await
    .unwrap_err();
    assert!(
        rejected.contains(&format!(
            "admission webhook \"{CONFIGURATION_NAME}\" denied the request: the fake cloud has no load-balancer \
             type \"gateway\" ({LOAD_BALANCER_TYPE_ANNOTATION}); use one of: network, application"
        )),
        "{rejected}"
    );
    try_create(&services, &service("good", "network"))
        .await
        .expect("a type the fake cloud has is admitted");
    let metrics = running.metrics().encode();
    let series =
        format!("cloud_provider_webhook_request_total{{code=\"200\",webhook=\"{NAME}\"}} ");
    let count: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{metrics}"));
    assert!(count >= 2.0, "{count}");

    // The webhook down: failurePolicy Fail rejects, Ignore admits.
    shutdown.cancel();
    tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("the CCM stops in time")
        .expect("a clean shutdown");
    let message = try_create(&services, &service("down", "network"))
        .await
        .expect_err("failurePolicy Fail with the webhook down rejects");
    assert!(message.contains("failed calling webhook"), "{message}");
    configs
        .patch(
            &config_name,
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(serde_json::json!([
                    {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}
                ]))
                .expect("a JSON patch"),
            ),
        )
        .await
        .expect("switch to failurePolicy Ignore");
    until(
        "failurePolicy Ignore to admit",
        &services,
        &service("ignored", "gateway"),
        Result::is_ok,
    )
    .await
    .expect("admitted with the webhook down and failurePolicy Ignore");

    let _ = configs.delete(&config_name, &DeleteParams::default()).await;
}
