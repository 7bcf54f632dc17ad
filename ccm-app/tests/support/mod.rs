//! Helpers shared by the integration tests: kubelet-like Nodes, LoadBalancer Services, an HTTPS client for the
//! admin server, and CCM set-up against the shared test apiserver.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ccm_app::{CcmBuilder, CloudControllerManager};
use ccm_core::{ProviderRegistry, names};
use ccm_provider_fake::{FakeCloud, FakeInstance};
use ccm_testenv::nodes::TestNode;
use k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto::ring};

pub use ccm_testenv::ccm::{TEST_LABEL, TIMEOUT};

/// A Node as a kubelet with `--cloud-provider=external` registers it, labelled `ccm-test=<label>`.
pub fn kubelet_node(name: &str, label: &str, pod_cidr: &str) -> Node {
    test_node(name, label, pod_cidr).into_node()
}

fn test_node(name: &str, label: &str, pod_cidr: &str) -> TestNode {
    TestNode::new(name)
        .with_label(TEST_LABEL, label)
        .with_label(names::labels::HOSTNAME, name)
        .with_pod_cidr(pod_cidr)
}

/// Create a kubelet-like Node and report it Ready.
pub async fn create_node(client: &kube::Client, name: &str, label: &str, pod_cidr: &str) {
    test_node(name, label, pod_cidr)
        .with_address("Hostname", name)
        .create_ready(client)
        .await
        .unwrap_or_else(|e| panic!("creating node {name} and reporting it Ready: {e}"));
}

/// Delete every Node labelled `ccm-test=<label>`.
pub async fn delete_nodes(client: &kube::Client, label: &str) {
    ccm_testenv::nodes::delete_nodes(client, &format!("{TEST_LABEL}={label}")).await;
}

/// A `type: LoadBalancer` Service.
pub fn load_balancer_service(namespace: &str, name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            selector: Some([("app".to_owned(), name.to_owned())].into()),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Whether a node was initialized: no uninitialized taint and a providerID.
pub fn initialized(node: &Node) -> bool {
    !ccm_core::helpers::node_has_taint(node, names::taints::UNINITIALIZED)
        && node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_some()
}

/// The ingress IPs of a Service.
pub fn ingress_ips(service: &Service) -> Vec<String> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| i.iter().filter_map(|x| x.ip.clone()).collect())
        .unwrap_or_default()
}

/// A fake cloud with one instance per node name, registered as `fake` in a new registry.
pub fn fake_cloud(node_names: &[String]) -> (FakeCloud, ProviderRegistry) {
    let cloud = FakeCloud::new();
    for (i, name) in node_names.iter().enumerate() {
        cloud.add_instance(
            FakeInstance::new(name.clone())
                .with_internal_ip(format!("10.0.0.{}", i + 10))
                .with_hostname(name.clone())
                .with_instance_type("fake.large")
                .with_zone("zone-a", "region-1"),
        );
    }
    let registry = ProviderRegistry::new();
    cloud
        .register_shared(&registry, "fake")
        .expect("register the fake cloud");
    (cloud, registry)
}

/// A CCM builder over `client` with the default controllers, serving on an ephemeral loopback port.
pub fn ccm(registry: ProviderRegistry, client: kube::Client) -> CcmBuilder {
    CloudControllerManager::builder(registry)
        .with_default_controllers()
        .with_client(client)
        .with_admin_listener(ccm_testenv::ccm::admin_listener())
}

/// The flags every runtime test uses: its own node label, Service namespace and Lease, short election timings.
pub fn flags(label: &str, namespace: &str, lease: &str) -> Vec<String> {
    let mut args = ccm_testenv::ccm::flags(label, namespace, lease);
    args.extend([
        "--shutdown-timeout=10s".to_owned(),
        // In-process CCMs have neither a delegated-auth kubeconfig nor an in-cluster configuration, so only the
        // always-allowed paths are readable without a system:masters identity (tests/authn.rs covers the rest).
        ALLOW_ADMIN_PATHS.to_owned(),
    ]);
    args
}

/// Wait until `running` reports `want` (at most [`TIMEOUT`]).
pub async fn wait_status(running: &ccm_app::RunningCcm, want: ccm_app::CcmStatus) {
    ccm_testenv::ccm::wait_status(running.status(), want, TIMEOUT).await;
}

/// The flag of [`flags`] that opens `/metrics` and `/configz` to anonymous readers.
pub const ALLOW_ADMIN_PATHS: &str = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/healthz/*,/readyz/*,/livez/*,/metrics,/configz";

/// A client certificate and key (PEM) to present, and request headers to send.
#[derive(Debug, Default, Clone, Copy)]
pub struct Credentials<'a> {
    /// The client certificate chain and key, PEM.
    pub client_cert: Option<(&'a str, &'a str)>,
    /// Extra request headers (`Authorization`, `X-Remote-User`, ...).
    pub headers: &'a [(&'a str, &'a str)],
}

/// A minimal HTTPS GET against the admin server, trusting its (self-signed) certificate. Returns the status code
/// and the body.
pub async fn https_get(addr: SocketAddr, cert_pem: &str, path: &str) -> (u16, String) {
    https_get_as(addr, cert_pem, path, Credentials::default()).await
}

/// [`https_get`] with a client certificate and request headers.
pub async fn https_get_as(
    addr: SocketAddr,
    cert_pem: &str,
    path: &str,
    credentials: Credentials<'_>,
) -> (u16, String) {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        roots
            .add(cert.expect("PEM certificate"))
            .expect("trust the certificate");
    }
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    let config = match credentials.client_cert {
        None => config.with_no_client_auth(),
        Some((cert, key)) => config
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("PEM client certificate"),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("PEM client key"),
            )
            .expect("a usable client certificate"),
    };
    let connector = TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the admin server");
    let name = ServerName::try_from("localhost").expect("server name");
    let mut tls = connector
        .connect(name, tcp)
        .await
        .expect("TLS handshake with the admin server");
    let headers: String = credentials
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("send the request");
    let mut raw = Vec::new();
    // The server may close without close_notify; what was read is complete (Connection: close).
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The value of a Prometheus sample line `name{labels} value` whose line starts with `prefix`.
pub fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A token (valid for an hour) of ServiceAccount `namespace/name`, which is created if missing
/// ([`ccm_testenv::TestEnv::service_account_token`]).
pub async fn service_account_token(
    env: &ccm_testenv::TestEnv,
    namespace: &str,
    name: &str,
) -> String {
    env.service_account_token(namespace, name)
        .await
        .unwrap_or_else(|err| panic!("a token of {namespace}/{name}: {err}"))
}

/// A kubeconfig file (in `dir`) for the test apiserver that authenticates with `token`.
pub fn token_kubeconfig(
    env: &ccm_testenv::TestEnv,
    dir: &std::path::Path,
    token: &str,
) -> std::path::PathBuf {
    let ca = std::fs::read_to_string(&env.env().ca_cert).expect("read the CA");
    let yaml = ccm_testenv::kubeconfig::render_token("test", &env.env().server, &ca, token);
    let path = dir.join("token.kubeconfig");
    std::fs::write(&path, yaml).expect("write the kubeconfig");
    path
}

/// The whole controller scenario the RBAC tests run under a restricted identity: `node_names` (two) registered and
/// initialized (with pod CIDRs, so routes are made), a LoadBalancer Service `web` in `namespace` provisioned and then
/// deleted (its load balancer gone and the finalizer removed), and the second node deleted by the lifecycle
/// controller once its instance is gone and it is NotReady.
pub async fn run_controller_scenario(
    admin: &kube::Client,
    namespace: &str,
    label: &str,
    node_names: &[String],
    cloud: &FakeCloud,
    timeout: Duration,
) {
    use ccm_testenv::wait_for;
    for (i, name) in node_names.iter().enumerate() {
        create_node(admin, name, label, &format!("10.244.{i}.0/24")).await;
    }
    let nodes: Api<Node> = Api::all(admin.clone());
    let selector = ListParams::default().labels(&format!("{TEST_LABEL}={label}"));
    wait_for("the nodes to be initialized", timeout, || async {
        let list = nodes.list(&selector).await.ok()?;
        (list.items.len() == node_names.len() && list.items.iter().all(initialized)).then_some(())
    })
    .await
    .expect("nodes initialized");

    let services: Api<Service> = Api::namespaced(admin.clone(), namespace);
    services
        .create(
            &PostParams::default(),
            &load_balancer_service(namespace, "web"),
        )
        .await
        .expect("create the Service");
    wait_for("the load balancer", timeout, || async {
        let service = services.get("web").await.ok()?;
        (!ingress_ips(&service).is_empty()).then_some(())
    })
    .await
    .expect("provisioned");
    services
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete the Service");
    wait_for("the Service to be gone", timeout, || async {
        services.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await
    .expect("load balancer deleted and finalizer removed");
    assert!(cloud.load_balancer(&format!("{namespace}/web")).is_none());

    let gone = &node_names[1];
    assert!(cloud.remove_instance(gone));
    let not_ready = serde_json::json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletDown"}
    ]}});
    nodes
        .patch_status(gone, &PatchParams::default(), &Patch::Merge(&not_ready))
        .await
        .expect("mark the node NotReady");
    wait_for(
        "the lifecycle controller to delete the node",
        timeout,
        || async { nodes.get_opt(gone).await.ok()?.is_none().then_some(()) },
    )
    .await
    .expect("node deleted");
}

/// Wrap `client` so that every 403 answer is recorded in `record` as `METHOD path`.
pub fn counting_forbidden(
    client: kube::Client,
    record: Arc<std::sync::Mutex<Vec<String>>>,
) -> kube::Client {
    let default_ns = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = client.clone();
        let record = record.clone();
        let what = format!("{} {}", request.method(), request.uri());
        async move {
            let response = client.send(request).await?;
            if response.status() == http::StatusCode::FORBIDDEN {
                record.lock().unwrap().push(what);
            }
            Ok::<_, kube::Error>(response)
        }
    });
    kube::Client::new(service, default_ns)
}

/// Whether `client` may `verb` `resource` (`resource/subresource` for a subresource) in `namespace` (`""`:
/// cluster-wide), on the object `name` if given: a SelfSubjectAccessReview. Leases are in
/// `coordination.k8s.io`, everything else in the core group.
pub async fn allowed(
    client: &kube::Client,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: Option<&str>,
) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, subresource)) => (resource, Some(subresource.to_owned())),
        None => (resource, None),
    };
    let group = if resource == "leases" {
        "coordination.k8s.io"
    } else {
        ""
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                namespace: Some(namespace.to_owned()).filter(|ns| !ns.is_empty()),
                name: name.map(str::to_owned),
                group: Some(group.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .ok()
        .and_then(|r| r.status)
        .is_some_and(|s| s.allowed)
}
