//! Shared set-up for the integration tests: a real API server (ccm-testenv), the fake cloud, and Nodes that
//! look like a kubelet registered them with `--cloud-provider=external`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ccm_core::names;
use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_nodecontroller::{
    CloudNodeConfig, CloudNodeController, CloudNodeLifecycleConfig, CloudNodeLifecycleController,
};
use ccm_provider_fake::{FakeCloud, Operation};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::core::v1::{
    Event, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint,
};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

/// How long any eventually-consistent state may take.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The label every node of one test carries.
pub const TEST_LABEL: &str = "ccm-test";

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "ccm_nodecontroller=debug,warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// One test's world: its own label, informers scoped to it, the fake cloud, and the controllers it started.
pub struct Harness {
    pub env: &'static TestEnv,
    pub client: kube::Client,
    pub nodes: Api<Node>,
    pub id: String,
    pub fake: FakeCloud,
    pub registry: SharedRegistry,
    pub ctx: ControllerContext,
    pub token: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Harness {
    pub async fn new(fake: FakeCloud) -> Harness {
        init_tracing();
        let env = TestEnv::shared().await;
        let client = env.client();
        let id = env.unique_name("t");
        let informers = SharedInformers::new(
            client.clone(),
            &InformerScope::all().with_node_selector(format!("{TEST_LABEL}={id}")),
        );
        let registry = SharedRegistry::new();
        let ctx = ControllerContext::new(
            client.clone(),
            Arc::new(fake.clone()),
            informers.clone(),
            registry.clone(),
            "kubernetes",
        )
        .with_instance("ccm-nodecontroller-test");
        let token = CancellationToken::new();
        let informer_task = tokio::spawn(informers.run(token.clone()));
        Harness {
            env,
            nodes: Api::all(client.clone()),
            client,
            id,
            fake,
            registry,
            ctx,
            token,
            tasks: vec![informer_task],
        }
    }

    /// A unique node name for this test.
    pub fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.id)
    }

    pub fn start_node_controller(&mut self, config: CloudNodeConfig) {
        let controller = CloudNodeController::new(&self.ctx, config).expect("controller builds");
        let token = self.token.clone();
        self.tasks.push(tokio::spawn(async move {
            Box::new(controller)
                .run(token)
                .await
                .expect("controller runs");
        }));
    }

    pub fn start_lifecycle_controller(&mut self, config: CloudNodeLifecycleConfig) {
        let controller =
            CloudNodeLifecycleController::new(&self.ctx, config).expect("controller builds");
        let token = self.token.clone();
        self.tasks.push(tokio::spawn(async move {
            Box::new(controller)
                .run(token)
                .await
                .expect("controller runs");
        }));
    }

    /// A Node as a kubelet with `--cloud-provider=external` registers it: the uninitialized taint, a hostname
    /// address and a Ready condition.
    pub fn kubelet_node(&self, name: &str, ready: bool) -> Node {
        let mut node = Node {
            spec: Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: names::taints::UNINITIALIZED.into(),
                    value: Some("true".into()),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![address("Hostname", name)]),
                conditions: Some(vec![ready_condition(ready)]),
                ..Default::default()
            }),
            ..Default::default()
        };
        node.metadata.name = Some(name.to_owned());
        node.metadata.labels = Some(BTreeMap::from([
            (TEST_LABEL.to_owned(), self.id.clone()),
            (names::labels::HOSTNAME.to_owned(), name.to_owned()),
        ]));
        node
    }

    /// Create a node, then write its status (the API server ignores status on create).
    pub async fn create(&self, node: &Node) -> Node {
        let name = node.metadata.name.clone().expect("named node");
        self.nodes
            .create(&PostParams::default(), node)
            .await
            .unwrap_or_else(|e| panic!("create node {name}: {e}"));
        let status = serde_json::json!({ "status": node.status });
        self.nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap_or_else(|e| panic!("write status of node {name}: {e}"))
    }

    pub async fn get(&self, name: &str) -> Option<Node> {
        self.nodes.get_opt(name).await.expect("read node")
    }

    /// Set the node's Ready condition through the status subresource.
    pub async fn set_ready(&self, name: &str, ready: bool) {
        let status = serde_json::json!({ "status": { "conditions": [ready_condition(ready)] } });
        self.nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap_or_else(|e| panic!("set Ready={ready} on {name}: {e}"));
    }

    /// Wait until the node satisfies `check`, returning it.
    pub async fn wait_node(&self, name: &str, what: &str, check: impl Fn(&Node) -> bool) -> Node {
        let nodes = self.nodes.clone();
        let check = &check;
        wait_for(&format!("node {name}: {what}"), TIMEOUT, || {
            let nodes = nodes.clone();
            async move {
                let node = nodes.get_opt(name).await.ok().flatten()?;
                check(&node).then_some(node)
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Wait until the node is gone.
    pub async fn wait_deleted(&self, name: &str) {
        let nodes = self.nodes.clone();
        wait_for(&format!("node {name} to be deleted"), TIMEOUT, || {
            let nodes = nodes.clone();
            async move { matches!(nodes.get_opt(name).await, Ok(None)).then_some(()) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Events about a node (events on cluster-scoped objects live in `default`).
    pub async fn events(&self, name: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), "default");
        events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .expect("list events")
            .items
    }

    /// Wait for an event with this reason about the node.
    pub async fn wait_event(&self, name: &str, reason: &str) -> Event {
        wait_for(
            &format!("event {reason} on node {name}"),
            TIMEOUT,
            || async {
                self.events(name)
                    .await
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some(reason))
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Wait until the fake cloud has logged at least `n` calls of `op`.
    pub async fn wait_calls(&self, op: Operation, n: usize) {
        let fake = self.fake.clone();
        wait_for(&format!("{n} cloud calls of {op}"), TIMEOUT, || {
            let fake = fake.clone();
            async move { (fake.call_count(op) >= n).then_some(()) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Stop the controllers and delete this test's nodes.
    pub async fn finish(mut self) {
        self.token.cancel();
        for task in self.tasks.drain(..) {
            task.await.expect("task ends cleanly");
        }
        let _ = self
            .nodes
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("{TEST_LABEL}={}", self.id)),
            )
            .await;
    }
}

pub fn address(type_: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: type_.into(),
        address: address.into(),
    }
}

pub fn ready_condition(ready: bool) -> NodeCondition {
    NodeCondition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        reason: Some(
            if ready {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            }
            .into(),
        ),
        message: Some("set by the test".into()),
        last_heartbeat_time: None,
        last_transition_time: None,
    }
}

pub fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| {
            t.iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect()
        })
        .unwrap_or_default()
}

pub fn has_taint(node: &Node, key: &str) -> bool {
    ccm_core::helpers::node_has_taint(node, key)
}

pub fn labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

pub fn addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}
