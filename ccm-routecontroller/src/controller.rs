//! The running route controller: the cloud and Kubernetes calls around [`plan`](crate::plan::plan).

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_core::names;
use ccm_core::runtime::Controller as Kit;
use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::debounce::Debounced;
use ccm_core::runtime::events::EventRecorder;
use ccm_core::runtime::informer::NodeInformer;
use ccm_core::{BoxError, Routes};
use futures::StreamExt;
use futures::future::join_all;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, RouteSyncMode};
use crate::error::Error;
use crate::filter::event_needs_reconcile;
use crate::metrics::RouteMetrics;
use crate::plan::{ConditionWrite, RouteCreate, RouteDelete, RoutePlan, plan};
use crate::report::{PassReport, failed_create_message, node_reference};

/// The work queue's name (the `name` label of the `workqueue_*` metrics), as in Go's watch mode.
pub const QUEUE_NAME: &str = "Routes";
/// The single key of the queue, as in Go.
pub const QUEUE_KEY: &str = "routes";

/// How many `NetworkUnavailable` patches run at once.
const CONDITION_WRITE_CONCURRENCY: usize = 16;

/// The route controller (Go: `controllers/route.RouteController`, see the [crate](crate) docs): build it with
/// [`RouteController::new`] (or through [`descriptor`](crate::descriptor) in a CCM binary), run it with
/// [`Controller::run`], or run a single pass with [`RouteController::reconcile`].
///
/// ```no_run
/// use std::sync::Arc;
/// use ccm_core::runtime::controller::{Controller, ControllerContext};
/// use ccm_core::runtime::informer::{InformerScope, SharedInformers};
/// use ccm_core::runtime::metrics::SharedRegistry;
/// use ccm_routecontroller::{Config, RouteController};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn demo(client: kube::Client, provider: Arc<dyn ccm_core::CloudProvider>) -> Result<(), ccm_core::BoxError> {
/// let informers = SharedInformers::new(client.clone(), &InformerScope::all());
/// let ctx = ControllerContext::new(client, provider, informers.clone(), SharedRegistry::new(), "kubernetes");
/// let controller = RouteController::new(&ctx, Config::default().with_cluster_cidr("10.244.0.0/16"))?;
/// let shutdown = CancellationToken::new();
/// tokio::spawn(informers.run(shutdown.clone()));
/// Box::new(controller).run(shutdown).await?;
/// # Ok(()) }
/// ```
pub struct RouteController {
    client: kube::Client,
    routes: Arc<dyn Routes>,
    nodes: NodeInformer,
    cluster_name: String,
    cluster_cidrs: Vec<IpNet>,
    config: Config,
    recorder: EventRecorder,
    metrics: RouteMetrics,
    scheduler: Debounced,
}

impl std::fmt::Debug for RouteController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteController")
            .field("cluster_name", &self.cluster_name)
            .field("cluster_cidrs", &self.cluster_cidrs)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RouteController {
    /// A route controller for the context's provider, Node informer and cluster name.
    ///
    /// Errors: the provider does not support routes, or `config` is invalid (see [`Config::validate`]; notably
    /// an empty or invalid `cluster_cidr`). `configure_cloud_routes` is not consulted here (that is the
    /// descriptor's job). Registers the metrics into `ctx.metrics`.
    pub fn new(ctx: &ControllerContext, config: Config) -> Result<Self, Error> {
        let routes =
            Arc::clone(&ctx.provider)
                .routes()
                .ok_or_else(|| Error::RoutesNotSupported {
                    provider: ctx.provider.provider_name().to_owned(),
                })?;
        let cluster_cidrs = config.validate()?;
        let scheduler = Debounced::new(
            QUEUE_NAME,
            QUEUE_KEY,
            config.sync_mode.schedule(),
            config.route_reconciliation_period,
            config.max_retry_backoff,
            Some(&ctx.workqueue_metrics),
        )
        .with_debounce(config.event_debounce);
        Ok(RouteController {
            client: ctx.client.clone(),
            routes,
            nodes: ctx.informers.nodes().clone(),
            cluster_name: ctx.cluster_name.clone(),
            cluster_cidrs,
            recorder: ctx.recorder(names::components::ROUTE_CONTROLLER),
            metrics: RouteMetrics::register(&ctx.metrics),
            scheduler,
            config,
        })
    }

    /// The parsed cluster CIDRs.
    pub fn cluster_cidrs(&self) -> &[IpNet] {
        &self.cluster_cidrs
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The controller's metrics.
    pub fn metrics(&self) -> &RouteMetrics {
        &self.metrics
    }

    /// Run one pass now (Go: `reconcileNodeRoutes`): list the cloud's routes, compare them with the Nodes in the
    /// informer cache, delete and create routes, and write the `NetworkUnavailable` conditions.
    ///
    /// Returns an error only if the routes cannot be listed; failures of single operations are counted in the
    /// report (see [`PassReport::is_complete`]).
    pub async fn reconcile(&self) -> Result<PassReport, Error> {
        self.metrics.sync_started();
        let listed = self.routes.list_routes(&self.cluster_name).await;
        self.metrics.operation("list", listed.is_ok());
        let routes = listed.map_err(|source| Error::ListRoutes {
            cluster: self.cluster_name.clone(),
            source,
        })?;
        let nodes = self.nodes.store().list();
        let plan = plan(&nodes, &routes, &self.cluster_cidrs);
        for route in &plan.unparsable {
            tracing::warn!(
                route = %route.name,
                cidr = %route.destination_cidr,
                "ignoring route with an unparsable destination CIDR"
            );
        }
        tracing::debug!(
            nodes = nodes.len(),
            routes = routes.len(),
            deletes = plan.deletes.len(),
            creates = plan.creates.len(),
            "route pass planned"
        );
        let mut report = PassReport {
            routes_listed: routes.len(),
            ..Default::default()
        };
        let failed_creates = self.execute(&plan, &mut report).await;
        self.write_conditions(&plan, &failed_creates, &mut report)
            .await;
        Ok(report)
    }

    /// Delete and create routes with at most `max_concurrent_route_operations` calls in flight. Creates marked
    /// `after_deletes` start once every delete has finished; the others run alongside the deletes. Returns the
    /// `(node, cidr)` creates that failed.
    async fn execute(
        &self,
        plan: &RoutePlan,
        report: &mut PassReport,
    ) -> HashSet<(String, String)> {
        if plan.is_noop() {
            return HashSet::new();
        }
        let limit = Semaphore::new(
            self.config
                .max_concurrent_route_operations
                .min(Semaphore::MAX_PERMITS),
        );
        let (late, early): (Vec<&RouteCreate>, Vec<&RouteCreate>) =
            plan.creates.iter().partition(|c| c.after_deletes);
        let deletes_then_late = async {
            let deletes = join_all(plan.deletes.iter().map(|d| self.delete_route(&limit, d))).await;
            let late = join_all(late.iter().map(|c| self.create_route(&limit, c))).await;
            (deletes, late)
        };
        let early_creates = join_all(early.iter().map(|c| self.create_route(&limit, c)));
        let ((deletes, late_results), early_results) =
            tokio::join!(deletes_then_late, early_creates);

        let creates = late.into_iter().zip(late_results);
        report.tally_routes(
            &deletes,
            creates.chain(early.into_iter().zip(early_results)),
        )
    }

    async fn delete_route(&self, limit: &Semaphore, delete: &RouteDelete) -> bool {
        let route = &delete.route;
        let start = Instant::now();
        let result = {
            let _permit = limit.acquire().await;
            self.routes.delete_route(&self.cluster_name, route).await
        };
        self.metrics.operation("delete", result.is_ok());
        let (node, cidr, reason) = (&route.target_node, &route.destination_cidr, delete.reason);
        let elapsed = start.elapsed();
        match &result {
            Ok(()) => {
                tracing::info!(route = %route.name, %node, %cidr, ?reason, ?elapsed, "deleted route");
            }
            Err(error) => {
                tracing::error!(route = %route.name, %node, %cidr, ?reason, ?elapsed, %error, "could not delete route");
            }
        }
        result.is_ok()
    }

    async fn create_route(&self, limit: &Semaphore, create: &RouteCreate) -> bool {
        let (node, cidr) = (&create.node_name, &create.route.destination_cidr);
        let name_hint = &create.name_hint;
        let start = Instant::now();
        let result = {
            let _permit = limit.acquire().await;
            let (action, throttled) = (create.action, start.elapsed());
            tracing::info!(%node, %cidr, %name_hint, ?action, ?throttled, "creating route");
            let cluster = &self.cluster_name;
            self.routes
                .create_route(cluster, name_hint, &create.route)
                .await
        };
        self.metrics.operation("create", result.is_ok());
        let elapsed = start.elapsed();
        match &result {
            Ok(()) => tracing::info!(%node, %cidr, %name_hint, ?elapsed, "created route"),
            Err(error) => {
                let note = failed_create_message(create, elapsed, error);
                let reference = node_reference(node, name_hint);
                let reason = names::events::FAILED_TO_CREATE_ROUTE;
                self.recorder.warning(&reference, reason, note);
            }
        }
        result.is_ok()
    }

    async fn write_conditions(
        &self,
        plan: &RoutePlan,
        failed_creates: &HashSet<(String, String)>,
        report: &mut PassReport,
    ) {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let writes = plan.condition_writes(failed_creates, &now);
        let results: Vec<Result<(), Error>> = futures::stream::iter(writes)
            .map(|write| self.write_condition(write))
            .buffer_unordered(CONDITION_WRITE_CONCURRENCY)
            .collect()
            .await;
        for result in results {
            if let Err(error) = &result {
                tracing::error!(%error, "could not update the NetworkUnavailable condition");
            }
            report.tally_condition(result.is_ok());
        }
    }

    /// Merge the condition into `status.conditions` with a strategic merge patch on the status subresource (Go:
    /// `SetNodeCondition`): the list is keyed by `type`, so only the `NetworkUnavailable` entry is replaced, the
    /// kubelet's conditions are never overwritten, and no resourceVersion is needed (no conflicts with the
    /// kubelet's frequent heartbeats).
    async fn write_condition(&self, write: ConditionWrite) -> Result<(), Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let params = PatchParams {
            field_manager: Some(names::controllers::ROUTE_CONTROLLER_CLIENT.to_owned()),
            ..PatchParams::default()
        };
        let body = serde_json::json!({ "status": { "conditions": [write.condition] } });
        match api
            .patch_status(&write.node_name, &params, &Patch::Strategic(body))
            .await
        {
            Ok(_) => {
                tracing::info!(
                    node = %write.node_name,
                    status = %write.condition.status,
                    reason = write.condition.reason.as_deref().unwrap_or_default(),
                    "updated NetworkUnavailable condition"
                );
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                tracing::debug!(node = %write.node_name, "node is gone; condition not written");
                Ok(())
            }
            Err(source) => Err(Error::PatchCondition {
                node: write.node_name,
                source: Box::new(source),
            }),
        }
    }

    /// One scheduled pass: true if it fully succeeded.
    async fn scheduled_pass(&self) -> bool {
        let start = Instant::now();
        match self.reconcile().await.and_then(PassReport::into_result) {
            Ok(report) => {
                tracing::debug!(?report, elapsed = ?start.elapsed(), "route pass finished");
                true
            }
            Err(error) => {
                tracing::warn!(%error, elapsed = ?start.elapsed(), "could not reconcile node routes");
                false
            }
        }
    }
}

#[async_trait]
impl Controller for RouteController {
    async fn run(self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        tracing::info!(
            mode = self.config.sync_mode.as_str(),
            period = ?self.config.route_reconciliation_period,
            debounce = ?self.scheduler.debounce(),
            resync = ?self.config.sync_mode.resync(),
            cluster_cidrs = ?self.cluster_cidrs,
            cluster = %self.cluster_name,
            "starting route controller"
        );
        let nodes = self.nodes.clone();
        let this = Arc::new(*self);
        let mut kit = Kit::new(names::controllers::NODE_ROUTE).waits_for(&nodes);
        if let RouteSyncMode::EventDriven { .. } = this.config.sync_mode {
            let passes = this.scheduler.clone();
            kit = kit.on_events(&nodes, move |event| {
                if event_needs_reconcile(event) {
                    passes.trigger();
                }
            });
        }
        kit.with_loop(move |shutdown| async move {
            let pass = || this.scheduled_pass();
            this.scheduler.run(shutdown, pass).await;
        })
        .run_loops(shutdown)
        .await;
        tracing::info!("shutting down route controller");
        Ok(())
    }
}
