//! The node-sync loop: batching node changes into passes, and a pass that updates each load balancer's hosts
//! when its node set changed (Go: `nodeSyncLoop`, `syncNodes`, `nodeSyncService`).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ServiceController;
use crate::error::Error;
use ccm_core::runtime::debounce::burst::run_bursts;

use crate::plan::{hosts_update_failed, hosts_updated};
use crate::predicates::nodes_sufficiently_equal;

impl ServiceController {
    /// Go: `nodeSyncLoop`: one pass per burst of node changes, until `shutdown`.
    pub(super) async fn node_sync_loop(self: Arc<Self>, shutdown: CancellationToken) {
        let (quiet, max) = (
            self.config.node_sync_debounce,
            self.config.node_sync_max_delay,
        );
        let (this, stop) = (&self, &shutdown);
        run_bursts(&self.node_queue, quiet, max, &shutdown, move |burst| async move {
            tracing::debug!(node_changes = burst.keys, waited = ?burst.started.elapsed(), "syncing load balancer hosts");
            this.sync_nodes(stop).await.into_iter().for_each(|key| this.queue.add(key));
        })
        .await;
    }

    /// Go: `syncNodes`: one pass over every remembered Service; returns the keys to re-ensure.
    async fn sync_nodes(&self, shutdown: &CancellationToken) -> Vec<String> {
        let started = Instant::now();
        // A pass starts from the node cache as it is now.
        self.hosts.current(true, || self.nodes.store().list());
        let services = self.tracker.services();
        let total = services.len();
        let retry: Vec<String> = futures::stream::iter(services)
            .map(|(key, _)| async move {
                if shutdown.is_cancelled() {
                    return None;
                }
                self.node_sync_service(key).await
            })
            .buffer_unordered(self.config.concurrent_service_syncs)
            .filter_map(std::future::ready)
            .collect()
            .await;
        let took = started.elapsed();
        self.metrics.nodesync_latency.observe(took.as_secs_f64());
        tracing::info!(
            services = total,
            failed = retry.len(),
            ?took,
            "synced load balancer hosts"
        );
        retry
    }

    /// Go: `nodeSyncService`: update one load balancer's hosts if its node set changed; `Some(key)` to retry.
    /// The node set is taken when the load balancer's turn comes ([`Hosts::current`](crate::hosts::Hosts::current)).
    async fn node_sync_service(&self, key: String) -> Option<String> {
        let nodes = || self.nodes.store().list();
        let (_guard, (hosts, set)) = match self.locks.try_lock(&key) {
            Some(guard) => (guard, self.hosts.current(false, nodes)),
            None => {
                // An ensure of this Service is running; after it, what it sent may be newer than the last
                // computation.
                let guard = self.locks.lock(&key).await;
                (guard, self.hosts.current(true, nodes))
            }
        };
        let svc = self.tracker.cached(&key)?;
        if !self.selector.wants_load_balancer(&svc) {
            return None;
        }
        let old = self.tracker.synced(&key);
        // Stored before the call, as in Go: failures are retried through the service queue.
        self.tracker.set_synced(&key, (*set).clone());
        if nodes_sufficiently_equal(old.as_ref(), &set) {
            return None;
        }
        match self.update_load_balancer_hosts(&key, &svc, &hosts).await {
            Ok(()) => None,
            Err(err) => {
                tracing::warn!(service = %key, error = %err, "failed to update load balancer hosts; the service will be re-ensured");
                self.metrics.nodesync_error.inc();
                Some(key)
            }
        }
    }

    /// Go: `lockedUpdateLoadBalancerHosts`.
    async fn update_load_balancer_hosts(
        &self,
        key: &str,
        svc: &Service,
        hosts: &[Arc<Node>],
    ) -> Result<(), Error> {
        self.metrics.loadbalancer_sync.inc();
        let started = Instant::now();
        let nodes: Vec<Node> = hosts.iter().map(|n| (**n).clone()).collect();
        tracing::info!(service = %key, nodes = nodes.len(), "updating load balancer hosts");
        let result = self
            .balancer
            .update_load_balancer(&self.cluster_name, svc, &nodes)
            .await;
        let took = started.elapsed().as_secs_f64();
        self.metrics.update_host_latency.observe(took);
        let err = match result {
            Ok(()) => {
                self.emit(svc, hosts_updated(nodes.len()));
                return Ok(());
            }
            Err(err) if err.is_implemented_elsewhere() => return Ok(()),
            Err(err) => err,
        };
        // It is only an error if the load balancer still exists.
        match self
            .balancer
            .get_load_balancer(&self.cluster_name, svc)
            .await
        {
            Ok(None) => return Ok(()),
            Ok(Some(_)) => {}
            Err(get_err) => {
                tracing::warn!(service = %key, error = %get_err, "failed to check if load balancer exists");
            }
        }
        self.emit(svc, hosts_update_failed(&nodes, &err));
        Err(Error::UpdateHosts(err))
    }
}
