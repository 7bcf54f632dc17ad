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

use async_trait::async_trait;
use ccm_core::budget::{CallPriority, is_abandoned};
use ccm_core::helpers::node_name;
use ccm_core::runtime::Controller as Kit;
use ccm_core::runtime::controller::{Controller, ControllerContext, ControllerDescriptor};
use ccm_core::runtime::events::EventRecorder;
use ccm_core::runtime::every::{Timing, every};
use ccm_core::runtime::informer::NodeInformer;
use ccm_core::{BoxError, ErrorKind, names};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use kube::api::{Api, DeleteParams, Preconditions};
use tokio_util::sync::CancellationToken;

use crate::cloud::{CloudInstances, INSTANCES};
use crate::error::Error;
use crate::patch::{self, shutdown_taint, with_taint};
use crate::write::{self, Target, guarded_update};

const CONTROLLER: &str = names::controllers::CLOUD_NODE_LIFECYCLE;

mod config;
mod decide;

pub use config::{Config, DEFAULT_CONCURRENCY, DEFAULT_NODE_MONITOR_PERIOD};

pub use decide::{
    LifecycleAction, NodeOwnership, ParseNodeOwnershipError, Probe, SkipReason, decide, is_owned,
};
use decide::{asking, check_failed, needs_attention, without_shutdown_taint_if_ready};

/// The `cloud-node-lifecycle-controller` (alias `cloud-node-lifecycle`) for the runtime: not started (logged)
/// when the provider has neither InstancesV2 nor Instances; an invalid `config` is an error.
///
/// ```
/// let d = ccm_nodecontroller::cloud_node_lifecycle_descriptor(Default::default());
/// assert_eq!(d.name, "cloud-node-lifecycle-controller");
/// assert_eq!(d.short_name(), "cloud-node-lifecycle");
/// ```
pub fn descriptor(config: Config) -> ControllerDescriptor {
    ControllerDescriptor::build(CONTROLLER, move |ctx: &ControllerContext| {
        config.validate()?;
        ctx.require(&INSTANCES)?;
        Ok(CloudNodeLifecycleController::new(ctx, config.clone())?)
    })
    .with_aliases(&[names::controllers::CLOUD_NODE_LIFECYCLE_ALIAS])
}

/// The cloud node lifecycle controller (Go: `CloudNodeLifecycleController`).
pub struct CloudNodeLifecycleController {
    nodes: Api<Node>,
    informer: NodeInformer,
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
            informer,
            cloud,
            recorder: ctx.recorder(names::components::CLOUD_NODE_LIFECYCLE_CONTROLLER),
            config,
        })
    }

    /// One pass over every cached node (Go: `MonitorNodes`), `config.concurrency` nodes at a time. With a provider
    /// that answers bulk calls natively, the pass's existence checks are one `instance_exists_bulk` call and its
    /// shutdown checks one `instance_shutdown_bulk` call. Its cloud calls are [`CallPriority::Low`]: they wait
    /// behind every other controller's for the cloud-call budget, so a pass never delays a new node's
    /// initialization.
    pub async fn monitor_nodes(&self) {
        let pass = async {
            // Most nodes are Ready and untainted: decided here, without a task or a probe for each.
            let provider = self.cloud.provider_name();
            // (read from the compact cache: only these nodes are made again)
            let nodes: Vec<Arc<Node>> = self
                .informer
                .store()
                .select(|node| needs_attention(node, &self.config, provider));
            if nodes.is_empty() {
                return;
            }
            let mut probes = vec![Probe::default(); nodes.len()];
            if self.cloud.supports_bulk() {
                // Existence first, then shutdown for the nodes that exist (the order `decide` asks in): at most
                // two bulk calls per pass.
                self.probe_in_bulk(&nodes, &mut probes, LifecycleAction::CheckExists)
                    .await;
                self.probe_in_bulk(&nodes, &mut probes, LifecycleAction::CheckShutdown)
                    .await;
            }
            futures::stream::iter(nodes.iter().zip(probes))
                .for_each_concurrent(self.config.concurrency, |(node, probe)| async move {
                    self.monitor_node(node, probe).await;
                })
                .await;
        };
        CallPriority::Low.scope(pass).await;
    }

    /// Ask, in one bulk call, about every node whose next step (given its `probes` so far) is `step`
    /// ([`LifecycleAction::CheckExists`] or [`LifecycleAction::CheckShutdown`]), and record the answers in
    /// `probes` (same order as `nodes`). A failed bulk call counts as a failed check of each of those nodes.
    async fn probe_in_bulk(
        &self,
        nodes: &[Arc<Node>],
        probes: &mut [Probe],
        step: LifecycleAction,
    ) {
        let provider = self.cloud.provider_name();
        let asked = asking(nodes, probes, &self.config, provider, step);
        if asked.is_empty() {
            return;
        }
        let list: Vec<Node> = asked.iter().map(|&i| Node::clone(&nodes[i])).collect();
        let exists = step == LifecycleAction::CheckExists;
        let answers = self.cloud.check_bulk(&list, exists).await;
        let answers: Vec<Result<bool, ErrorKind>> = match answers {
            Ok(answers) => asked
                .iter()
                .zip(answers)
                .map(|(&i, answer)| checked(answer, node_name(&nodes[i]), step))
                .collect(),
            Err(err) => {
                if !is_abandoned(&err) {
                    let what = check_failed(step);
                    tracing::warn!(nodes = asked.len(), error = %err, "{what} (bulk call)");
                }
                vec![Err(err.cloud_kind().unwrap_or(ErrorKind::Other)); asked.len()]
            }
        };
        for (&i, answer) in asked.iter().zip(answers) {
            probes[i].record(step, answer);
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
                step @ LifecycleAction::CheckExists => {
                    let answer = checked(self.cloud.exists(node).await, name, step);
                    probe.record(
                        step,
                        answer.map(|(exists, id)| {
                            provider_id = id;
                            exists
                        }),
                    );
                }
                step @ LifecycleAction::CheckShutdown => {
                    let answer = self.cloud.shutdown(node, provider_id.as_deref()).await;
                    probe.record(step, checked(answer, name, step));
                }
                LifecycleAction::Delete => return self.delete(node).await,
                LifecycleAction::AddShutdownTaint => {
                    let add = |n: &Node| with_taint(n, &shutdown_taint());
                    return self
                        .set_taints(node, "add the shutdown taint to", add)
                        .await;
                }
                LifecycleAction::RemoveShutdownTaint => {
                    let remove = without_shutdown_taint_if_ready;
                    return self
                        .set_taints(node, "remove the shutdown taint from", remove)
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
        let params = DeleteParams::default().preconditions(Preconditions {
            uid: node.metadata.uid.clone(),
            ..Default::default()
        });
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

/// A check's answer as [`decide`] reads it: a failure is logged (unless the call was abandoned at shutdown: the
/// cloud-call budget summarises those in one line) and kept as its kind.
fn checked<T>(answer: Result<T, Error>, node: &str, step: LifecycleAction) -> Result<T, ErrorKind> {
    answer.map_err(|err| {
        if !is_abandoned(&err) {
            tracing::warn!(node, error = %err, "{}", check_failed(step));
        }
        err.cloud_kind().unwrap_or(ErrorKind::Other)
    })
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
        let informer = self.informer.clone();
        let this = Arc::new(*self);
        let monitor = every(this.config.node_monitor_period, 0.0, Timing::Sliding);
        Kit::new(CONTROLLER)
            .waits_for(&informer)
            .with_loop(move |shutdown| async move {
                monitor.run(&shutdown, || this.monitor_nodes()).await;
            })
            .run_loops(shutdown)
            .await;
        Ok(())
    }
}
