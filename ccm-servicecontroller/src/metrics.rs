//! The service controller's metrics, under the Go names (subsystem `service_controller`).

use ccm_core::runtime::metrics::SharedRegistry;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The four Go metrics of the service controller.
///
/// ```
/// use ccm_core::runtime::metrics::SharedRegistry;
/// use ccm_servicecontroller::metrics::ServiceMetrics;
///
/// let registry = SharedRegistry::new();
/// let metrics = ServiceMetrics::register(&registry);
/// metrics.loadbalancer_sync.inc();
/// assert!(registry.encode().contains("service_controller_loadbalancer_sync_total 1"));
/// ```
#[derive(Debug, Clone)]
pub struct ServiceMetrics {
    /// `service_controller_loadbalancer_sync_total`: host updates attempted by node sync.
    pub loadbalancer_sync: Counter,
    /// `service_controller_nodesync_error_total`: host updates that failed.
    pub nodesync_error: Counter,
    /// `service_controller_nodesync_latency_seconds`: duration of a node-sync pass.
    pub nodesync_latency: Histogram,
    /// `service_controller_update_loadbalancer_host_latency_seconds`: duration of one host update.
    pub update_host_latency: Histogram,
}

fn buckets() -> Histogram {
    // Go: metrics.ExponentialBuckets(1, 2, 15)
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

impl ServiceMetrics {
    /// Create the metrics and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        ServiceMetrics {
            loadbalancer_sync: registry.registered(
                "service_controller_loadbalancer_sync",
                "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
                Counter::default(),
            ),
            nodesync_error: registry.registered(
                "service_controller_nodesync_error",
                "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
                Counter::default(),
            ),
            nodesync_latency: registry.registered(
                "service_controller_nodesync_latency_seconds",
                "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
                buckets(),
            ),
            update_host_latency: registry.registered(
                "service_controller_update_loadbalancer_host_latency_seconds",
                "A metric measuring the latency for updating each load balancer hosts.",
                buckets(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_buckets_match_go() {
        let registry = SharedRegistry::new();
        let m = ServiceMetrics::register(&registry);
        m.loadbalancer_sync.inc();
        m.nodesync_error.inc();
        m.nodesync_latency.observe(1.5);
        m.update_host_latency.observe(0.3);
        let text = registry.encode();
        for needle in [
            "service_controller_loadbalancer_sync_total 1",
            "service_controller_nodesync_error_total 1",
            "service_controller_nodesync_latency_seconds_count 1",
            "service_controller_update_loadbalancer_host_latency_seconds_count 1",
            "service_controller_nodesync_latency_seconds_bucket{le=\"1.0\"} 0",
            "service_controller_nodesync_latency_seconds_bucket{le=\"2.0\"} 1",
            "service_controller_update_loadbalancer_host_latency_seconds_bucket{le=\"1.0\"} 1",
            "service_controller_nodesync_latency_seconds_bucket{le=\"16384.0\"} 1",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        assert!(!text.contains("le=\"32768.0\""), "15 buckets only");
    }
}
