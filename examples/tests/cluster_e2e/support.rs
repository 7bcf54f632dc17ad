//! The pieces every end-to-end scenario uses: one cluster in a box at a time, deploy/ applied, node and pod
//! observations, the reference CCM as a process or in-process with a fake cloud the test controls.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ccm_app::{CcmStatus, CloudControllerManager};
use ccm_core::ProviderRegistry;
use ccm_provider_fake::FakeCloud;
use ccm_testenv::cluster::{Cluster, ClusterOptions, NodeRole, register_node};
use ccm_testenv::controlplane::{Binaries, LaunchOptions, Supervision};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use tokio_util::sync::CancellationToken;

/// How long any one step of a scenario may take.
pub const STEP: Duration = Duration::from_secs(90);

/// The ServiceAccount deploy/ runs the CCM as.
pub const CCM_ACCOUNT: &str = "system:serviceaccount:kube-system:cloud-controller-manager";

/// The user the in-process CCMs authenticate as (a cluster admin, told apart in the audit log).
pub const IN_PROCESS_CCM_USER: &str = "e2e-cloud-controller-manager";

/// The audit policy of the scenarios: every request of the deployed CCM's ServiceAccount and of the in-process
/// CCM, and every pod deletion or eviction, at Metadata level.
const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    users: ["system:serviceaccount:kube-system:cloud-controller-manager", "e2e-cloud-controller-manager"]
  - level: Metadata
    verbs: ["delete", "deletecollection", "create"]
    resources:
      - group: ""
        resources: ["pods", "pods/eviction"]
  - level: None
"#;

/// The scenarios run one at a time: each cluster runs five Go servers and kwok on a small CI machine.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A running cluster in a box with its directory and turn.
pub struct Scenario {
    pub cluster: Cluster,
    pub dir: tempfile::TempDir,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Scenario {
    /// Waits for its turn, launches a cluster with the scenarios' audit policy and registers `nodes`.
    pub async fn start(nodes: &[(&str, NodeRole)]) -> Scenario {
        let turn = ONE_CLUSTER_AT_A_TIME.lock().await;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let policy = dir.path().join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).expect("write the audit policy");
        let mut control_plane = LaunchOptions::new(
            Binaries::find().expect("control-plane binaries (cargo xtask controlplane build)"),
            dir.path().join("cluster"),
            Supervision::Watchdog,
        )
        .with_audit();
        control_plane
            .extra_apiserver_args
            .push(format!("--audit-policy-file={}", policy.display()));
        let cluster = Cluster::launch(ClusterOptions::new(control_plane))
            .await
            .unwrap_or_else(|err| panic!("the cluster in a box: {err}"));
        let client = cluster.client().expect("admin client");
        for (name, role) in nodes {
            register_node(&client, name, *role)
                .await
                .unwrap_or_else(|err| panic!("registering {name}: {err}"));
        }
        Scenario {
            cluster,
            dir,
            _turn: turn,
        }
    }

    /// A cluster-admin client for the calling test's runtime.
    pub fn client(&self) -> kube::Client {
        self.cluster.client().expect("admin client")
    }

    /// The test environment view of the cluster (ServiceAccount tokens, clients for users).
    pub fn env(&self) -> TestEnv {
        TestEnv::attach(&self.cluster.control_plane().env_file_path())
            .expect("attach to the cluster")
    }

    /// The audit events so far.
    pub fn audit(&self) -> Vec<ccm_testenv::audit::AuditEvent> {
        let path = self
            .cluster
            .control_plane()
            .audit_log_path()
            .expect("audit logging is on");
        ccm_testenv::audit::read_log(&path).expect("read the audit log")
    }
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the examples crate is in the workspace")
        .to_path_buf()
}

/// The documents of `deploy/<file>`.
pub fn deploy_documents(file: &str) -> Vec<serde_json::Value> {
    let path = workspace_root().join("deploy").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The install of deploy/: ServiceAccount, RBAC, cloud config, Deployment (in that order).
pub fn deploy_install() -> Vec<serde_json::Value> {
    [
        "serviceaccount.yaml",
        "rbac.yaml",
        "controller-rbac.yaml",
        "cloud-config.yaml",
        "deployment.yaml",
    ]
    .iter()
    .flat_map(|file| deploy_documents(file))
    .collect()
}

/// Server-side applies one manifest document.
pub async fn apply(client: &kube::Client, doc: &serde_json::Value) {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let kind = doc["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let name = doc["metadata"]["name"].as_str().expect("name");
    let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply("ccm-e2e").force(),
        &Patch::Apply(doc),
    )
    .await
    .unwrap_or_else(|err| panic!("applying {kind} {name}: {err}"));
}

/// The taint keys of a Node.
pub fn taint_keys(node: &Node) -> BTreeSet<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|taints| taints.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default()
}

/// The status and reason of a Node's condition `type_`.
pub fn condition(node: &Node, type_: &str) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// Whether the CCM initialized a Node: a providerID and no uninitialized taint.
pub fn initialized(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_ref())
        .is_some()
        && !taint_keys(node).contains(ccm_testenv::cluster::UNINITIALIZED_TAINT)
}

/// Waits until every Node satisfies `check`, for `count` Nodes.
pub async fn wait_nodes(
    client: &kube::Client,
    what: &str,
    count: usize,
    check: impl Fn(&Node) -> bool,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for(what, STEP, || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        (list.items.len() == count && list.items.iter().all(&check)).then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
}

/// A Node (panics if it cannot be read).
pub async fn node(client: &kube::Client, name: &str) -> Option<Node> {
    Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap_or_else(|err| panic!("reading node {name}: {err}"))
}

/// `target/<profile>/examples/reference-ccm`, built by `cargo xtask test` before the tests.
pub fn reference_ccm() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps")
        .join("examples")
        .join("reference-ccm");
    assert!(
        binary.is_file(),
        "{} is missing; build it with `cargo build -p examples --example reference-ccm` (cargo xtask test does)",
        binary.display()
    );
    binary
}

/// The SDK's CCM running in this test process with a fake cloud the test controls.
pub struct InProcessCcm {
    pub cloud: FakeCloud,
    shutdown: CancellationToken,
    running: Option<ccm_app::RunningCcm>,
}

impl InProcessCcm {
    /// Starts the default controllers over a fake cloud with one instance per node name
    /// ([`ccm_testenv::cluster::fake_inventory`]), as [`IN_PROCESS_CCM_USER`], with `--cluster-cidr` of the
    /// cluster and a 1 s node-monitor period.
    pub async fn start(scenario: &Scenario, node_names: &[&str]) -> InProcessCcm {
        let cloud = FakeCloud::from_inventory_str(
            &ccm_testenv::cluster::fake_inventory(node_names),
            "e2e inventory",
        )
        .expect("the inventory parses");
        let registry = ProviderRegistry::new();
        cloud
            .register_shared(&registry, "fake")
            .expect("register the fake cloud");
        let client = scenario
            .env()
            .try_client_for_user(IN_PROCESS_CCM_USER, &["system:masters"])
            .expect("a client for the CCM");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("an ephemeral port");
        let builder = CloudControllerManager::builder(registry)
            .with_default_controllers()
            .with_client(client)
            .with_admin_listener(listener);
        let options = builder
            .parse_args([
                "e2e-ccm",
                "--cloud-provider=fake",
                &format!("--cluster-cidr={}", ccm_testenv::cluster::CLUSTER_CIDR),
                "--leader-elect=false",
                "--node-monitor-period=1s",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            ])
            .expect("flags");
        let shutdown = CancellationToken::new();
        let running = builder
            .start(options, shutdown.clone())
            .await
            .expect("the CCM starts");
        let mut status = running.status();
        tokio::time::timeout(STEP, status.wait_for(|s| *s == CcmStatus::Running))
            .await
            .expect("running in time")
            .expect("status");
        InProcessCcm {
            cloud,
            shutdown,
            running: Some(running),
        }
    }

    /// Stops it and waits until it has.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(running) = self.running.take() {
            running.wait().await.expect("clean shutdown");
        }
    }
}
