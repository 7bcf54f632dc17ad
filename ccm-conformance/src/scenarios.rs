//! Controller-level conformance: the real controllers of this SDK (cloud node, node lifecycle, service, route)
//! run against a provider and a Kubernetes API server through short scenarios, each with a pass/fail result.
//!
//! Where the contract clauses call the provider directly, the scenarios check what a cluster sees: Nodes
//! initialized with the cloud's providerID, labels and addresses; Nodes of vanished instances deleted and
//! stopped ones tainted; Services getting a load-balancer ingress and releasing the load balancer on deletion;
//! routes created for pod CIDRs with `NetworkUnavailable=False`.
//!
//! Run them against a throw-away control plane (`cargo xtask controlplane start`, or `ccm-testenv`): they
//! create and delete Nodes named after the fixture's instances, a namespace and a Service. Every object carries
//! the label [`RUN_LABEL`] and the controllers only watch objects with it, so nothing else in the cluster is
//! touched. The route scenario uses a cluster name of its own (`ccm-conformance-<run id>`), so the route
//! controller cannot delete routes of a real cluster.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ccm_conformance::scenarios::{controller_scenarios, ScenarioOptions};
//!
//! # async fn demo(client: kube::Client) {
//! let subject = ccm_conformance::fake::subject();
//! let report = controller_scenarios(subject.provider.clone(), client, &ScenarioOptions::from_subject(&subject)).await;
//! println!("{report}");
//! assert!(report.is_success());
//! # }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ccm_core::helpers::{ConditionStatus, node_condition_status, node_has_taint};
use ccm_core::intercept::Capability;
use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_core::{CloudProvider, Route, names};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, Namespace, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service,
    ServicePort, ServiceSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clause::{Outcome, format_elapsed};
use crate::context::{Check, Stop, fail, skip};
use crate::fixture::{ConformanceFixture, ConformanceSubject, InstanceRef, LoadBalancerInspector};
use crate::validate::{address_set, describe_status, status_addresses};

/// The label on every object a scenario creates; its value is the scenario run's id, and the controllers
/// watch only Nodes with it.
pub const RUN_LABEL: &str = "conformance.ccm.example.com/run";

/// How often a scenario looks at the cluster and the cloud while waiting.
const POLL: Duration = Duration::from_millis(200);

/// One controller-level scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Scenario {
    /// A Node registered with the uninitialized taint gets the cloud's providerID, topology and instance-type
    /// labels and addresses, and loses the taint (cloud node controller).
    NodeInitialization,
    /// A NotReady Node whose instance is gone is deleted; a NotReady Node of a stopped instance gets the
    /// shutdown taint and keeps it until Ready; a Ready Node is left alone (cloud node lifecycle controller).
    NodeLifecycle,
    /// A `type: LoadBalancer` Service gets the finalizer and an ingress matching the cloud's, its backends
    /// follow the Nodes, and deleting it deletes the load balancer (service controller).
    LoadBalancer,
    /// A Node's pod CIDR gets a route and `NetworkUnavailable=False/RouteCreated`, a stale route in the
    /// cluster CIDR is removed, and deleting the Node removes its route (route controller).
    Routes,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 4] = [
        Scenario::NodeInitialization,
        Scenario::NodeLifecycle,
        Scenario::LoadBalancer,
        Scenario::Routes,
    ];

    /// A stable lower-case name (`node-initialization`, `node-lifecycle`, `load-balancer`, `routes`).
    pub fn id(self) -> &'static str {
        match self {
            Scenario::NodeInitialization => "node-initialization",
            Scenario::NodeLifecycle => "node-lifecycle",
            Scenario::LoadBalancer => "load-balancer",
            Scenario::Routes => "routes",
        }
    }

    /// The scenario with this [`id`](Scenario::id).
    pub fn from_id(id: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The controller the scenario exercises.
    pub fn controller(self) -> &'static str {
        match self {
            Scenario::NodeInitialization => names::controllers::CLOUD_NODE,
            Scenario::NodeLifecycle => names::controllers::CLOUD_NODE_LIFECYCLE,
            Scenario::LoadBalancer => names::controllers::SERVICE_LB,
            Scenario::Routes => names::controllers::NODE_ROUTE,
        }
    }

    fn short(self) -> &'static str {
        match self {
            Scenario::NodeInitialization => "init",
            Scenario::NodeLifecycle => "life",
            Scenario::LoadBalancer => "lb",
            Scenario::Routes => "route",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// What the scenarios need besides the provider and a client.
#[derive(Clone)]
#[non_exhaustive]
pub struct ScenarioOptions {
    /// The instances to use (running, stopped, unknown, backends, route target, route CIDRs), as for the
    /// contract clauses.
    pub fixture: ConformanceFixture,
    /// Reads load-balancer backends, if available (the backend steps are left out without it).
    pub inspector: Option<Arc<dyn LoadBalancerInspector>>,
    /// How long each awaited state may take (default 60 s).
    pub timeout: Duration,
    /// The `--cluster-cidr` of the route scenario; must contain the fixture's route CIDRs (default
    /// `10.244.0.0/16`).
    pub cluster_cidr: String,
    /// The cluster name of the route scenario (default `ccm-conformance-<run id>`, so no real cluster's routes
    /// are in its view).
    pub route_cluster_name: Option<String>,
    /// The scenarios to run (default: all).
    pub scenarios: Vec<Scenario>,
}

impl fmt::Debug for ScenarioOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScenarioOptions")
            .field("fixture", &self.fixture)
            .field("inspector", &self.inspector.is_some())
            .field("timeout", &self.timeout)
            .field("cluster_cidr", &self.cluster_cidr)
            .field("route_cluster_name", &self.route_cluster_name)
            .field("scenarios", &self.scenarios)
            .finish()
    }
}

impl ScenarioOptions {
    /// Options for `fixture`, with the defaults.
    pub fn new(fixture: ConformanceFixture) -> Self {
        ScenarioOptions {
            fixture,
            inspector: None,
            timeout: Duration::from_secs(60),
            cluster_cidr: "10.244.0.0/16".to_owned(),
            route_cluster_name: None,
            scenarios: Scenario::ALL.to_vec(),
        }
    }

    /// Options with the fixture and inspector of a conformance subject.
    pub fn from_subject(subject: &ConformanceSubject) -> Self {
        let mut options = Self::new(subject.fixture.clone());
        options.inspector = subject.inspector.clone();
        options
    }

    /// Set the inspector.
    pub fn with_inspector(mut self, inspector: Arc<dyn LoadBalancerInspector>) -> Self {
        self.inspector = Some(inspector);
        self
    }

    /// Set the wait limit.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Set the route scenario's cluster CIDR.
    pub fn with_cluster_cidr(mut self, cidr: impl Into<String>) -> Self {
        self.cluster_cidr = cidr.into();
        self
    }

    /// Set the route scenario's cluster name.
    pub fn with_route_cluster_name(mut self, name: impl Into<String>) -> Self {
        self.route_cluster_name = Some(name.into());
        self
    }

    /// Run only these scenarios.
    pub fn with_scenarios(mut self, scenarios: impl IntoIterator<Item = Scenario>) -> Self {
        self.scenarios = scenarios.into_iter().collect();
        self
    }
}

/// The outcome of one scenario, with the steps it got through.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScenarioResult {
    /// The scenario.
    pub scenario: Scenario,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took, clean-up included.
    pub elapsed: Duration,
    /// What was observed, in order (for a failure: everything before it).
    pub steps: Vec<String>,
}

impl ScenarioResult {
    /// True if the scenario passed.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Passed
    }
}

impl fmt::Display for ScenarioResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.outcome.label(), self.scenario)?;
        match &self.outcome {
            Outcome::Passed => Ok(()),
            Outcome::Failed { message } => write!(f, ": {message}"),
            Outcome::Skipped { reason } => write!(f, ": {reason}"),
        }
    }
}

/// The results of [`controller_scenarios`]. Its `Display` is a table, one line per scenario (failures with
/// the steps that passed before), then a summary line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The provider's name.
    pub provider: String,
    /// One result per scenario run.
    pub results: Vec<ScenarioResult>,
}

impl ScenarioReport {
    /// True if no scenario failed.
    pub fn is_success(&self) -> bool {
        !self
            .results
            .iter()
            .any(|r| matches!(r.outcome, Outcome::Failed { .. }))
    }

    fn count(&self, label: &str) -> usize {
        self.results
            .iter()
            .filter(|r| r.outcome.label() == label)
            .count()
    }
}

impl fmt::Display for ScenarioReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "controller scenarios with provider {:?}", self.provider)?;
        writeln!(
            f,
            "  {:<7}  {:<19}  {:<31}  {:>8}",
            "RESULT", "SCENARIO", "CONTROLLER", "TIME"
        )?;
        for r in &self.results {
            writeln!(
                f,
                "  {:<7}  {:<19}  {:<31}  {:>8}",
                r.outcome.label(),
                r.scenario.id(),
                r.scenario.controller(),
                format_elapsed(r.elapsed)
            )?;
            match &r.outcome {
                Outcome::Passed => {}
                Outcome::Skipped { reason } => writeln!(f, "           {reason}")?,
                Outcome::Failed { message } => {
                    for step in &r.steps {
                        writeln!(f, "           ok: {step}")?;
                    }
                    writeln!(f, "           FAILED: {message}")?;
                }
            }
        }
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.count("PASSED"),
            self.count("FAILED"),
            self.count("SKIPPED")
        )
    }
}

/// Run the scenarios of `options` one after the other, each with freshly built controllers over `client`.
///
/// Scenarios whose capability the provider lacks, or that need an instance the fixture does not name, are
/// skipped with the reason.
pub async fn controller_scenarios(
    provider: Arc<dyn CloudProvider>,
    client: kube::Client,
    options: &ScenarioOptions,
) -> ScenarioReport {
    let mut results = Vec::with_capacity(options.scenarios.len());
    for scenario in &options.scenarios {
        results.push(run_scenario(*scenario, provider.clone(), client.clone(), options).await);
    }
    ScenarioReport {
        provider: provider.provider_name().to_owned(),
        results,
    }
}

/// Run one scenario.
pub async fn run_scenario(
    scenario: Scenario,
    provider: Arc<dyn CloudProvider>,
    client: kube::Client,
    options: &ScenarioOptions,
) -> ScenarioResult {
    let started = Instant::now();
    let world = World::new(scenario, provider, client, options);
    let outcome = match required_capability(scenario, world.provider.as_ref()) {
        Err(reason) => Err(Stop::Skip(reason)),
        Ok(()) => match scenario {
            Scenario::NodeInitialization => node_initialization(&world).await,
            Scenario::NodeLifecycle => node_lifecycle(&world).await,
            Scenario::LoadBalancer => load_balancer(&world).await,
            Scenario::Routes => routes(&world).await,
        },
    };
    world.cleanup().await;
    let outcome = match outcome {
        Ok(()) => Outcome::Passed,
        Err(Stop::Fail(message)) => Outcome::Failed { message },
        Err(Stop::Skip(reason)) => Outcome::Skipped { reason },
    };
    tracing::info!(
        scenario = scenario.id(),
        outcome = outcome.label(),
        "controller scenario finished"
    );
    ScenarioResult {
        scenario,
        outcome,
        elapsed: started.elapsed(),
        steps: world.steps(),
    }
}

fn required_capability(scenario: Scenario, provider: &dyn CloudProvider) -> Result<(), String> {
    let needs = match scenario {
        Scenario::NodeInitialization | Scenario::NodeLifecycle => {
            if provider.instances_v2().is_some() || provider.instances().is_some() {
                return Ok(());
            }
            "instances-v2 or instances"
        }
        Scenario::LoadBalancer => {
            if Capability::LoadBalancer.supported_by(provider) {
                return Ok(());
            }
            "load-balancer"
        }
        Scenario::Routes => {
            if Capability::Routes.supported_by(provider) {
                return Ok(());
            }
            "routes"
        }
    };
    Err(format!(
        "the provider does not support {needs}, so {} does not start",
        scenario.controller()
    ))
}

/// One scenario's world: its run id, the label its objects carry, the controllers it started.
struct World {
    scenario: Scenario,
    provider: Arc<dyn CloudProvider>,
    client: kube::Client,
    options: ScenarioOptions,
    id: String,
    nodes: Api<Node>,
    token: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    controller_error: Arc<Mutex<Option<String>>>,
    steps: Mutex<Vec<String>>,
    namespace: Mutex<Option<String>>,
    route_cluster: String,
    route_cidrs: Mutex<Vec<String>>,
}

impl World {
    fn new(
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

    fn fixture(&self) -> &ConformanceFixture {
        &self.options.fixture
    }

    fn step(&self, step: impl Into<String>) {
        let step = step.into();
        tracing::debug!(scenario = self.scenario.id(), step, "scenario step");
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(step);
    }

    fn steps(&self) -> Vec<String> {
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A controller context whose informers see only this world's Nodes (and Services in `namespace`).
    fn context(&self, cluster_name: &str, namespace: Option<&str>) -> ControllerContext {
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
    fn start(&self, ctx: &ControllerContext, controller: Box<dyn Controller>) {
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
    async fn wait<T, F, Fut>(&self, what: &str, mut check: F) -> Check<T>
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
    async fn wait_event(
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
    fn node(&self, instance: &InstanceRef, shape: NodeShape<'_>) -> Node {
        build_node(instance, (RUN_LABEL, &self.id), shape)
    }

    /// Create a Node, then write its status (the API server ignores status on create).
    async fn create_node(&self, node: &Node) -> Check {
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

    async fn get_node(&self, name: &str) -> Result<Option<Node>, String> {
        self.nodes
            .get_opt(name)
            .await
            .map_err(|e| format!("reading Node {name} failed: {e}"))
    }

    async fn delete_node(&self, name: &str) -> Check {
        match self.nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(err) => fail(format!("deleting Node {name} failed: {err}")),
        }
    }

    async fn set_ready(&self, name: &str, ready: bool) -> Check {
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
    async fn provider_id(&self, instance: &InstanceRef) -> Check<String> {
        if let Some(id) = &instance.provider_id {
            return Ok(id.clone());
        }
        let what = format!(
            "the cloud to report the providerID of {}",
            instance.node_name
        );
        self.wait(&what, || {
            expected_init(self.provider.as_ref(), instance, false)
        })
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

    async fn cleanup(&self) {
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
        if let (false, Some(routes)) = (cidrs.is_empty(), self.provider.routes())
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
                if let Some(lb) = self.provider.load_balancer() {
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
struct NodeShape<'a> {
    provider_id: Option<&'a str>,
    uninitialized: bool,
    ready: bool,
    pod_cidr: Option<&'a str>,
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
fn build_node(instance: &InstanceRef, label: (&str, &str), shape: NodeShape<'_>) -> Node {
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

/// What the node controller should write for an instance, asked from the provider the way the controller asks.
#[derive(Debug, Clone, Default, PartialEq)]
struct Expected {
    provider_id: Option<String>,
    zone: String,
    region: String,
    instance_type: String,
    addresses: Vec<NodeAddress>,
}

async fn expected_init(
    provider: &dyn CloudProvider,
    instance: &InstanceRef,
    with_provider_id: bool,
) -> Result<Expected, String> {
    let node = if with_provider_id {
        instance.node()
    } else {
        instance.node_without_provider_id()
    };
    if let Some(v2) = provider.instances_v2() {
        let meta = v2
            .instance_metadata(&node)
            .await
            .map_err(|e| format!("instance_metadata of {} failed: {e}", instance.node_name))?
            .ok_or_else(|| {
                format!(
                    "instance_metadata of {} is None, so the node controller skips the Node",
                    instance.node_name
                )
            })?;
        let provider_id = (!meta.provider_id.is_empty())
            .then_some(meta.provider_id)
            .or_else(|| instance.provider_id.clone());
        return Ok(Expected {
            provider_id,
            zone: meta.zone,
            region: meta.region,
            instance_type: meta.instance_type,
            addresses: meta.node_addresses,
        });
    }
    let v1 = provider
        .instances()
        .ok_or_else(|| "the provider supports neither InstancesV2 nor Instances".to_owned())?;
    let id = v1
        .instance_id(&instance.node_name)
        .await
        .map_err(|e| format!("instance_id of {} failed: {e}", instance.node_name))?;
    let provider_id = format!("{}://{id}", provider.provider_name());
    let instance_type = v1
        .instance_type_by_provider_id(&provider_id)
        .await
        .unwrap_or_default();
    let addresses = v1
        .node_addresses_by_provider_id(&provider_id)
        .await
        .unwrap_or_default();
    let zone = match provider.zones() {
        Some(zones) => zones
            .get_zone_by_provider_id(&provider_id)
            .await
            .unwrap_or_default(),
        None => ccm_core::Zone::default(),
    };
    Ok(Expected {
        provider_id: Some(provider_id),
        zone: zone.failure_domain,
        region: zone.region,
        instance_type,
        addresses,
    })
}

/// What is still missing on `node` compared with `expected` (`Ok` when initialized as expected).
fn initialization_gaps(node: &Node, expected: &Expected) -> Result<(), String> {
    let mut gaps = Vec::new();
    if node_has_taint(node, names::taints::UNINITIALIZED) {
        gaps.push("the uninitialized taint is still there".to_owned());
    }
    let provider_id = ccm_core::helpers::node_provider_id(node);
    if let Some(want) = &expected.provider_id
        && provider_id != want
    {
        gaps.push(format!(
            "spec.providerID is {provider_id:?}, expected {want:?}"
        ));
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (key, want) in [
        (names::labels::TOPOLOGY_ZONE, &expected.zone),
        (names::labels::TOPOLOGY_REGION, &expected.region),
        (names::labels::INSTANCE_TYPE, &expected.instance_type),
    ] {
        if !want.is_empty() && labels.get(key) != Some(want) {
            gaps.push(format!(
                "label {key} is {:?}, expected {want:?}",
                labels.get(key)
            ));
        }
    }
    let have = address_set(
        node.status
            .as_ref()
            .and_then(|s| s.addresses.as_deref())
            .unwrap_or_default(),
    );
    let missing: Vec<String> = address_set(&expected.addresses)
        .difference(&have)
        .cloned()
        .collect();
    if !missing.is_empty() {
        gaps.push(format!("status.addresses lacks {}", missing.join(", ")));
    }
    if gaps.is_empty() {
        Ok(())
    } else {
        Err(gaps.join("; "))
    }
}

async fn node_initialization(world: &World) -> Check {
    let running = world.fixture().running.clone().map_or_else(
        || skip("the fixture names no running instance (set ConformanceFixture::with_running)"),
        Ok,
    )?;
    // Without --provider-id unless the provider cannot look nodes up by name.
    let provider_id = (!world.fixture().lookup_by_name)
        .then_some(running.provider_id.as_deref())
        .flatten();
    let what = format!("the cloud to describe instance {}", running.node_name);
    let expected = world
        .wait(&what, || {
            expected_init(world.provider.as_ref(), &running, provider_id.is_some())
        })
        .await?;
    let ctx = world.context(&world.fixture().cluster_name, None);
    let controller = ccm_nodecontroller::CloudNodeController::new(&ctx, Default::default())
        .or_else(|e| fail(format!("building the cloud node controller failed: {e}")))?;
    let node = world.node(
        &running,
        NodeShape {
            provider_id,
            uninitialized: true,
            ready: true,
            pod_cidr: None,
        },
    );
    world.create_node(&node).await?;
    world.step(format!(
        "created Node {} with the uninitialized taint{}",
        running.node_name,
        if provider_id.is_some() {
            " and its providerID"
        } else {
            ", without providerID"
        }
    ));
    world.start(&ctx, Box::new(controller));
    let name = running.node_name.as_str();
    let what = format!(
        "Node {name} to be initialized (providerID {}, zone {:?}, region {:?}, instance type {:?}, {} cloud addresses)",
        expected.provider_id.as_deref().unwrap_or("kept"),
        expected.zone,
        expected.region,
        expected.instance_type,
        expected.addresses.len()
    );
    world
        .wait(&what, || async {
            match world.get_node(name).await? {
                None => Err("the Node is gone".to_owned()),
                Some(node) => initialization_gaps(&node, &expected),
            }
        })
        .await?;
    world
        .wait_event(
            "default",
            name,
            names::events::SYNCED,
            names::components::CLOUD_NODE_CONTROLLER,
        )
        .await
}

async fn node_lifecycle(world: &World) -> Check {
    let fixture = world.fixture().clone();
    let ctx = world.context(&fixture.cluster_name, None);
    let config = ccm_nodecontroller::CloudNodeLifecycleConfig::default()
        .with_node_monitor_period(Duration::from_secs(1));
    let controller =
        ccm_nodecontroller::CloudNodeLifecycleController::new(&ctx, config).or_else(|e| {
            fail(format!(
                "building the cloud node lifecycle controller failed: {e}"
            ))
        })?;

    let unknown = match &fixture.unknown {
        Some(unknown) => unknown.clone(),
        None => {
            let name = format!("ccm-conformance-absent-{}", world.id);
            let id = format!("{}://{name}", world.provider.provider_name());
            InstanceRef::new(name).with_provider_id(id)
        }
    };
    let unknown_id = world.provider_id(&unknown).await?;
    fn shape(provider_id: &str, ready: bool) -> NodeShape<'_> {
        NodeShape {
            provider_id: Some(provider_id),
            uninitialized: false,
            ready,
            pod_cidr: None,
        }
    }
    world
        .create_node(&world.node(&unknown, shape(&unknown_id, false)))
        .await?;
    world.step(format!(
        "created NotReady Node {} for the unknown instance {unknown_id}",
        unknown.node_name
    ));
    let stopped = match &fixture.stopped {
        Some(stopped) => {
            let id = world.provider_id(stopped).await?;
            world
                .create_node(&world.node(stopped, shape(&id, false)))
                .await?;
            world.step(format!(
                "created NotReady Node {} for the stopped instance {id}",
                stopped.node_name
            ));
            Some(stopped.clone())
        }
        None => None,
    };
    let running = match &fixture.running {
        Some(running) => {
            let id = world.provider_id(running).await?;
            world
                .create_node(&world.node(running, shape(&id, true)))
                .await?;
            world.step(format!(
                "created Ready Node {} for the running instance {id}",
                running.node_name
            ));
            Some(running.clone())
        }
        None => None,
    };
    world.start(&ctx, Box::new(controller));

    let gone = unknown.node_name.as_str();
    world
        .wait(
            &format!("Node {gone} (instance gone, NotReady) to be deleted"),
            || async {
                match world.get_node(gone).await? {
                    None => Ok(()),
                    Some(_) => Err("the Node still exists".to_owned()),
                }
            },
        )
        .await?;
    world
        .wait_event(
            "default",
            gone,
            names::events::DELETING_NODE,
            names::components::CLOUD_NODE_LIFECYCLE_CONTROLLER,
        )
        .await?;
    let shutdown = names::taints::SHUTDOWN;
    if let Some(stopped) = &stopped {
        let name = stopped.node_name.as_str();
        world
            .wait(
                &format!("Node {name} (instance stopped, NotReady) to get the {shutdown} taint"),
                || async {
                    match world.get_node(name).await? {
                        None => {
                            Err("the Node was deleted, but a stopped instance still exists"
                                .to_owned())
                        }
                        Some(node) if node_has_taint(&node, shutdown) => Ok(()),
                        Some(_) => Err("no shutdown taint".to_owned()),
                    }
                },
            )
            .await?;
    }
    if let Some(running) = &running {
        // The lifecycle controller has made at least one full pass (the other nodes changed); the Ready Node
        // must be untouched.
        match world.get_node(&running.node_name).await.or_else(fail)? {
            None => {
                return fail(format!(
                    "Node {} of the running instance was deleted",
                    running.node_name
                ));
            }
            Some(node) if node_has_taint(&node, shutdown) => {
                return fail(format!(
                    "Node {} of the running instance got the {shutdown} taint",
                    running.node_name
                ));
            }
            Some(_) => world.step(format!(
                "Node {} (running, Ready) left alone",
                running.node_name
            )),
        }
    }
    if let Some(stopped) = &stopped {
        let name = stopped.node_name.as_str();
        world.set_ready(name, true).await?;
        world
            .wait(
                &format!("Node {name}, Ready again, to lose the {shutdown} taint"),
                || async {
                    match world.get_node(name).await? {
                        None => Err("the Node was deleted".to_owned()),
                        Some(node) if node_has_taint(&node, shutdown) => {
                            Err("the shutdown taint is still there".to_owned())
                        }
                        Some(_) => Ok(()),
                    }
                },
            )
            .await?;
    }
    Ok(())
}

/// The Service of the load-balancer scenario.
fn scenario_service(world: &World, namespace: &str) -> Service {
    let mut service = Service {
        metadata: ObjectMeta {
            name: Some("conformance".to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(RUN_LABEL.to_owned(), world.id.clone())])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            selector: Some(BTreeMap::from([(
                "app".to_owned(),
                "conformance".to_owned(),
            )])),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                protocol: Some("TCP".to_owned()),
                port: 80,
                target_port: Some(IntOrString::Int(8080)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    if let Some(customize) = &world.fixture().customize_service {
        customize(&mut service);
        service.metadata.uid = None;
        service.metadata.resource_version = None;
        service.metadata.namespace = Some(namespace.to_owned());
    }
    service
}

async fn load_balancer(world: &World) -> Check {
    let fixture = world.fixture().clone();
    let backends = fixture.effective_backends();
    if backends.is_empty() {
        return skip(
            "the fixture names no backend nodes or running instance (set ConformanceFixture::with_backend_nodes)",
        );
    }
    let lb = world
        .provider
        .load_balancer()
        .map_or_else(|| fail("CloudProvider::load_balancer() returned None"), Ok)?;
    let namespace = format!("ccm-conformance-{}", world.id);
    let namespaces: Api<Namespace> = Api::all(world.client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            labels: Some(BTreeMap::from([(RUN_LABEL.to_owned(), world.id.clone())])),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .or_else(|e| fail(format!("creating namespace {namespace} failed: {e}")))?;
    *world
        .namespace
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(namespace.clone());

    for backend in &backends {
        let id = world.provider_id(backend).await?;
        let node = world.node(
            backend,
            NodeShape {
                provider_id: Some(&id),
                uninitialized: false,
                ready: true,
                pod_cidr: None,
            },
        );
        world.create_node(&node).await?;
    }
    let backend_names: BTreeSet<String> = backends.iter().map(|b| b.node_name.clone()).collect();
    world.step(format!(
        "created initialized Nodes {}",
        backend_names.iter().cloned().collect::<Vec<_>>().join(", ")
    ));

    let ctx = world.context(&fixture.cluster_name, Some(&namespace));
    let controller = ccm_servicecontroller::ServiceController::new(
        &ctx,
        ccm_servicecontroller::Config::default()
            .with_node_sync_debounce(Duration::from_millis(200)),
    )
    .or_else(|e| fail(format!("building the service controller failed: {e}")))?;
    world.start(&ctx, Box::new(controller));
    ctx.informers.wait_synced().await;

    let services: Api<Service> = Api::namespaced(world.client.clone(), &namespace);
    let service = scenario_service(world, &namespace);
    let key = format!("{namespace}/conformance");
    services
        .create(&PostParams::default(), &service)
        .await
        .or_else(|e| fail(format!("creating Service {key} failed: {e}")))?;
    world.step(format!("created Service {key} of type LoadBalancer"));

    let finalizer = names::finalizers::LOAD_BALANCER_CLEANUP;
    let ready = world
        .wait(
            &format!("Service {key} to get the {finalizer} finalizer and a load-balancer ingress"),
            || async {
                let svc = services
                    .get_opt("conformance")
                    .await
                    .map_err(|e| format!("reading the Service failed: {e}"))?
                    .ok_or_else(|| "the Service is gone".to_owned())?;
                let has_finalizer = svc
                    .metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| f.iter().any(|f| f == finalizer));
                let status = svc
                    .status
                    .as_ref()
                    .and_then(|s| s.load_balancer.clone())
                    .unwrap_or_default();
                match (has_finalizer, status_addresses(&status).is_empty()) {
                    (true, false) => Ok(svc),
                    (f, _) => Err(format!(
                        "finalizer present: {f}, status: {}",
                        describe_status(&status)
                    )),
                }
            },
        )
        .await?;
    world
        .wait_event(
            &namespace,
            "conformance",
            names::events::ENSURED_LOAD_BALANCER,
            names::components::SERVICE_CONTROLLER,
        )
        .await?;
    let written = ready
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.clone())
        .unwrap_or_default();
    let cluster = fixture.cluster_name.as_str();
    world
        .wait(
            "the cloud to report the same ingress as the Service status",
            || async {
                match lb.get_load_balancer(cluster, &ready).await {
                    Ok(Some(cloud)) if status_addresses(&cloud) == status_addresses(&written) => {
                        Ok(())
                    }
                    Ok(Some(cloud)) => Err(format!(
                        "the cloud reports {}, the Service {}",
                        describe_status(&cloud),
                        describe_status(&written)
                    )),
                    Ok(None) => Err("get_load_balancer answers \"does not exist\"".to_owned()),
                    Err(e) => Err(format!("get_load_balancer failed: {e}")),
                }
            },
        )
        .await?;

    if let Some(inspector) = world.options.inspector.clone() {
        let expect_backends = |want: BTreeSet<String>, what: String| {
            let inspector = inspector.clone();
            let ready = &ready;
            async move {
                world
                    .wait(&what, || {
                        let inspector = inspector.clone();
                        let want = want.clone();
                        async move {
                            let seen = inspector
                                .backend_nodes(cluster, ready)
                                .await
                                .map_err(|e| format!("the inspector failed: {e}"))?
                                .ok_or_else(|| "the inspector finds no load balancer".to_owned())?;
                            let seen: BTreeSet<String> = seen.into_iter().collect();
                            if seen == want {
                                Ok(())
                            } else {
                                Err(format!("backends {seen:?}"))
                            }
                        }
                    })
                    .await
            }
        };
        expect_backends(
            backend_names.clone(),
            format!("the load balancer's backends to be {backend_names:?}"),
        )
        .await?;
        if backends.len() > 1 {
            let leaving = backends[backends.len() - 1].node_name.clone();
            world.delete_node(&leaving).await?;
            world.step(format!("deleted backend Node {leaving}"));
            let mut rest = backend_names.clone();
            rest.remove(&leaving);
            expect_backends(
                rest.clone(),
                format!("the load balancer's backends to follow the Nodes: {rest:?}"),
            )
            .await?;
        }
    } else {
        world.step("no inspector: backend checks left out");
    }

    services
        .delete("conformance", &DeleteParams::default())
        .await
        .or_else(|e| fail(format!("deleting Service {key} failed: {e}")))?;
    world.step(format!("deleted Service {key}"));
    world
        .wait(
            &format!("Service {key} to be gone (the controller removes its finalizer)"),
            || async {
                match services.get_opt("conformance").await {
                    Ok(None) => Ok(()),
                    Ok(Some(svc)) => Err(format!(
                        "the Service still exists with finalizers {:?}",
                        svc.metadata.finalizers.unwrap_or_default()
                    )),
                    Err(e) => Err(format!("reading the Service failed: {e}")),
                }
            },
        )
        .await?;
    world
        .wait_event(
            &namespace,
            "conformance",
            names::events::DELETED_LOAD_BALANCER,
            names::components::SERVICE_CONTROLLER,
        )
        .await?;
    world
        .wait(
            "the cloud to report the load balancer as deleted",
            || async {
                match lb.get_load_balancer(cluster, &ready).await {
                    Ok(None) => Ok(()),
                    Ok(Some(status)) => Err(format!(
                        "get_load_balancer reports {}",
                        describe_status(&status)
                    )),
                    Err(e) => Err(format!("get_load_balancer failed: {e}")),
                }
            },
        )
        .await
}

/// Whether `cidr` lies inside one of `cluster`.
fn within(cidr: &str, cluster: &[IpNet]) -> bool {
    cidr.parse::<IpNet>()
        .is_ok_and(|net| cluster.iter().any(|c| c.contains(&net)))
}

async fn routes(world: &World) -> Check {
    let fixture = world.fixture().clone();
    let target = match fixture.route_target.as_ref().or(fixture.running.as_ref()) {
        Some(target) => target.clone(),
        None => return skip("the fixture names no route target or running instance"),
    };
    let cluster_cidrs = ccm_routecontroller::parse_cluster_cidrs(&world.options.cluster_cidr)
        .or_else(|e| fail(format!("the scenario's cluster CIDR is invalid: {e}")))?;
    let cidrs: Vec<String> = fixture.route_cidrs.clone();
    if cidrs.is_empty() {
        return skip("the fixture has no route CIDRs (set ConformanceFixture::with_route_cidrs)");
    }
    if let Some(outside) = cidrs.iter().find(|c| !within(c, &cluster_cidrs)) {
        return fail(format!(
            "the route CIDR {outside} is outside the scenario's cluster CIDR {}; set ScenarioOptions::with_cluster_cidr",
            world.options.cluster_cidr
        ));
    }
    *world
        .route_cidrs
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = cidrs.clone();
    let api = world
        .provider
        .routes()
        .map_or_else(|| fail("CloudProvider::routes() returned None"), Ok)?;
    let cluster = world.route_cluster.clone();
    let pod_cidr = cidrs[0].clone();

    // A stale route inside the cluster CIDR that no Node wants: the controller must delete it.
    let stale = cidrs.get(1).cloned();
    if let Some(stale) = &stale {
        let route = Route::new(target.node_name.clone(), stale.clone());
        let what = format!(
            "a stale route {stale} -> {} to be seeded in cluster {cluster:?}",
            target.node_name
        );
        world
            .wait(&what, || async {
                api.create_route(&cluster, "ccm-conformance-stale", &route)
                    .await
                    .map_err(|e| format!("create_route failed: {e}"))
            })
            .await?;
    }

    let id = world.provider_id(&target).await?;
    let node = world.node(
        &target,
        NodeShape {
            provider_id: Some(&id),
            uninitialized: false,
            ready: true,
            pod_cidr: Some(&pod_cidr),
        },
    );
    world.create_node(&node).await?;
    world.step(format!(
        "created Node {} with pod CIDR {pod_cidr}",
        target.node_name
    ));

    let ctx = world.context(&cluster, None);
    let config = ccm_routecontroller::Config::default()
        .with_cluster_cidr(world.options.cluster_cidr.clone())
        .with_route_reconciliation_period(Duration::from_secs(1));
    let controller = ccm_routecontroller::RouteController::new(&ctx, config)
        .or_else(|e| fail(format!("building the route controller failed: {e}")))?;
    world.start(&ctx, Box::new(controller));

    let name = target.node_name.as_str();
    let describe = |routes: &[Route]| {
        routes
            .iter()
            .map(|r| format!("{} -> {}", r.destination_cidr, r.target_node))
            .collect::<Vec<_>>()
            .join(", ")
    };
    world
        .wait(
            &format!(
                "a route {pod_cidr} -> {name}{}",
                match &stale {
                    Some(s) => format!(" and no route {s}"),
                    None => String::new(),
                }
            ),
            || async {
                let listed = api
                    .list_routes(&cluster)
                    .await
                    .map_err(|e| format!("list_routes failed: {e}"))?;
                let created = listed
                    .iter()
                    .any(|r| r.destination_cidr == pod_cidr && r.target_node == name);
                let stale_left = stale
                    .as_ref()
                    .is_some_and(|s| listed.iter().any(|r| &r.destination_cidr == s));
                if created && !stale_left {
                    Ok(())
                } else {
                    Err(format!("routes [{}]", describe(&listed)))
                }
            },
        )
        .await?;
    let unavailable = names::conditions::NETWORK_UNAVAILABLE;
    world
        .wait(
            &format!(
                "Node {name} to get {unavailable}=False with reason {}",
                names::conditions::REASON_ROUTE_CREATED
            ),
            || async {
                let node = world
                    .get_node(name)
                    .await?
                    .ok_or_else(|| "the Node is gone".to_owned())?;
                let reason = node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == unavailable))
                    .and_then(|c| c.reason.clone());
                match (node_condition_status(&node, unavailable), reason.as_deref()) {
                    (ConditionStatus::False, Some(names::conditions::REASON_ROUTE_CREATED)) => {
                        Ok(())
                    }
                    (status, reason) => Err(format!(
                        "{unavailable} is {status:?} with reason {reason:?}"
                    )),
                }
            },
        )
        .await?;
    world.delete_node(name).await?;
    world.step(format!("deleted Node {name}"));
    world
        .wait(
            &format!("the route {pod_cidr} to be deleted with its Node"),
            || async {
                let listed = api
                    .list_routes(&cluster)
                    .await
                    .map_err(|e| format!("list_routes failed: {e}"))?;
                if listed.iter().any(|r| r.destination_cidr == pod_cidr) {
                    Err(format!("routes [{}]", describe(&listed)))
                } else {
                    Ok(())
                }
            },
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_ids_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::from_id(s.id()), Some(s));
            assert!(!s.controller().is_empty());
        }
        assert_eq!(Scenario::from_id("nope"), None);
    }

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

    #[test]
    fn initialization_gaps_name_what_is_missing() {
        let expected = Expected {
            provider_id: Some("fake://n1".into()),
            zone: "zone-a".into(),
            region: String::new(),
            instance_type: "m".into(),
            addresses: vec![NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.1".into(),
            }],
        };
        let instance = InstanceRef::new("n1");
        let fresh = build_node(
            &instance,
            (RUN_LABEL, "x"),
            NodeShape {
                provider_id: None,
                uninitialized: true,
                ready: true,
                pod_cidr: None,
            },
        );
        let gaps = initialization_gaps(&fresh, &expected).unwrap_err();
        assert!(gaps.contains("uninitialized taint"), "{gaps}");
        assert!(gaps.contains("spec.providerID is \"\""), "{gaps}");
        assert!(gaps.contains("topology.kubernetes.io/zone"), "{gaps}");
        assert!(!gaps.contains("topology.kubernetes.io/region"), "{gaps}");
        assert!(gaps.contains("lacks InternalIP=10.0.0.1"), "{gaps}");

        let mut done = build_node(
            &instance.clone().with_internal_ip("10.0.0.1"),
            (RUN_LABEL, "x"),
            NodeShape {
                provider_id: Some("fake://n1"),
                uninitialized: false,
                ready: true,
                pod_cidr: None,
            },
        );
        let labels = done.metadata.labels.get_or_insert_default();
        labels.insert(names::labels::TOPOLOGY_ZONE.into(), "zone-a".into());
        labels.insert(names::labels::INSTANCE_TYPE.into(), "m".into());
        assert_eq!(initialization_gaps(&done, &expected), Ok(()));
    }

    #[test]
    fn cidrs_within_the_cluster_cidr() {
        let cluster = ccm_routecontroller::parse_cluster_cidrs("10.244.0.0/16").unwrap_or_default();
        assert!(within("10.244.250.0/24", &cluster));
        assert!(!within("10.245.0.0/24", &cluster));
        assert!(!within("10.0.0.0/8", &cluster));
        assert!(!within("nope", &cluster));
    }

    #[test]
    fn report_table() {
        let report = ScenarioReport {
            provider: "fake".into(),
            results: vec![
                ScenarioResult {
                    scenario: Scenario::NodeInitialization,
                    outcome: Outcome::Passed,
                    elapsed: Duration::from_millis(1200),
                    steps: vec!["created".into()],
                },
                ScenarioResult {
                    scenario: Scenario::LoadBalancer,
                    outcome: Outcome::Failed {
                        message: "timed out".into(),
                    },
                    elapsed: Duration::from_secs(60),
                    steps: vec!["created Service".into()],
                },
                ScenarioResult {
                    scenario: Scenario::Routes,
                    outcome: Outcome::Skipped {
                        reason: "no routes".into(),
                    },
                    elapsed: Duration::ZERO,
                    steps: vec![],
                },
            ],
        };
        assert!(!report.is_success());
        let table = report.to_string();
        assert!(
            table.contains("PASSED   node-initialization  cloud-node-controller"),
            "{table}"
        );
        assert!(table.contains("ok: created Service"), "{table}");
        assert!(table.contains("FAILED: timed out"), "{table}");
        assert!(table.contains("           no routes"), "{table}");
        assert!(
            !table.contains("ok: created\n"),
            "passed scenarios list no steps: {table}"
        );
        assert!(table.ends_with("1 passed, 1 failed, 1 skipped"), "{table}");
    }
}
