//! The cloud node controller's metrics, under the Go reference's names and buckets.

use ccm_core::runtime::metrics::SharedRegistry;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// `node_controller_cloud_provider_taint_removal_delay_seconds`.
pub const TAINT_REMOVAL_DELAY: &str = "node_controller_cloud_provider_taint_removal_delay_seconds";
/// `node_controller_initial_node_sync_delay_seconds`.
pub const INITIAL_NODE_SYNC_DELAY: &str = "node_controller_initial_node_sync_delay_seconds";

/// The two ALPHA histograms of the Go cloud node controller (exponential buckets 1 s × 4, 6 buckets: 1 s to
/// about 17 min).
#[derive(Clone, Debug)]
pub(crate) struct NodeMetrics {
    taint_removal_delay: Histogram,
    initial_sync_delay: Histogram,
}

fn buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 6))
}

impl NodeMetrics {
    pub(crate) fn register(registry: &SharedRegistry) -> Self {
        NodeMetrics {
            taint_removal_delay: registry.registered(
                TAINT_REMOVAL_DELAY,
                "[ALPHA] Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.",
                buckets(),
            ),
            initial_sync_delay: registry.registered(
                INITIAL_NODE_SYNC_DELAY,
                "[ALPHA] Number of seconds after node creation when NodeController finished the initial synchronization of a single node.",
                buckets(),
            ),
        }
    }

    pub(crate) fn taint_removed(&self, created: Option<&Time>) {
        self.taint_removal_delay.observe(seconds_since(created));
    }

    pub(crate) fn initial_sync_done(&self, created: Option<&Time>) {
        self.initial_sync_delay.observe(seconds_since(created));
    }
}

/// Seconds from `created` to now, never negative (clock skew between the API server and us is possible).
fn seconds_since(created: Option<&Time>) -> f64 {
    created
        .map(|t| Timestamp::now().duration_since(t.0).as_secs_f64())
        .unwrap_or(0.0)
        .max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_with_go_names_and_buckets() {
        let registry = SharedRegistry::new();
        let m = NodeMetrics::register(&registry);
        let created = Time(Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(30));
        m.taint_removed(Some(&created));
        m.initial_sync_done(Some(&created));
        m.initial_sync_done(None);
        let text = registry.encode();
        assert!(
            text.contains(&format!("{TAINT_REMOVAL_DELAY}_count 1")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{INITIAL_NODE_SYNC_DELAY}_count 2")),
            "{text}"
        );
        // 30 s falls in the le=64 bucket but not le=16.
        assert!(
            text.contains(&format!("{TAINT_REMOVAL_DELAY}_bucket{{le=\"16.0\"}} 0")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{TAINT_REMOVAL_DELAY}_bucket{{le=\"64.0\"}} 1")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{TAINT_REMOVAL_DELAY}_bucket{{le=\"1024.0\"}} 1")),
            "{text}"
        );
        assert!(text.contains("[ALPHA] Number of seconds after node creation"));
    }

    #[test]
    fn future_creation_times_count_as_zero() {
        let future = Time(Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(100));
        assert_eq!(seconds_since(Some(&future)), 0.0);
    }
}
