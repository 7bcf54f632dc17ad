//! The cloud node lifecycle controller: deletes Nodes whose instance is gone, and marks shut-down instances with
//! the `node.cloudprovider.kubernetes.io/shutdown:NoSchedule` taint (removed again once the node is Ready).
//!
//! Unlike the Go reference it only touches nodes it owns ([`NodeOwnership`]), never deletes a node that is still
//! being initialized, never reads a failed existence check as "gone", and checks nodes in parallel.
//!
//! ```no_run
//! use ccm_core::runtime::controller::{Controller, ControllerContext};
//! use ccm_nodecontroller::{CloudNodeLifecycleConfig, CloudNodeLifecycleController, NodeOwnership};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(ctx: ControllerContext) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let config = CloudNodeLifecycleConfig::default().with_ownership(NodeOwnership::ProviderIdPrefix);
//! let controller = CloudNodeLifecycleController::new(&ctx, config)?;
//! Box::new(controller).run(CancellationToken::new()).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::budget::{CallPriority, is_abandoned};
use ccm_core::helpers::{
    ConditionStatus, node_condition_status, node_has_taint, node_name, node_provider_id,
};
use ccm_core::runtime::controller::{Controller, ControllerContext, ControllerDescriptor};
use ccm_core::runtime::events::EventRecorder;
use ccm_core::runtime::informer::{Informer, Store};
use ccm_core::{BoxError, ErrorKind, names};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use kube::api::{Api, DeleteParams, Preconditions};
use tokio_util::sync::CancellationToken;

use crate::DEFAULT_CLOUD_CALL_TIMEOUT;
use crate::cloud::CloudInstances;
use crate::error::Error;
use crate::patch::{self, shutdown_taint, with_taint, without_matching_taint};
use crate::write::{self, Target, guarded_update};

/// Default of `--node-monitor-period` (Go: 5 s).
pub const DEFAULT_NODE_MONITOR_PERIOD: Duration = Duration::from_secs(5);
/// Default number of nodes checked at once (Go checks one at a time).
pub const DEFAULT_CONCURRENCY: usize = 10;

const CONTROLLER: &str = names::controllers::CLOUD_NODE_LIFECYCLE;

/// Which nodes the lifecycle controller may taint, untaint and delete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeOwnership {
    /// Only nodes whose `spec.providerID` starts with `<provider name>://` (the default).
    ///
    /// Nodes with an **empty** providerID are not owned either: with InstancesV2 the cloud node controller never
    /// initializes a node without a providerID, so such a node was not set up by this CCM (a node of another
    /// CCM, a bare-metal or virtual-kubelet node, or a kubelet not started with `--cloud-provider=external`), and
    /// a lookup by name could match an unrelated instance. The only cost is with a V1 provider whose
    /// `instance_id` is not implemented: its nodes have no providerID, so they get no lifecycle handling (Go
    /// cannot check them either: its providerID lookup fails for them every time).
    #[default]
    ProviderIdPrefix,
    /// Every node, as in Go (the reference has no ownership rule).
    AllNodes,
}

impl NodeOwnership {
    /// The flag spelling: `provider-id-prefix` or `all-nodes`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeOwnership::ProviderIdPrefix => "provider-id-prefix",
            NodeOwnership::AllNodes => "all-nodes",
        }
    }
}

impl std::fmt::Display for NodeOwnership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown [`NodeOwnership`] spelling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown node ownership {0:?}: use provider-id-prefix (the default) or all-nodes (the Go behaviour)"
)]
pub struct ParseNodeOwnershipError(pub String);

impl std::str::FromStr for NodeOwnership {
    type Err = ParseNodeOwnershipError;

    /// ```
    /// use ccm_nodecontroller::NodeOwnership;
    /// assert_eq!("all-nodes".parse::<NodeOwnership>().unwrap(), NodeOwnership::AllNodes);
    /// assert_eq!(NodeOwnership::ProviderIdPrefix.to_string(), "provider-id-prefix");
    /// assert!("mine".parse::<NodeOwnership>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "provider-id-prefix" => Ok(NodeOwnership::ProviderIdPrefix),
            "all-nodes" => Ok(NodeOwnership::AllNodes),
            other => Err(ParseNodeOwnershipError(other.to_owned())),
        }
    }
}

/// Settings of the cloud node lifecycle controller. `Default` gives the Go reference's flag defaults plus the
/// safety rules described on [`NodeOwnership`] and [`Config::protect_initializing_nodes`].
///
/// ```
/// use std::time::Duration;
/// use ccm_nodecontroller::{CloudNodeLifecycleConfig, NodeOwnership};
///
/// let go_compatible = CloudNodeLifecycleConfig::default()
///     .with_ownership(NodeOwnership::AllNodes)
///     .with_protect_initializing_nodes(false)
///     .with_concurrency(1);
/// assert_eq!(go_compatible.node_monitor_period, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// `--node-monitor-period` (default 5 s, must be > 0): the pause between two passes over the nodes.
    pub node_monitor_period: Duration,
    /// Nodes checked at once (default 10, must be > 0; Go: 1).
    pub concurrency: usize,
    /// Which nodes are handled (default [`NodeOwnership::ProviderIdPrefix`]).
    pub ownership: NodeOwnership,
    /// Leave nodes that still carry `node.cloudprovider.kubernetes.io/uninitialized` alone (default true; Go:
    /// false, so a node could be deleted before it was ever initialized).
    pub protect_initializing_nodes: bool,
    /// The longest a single cloud call may take (default 30 s, must be > 0).
    pub cloud_call_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_monitor_period: DEFAULT_NODE_MONITOR_PERIOD,
            concurrency: DEFAULT_CONCURRENCY,
            ownership: NodeOwnership::default(),
            protect_initializing_nodes: true,
            cloud_call_timeout: DEFAULT_CLOUD_CALL_TIMEOUT,
        }
    }
}

impl Config {
    /// Set `--node-monitor-period`.
    pub fn with_node_monitor_period(mut self, period: Duration) -> Self {
        self.node_monitor_period = period;
        self
    }
    /// Set how many nodes are checked at once.
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }
    /// Set the ownership rule.
    pub fn with_ownership(mut self, ownership: NodeOwnership) -> Self {
        self.ownership = ownership;
        self
    }
    /// Set whether nodes being initialized are left alone.
    pub fn with_protect_initializing_nodes(mut self, protect: bool) -> Self {
        self.protect_initializing_nodes = protect;
        self
    }
    /// Set the cloud call timeout.
    pub fn with_cloud_call_timeout(mut self, timeout: Duration) -> Self {
        self.cloud_call_timeout = timeout;
        self
    }
    /// Check the settings.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |message: &str| {
            Err(Error::InvalidConfig {
                controller: CONTROLLER,
                message: message.to_owned(),
            })
        };
        if self.node_monitor_period.is_zero() {
            return invalid("--node-monitor-period must be greater than 0");
        }
        if self.concurrency == 0 {
            return invalid("the concurrency must be greater than 0");
        }
        if self.cloud_call_timeout.is_zero() {
            return invalid("the cloud call timeout must be greater than 0");
        }
        Ok(())
    }
}

/// Why a node is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The node belongs to another provider (or has no providerID), see [`NodeOwnership`].
    NotOwned,
    /// The node still carries the uninitialized taint.
    Initializing,
}

/// The next thing to do for one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleAction {
    /// Leave the node alone.
    Skip(SkipReason),
    /// Nothing to do (Ready without the taint, a failed or negative check, or the taint already there).
    Nothing,
    /// Ready: remove the shutdown taint (no cloud call).
    RemoveShutdownTaint,
    /// Ask the cloud whether the instance exists.
    CheckExists,
    /// Ask the cloud whether the instance is shut down.
    CheckShutdown,
    /// The instance is gone: delete the Node.
    Delete,
    /// The instance is shut down: add the shutdown taint.
    AddShutdownTaint,
}

/// What the cloud answered so far about one node: `None` = not asked yet, `Some(Err(kind))` = the call failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    /// The existence check.
    pub exists: Option<Result<bool, ErrorKind>>,
    /// The shutdown check.
    pub shutdown: Option<Result<bool, ErrorKind>>,
}

/// True if this controller may act on the node.
///
/// ```
/// use ccm_nodecontroller::lifecycle::is_owned;
/// use ccm_nodecontroller::NodeOwnership;
/// use k8s_openapi::api::core::v1::{Node, NodeSpec};
///
/// let node = |id: &str| Node { spec: Some(NodeSpec { provider_id: Some(id.into()), ..Default::default() }), ..Default::default() };
/// assert!(is_owned(&node("fake://a"), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(!is_owned(&node("other://a"), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(!is_owned(&node("fakeish://a"), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(!is_owned(&Node::default(), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(is_owned(&Node::default(), NodeOwnership::AllNodes, "fake"));
/// ```
pub fn is_owned(node: &Node, ownership: NodeOwnership, provider_name: &str) -> bool {
    match ownership {
        NodeOwnership::AllNodes => true,
        NodeOwnership::ProviderIdPrefix => node_provider_id(node)
            .strip_prefix(provider_name)
            .is_some_and(|rest| rest.starts_with("://")),
    }
}

/// The lifecycle decision for one node, given what the cloud answered so far (Go: one iteration of
/// `MonitorNodes`, plus the ownership and initialization rules). Call it again after each check it asks for.
///
/// - not owned, or (when protected) still initializing → [`LifecycleAction::Skip`];
/// - Ready → remove the shutdown taint if present, never a cloud call;
/// - NotReady or Unknown → check existence; gone → delete; a failed check → nothing (never "gone");
/// - exists → check shutdown; shut down → add the taint unless it is already there; a failed or negative check
///   → nothing (the taint is never removed while the node is not Ready).
pub fn decide(node: &Node, config: &Config, provider_name: &str, probe: &Probe) -> LifecycleAction {
    if !is_owned(node, config.ownership, provider_name) {
        return LifecycleAction::Skip(SkipReason::NotOwned);
    }
    if node_condition_status(node, names::conditions::READY) == ConditionStatus::True {
        // every Ready node, every period: no allocation (`without_matching_taint` only when there is one)
        let shut_down = patch::taints(node)
            .iter()
            .any(|t| t.key == names::taints::SHUTDOWN && t.effect == patch::NO_SCHEDULE);
        return if shut_down {
            LifecycleAction::RemoveShutdownTaint
        } else {
            LifecycleAction::Nothing
        };
    }
    if config.protect_initializing_nodes && node_has_taint(node, names::taints::UNINITIALIZED) {
        return LifecycleAction::Skip(SkipReason::Initializing);
    }
    match probe.exists {
        None => LifecycleAction::CheckExists,
        Some(Err(_)) => LifecycleAction::Nothing,
        Some(Ok(false)) => LifecycleAction::Delete,
        Some(Ok(true)) => match probe.shutdown {
            None => LifecycleAction::CheckShutdown,
            Some(Ok(true)) if with_taint(node, &shutdown_taint()).is_some() => {
                LifecycleAction::AddShutdownTaint
            }
            Some(_) => LifecycleAction::Nothing,
        },
    }
}

/// The `cloud-node-lifecycle-controller` (alias `cloud-node-lifecycle`) for the runtime: not started (logged)
/// when the provider has neither InstancesV2 nor Instances; an invalid `config` is an error.
///
/// ```
/// let d = ccm_nodecontroller::cloud_node_lifecycle_descriptor(Default::default());
/// assert_eq!(d.name, "cloud-node-lifecycle-controller");
/// assert_eq!(d.short_name(), "cloud-node-lifecycle");
/// ```
pub fn descriptor(config: Config) -> ControllerDescriptor {
    ControllerDescriptor::new(CONTROLLER, move |ctx: &ControllerContext| {
        match CloudNodeLifecycleController::new(ctx, config.clone()) {
            Ok(controller) => Ok(Some(Box::new(controller) as Box<dyn Controller>)),
            Err(err @ Error::InstancesUnsupported { .. }) => {
                tracing::warn!(controller = CONTROLLER, error = %err, "not starting the controller");
                Ok(None)
            }
            Err(err) => Err(Box::new(err) as BoxError),
        }
    })
    .with_aliases(&[names::controllers::CLOUD_NODE_LIFECYCLE_ALIAS])
}

/// The cloud node lifecycle controller (Go: `CloudNodeLifecycleController`).
pub struct CloudNodeLifecycleController {
    nodes: Api<Node>,
    informer: Informer<Node>,
    store: Store<Node>,
    cloud: CloudInstances,
    recorder: EventRecorder,
    config: Config,
}

impl std::fmt::Debug for CloudNodeLifecycleController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudNodeLifecycleController")
            .field("cloud", &self.cloud)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CloudNodeLifecycleController {
    /// Build the controller from the process context: validates `config` and needs InstancesV2 or Instances.
    pub fn new(ctx: &ControllerContext, config: Config) -> Result<Self, Error> {
        config.validate()?;
        let cloud =
            CloudInstances::for_controller(&ctx.provider, config.cloud_call_timeout, CONTROLLER)?;
        let informer = ctx.informers.nodes().clone();
        Ok(CloudNodeLifecycleController {
            nodes: Api::all(ctx.client.clone()),
            store: informer.store(),
            informer,
            cloud,
            recorder: ctx.recorder(names::components::CLOUD_NODE_LIFECYCLE_CONTROLLER),
            config,
        })
    }

    /// One pass over every cached node (Go: `MonitorNodes`), `config.concurrency` nodes at a time. With a
    /// provider that answers bulk calls natively, every existence check of the pass is one
    /// `instance_exists_bulk` call.
    ///
    /// The pass's cloud calls are [`CallPriority::Low`]: when calls must wait for the cloud-call budget, they wait
    /// behind every other controller's, so a pass never delays the initialization of a new node.
    pub async fn monitor_nodes(&self) {
        CallPriority::Low.scope(self.monitor_nodes_now()).await;
    }

    async fn monitor_nodes_now(&self) {
        // Most nodes are Ready and untainted: decided here, without a task or a probe for each.
        let provider = self.cloud.provider_name();
        let nodes: Vec<Arc<Node>> = self
            .store
            .list()
            .into_iter()
            .filter(|node| {
                !matches!(
                    decide(node, &self.config, provider, &Probe::default()),
                    LifecycleAction::Nothing | LifecycleAction::Skip(_)
                )
            })
            .collect();
        if nodes.is_empty() {
            return;
        }
        let mut probes = vec![Probe::default(); nodes.len()];
        if self.cloud.supports_bulk() {
            self.check_exists_in_bulk(&nodes, &mut probes).await;
        }
        futures::stream::iter(nodes.iter().zip(probes))
            .for_each_concurrent(self.config.concurrency, |(node, probe)| async move {
                self.monitor_node(node, probe).await;
            })
            .await;
    }

    /// Ask, in one bulk call, about every node whose next step is an existence check, and record the answers in
    /// `probes` (same order as `nodes`). A failed bulk call counts as a failed check of each of those nodes.
    async fn check_exists_in_bulk(&self, nodes: &[Arc<Node>], probes: &mut [Probe]) {
        let provider = self.cloud.provider_name();
        let asked: Vec<usize> = nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| {
                decide(node, &self.config, provider, &Probe::default())
                    == LifecycleAction::CheckExists
            })
            .map(|(i, _)| i)
            .collect();
        if asked.is_empty() {
            return;
        }
        let list: Vec<Node> = asked.iter().map(|&i| Node::clone(&nodes[i])).collect();
        match self.cloud.exists_bulk(&list).await {
            Ok(answers) => {
                for (&i, answer) in asked.iter().zip(answers) {
                    probes[i].exists = Some(answer.map_err(|err| {
                        warn_unless_abandoned(
                            &err,
                            node_name(&nodes[i]),
                            "error checking if node exists; will check again next period",
                        );
                        err.cloud_kind().unwrap_or(ErrorKind::Other)
                    }));
                }
            }
            Err(err) => {
                if !is_abandoned(&err) {
                    tracing::warn!(nodes = asked.len(), error = %err, "error checking if nodes exist; will check again next period");
                }
                let kind = err.cloud_kind().unwrap_or(ErrorKind::Other);
                for &i in &asked {
                    probes[i].exists = Some(Err(kind));
                }
            }
        }
    }

    /// Act on one node, starting from what the cloud already answered about it (`probe`).
    async fn monitor_node(&self, node: &Node, mut probe: Probe) {
        let name = node_name(node);
        let mut provider_id = None;
        loop {
            match decide(node, &self.config, self.cloud.provider_name(), &probe) {
                LifecycleAction::Skip(reason) => {
                    tracing::trace!(node = name, ?reason, "leaving node alone");
                    return;
                }
                LifecycleAction::Nothing => return,
                LifecycleAction::CheckExists => {
                    probe.exists = Some(match self.cloud.exists(node).await {
                        Ok((exists, id)) => {
                            provider_id = id;
                            Ok(exists)
                        }
                        Err(err) => {
                            warn_unless_abandoned(
                                &err,
                                name,
                                "error checking if node exists; will check again next period",
                            );
                            Err(err.cloud_kind().unwrap_or(ErrorKind::Other))
                        }
                    });
                }
                LifecycleAction::CheckShutdown => {
                    probe.shutdown = Some(
                        match self.cloud.shutdown(node, provider_id.as_deref()).await {
                            Ok(shutdown) => Ok(shutdown),
                            Err(err) => {
                                warn_unless_abandoned(
                                    &err,
                                    name,
                                    "error checking if node is shut down",
                                );
                                Err(err.cloud_kind().unwrap_or(ErrorKind::Other))
                            }
                        },
                    );
                }
                LifecycleAction::Delete => return self.delete(node).await,
                LifecycleAction::AddShutdownTaint => {
                    return self
                        .set_taints(node, "add the shutdown taint to", |n| {
                            with_taint(n, &shutdown_taint())
                        })
                        .await;
                }
                LifecycleAction::RemoveShutdownTaint => {
                    return self
                        .set_taints(node, "remove the shutdown taint from", |n| {
                            // Only while the node is still Ready (re-checked on every re-read).
                            (node_condition_status(n, names::conditions::READY)
                                == ConditionStatus::True)
                                .then(|| without_matching_taint(n, &shutdown_taint()))
                                .flatten()
                        })
                        .await;
                }
            }
        }
    }

    async fn set_taints(
        &self,
        node: &Node,
        what: &str,
        change: impl Fn(&Node) -> Option<Vec<k8s_openapi::api::core::v1::Taint>>,
    ) {
        let name = node_name(node);
        let result = guarded_update(&self.nodes, node.clone(), |current, written| {
            if !written.is_empty() {
                return Ok(None);
            }
            Ok(change(current).map(|taints| (Target::Spec, patch::taint_ops(current, taints))))
        })
        .await;
        match result {
            Ok(outcome) if !outcome.written.is_empty() => {
                tracing::info!(node = name, "{what} node")
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(node = name, error = %err, "failed to {what} node"),
        }
    }

    async fn delete(&self, node: &Node) {
        let name = node_name(node);
        let reference = node.object_ref(&());
        tracing::info!(
            node = name,
            "deleting node since it is no longer present in cloud provider"
        );
        self.recorder.normal(
            &reference,
            names::events::DELETING_NODE,
            format!("Deleting node {name} because it does not exist in the cloud provider"),
        );
        // The UID precondition keeps a node re-registered under the same name from being deleted by mistake.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: node.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.nodes.delete(name, &params).await {
            Ok(_) => {}
            Err(err) if write::is_not_found(&err) => {
                tracing::debug!(node = name, "node already deleted");
            }
            Err(err) => {
                tracing::warn!(node = name, error = %err, "unable to delete node");
                self.recorder.warning(
                    &reference,
                    names::events::DELETING_NODE_FAILED,
                    format!("Failed deleting node {name}: {err}"),
                );
            }
        }
    }
}

/// Log a failed check, unless the call was abandoned at shutdown: the cloud-call budget summarises those in one
/// line.
fn warn_unless_abandoned(err: &Error, node: &str, message: &str) {
    if !is_abandoned(err) {
        tracing::warn!(node, error = %err, "{message}");
    }
}

#[async_trait]
impl Controller for CloudNodeLifecycleController {
    async fn run(self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        tracing::info!(
            controller = CONTROLLER,
            period = ?self.config.node_monitor_period,
            concurrency = self.config.concurrency,
            ownership = ?self.config.ownership,
            "waiting for the node cache to sync"
        );
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = self.informer.wait_synced() => {}
        }
        let this = Arc::new(*self);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = this.monitor_nodes() => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(this.config.node_monitor_period) => {}
            }
        }
        tracing::info!(controller = CONTROLLER, "stopped");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::NO_SCHEDULE;
    use crate::patch::tests::taint;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint};

    fn node(provider_id: &str, ready: Option<&str>, taints: Vec<Taint>) -> Node {
        Node {
            spec: Some(NodeSpec {
                provider_id: (!provider_id.is_empty()).then(|| provider_id.to_owned()),
                taints: Some(taints),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: ready.map(|s| {
                    vec![NodeCondition {
                        type_: "Ready".into(),
                        status: s.into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn probe(
        exists: Option<Result<bool, ErrorKind>>,
        shutdown: Option<Result<bool, ErrorKind>>,
    ) -> Probe {
        Probe { exists, shutdown }
    }

    fn go() -> Config {
        Config::default()
            .with_ownership(NodeOwnership::AllNodes)
            .with_protect_initializing_nodes(false)
    }

    use LifecycleAction as A;

    #[test]
    fn go_table_nodes_deleted() {
        // Go Test_NodesDeleted (V1 and V2 rows give the same decisions).
        let cfg = go();
        let not_ready = node("fake://n", Some("False"), vec![]);
        let unknown = node("fake://n", Some("Unknown"), vec![]);
        let ready = node("fake://n", Some("True"), vec![]);
        // "node is not ready and does not exist"
        assert_eq!(
            decide(&not_ready, &cfg, "fake", &Probe::default()),
            A::CheckExists
        );
        assert_eq!(
            decide(&not_ready, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Delete
        );
        // "node is not ready and provider returns err"
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Err(ErrorKind::Other)), None)
            ),
            A::Nothing
        );
        // "node is not ready but still exists"
        assert_eq!(
            decide(&not_ready, &cfg, "fake", &probe(Some(Ok(true)), None)),
            A::CheckShutdown
        );
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // "node ready condition is unknown, node doesn't exist" / "... exists"
        assert_eq!(
            decide(&unknown, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Delete
        );
        assert_eq!(
            decide(
                &unknown,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // A missing Ready condition counts as Unknown.
        assert_eq!(
            decide(
                &node("fake://n", None, vec![]),
                &cfg,
                "fake",
                &Probe::default()
            ),
            A::CheckExists
        );
        // "node is ready, but provider said it is deleted": never asked.
        assert_eq!(decide(&ready, &cfg, "fake", &Probe::default()), A::Nothing);
        assert_eq!(
            decide(&ready, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Nothing
        );
    }

    #[test]
    fn go_table_nodes_shutdown() {
        // Go Test_NodesShutdown.
        let cfg = go();
        let not_ready = node("fake://n", Some("False"), vec![]);
        // "node is not ready and was shutdown, but exists" (also with an empty providerID under AllNodes)
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::AddShutdownTaint
        );
        let empty_id = node("", Some("False"), vec![]);
        assert_eq!(
            decide(
                &empty_id,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::AddShutdownTaint
        );
        // "node with non-existing providerID gets deleted" / "InstanceID returning InstanceNotFound gets deleted"
        assert_eq!(
            decide(&empty_id, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Delete
        );
        // "node with error when getting providerID does not have shutdown taint"
        assert_eq!(
            decide(
                &empty_id,
                &cfg,
                "fake",
                &probe(Some(Err(ErrorKind::Other)), None)
            ),
            A::Nothing
        );
        // "node is not ready, but there is error checking if node is shutdown"
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Err(ErrorKind::Timeout)))
            ),
            A::Nothing
        );
        // "node is not ready and is not shutdown"
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // "node is ready but provider says it's shutdown": no cloud call, no taint.
        let ready = node("fake://n", Some("True"), vec![]);
        assert_eq!(
            decide(&ready, &cfg, "fake", &probe(None, Some(Ok(true)))),
            A::Nothing
        );
        // "node is shutdown but provider says it does not exist": deleted, no taint.
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(false)), Some(Ok(true)))
            ),
            A::Delete
        );
    }

    #[test]
    fn shutdown_taint_added_once_and_removed_only_when_ready() {
        let cfg = Config::default();
        let tainted_not_ready = node("fake://n", Some("False"), vec![shutdown_taint()]);
        // Already tainted: no write.
        assert_eq!(
            decide(
                &tainted_not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::Nothing
        );
        // Not shut down any more but still NotReady: the taint stays.
        assert_eq!(
            decide(
                &tainted_not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // Ready: removed without asking the cloud.
        let tainted_ready = node("fake://n", Some("True"), vec![shutdown_taint()]);
        assert_eq!(
            decide(&tainted_ready, &cfg, "fake", &Probe::default()),
            A::RemoveShutdownTaint
        );
        // Another effect with the same key is not ours.
        let other_effect = node(
            "fake://n",
            Some("True"),
            vec![taint(names::taints::SHUTDOWN, None, "NoExecute")],
        );
        assert_eq!(
            decide(&other_effect, &cfg, "fake", &Probe::default()),
            A::Nothing
        );
        // A shutdown taint with a value is normalised (Go: AddOrUpdateTaint).
        let valued = node(
            "fake://n",
            Some("False"),
            vec![taint(names::taints::SHUTDOWN, Some("x"), NO_SCHEDULE)],
        );
        assert_eq!(
            decide(
                &valued,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::AddShutdownTaint
        );
    }

    #[test]
    fn ownership_rules() {
        let cfg = Config::default();
        for id in ["other://n", "", "fakeish://n", "fake:/n", "FAKE://n"] {
            let n = node(id, Some("False"), vec![]);
            assert_eq!(
                decide(&n, &cfg, "fake", &Probe::default()),
                A::Skip(SkipReason::NotOwned),
                "{id:?}"
            );
            // Even a Ready foreign node with our taint key is left alone.
            let n = node(id, Some("True"), vec![shutdown_taint()]);
            assert_eq!(
                decide(&n, &cfg, "fake", &Probe::default()),
                A::Skip(SkipReason::NotOwned),
                "{id:?}"
            );
        }
        let all = cfg.clone().with_ownership(NodeOwnership::AllNodes);
        assert_eq!(
            decide(
                &node("other://n", Some("False"), vec![]),
                &all,
                "fake",
                &Probe::default()
            ),
            A::CheckExists
        );
    }

    #[test]
    fn initializing_nodes_are_protected() {
        let uninit = taint(names::taints::UNINITIALIZED, Some("true"), NO_SCHEDULE);
        let n = node("fake://n", Some("False"), vec![uninit.clone()]);
        assert_eq!(
            decide(&n, &Config::default(), "fake", &Probe::default()),
            A::Skip(SkipReason::Initializing)
        );
        assert_eq!(decide(&n, &go(), "fake", &Probe::default()), A::CheckExists);
        // A Ready initializing node still loses a stale shutdown taint (no cloud call either way).
        let ready = node("fake://n", Some("True"), vec![uninit, shutdown_taint()]);
        assert_eq!(
            decide(&ready, &Config::default(), "fake", &Probe::default()),
            A::RemoveShutdownTaint
        );
    }

    #[test]
    fn existence_errors_are_never_gone() {
        let n = node("fake://n", Some("False"), vec![]);
        for kind in [
            ErrorKind::Other,
            ErrorKind::Timeout,
            ErrorKind::Throttled,
            ErrorKind::InstanceNotFound,
            ErrorKind::NotImplemented,
        ] {
            assert_eq!(
                decide(
                    &n,
                    &Config::default(),
                    "fake",
                    &probe(Some(Err(kind)), None)
                ),
                A::Nothing,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn config_validation() {
        assert!(Config::default().validate().is_ok());
        assert!(Config::default().with_concurrency(0).validate().is_err());
        assert!(
            Config::default()
                .with_node_monitor_period(Duration::ZERO)
                .validate()
                .is_err()
        );
        assert!(
            Config::default()
                .with_cloud_call_timeout(Duration::ZERO)
                .validate()
                .is_err()
        );
    }
}
