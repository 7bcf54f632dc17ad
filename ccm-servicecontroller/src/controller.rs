//! The running controller: Service workers, the node-sync loop, the event routing and the optional periodic
//! re-ensure. Decisions come from [`crate::predicates`]; this module does the I/O.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_core::helpers::load_balancer_status_equal;
use ccm_core::names;
use ccm_core::names::finalizers::LOAD_BALANCER_CLEANUP;
use ccm_core::runtime::Controller as Kit;
use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::events::EventRecorder;
use ccm_core::runtime::every::{Timing, every};
use ccm_core::runtime::informer::{Informer, InformerEvent, NodeInformer};
use ccm_core::runtime::workers::Action;
use ccm_core::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};
use ccm_core::{BoxError, CloudError, LoadBalancer};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::Error;
use crate::hosts::Hosts;
use crate::locks::ServiceLocks;
use crate::metrics::ServiceMetrics;
use crate::patches;
use crate::plan::{
    self, DeletePath, FINALIZER_ATTEMPTS, Note, Operation, current_status, is_finalizer_conflict,
    keys_to_sync, node_event_key, reensure_keys, service_event_key, split_key, with_finalizers,
};
use crate::predicates::{NodeSet, ServiceSelector, stable_nodes, wants_deletion};
use crate::state::Tracker;
use crate::takeover;

mod listing;
mod nodesync;

/// The service controller (Go: `controllers/service.Controller`): creates, updates and deletes cloud load
/// balancers for `type: LoadBalancer` Services and keeps their backend hosts in line with the nodes.
///
/// ```no_run
/// use std::sync::Arc;
/// use ccm_core::runtime::controller::ControllerContext;
/// use ccm_core::runtime::informer::{InformerScope, SharedInformers};
/// use ccm_core::runtime::metrics::SharedRegistry;
/// use ccm_servicecontroller::{Config, ServiceController};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn demo(client: kube::Client, cloud: Arc<dyn ccm_core::CloudProvider>) -> Result<(), Box<dyn std::error::Error>> {
/// let informers = SharedInformers::new(client.clone(), &InformerScope::all());
/// let ctx = ControllerContext::new(client, cloud, informers.clone(), SharedRegistry::new(), "kubernetes");
/// let controller = ServiceController::new(&ctx, Config::default())?;
/// let shutdown = CancellationToken::new();
/// tokio::spawn(informers.run(shutdown.clone()));
/// controller.run(shutdown).await;
/// # Ok(())
/// # }
/// ```
pub struct ServiceController {
    client: kube::Client,
    balancer: Arc<dyn LoadBalancer>,
    provider: String,
    cluster_name: String,
    nodes: NodeInformer,
    services: Informer<Service>,
    recorder: EventRecorder,
    metrics: ServiceMetrics,
    config: Config,
    selector: ServiceSelector,
    queue: WorkQueue<String>,
    node_queue: WorkQueue<String>,
    hosts: Hosts,
    tracker: Tracker,
    locks: ServiceLocks,
}

impl std::fmt::Debug for ServiceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceController")
            .field("provider", &self.provider)
            .field("cluster_name", &self.cluster_name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ServiceController {
    /// A controller using the context's client, provider, informers and metrics registry.
    ///
    /// Fails if `config` is invalid or the provider has no load-balancer support. Registers the four
    /// `service_controller_*` metrics into `ctx.metrics`.
    pub fn new(ctx: &ControllerContext, config: Config) -> Result<Self, Error> {
        config.validate()?;
        let balancer = Arc::clone(&ctx.provider).load_balancer().ok_or_else(|| {
            Error::LoadBalancersUnsupported {
                provider: ctx.provider.provider_name().to_owned(),
            }
        })?;
        let backoff =
            || ItemExponentialBackoff::new(config.retry_base_delay, config.retry_max_delay);
        Ok(ServiceController {
            client: ctx.client.clone(),
            balancer,
            provider: ctx.provider.provider_name().to_owned(),
            cluster_name: ctx.cluster_name.clone(),
            nodes: ctx.informers.nodes().clone(),
            services: ctx.informers.services().clone(),
            recorder: ctx.recorder(names::components::SERVICE_CONTROLLER),
            metrics: ServiceMetrics::register(&ctx.metrics),
            selector: config.selector(),
            queue: WorkQueue::with_metrics("service", backoff(), &ctx.workqueue_metrics),
            node_queue: WorkQueue::with_metrics("node", backoff(), &ctx.workqueue_metrics),
            hosts: Hosts::default(),
            tracker: Tracker::default(),
            locks: ServiceLocks::default(),
            config,
        })
    }

    /// The controller's metrics.
    pub fn metrics(&self) -> &ServiceMetrics {
        &self.metrics
    }

    /// The settings in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Run until `shutdown` is cancelled: wait for the caches, then sync Services and node changes. In-flight
    /// syncs finish before this returns; a node-sync pass stops starting new host updates.
    pub async fn run(self, shutdown: CancellationToken) {
        let inner = Arc::new(self);
        tracing::info!(provider = %inner.provider, "starting service controller");
        let [all, initial, services, nodes, node_sync] = std::array::from_fn(|_| inner.clone());
        let mut kit = Kit::new("service-controller")
            .queue(inner.queue.clone())
            .workers(inner.config.concurrent_service_syncs)
            .watches(&inner.services, move |event| {
                services.service_event_key(event)
            })
            .enqueue_all(move || all.keys_except(&HashSet::new()))
            .initial_keys(move || async move { initial.keys_except(&initial.take_over().await) })
            .on_events(&inner.nodes, move |event| nodes.node_changed(event))
            .with_loop(move |shutdown| node_sync.node_sync_loop(shutdown));
        if let Some(period) = inner.config.periodic_reensure {
            let (reensure, jitter) = (inner.clone(), inner.config.periodic_reensure_jitter);
            let timer = every(period, jitter, Timing::Sliding).after_first_period();
            kit = kit.with_loop(move |shutdown| async move {
                timer.run_sync(&shutdown, || reensure.reensure()).await;
            });
        }
        kit.run(shutdown, inner, |key, inner: Arc<Self>| async move {
            let started = Instant::now();
            inner.sync_service(&key).await?;
            tracing::debug!(service = %key, took = ?started.elapsed(), "synced service");
            Ok::<_, Error>(Action::Done)
        })
        .await;
    }
}

#[async_trait]
impl Controller for ServiceController {
    async fn run(self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        ServiceController::run(*self, shutdown).await;
        Ok(())
    }
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_not_found())
}

/// A `kube` JSON patch from a JSON value built by [`patches`].
fn json_patch(value: serde_json::Value) -> Result<Patch<()>, kube::Error> {
    serde_json::from_value(value)
        .map(Patch::Json)
        .map_err(kube::Error::SerdeError)
}

impl ServiceController {
    fn patch_params() -> PatchParams {
        PatchParams {
            field_manager: Some(names::controllers::SERVICE_CONTROLLER_CLIENT.to_owned()),
            ..Default::default()
        }
    }

    fn api(&self, namespace: &str) -> Api<Service> {
        Api::namespaced(self.client.clone(), namespace)
    }

    // ---- event routing ----

    /// The keys queued on a resync, and at start but those the takeover found steady (`skip`): every Service
    /// that wants a load balancer, and every remembered Service that is gone from the cache.
    fn keys_except(&self, skip: &HashSet<String>) -> Vec<String> {
        let store = self.services.store();
        let remembered = self.tracker.services().into_iter().map(|(key, _)| key);
        keys_to_sync(
            &self.selector,
            &store.list(),
            remembered,
            |key| store.get(key).is_some(),
            skip,
        )
    }

    /// The key a Service event queues, if any ([`service_event_key`]).
    fn service_event_key(&self, event: &InformerEvent<Service>) -> Option<String> {
        let key = service_event_key(
            &self.selector,
            self.config.extended_update_fields,
            |key| self.tracker.contains(key),
            event,
        )?;
        tracing::debug!(service = %key, "service changed");
        Some(key)
    }

    /// Emit `note` about `svc`.
    fn emit(&self, svc: &Service, note: Note) {
        let (regarding, message) = (svc.object_ref(&()), note.message.into());
        self.recorder
            .publish(&regarding, note.type_, note.reason, message);
    }

    /// Queue a node change for the node-sync loop.
    fn node_changed(&self, event: &InformerEvent<Node>) {
        let Some(key) = node_event_key(event) else {
            return;
        };
        // The node cache already holds the change: a pass in progress sees it from its next load balancer.
        self.hosts.changed();
        self.node_queue.add(key);
    }

    /// The start-up takeover ([`crate::takeover`]): with [`Takeover::Compare`](crate::Takeover::Compare) and a
    /// provider that lists its load balancers, remember every Service whose load balancer matches as synced, and
    /// return their keys (the caller does not queue them). Any failure of the listing returns none: every Service
    /// is ensured, as in Go.
    async fn take_over(&self) -> HashSet<String> {
        if !takeover::compares(self.config.takeover, self.balancer.supports_listing()) {
            return HashSet::new();
        }
        let started = Instant::now();
        let services = self.services.store().list();
        let hosts = stable_nodes(&self.nodes.store().list());
        let host_refs: Vec<&Node> = hosts.iter().map(AsRef::as_ref).collect();
        let name_of = |svc: &Service| {
            self.balancer
                .get_load_balancer_name(&self.cluster_name, svc)
        };
        // One page at a time: a listing of thousands of load balancers with their backends is never held whole.
        let mut comparison =
            takeover::Comparison::new(&self.selector, &services, &name_of, &host_refs);
        let listed = listing::list_pages(self.balancer.as_ref(), &self.cluster_name, |page| {
            comparison.page(page);
        })
        .await;
        let pages = match listed {
            Ok(pages) => pages,
            Err(err) => {
                tracing::warn!(error = %err, "cannot list the load balancers at start; ensuring every Service");
                return HashSet::new();
            }
        };
        let (load_balancers, without_service) = comparison.listed();
        let plan = comparison.finish();
        let node_set = NodeSet::from_nodes(host_refs.iter().copied());
        for (key, svc) in plan.steady_services(&services) {
            self.tracker.set_cached(&key, svc);
            self.tracker.set_synced(&key, node_set.clone());
        }
        tracing::info!(
            load_balancers,
            pages,
            without_service,
            steady = plan.steady.len(),
            to_ensure = plan.ensure.len(),
            drift = ?plan.drift_counts(),
            took = ?started.elapsed(),
            "took over the existing load balancers"
        );
        plan.steady.into_iter().collect()
    }

    // ---- service worker ----

    /// Go: `syncService`.
    async fn sync_service(&self, key: &str) -> Result<(), Error> {
        split_key(key)?;
        match self.services.store().get(key) {
            None => self.process_service_deletion(key).await,
            Some(svc) => self.process_create_or_update(key, svc).await,
        }
    }

    /// Go: `processServiceDeletion` (the Service is gone from the cache).
    async fn process_service_deletion(&self, key: &str) -> Result<(), Error> {
        if !self.tracker.contains(key) {
            return Ok(());
        }
        let _guard = self.locks.lock(key).await;
        let Some(cached) = self.tracker.cached(key) else {
            return Ok(());
        };
        tracing::info!(service = %key, "service has been deleted; cleaning up its load balancer");
        self.delete_load_balancer(key, &cached, DeletePath::Vanished)
            .await?;
        self.tracker.forget(key);
        Ok(())
    }

    /// Go: `processServiceCreateOrUpdate`.
    async fn process_create_or_update(&self, key: &str, svc: Arc<Service>) -> Result<(), Error> {
        let _guard = self.locks.lock(key).await;
        if let Some(cached) = self.tracker.cached(key)
            && cached.metadata.uid != svc.metadata.uid
        {
            // Deleted and re-created (without a finalizer) since the last sync: remove the old load balancer.
            self.delete_load_balancer(key, &cached, DeletePath::Vanished)
                .await?;
        }
        self.tracker.set_cached(key, svc.clone());
        match self.sync_load_balancer_if_needed(key, &svc).await {
            Err(err) => {
                self.emit(&svc, plan::sync_failed(&err));
                Err(err)
            }
            Ok(Operation::Delete) => {
                self.tracker.forget(key);
                Ok(())
            }
            Ok(Operation::Ensure) => Ok(()),
        }
    }

    /// The load-balancer delete sequence, on either of Go's two paths (see [`DeletePath`]):
    ///
    /// 1. on the cleanup path, `GetLoadBalancer` (an error fails the sync before anything else); on the vanished
    ///    path, nothing at all unless the Service's last state wanted a load balancer;
    /// 2. if the load balancer exists (always assumed on the vanished path): Normal `DeletingLoadBalancer`, then
    ///    `EnsureLoadBalancerDeleted`; `ImplementedElsewhere` counts as success, any other error fails the sync
    ///    (on the vanished path after a Warning `DeleteLoadBalancerFailed`);
    /// 3. on the cleanup path, the finalizer is removed (if present);
    /// 4. Normal `DeletedLoadBalancer`, on the cleanup path even when no load balancer existed.
    ///
    /// The caller clears the status (cleanup path) and forgets the Service.
    async fn delete_load_balancer(
        &self,
        key: &str,
        svc: &Service,
        path: DeletePath,
    ) -> Result<(), Error> {
        if !path.applies(self.selector.wants_load_balancer(svc)) {
            return Ok(());
        }
        let exists = !path.checks_existence()
            || self
                .balancer
                .get_load_balancer(&self.cluster_name, svc)
                .await
                .map_err(Error::CheckBeforeCleanup)?
                .is_some();
        if exists {
            tracing::info!(service = %key, "deleting load balancer");
            self.emit(svc, plan::DELETING);
            match self
                .balancer
                .ensure_load_balancer_deleted(&self.cluster_name, svc)
                .await
            {
                Ok(()) => {}
                Err(err) if err.is_implemented_elsewhere() => {
                    tracing::debug!(service = %key, "load balancer implemented elsewhere; ignoring the delete error");
                }
                Err(err) => {
                    if path.reports_delete_failure() {
                        self.emit(svc, plan::delete_failed(&err));
                    }
                    return Err(Error::Delete(err));
                }
            }
        }
        if path.removes_finalizer() {
            self.change_finalizer(key, svc, false).await?;
        }
        self.emit(svc, plan::DELETED);
        Ok(())
    }

    /// Go: `syncLoadBalancerIfNeeded`.
    async fn sync_load_balancer_if_needed(
        &self,
        key: &str,
        svc: &Service,
    ) -> Result<Operation, Error> {
        let previous = current_status(svc);
        let (operation, status) = if wants_deletion(&self.selector, svc) {
            self.delete_load_balancer(key, svc, DeletePath::Cleanup)
                .await?;
            (Operation::Delete, LoadBalancerStatus::default())
        } else {
            tracing::info!(service = %key, "ensuring load balancer");
            self.emit(svc, plan::ENSURING);
            let svc = with_finalizers(svc, self.change_finalizer(key, svc, true).await?);
            let answer = self.ensure_load_balancer(key, &svc).await;
            let Some(status) = plan::ensured_status(answer)? else {
                tracing::debug!(service = %key, "load balancer implemented elsewhere; nothing to do");
                return Ok(Operation::Ensure);
            };
            self.emit(&svc, plan::ENSURED);
            (Operation::Ensure, status)
        };
        self.patch_status(key, svc, &previous, &status).await?;
        Ok(operation)
    }

    /// Go: `ensureLoadBalancer`: the stable node set, recorded before the call.
    async fn ensure_load_balancer(
        &self,
        key: &str,
        svc: &Service,
    ) -> Result<LoadBalancerStatus, CloudError> {
        let hosts = stable_nodes(&self.nodes.store().list());
        if hosts.is_empty() {
            self.emit(svc, plan::no_available_nodes());
        }
        self.tracker
            .set_synced(key, NodeSet::from_nodes(hosts.iter().map(AsRef::as_ref)));
        // each Node was made for this read of the cache, so it is moved, not copied
        let hosts: Vec<Node> = hosts.into_iter().map(Arc::unwrap_or_clone).collect();
        self.balancer
            .ensure_load_balancer(&self.cluster_name, svc, &hosts)
            .await
    }

    /// Add (`add`) or remove the cleanup finalizer through `services/status`, reading the finalizer list again
    /// after a concurrent change of it. Returns the Service's finalizers afterwards, for an ensure to hand the
    /// cloud the Service as it is (with the finalizer). A Service that is already gone needs no finalizer removal.
    async fn change_finalizer(
        &self,
        key: &str,
        svc: &Service,
        add: bool,
    ) -> Result<Option<Vec<String>>, Error> {
        let (verb, fail): (_, fn(kube::Error) -> Error) = if add {
            ("adding", Error::AddFinalizer)
        } else {
            ("removing", Error::RemoveFinalizer)
        };
        // The patch that makes `finalizers` right, if they are not.
        let body = |finalizers: &[String]| match add {
            true if finalizers.iter().any(|f| f == LOAD_BALANCER_CLEANUP) => None,
            true => Some(patches::add_finalizer(finalizers)),
            false => patches::remove_finalizer(finalizers),
        };
        let Some(mut patch_body) = body(svc.finalizers()) else {
            return Ok(svc.metadata.finalizers.clone());
        };
        let (namespace, name) = split_key(key)?;
        let api = self.api(namespace);
        for _ in 0..FINALIZER_ATTEMPTS {
            tracing::debug!(service = %key, "{verb} load balancer cleanup finalizer");
            let patch = json_patch(patch_body).map_err(fail)?;
            let fresh = match api.patch_status(name, &Self::patch_params(), &patch).await {
                Ok(updated) => return Ok(updated.metadata.finalizers),
                Err(err) if !add && is_not_found(&err) => return Ok(None),
                // The finalizer list changed under us: read it again.
                Err(kube::Error::Api(s)) if is_finalizer_conflict(Some(s.code)) => {
                    match api.get(name).await {
                        Err(err) if !add && is_not_found(&err) => return Ok(None),
                        fresh => fresh.map_err(fail)?,
                    }
                }
                Err(err) => return Err(fail(err)),
            };
            match body(fresh.finalizers()) {
                None => return Ok(fresh.metadata.finalizers),
                Some(next) => patch_body = next,
            }
        }
        Err(Error::FinalizerConflict {
            key: key.to_owned(),
            attempts: FINALIZER_ATTEMPTS,
        })
    }

    /// Go: `patchStatus`: write `status.loadBalancer` only if its ingress changed; a vanished Service is fine.
    async fn patch_status(
        &self,
        key: &str,
        svc: &Service,
        previous: &LoadBalancerStatus,
        status: &LoadBalancerStatus,
    ) -> Result<(), Error> {
        if load_balancer_status_equal(previous, status) {
            return Ok(());
        }
        let (namespace, name) = split_key(key)?;
        tracing::debug!(service = %key, "patching load balancer status");
        let patch = Patch::Merge(patches::load_balancer_status(status));
        match self
            .api(namespace)
            .patch_status(name, &Self::patch_params(), &patch)
            .await
        {
            Ok(_) => Ok(()),
            Err(err) if is_not_found(&err) => {
                tracing::debug!(service = %key, uid = ?svc.metadata.uid, "service vanished before its status was written");
                Ok(())
            }
            Err(err) => Err(Error::PatchStatus(err)),
        }
    }

    // ---- periodic re-ensure ----

    /// One periodic re-ensure: queue every Service that wants a load balancer and is not backing off.
    fn reensure(&self) {
        let services = self.services.store().list();
        let keys = reensure_keys(&self.selector, &services, |key| {
            self.queue.num_requeues(&key.to_owned()) > 0
        });
        tracing::info!(
            services = keys.len(),
            "periodic re-ensure of load balancers"
        );
        keys.into_iter().for_each(|key| self.queue.add(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_values_are_valid_json_patches() {
        for value in [
            patches::add_finalizer(&[]),
            patches::add_finalizer(&["other".into()]),
            patches::remove_finalizer(&[names::finalizers::LOAD_BALANCER_CLEANUP.into()])
                .expect("a removal"),
        ] {
            let patch = json_patch(value.clone()).expect("a valid JSON patch");
            let Patch::Json(ops) = patch else {
                panic!("expected a JSON patch")
            };
            assert_eq!(
                serde_json::to_value(&ops).unwrap(),
                value,
                "round-trips unchanged"
            );
        }
        assert!(json_patch(serde_json::json!([{"op": "bogus"}])).is_err());
    }
}
