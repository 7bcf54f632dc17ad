//! The cloud node controller: initializes nodes registered with the uninitialized taint, keeps the beta and GA
//! topology labels in step, and periodically refreshes every initialized node's addresses from the cloud.
//!
//! ```no_run
//! use ccm_core::runtime::controller::{Controller, ControllerContext};
//! use ccm_nodecontroller::{CloudNodeConfig, CloudNodeController};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(ctx: ControllerContext) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let config = CloudNodeConfig::default().with_concurrent_node_syncs(10);
//! let controller = CloudNodeController::new(&ctx, config)?;
//! let shutdown = CancellationToken::new();
//! tokio::spawn(ctx.informers.clone().run(shutdown.clone()));
//! Box::new(controller).run(shutdown).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use ccm_core::budget::{CallPriority, is_abandoned};
use ccm_core::helpers::{node_has_taint, node_name};
use ccm_core::names;
use ccm_core::runtime::Controller as Kit;
use ccm_core::runtime::controller::{Controller, ControllerContext, ControllerDescriptor};
use ccm_core::runtime::events::{EventRecorder, EventType};
use ccm_core::runtime::every::{Timing, every};
use ccm_core::runtime::informer::{NodeInformer, NodeStore};
use ccm_core::runtime::workers::Action;
use ccm_core::{BoxError, InstanceLookup};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use kube::api::{Api, Patch};
use tokio_util::sync::CancellationToken;

use crate::cloud::{CloudInstances, INSTANCES, MetadataResult};
use crate::error::Error;
use crate::metrics::NodeMetrics;
use crate::plan::{
    address_step, ga_labels, initialization_step, is_initialized, node_event_key, warning_reason,
};
use crate::prefetch::Prefetcher;
use crate::write::{self, Target, guarded_update};
use superseded::Superseded;

mod config;
mod superseded;

pub use config::{Config, DEFAULT_CONCURRENT_NODE_SYNCS, DEFAULT_NODE_STATUS_UPDATE_FREQUENCY};

/// The work queue's name (the `name` label of the `workqueue_*` metrics), as in Go.
pub const QUEUE_NAME: &str = "Nodes";

const CONTROLLER: &str = names::controllers::CLOUD_NODE;

/// The `cloud-node-controller` (alias `cloud-node`) for the runtime: not started (logged) when the provider has
/// neither InstancesV2 nor Instances; an invalid `config` is an error.
///
/// ```
/// let d = ccm_nodecontroller::cloud_node_descriptor(ccm_nodecontroller::CloudNodeConfig::default());
/// assert_eq!(d.name, "cloud-node-controller");
/// assert_eq!(d.short_name(), "cloud-node");
/// ```
pub fn descriptor(config: Config) -> ControllerDescriptor {
    ControllerDescriptor::build(CONTROLLER, move |ctx: &ControllerContext| {
        config.validate()?;
        ctx.require(&INSTANCES)?;
        Ok(CloudNodeController::new(ctx, config.clone())?)
    })
    .with_aliases(&[names::controllers::CLOUD_NODE_ALIAS])
}

struct Inner {
    nodes: Api<Node>,
    store: NodeStore,
    cloud: CloudInstances,
    recorder: EventRecorder,
    metrics: NodeMetrics,
    config: Config,
    /// The resourceVersions our writes superseded (see [`superseded`]).
    superseded: Superseded,
    /// Batched initialization (bulk-capable providers only, see [`crate::prefetch`]).
    prefetcher: Prefetcher,
}

/// The cloud node controller (Go: `CloudNodeController`).
pub struct CloudNodeController {
    inner: Arc<Inner>,
    informer: NodeInformer,
    kit: Kit,
}

impl std::fmt::Debug for CloudNodeController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudNodeController")
            .field("cloud", &self.inner.cloud)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl CloudNodeController {
    /// Build the controller from the process context: validates `config`, needs InstancesV2 or Instances, and
    /// registers the metrics into `ctx.metrics`.
    pub fn new(ctx: &ControllerContext, config: Config) -> Result<Self, Error> {
        config.validate()?;
        let cloud =
            CloudInstances::for_controller(&ctx.provider, config.cloud_call_timeout, CONTROLLER)?;
        let informer = ctx.informers.nodes().clone();
        Ok(CloudNodeController {
            inner: Arc::new(Inner {
                nodes: Api::all(ctx.client.clone()),
                store: informer.store(),
                cloud,
                recorder: ctx.recorder(names::components::CLOUD_NODE_CONTROLLER),
                metrics: NodeMetrics::register(&ctx.metrics),
                config,
                superseded: Superseded::default(),
                prefetcher: Prefetcher::default(),
            }),
            informer,
            kit: ctx.controller(CONTROLLER, QUEUE_NAME),
        })
    }

    /// One pass of the periodic address sync over every cached node (Go: `UpdateNodeStatus`), as
    /// [`run`](Controller::run) makes every `node_status_update_frequency`: for tools and benchmarks that measure
    /// one period. The shared informers must be running and synced.
    pub async fn sync_addresses_once(&self) {
        self.inner.update_node_status().await;
    }
}

#[async_trait]
impl Controller for CloudNodeController {
    async fn run(self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        let CloudNodeController {
            inner,
            informer,
            kit,
        } = *self;
        tracing::info!(
            controller = CONTROLLER,
            instances_v2 = inner.cloud.is_v2(),
            "starting"
        );
        let status = every(
            inner.config.node_status_update_frequency,
            0.0,
            Timing::Sliding,
        );
        let status_inner = inner.clone();
        kit.watches(&informer, node_event_key)
            .workers(inner.config.concurrent_node_syncs)
            .with_loop(move |shutdown| async move {
                status
                    .run(&shutdown, || status_inner.update_node_status())
                    .await;
            })
            .run(shutdown, inner, |key, inner: Arc<Inner>| async move {
                inner.sync_node(&key).await.map(|()| Action::Done)
            })
            .await;
        Ok(())
    }
}

impl Inner {
    /// Emit an event; the recorder writes it in the background, so a worker never waits for it.
    fn event(&self, node: &Node, type_: EventType, reason: &'static str, note: String) {
        self.recorder
            .publish(&node.object_ref(&()), type_, reason, note);
    }

    /// Go: `syncNode`.
    async fn sync_node(&self, name: &str) -> Result<(), Error> {
        let Some(node) = self.store.get(name) else {
            self.superseded.forget(name);
            return Ok(());
        };
        if self.superseded.is_stale(&node) {
            tracing::debug!(
                node = name,
                "cached node is older than our last write; waiting for the newer version"
            );
            return Ok(());
        }
        if !node_has_taint(&node, names::taints::UNINITIALIZED) {
            return self.reconcile_labels(&node).await;
        }
        self.initialize(&node).await.inspect_err(|err| {
            if let Some(reason) = warning_reason(err) {
                self.event(&node, EventType::Warning, reason, err.to_string());
            }
        })
    }

    /// Initialize a node that carries the uninitialized taint.
    async fn initialize(&self, node: &Node) -> Result<(), Error> {
        let name = node_name(node);
        tracing::info!(node = name, "initializing node with cloud provider");
        // A new node goes first: its calls never wait behind the periodic sweeps' (see `CallPriority`).
        let lookup = async {
            if self.cloud.supports_bulk() {
                let limit = self.config.initialization_batch;
                let batched = self
                    .prefetcher
                    .metadata(&self.cloud, node, &self.store, limit);
                if let Some(answer) = batched.await {
                    return crate::cloud::complete(node, answer);
                }
            }
            self.cloud.metadata(node).await
        };
        let meta = match CallPriority::High.scope(lookup).await? {
            InstanceLookup::Found(meta) => meta,
            InstanceLookup::Skip { reason } => {
                // Go: "Skip sync node" for nil metadata; the node is not retried until it changes.
                tracing::info!(node = name, reason = %reason, "Skip sync node");
                return Ok(());
            }
        };
        let mut discarded_logged = false;
        let mut versions = Vec::new();
        let outcome = guarded_update(&self.nodes, node.clone(), |current, written| {
            versions.extend(current.metadata.resource_version.clone());
            let step = initialization_step(current, &meta, written)?;
            if !std::mem::replace(&mut discarded_logged, true) {
                for label in &step.discarded {
                    tracing::warn!(node = name, key = %label.key, value = %label.value, reason = ?label.reason, "discarding additional label from the cloud provider");
                }
            }
            Ok(step.write)
        })
        .await?;
        let Some(updated) = outcome.node else {
            tracing::info!(node = name, "node was deleted while being initialized");
            return Ok(());
        };
        if !outcome.written.contains(&Target::Spec) {
            // Someone else removed the taint meanwhile.
            return Ok(());
        }
        versions.retain(|v| updated.metadata.resource_version.as_ref() != Some(v));
        self.superseded.record(name, versions);
        let created = updated.metadata.creation_timestamp.as_ref();
        self.metrics.taint_removed(created);
        tracing::info!(node = name, provider_id = %ccm_core::helpers::node_provider_id(&updated), "successfully initialized node with cloud provider");
        self.event(
            &updated,
            EventType::Normal,
            names::events::SYNCED,
            "Node synced successfully".to_owned(),
        );
        self.metrics.initial_sync_done(created);
        Ok(())
    }

    /// Go: `reconcileNodeLabels`: copy beta topology labels to their GA names; one merge patch, no cloud call.
    async fn reconcile_labels(&self, node: &Node) -> Result<(), Error> {
        let Some(set) = ga_labels(node) else {
            return Ok(());
        };
        let name = node_name(node);
        let patch = Patch::Merge(serde_json::json!({ "metadata": { "labels": set } }));
        match self.nodes.patch(name, &write::patch_params(), &patch).await {
            Ok(_) => tracing::info!(node = name, labels = ?set, "reconciled GA topology labels"),
            Err(err) if write::is_not_found(&err) => {}
            Err(err) => return Err(write::kube_err(name, "patch the labels of")(err)),
        }
        Ok(())
    }

    /// Go: `UpdateNodeStatus`: refresh the addresses of every initialized node, with bounded parallelism; from one
    /// bulk call per period with a provider that answers them natively.
    async fn update_node_status(&self) {
        // a periodic sweep: its cloud calls wait behind initializations and other controllers' calls
        let sweep = async {
            let start = Instant::now();
            // (read from the compact cache: the nodes still waiting for initialization are not made again)
            let nodes = self.store.select(is_initialized);
            let count = nodes.len();
            let bulk = self.cloud.supports_bulk();
            if bulk {
                self.update_addresses_in_bulk(nodes).await;
            } else {
                futures::stream::iter(nodes)
                    .for_each_concurrent(self.config.status_update_workers(), |node| async move {
                        self.sync_addresses(&node, self.cloud.addresses(&node).await)
                            .await;
                    })
                    .await;
            }
            tracing::debug!(nodes = count, bulk, took = ?start.elapsed(), "updated node statuses");
        };
        CallPriority::Low.scope(sweep).await;
    }

    /// One `instance_metadata_bulk` call for every node, then the writes. A failed bulk call skips the round
    /// (every node is refreshed next period); a failed item skips its node.
    async fn update_addresses_in_bulk(&self, nodes: Vec<Arc<Node>>) {
        if nodes.is_empty() {
            return;
        }
        // each Node was made for this read of the cache, so it is moved, not copied
        let list: Vec<Node> = nodes.into_iter().map(Arc::unwrap_or_clone).collect();
        let answers = match self.cloud.metadata_bulk(&list).await {
            Ok(answers) => answers,
            Err(err) => {
                // (calls abandoned at shutdown are summarised by the cloud-call budget)
                if !is_abandoned(&err) {
                    tracing::warn!(nodes = list.len(), error = %err, "error getting instance addresses in bulk; skipping this round");
                }
                return;
            }
        };
        futures::stream::iter(list.iter().zip(answers))
            .for_each_concurrent(self.config.status_update_workers(), |(node, answer)| {
                self.sync_addresses(node, answer)
            })
            .await;
    }

    /// Act on the cloud's answer about a node's addresses: write them if they changed (Go: `updateNodeAddress`),
    /// or skip the node this round.
    async fn sync_addresses(&self, node: &Node, answer: MetadataResult) {
        let name = node_name(node);
        let addresses = match answer {
            Ok(InstanceLookup::Found(meta)) => meta.node_addresses,
            Ok(InstanceLookup::Skip { reason }) => {
                tracing::debug!(node = name, reason = %reason, "Skip sync node addresses");
                return;
            }
            Err(err) if is_abandoned(&err) => return,
            Err(err) => {
                tracing::warn!(node = name, error = %err, "error getting instance addresses; skipping the node this round");
                return;
            }
        };
        let plan = |current: &Node, _: &[Target]| address_step(current, &addresses);
        match guarded_update(&self.nodes, node.clone(), plan).await {
            Ok(outcome) if !outcome.written.is_empty() => {
                tracing::info!(
                    node = name,
                    "updated node addresses from the cloud provider"
                );
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(node = name, error = %err, "failed to update node addresses");
            }
        }
    }
}
