//! The world of one scenario run: its id and label, the controllers it started, the objects it created, and
//! the helpers every scenario uses to create Nodes and wait for the cluster and the cloud.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_core::{CloudProvider, names};
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, Namespace, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service,
    Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::node_initialization::expected_init;
use super::{POLL, RUN_LABEL, Scenario, ScenarioOptions};
use crate::context::{Check, fail};
use crate::fixture::{ConformanceFixture, InstanceRef};
use crate::report::format_elapsed;

/// One scenario's world: its run id, the label its objects carry, the controllers it started.
pub(super) struct World {
    scenario: Scenario,
    pub(super) provider: Arc<dyn CloudProvider>,
    pub(super) client: kube::Client,
    pub(super) options: ScenarioOptions,
    pub(super) id: String,
    nodes: Api<Node>,
    token: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    controller_error: Arc<Mutex<Option<String>>>,
    steps: Mutex<Vec<String>>,
    pub(super) namespace: Mutex<Option<String>>,
    pub(super) route_cluster: String,
    pub(super) route_cidrs: Mutex<Vec<String>>,
}

impl World {
    pub(super) fn new(
        scenario: Scenario,
        provider: Arc<dyn CloudProvider>,
        client: kube::Client,
        options: &ScenarioOptions,
    ) -> Self {
        let short_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let id = format!("{}-{short_id}", scenario.short());
        let route_cluster = options
            .route_cluster_name
            .clone()
            .unwrap_or_else(|| format!("ccm-conformance-{short_id}"));
        World {
            scenario,
            provider,
            nodes: Api::all(client.clone()),
            client,
            options: options.clone(),
            id,
            token: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            controller_error: Arc::new(Mutex::new(None)),
            steps: Mutex::new(Vec::new()),
            namespace: Mutex::new(None),
            route_cluster,
            route_cidrs: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn fixture(&self) -> &ConformanceFixture {
        &self.options.fixture
    }

    pub(super) fn step(&self, step: impl Into<String>) {
        let step = step.into();
        tracing::debug!(scenario = self.scenario.id(), step, "scenario step");
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(step);
    }

    pub(super) fn steps(&self) -> Vec<String> {
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A controller context whose informers see only this world's Nodes (and Services in `namespace`).
    pub(super) fn context(&self, cluster_name: &str, namespace: Option<&str>) -> ControllerContext {
        let mut scope = InformerScope::all().with_node_selector(format!("{RUN_LABEL}={}", self.id));
        scope = match namespace {
            Some(ns) => scope.with_service_namespace(ns),
            None => scope.with_service_selector(format!("{RUN_LABEL}={}", self.id)),
        };
        let informers = SharedInformers::new(self.client.clone(), &scope);
        ControllerContext::new(
            self.client.clone(),
            self.provider.clone(),
            informers,
            SharedRegistry::new(),
            cluster_name,
        )
        .with_instance(format!("ccm-conformance-{}", self.id))
    }

    /// Start the informers of `ctx`, then `controller` (built from `ctx` before, so it saw every event).
    pub(super) fn start(&self, ctx: &ControllerContext, controller: Box<dyn Controller>) {
        let token = self.token.clone();
        let informers = ctx.informers.clone();
        let errors = self.controller_error.clone();
        let name = self.scenario.controller();
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.push(tokio::spawn(informers.run(token.clone())));
        tasks.push(tokio::spawn(async move {
            if let Err(err) = controller.run(token).await {
                tracing::warn!(controller = name, error = %err, "controller stopped with an error");
                *errors.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(format!("{name} stopped with an error: {err}"));
            }
        }));
    }

    fn controller_failure(&self) -> Option<String> {
        self.controller_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Poll `check` until it gives a value; `Err(seen)` describes what was seen instead.
    pub(super) async fn wait<T, F, Fut>(&self, what: &str, mut check: F) -> Check<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let limit = self.options.timeout;
        let deadline = Instant::now() + limit;
        loop {
            if let Some(failure) = self.controller_failure() {
                return fail(format!("while waiting for {what}: {failure}"));
            }
            let seen = match check().await {
                Ok(value) => {
                    self.step(what);
                    return Ok(value);
                }
                Err(seen) => seen,
            };
            if Instant::now() >= deadline {
                return fail(format!(
                    "timed out after {} waiting for {what}; last seen: {seen}",
                    format_elapsed(limit)
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Wait for an Event with `reason` from `component` about the object named `object` in `namespace`
    /// (Events about Nodes live in `default`).
    pub(super) async fn wait_event(
        &self,
        namespace: &str,
        object: &str,
        reason: &str,
        component: &str,
    ) -> Check {
        let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), namespace);
        let what = format!("event {reason} from {component} about {object}");
        let selector = format!("involvedObject.name={object}");
        self.wait(&what, || async {
            let list = events
                .list(&ListParams::default().fields(&selector))
                .await
                .map_err(|e| format!("listing events failed: {e}"))?;
            let from = |e: &CoreEvent| {
                e.reporting_component
                    .clone()
                    .filter(|c| !c.is_empty())
                    .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
                    .unwrap_or_default()
            };
            if list
                .items
                .iter()
                .any(|e| e.reason.as_deref() == Some(reason) && from(e) == component)
            {
                return Ok(());
            }
            let seen: Vec<String> = list
                .items
                .iter()
                .map(|e| format!("{} from {}", e.reason.clone().unwrap_or_default(), from(e)))
                .collect();
            Err(format!("events [{}]", seen.join(", ")))
        })
        .await
    }

    /// A Node for `instance` with this world's label.
    pub(super) fn node(&self, instance: &InstanceRef, shape: NodeShape<'_>) -> Node {
        build_node(instance, (RUN_LABEL, &self.id), shape)
    }

    /// Create a Node, then write its status (the API server ignores status on create).
    pub(super) async fn create_node(&self, node: &Node) -> Check {
        let name = ccm_core::helpers::node_name(node).to_owned();
        match self.nodes.create(&PostParams::default(), node).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return fail(format!(
                    "a Node named {name} already exists in the cluster; run the scenarios against a control plane without it"
                ));
            }
            Err(err) => return fail(format!("creating Node {name} failed: {err}")),
        }
        let status = serde_json::json!({ "status": node.status });
        self.nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .map(drop)
            .or_else(|err| fail(format!("writing the status of Node {name} failed: {err}")))
    }

    pub(super) async fn get_node(&self, name: &str) -> Result<Option<Node>, String> {
        self.nodes
            .get_opt(name)
            .await
            .map_err(|e| format!("reading Node {name} failed: {e}"))
    }

    pub(super) async fn delete_node(&self, name: &str) -> Check {
        match self.nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(err) => fail(format!("deleting Node {name} failed: {err}")),
        }
    }

    pub(super) async fn set_ready(&self, name: &str, ready: bool) -> Check {
        let status = serde_json::json!({ "status": { "conditions": [ready_condition(ready)] } });
        self.nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .map(drop)
            .or_else(|err| {
                fail(format!(
                    "setting Ready={ready} on Node {name} failed: {err}"
                ))
            })
    }

    /// The providerID of `instance`: the fixture's, else what the cloud reports.
    pub(super) async fn provider_id(&self, instance: &InstanceRef) -> Check<String> {
        if let Some(id) = &instance.provider_id {
            return Ok(id.clone());
        }
        let what = format!(
            "the cloud to report the providerID of {}",
            instance.node_name
        );
        self.wait(&what, || expected_init(&self.provider, instance, false))
            .await?
            .provider_id
            .map_or_else(
                || {
                    fail(format!(
                        "the cloud reports no providerID for instance {}",
                        instance.node_name
                    ))
                },
                Ok,
            )
    }

    pub(super) async fn cleanup(&self) {
        self.token.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            if tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .is_err()
            {
                tracing::warn!(
                    scenario = self.scenario.id(),
                    "a controller did not stop within 10 s"
                );
            }
        }
        let selector = format!("{RUN_LABEL}={}", self.id);
        if let Err(err) = self
            .nodes
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&selector),
            )
            .await
        {
            tracing::warn!(error = %err, "scenario clean-up: deleting Nodes failed");
        }
        let namespace = self
            .namespace
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(ns) = namespace {
            self.cleanup_namespace(&ns).await;
        }
        let cidrs = std::mem::take(
            &mut *self
                .route_cidrs
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if let (false, Some(routes)) = (cidrs.is_empty(), Arc::clone(&self.provider).routes())
            && let Ok(listed) = routes.list_routes(&self.route_cluster).await
        {
            for route in listed
                .iter()
                .filter(|r| cidrs.contains(&r.destination_cidr))
            {
                if let Err(err) = routes.delete_route(&self.route_cluster, route).await {
                    tracing::warn!(error = %err, cidr = %route.destination_cidr, "scenario clean-up: deleting a route failed");
                }
            }
        }
    }

    /// Release the namespace's Services (load balancers first, then finalizers) and delete it.
    async fn cleanup_namespace(&self, ns: &str) {
        let services: Api<Service> = Api::namespaced(self.client.clone(), ns);
        if let Ok(list) = services.list(&ListParams::default()).await {
            for service in list.items {
                if let Some(lb) = Arc::clone(&self.provider).load_balancer() {
                    let cluster = &self.fixture().cluster_name;
                    if let Err(err) = lb.ensure_load_balancer_deleted(cluster, &service).await {
                        tracing::warn!(error = %err, "scenario clean-up: deleting a load balancer failed");
                    }
                }
                let name = service.metadata.name.clone().unwrap_or_default();
                let patch = serde_json::json!({ "metadata": { "finalizers": null } });
                let _ = services
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await;
            }
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        if let Err(err) = namespaces.delete(ns, &DeleteParams::default()).await {
            tracing::warn!(error = %err, namespace = ns, "scenario clean-up: deleting the namespace failed");
        }
    }
}

/// How a scenario Node looks.
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeShape<'a> {
    pub(super) provider_id: Option<&'a str>,
    pub(super) uninitialized: bool,
    pub(super) ready: bool,
    pub(super) pod_cidr: Option<&'a str>,
}

fn ready_condition(ready: bool) -> NodeCondition {
    NodeCondition {
        type_: names::conditions::READY.to_owned(),
        status: if ready { "True" } else { "False" }.to_owned(),
        reason: Some(
            if ready {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            }
            .to_owned(),
        ),
        ..Default::default()
    }
}

/// A Node as a kubelet registers it: labels (the run label and the hostname), the addresses the fixture
/// gives, a Ready condition, and optionally a providerID, the uninitialized taint and a pod CIDR.
pub(super) fn build_node(
    instance: &InstanceRef,
    label: (&str, &str),
    shape: NodeShape<'_>,
) -> Node {
    let mut labels: BTreeMap<String, String> = instance.labels.clone();
    labels.insert(label.0.to_owned(), label.1.to_owned());
    labels.insert(
        names::labels::HOSTNAME.to_owned(),
        instance.node_name.clone(),
    );
    let mut addresses = instance.addresses.clone();
    if !addresses.iter().any(|a| a.type_ == "Hostname") {
        addresses.push(NodeAddress {
            type_: "Hostname".to_owned(),
            address: instance.node_name.clone(),
        });
    }
    Node {
        metadata: ObjectMeta {
            name: Some(instance.node_name.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: shape.provider_id.map(str::to_owned),
            taints: shape.uninitialized.then(|| {
                vec![Taint {
                    key: names::taints::UNINITIALIZED.to_owned(),
                    value: Some("true".to_owned()),
                    effect: "NoSchedule".to_owned(),
                    ..Default::default()
                }]
            }),
            pod_cidr: shape.pod_cidr.map(str::to_owned),
            pod_cidrs: shape.pod_cidr.map(|c| vec![c.to_owned()]),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(addresses),
            conditions: Some(vec![ready_condition(shape.ready)]),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use ccm_core::helpers::{ConditionStatus, node_condition_status, node_has_taint};

    use super::*;
    use crate::validate::address_set;

    #[test]
    fn nodes_look_like_a_kubelet_registered_them() {
        let instance = InstanceRef::new("n1")
            .with_provider_id("fake://n1")
            .with_internal_ip("10.0.0.1");
        let node = build_node(
            &instance,
            (RUN_LABEL, "init-1"),
            NodeShape {
                provider_id: None,
                uninitialized: true,
                ready: false,
                pod_cidr: Some("10.244.1.0/24"),
            },
        );
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(RUN_LABEL).map(String::as_str), Some("init-1"));
        assert_eq!(
            labels.get(names::labels::HOSTNAME).map(String::as_str),
            Some("n1")
        );
        assert!(node_has_taint(&node, names::taints::UNINITIALIZED));
        assert_eq!(ccm_core::helpers::node_provider_id(&node), "");
        assert_eq!(
            node_condition_status(&node, names::conditions::READY),
            ConditionStatus::False
        );
        let spec = node.spec.clone().unwrap_or_default();
        assert_eq!(spec.pod_cidrs, Some(vec!["10.244.1.0/24".to_owned()]));
        let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
        assert_eq!(address_set(&addresses).len(), 2, "{addresses:?}");
    }
}
