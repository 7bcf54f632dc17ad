//! Shared set-up of the integration tests: a real apiserver (ccm-testenv), the fake cloud, and the REAL service
//! controller watching only this test's namespace and labelled nodes.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::runtime::controller::ControllerContext;
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_core::{CloudError, CloudProvider, LoadBalancer};
use ccm_provider_fake::FakeCloud;
use ccm_servicecontroller::{Config, ServiceController};
use ccm_testenv::services::{TestService, wait_for_ingress};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::core::v1::{
    LoadBalancerStatus, Node, NodeCondition, NodeSpec, NodeStatus, Service,
};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const TIMEOUT: Duration = Duration::from_secs(30);
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// A config for tests: the defaults (no quiet period before host updates), with faster retries.
pub fn test_config() -> Config {
    Config::default().with_retry_backoff(Duration::from_millis(200), Duration::from_secs(2))
}

struct Running {
    token: CancellationToken,
    informers: JoinHandle<()>,
    controller: JoinHandle<()>,
    registry: SharedRegistry,
}

pub struct Harness {
    pub env: &'static TestEnv,
    pub client: Client,
    pub ns: String,
    pub label: String,
    pub fake: FakeCloud,
    provider: Arc<dyn CloudProvider>,
    running: Option<Running>,
}

impl Harness {
    /// Start the controller with `config` against a fresh fake cloud.
    pub async fn start(config: Config) -> Self {
        let fake = FakeCloud::new();
        let provider: Arc<dyn CloudProvider> = Arc::new(fake.clone());
        Self::start_with(config, fake, provider).await
    }

    /// Start the controller with `config` against `provider` (which wraps `fake`).
    pub async fn start_with(
        config: Config,
        fake: FakeCloud,
        provider: Arc<dyn CloudProvider>,
    ) -> Self {
        let env = TestEnv::shared().await;
        let client = env.client();
        let ns = env.namespace("svc").await;
        let label = env.unique_name("t");
        let mut h = Harness {
            env,
            client,
            ns,
            label,
            fake,
            provider,
            running: None,
        };
        h.start_controller(config).await;
        h
    }

    /// (Re)start the controller with fresh informers and a fresh metrics registry.
    pub async fn start_controller(&mut self, config: Config) {
        assert!(self.running.is_none(), "controller already running");
        let scope = InformerScope::all()
            .with_node_selector(format!("ccm-test={}", self.label))
            .with_service_namespace(self.ns.clone());
        let informers = SharedInformers::new(self.client.clone(), &scope);
        let registry = SharedRegistry::new();
        let ctx = ControllerContext::new(
            self.client.clone(),
            self.provider.clone(),
            informers.clone(),
            registry.clone(),
            "kubernetes",
        );
        let controller = ServiceController::new(&ctx, config).expect("a valid controller");
        let token = CancellationToken::new();
        let informer_task = tokio::spawn(informers.clone().run(token.clone()));
        let controller_task = tokio::spawn(controller.run(token.clone()));
        self.running = Some(Running {
            token,
            informers: informer_task,
            controller: controller_task,
            registry,
        });
    }

    /// Stop the controller (as a CCM shutting down would) and wait for it.
    pub async fn stop_controller(&mut self) {
        if let Some(r) = self.running.take() {
            r.token.cancel();
            tokio::time::timeout(TIMEOUT, r.controller)
                .await
                .expect("controller stops in time")
                .expect("controller task");
            r.informers.await.expect("informer task");
        }
    }

    /// The Prometheus text of the running controller's registry.
    pub fn metrics(&self) -> String {
        self.running.as_ref().expect("running").registry.encode()
    }

    /// A metric's value (a counter or gauge line without labels), 0 when absent.
    pub fn metric(&self, name: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    pub fn key(&self, name: &str) -> String {
        format!("{}/{}", self.ns, name)
    }

    /// The full (unique) name of the test node `short`.
    pub fn node_name(&self, short: &str) -> String {
        format!("{}-{}", self.label, short)
    }

    /// A kubelet-like Node labelled for this test, with `spec.providerID = fake://<name>`.
    pub fn node(&self, short: &str) -> Node {
        let name = self.node_name(short);
        let mut node = Node {
            spec: Some(NodeSpec {
                provider_id: Some(format!("fake://{name}")),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        node.metadata.name = Some(name.clone());
        node.metadata.labels = Some(
            [
                ("ccm-test".to_string(), self.label.clone()),
                ("kubernetes.io/hostname".to_string(), name),
            ]
            .into(),
        );
        node
    }

    pub async fn create_node(&self, short: &str) -> Node {
        self.create_node_from(self.node(short)).await
    }

    pub async fn create_node_from(&self, node: Node) -> Node {
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .expect("create node")
    }

    pub async fn patch_node(&self, short: &str, patch: serde_json::Value) {
        self.nodes()
            .patch(
                &self.node_name(short),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .expect("patch node");
    }

    pub async fn delete_node(&self, short: &str) {
        self.nodes()
            .delete(&self.node_name(short), &DeleteParams::default())
            .await
            .expect("delete node");
    }

    /// The full host names for `shorts`, sorted.
    pub fn hosts(&self, shorts: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = shorts.iter().map(|s| self.node_name(s)).collect();
        v.sort();
        v
    }

    /// A `type: LoadBalancer` Service with one TCP port.
    pub fn lb_service(&self, name: &str, port: i32) -> Service {
        TestService::load_balancer(name)
            .with_tcp_port("web", port, None)
            .into_service()
    }

    pub async fn create_service(&self, svc: &Service) -> Service {
        self.services()
            .create(&PostParams::default(), svc)
            .await
            .expect("create service")
    }

    pub async fn create_lb(&self, name: &str) -> Service {
        self.create_service(&self.lb_service(name, 80)).await
    }

    pub async fn get_service(&self, name: &str) -> Option<Service> {
        self.services().get_opt(name).await.expect("get service")
    }

    pub async fn delete_service(&self, name: &str) {
        self.services()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete service");
    }

    /// Wait until the Service's status shows an ingress IP; returns it.
    pub async fn wait_ingress(&self, name: &str) -> String {
        wait_for_ingress(&self.services(), name, TIMEOUT)
            .await
            .expect("ingress")
    }

    /// Wait until the fake cloud's load balancer of `name` has exactly `hosts`.
    pub async fn wait_hosts(&self, name: &str, hosts: &[String]) {
        let key = self.key(name);
        let result = wait_for(&format!("hosts {hosts:?} of {key}"), TIMEOUT, || async {
            let lb = self.fake.load_balancer(&key)?;
            (lb.hosts == hosts).then_some(())
        })
        .await;
        if let Err(err) = result {
            panic!(
                "{err}; the load balancer has {:?}",
                self.fake.load_balancer(&key).map(|lb| lb.hosts)
            );
        }
    }

    /// Wait until the fake cloud has no load balancer for `name`.
    pub async fn wait_no_lb(&self, name: &str) {
        let key = self.key(name);
        wait_for(&format!("no load balancer for {key}"), TIMEOUT, || async {
            self.fake.load_balancer(&key).is_none().then_some(())
        })
        .await
        .expect("load balancer removed");
    }

    /// Wait until the Service is gone from the API.
    pub async fn wait_service_gone(&self, name: &str) {
        wait_for(&format!("service {name} deleted"), TIMEOUT, || async {
            self.get_service(name).await.is_none().then_some(())
        })
        .await
        .expect("service gone");
    }

    /// The `core/v1` Events about the Service `name` with `reason`, each checked to come from the service
    /// controller as Go writes it (`source.component`, `reportingComponent`).
    pub async fn event_objects(&self, name: &str, reason: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.involved_object.name.as_deref() == Some(name)
            })
            .inspect(|e| {
                assert_eq!(
                    e.source.as_ref().and_then(|s| s.component.as_deref()),
                    Some("service-controller"),
                    "event source"
                );
                assert_eq!(
                    e.reporting_component.as_deref(),
                    Some("service-controller"),
                    "event reporting component"
                );
            })
            .collect()
    }

    /// Events about the Service `name` with `reason`, as (type, message).
    pub async fn events(&self, name: &str, reason: &str) -> Vec<(String, String)> {
        self.event_objects(name, reason)
            .await
            .into_iter()
            .map(|e| (e.type_.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    /// Wait until an event with `reason` exists for `name`; returns (type, note) of the first.
    pub async fn wait_event(&self, name: &str, reason: &str) -> (String, String) {
        wait_for(&format!("event {reason} on {name}"), TIMEOUT, || async {
            self.events(name, reason).await.into_iter().next()
        })
        .await
        .expect("event")
    }

    /// Delete every Service of the namespace and wait until they are gone and the cloud holds no load balancer
    /// of this test; then stop the controller and delete the test's nodes.
    pub async fn finish(mut self) {
        if self.running.is_some() {
            let names: Vec<String> = self
                .services()
                .list(&ListParams::default())
                .await
                .expect("list services")
                .items
                .iter()
                .map(|s| s.name_any())
                .collect();
            for name in &names {
                let _ = self.services().delete(name, &DeleteParams::default()).await;
            }
            for name in &names {
                self.wait_service_gone(name).await;
            }
            let prefix = format!("{}/", self.ns);
            wait_for("no load balancer left", TIMEOUT, || async {
                self.fake
                    .load_balancers()
                    .iter()
                    .all(|lb| !lb.service.starts_with(&prefix))
                    .then_some(())
            })
            .await
            .expect("every load balancer removed");
        }
        self.stop_controller().await;
        self.delete_nodes().await;
    }

    pub async fn delete_nodes(&self) {
        let _ = self
            .nodes()
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("ccm-test={}", self.label)),
            )
            .await;
    }
}

pub fn has_finalizer(svc: &Service) -> bool {
    svc.finalizers().iter().any(|f| f == FINALIZER)
}

pub fn merge(value: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(value)
}

pub fn json_patch_remove_finalizers() -> serde_json::Value {
    json!([{"op": "remove", "path": "/metadata/finalizers"}])
}

/// The fake cloud behind a provider whose `ensure_load_balancer` a test bends; every other call goes to the fake.
pub struct BentCloud {
    pub fake: FakeCloud,
    /// How many more ensures return an empty status (no ingress) after the fake created the load balancer.
    pub remaining_empty: AtomicUsize,
    /// When set, every ensure first reads the Service from the API and counts (in `ensures_without_finalizer`)
    /// those made while the stored Service, or the one passed, had no cleanup finalizer yet.
    pub reader: Option<Client>,
    pub ensures: AtomicUsize,
    pub ensures_without_finalizer: AtomicUsize,
}

impl BentCloud {
    fn new(fake: FakeCloud, empty: usize, reader: Option<Client>) -> Arc<Self> {
        Arc::new(BentCloud {
            fake,
            remaining_empty: AtomicUsize::new(empty),
            reader,
            ensures: AtomicUsize::new(0),
            ensures_without_finalizer: AtomicUsize::new(0),
        })
    }

    /// Ensures answer an empty status for the first `empty` calls, then the fake's.
    pub fn empty_status(fake: FakeCloud, empty: usize) -> Arc<Self> {
        Self::new(fake, empty, None)
    }

    /// Ensures are counted against the Service as stored in the API (read through `client`).
    pub fn checking_order(fake: FakeCloud, client: Client) -> Arc<Self> {
        Self::new(fake, 0, Some(client))
    }

    /// The provider to run the controller on.
    pub fn provider(self: &Arc<Self>) -> Arc<dyn CloudProvider> {
        Arc::new(BentProvider(self.clone()))
    }

    fn lb(&self) -> Arc<dyn LoadBalancer> {
        CloudProvider::load_balancer(Arc::new(self.fake.clone()))
            .expect("the fake cloud supports load balancers")
    }

    async fn count_order(&self, client: &Client, service: &Service) -> Result<(), CloudError> {
        let api: Api<Service> = Api::namespaced(
            client.clone(),
            service.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let stored = api
            .get(&service.name_any())
            .await
            .map_err(|e| CloudError::message(format!("reading the service: {e}")))?;
        self.ensures.fetch_add(1, Ordering::SeqCst);
        if !has_finalizer(&stored) || !has_finalizer(service) {
            self.ensures_without_finalizer
                .fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

struct BentProvider(Arc<BentCloud>);

impl CloudProvider for BentProvider {
    fn provider_name(&self) -> &str {
        "fake"
    }
    fn load_balancer(self: Arc<Self>) -> Option<Arc<dyn LoadBalancer>> {
        Some(self.0.clone())
    }
}

#[async_trait]
impl LoadBalancer for BentCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        self.lb().get_load_balancer(cluster_name, service).await
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        if let Some(client) = &self.reader {
            self.count_order(client, service).await?;
        }
        let status = self
            .lb()
            .ensure_load_balancer(cluster_name, service, nodes)
            .await?;
        let empty = self
            .remaining_empty
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        Ok(if empty {
            LoadBalancerStatus::default()
        } else {
            status
        })
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        self.lb()
            .update_load_balancer(cluster_name, service, nodes)
            .await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        self.lb()
            .ensure_load_balancer_deleted(cluster_name, service)
            .await
    }
}
