//! The route controller's metrics.

use ccm_core::runtime::metrics::SharedRegistry;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

type Labels = Vec<(String, String)>;

/// The route controller's metrics.
///
/// - `route_controller_route_sync_total` (Go name, ALPHA there): passes started, +1 per pass.
/// - `route_controller_route_operations_total{operation, result}` (not in Go): cloud route calls, with
///   `operation` = `list`, `create` or `delete` and `result` = `success` or `error`.
///
/// ```
/// use ccm_core::runtime::metrics::SharedRegistry;
/// use ccm_routecontroller::metrics::RouteMetrics;
///
/// let registry = SharedRegistry::new();
/// let metrics = RouteMetrics::register(&registry);
/// metrics.sync_started();
/// assert!(registry.encode().contains("route_controller_route_sync_total 1"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct RouteMetrics {
    route_sync: Counter,
    operations: Family<Labels, Counter>,
}

impl RouteMetrics {
    /// Create the metrics and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        RouteMetrics {
            route_sync: registry.registered(
                "route_controller_route_sync",
                "A metric counting the amount of times routes have been synced with the cloud provider.",
                Counter::default(),
            ),
            operations: registry.registered(
                "route_controller_route_operations",
                "Cloud route calls made by the route controller, by operation (list, create, delete) and result.",
                Family::default(),
            ),
        }
    }

    /// One more pass.
    pub fn sync_started(&self) {
        self.route_sync.inc();
    }

    /// Passes so far.
    pub fn syncs(&self) -> u64 {
        self.route_sync.get()
    }

    /// One cloud route call finished.
    pub fn operation(&self, operation: &str, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.operations
            .get_or_create(&vec![
                ("operation".to_owned(), operation.to_owned()),
                ("result".to_owned(), result.to_owned()),
            ])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names() {
        let registry = SharedRegistry::new();
        let m = RouteMetrics::register(&registry);
        m.sync_started();
        m.sync_started();
        m.operation("create", false);
        m.operation("list", true);
        assert_eq!(m.syncs(), 2);
        let text = registry.encode();
        assert!(
            text.contains("route_controller_route_sync_total 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "route_controller_route_operations_total{operation=\"create\",result=\"error\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "route_controller_route_operations_total{operation=\"list\",result=\"success\"} 1"
            ),
            "{text}"
        );
    }
}
