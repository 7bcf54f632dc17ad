//! Metrics: one shared Prometheus registry per process, and the framework metrics under the Go names.
//!
//! Controllers register their own metrics into the [`SharedRegistry`] they receive. Note that
//! `prometheus-client` appends `_total` to counter names: register `service_controller_loadbalancer_sync` to
//! expose `service_controller_loadbalancer_sync_total`.
//!
//! ```
//! use ccm_core::runtime::metrics::SharedRegistry;
//! use prometheus_client::metrics::counter::Counter;
//!
//! let registry = SharedRegistry::new();
//! let syncs: Counter = registry.registered("route_controller_route_sync", "Route syncs", Counter::default());
//! syncs.inc();
//! assert!(registry.encode().contains("route_controller_route_sync_total 1"));
//! ```

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

/// A clonable handle to one Prometheus registry.
#[derive(Clone, Default)]
pub struct SharedRegistry {
    inner: Arc<Mutex<Registry>>,
}

impl std::fmt::Debug for SharedRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRegistry").finish_non_exhaustive()
    }
}

impl SharedRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register one metric.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.with(|r| r.register(name, help, metric));
    }

    /// Register `metric` and return it: how a controller declares each of its metrics in one expression (see
    /// the [module documentation](self)).
    pub fn registered<M: Metric + Clone>(&self, name: &str, help: &str, metric: M) -> M {
        self.register(name, help, metric.clone());
        metric
    }

    /// Run `f` with the registry locked.
    pub fn with<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        let mut registry = self.inner.lock();
        f(&mut registry)
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        self.with(|r| encode(&mut out, r))
            .expect("writing to a String cannot fail");
        out
    }
}

/// The label set of every metric family of the SDK: `(name, value)` pairs.
pub(crate) type Labels = Vec<(String, String)>;

/// The label set of `pairs`.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn name_label(name: &str) -> Labels {
    labels(&[("name", name)])
}

/// The `workqueue_*` metrics (label `name` = the queue name, as in client-go).
#[derive(Clone, Debug)]
pub struct WorkqueueMetrics {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    retries: Family<Labels, Counter>,
    queue_duration: Family<Labels, Histogram>,
}

impl WorkqueueMetrics {
    /// Create the families and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        let durations: fn() -> Histogram = || Histogram::new(exponential_buckets(10e-9, 10.0, 12));
        WorkqueueMetrics {
            depth: registry.registered(
                "workqueue_depth",
                "Current depth of workqueue",
                Family::default(),
            ),
            adds: registry.registered(
                "workqueue_adds",
                "Total number of adds handled by workqueue",
                Family::default(),
            ),
            retries: registry.registered(
                "workqueue_retries",
                "Total number of retries handled by workqueue",
                Family::default(),
            ),
            queue_duration: registry.registered(
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                Family::new_with_constructor(durations),
            ),
        }
    }

    pub(crate) fn add(&self, name: &str) {
        self.adds.get_or_create(&name_label(name)).inc();
    }
    pub(crate) fn retry(&self, name: &str) {
        self.retries.get_or_create(&name_label(name)).inc();
    }
    pub(crate) fn set_depth(&self, name: &str, depth: usize) {
        self.depth
            .get_or_create(&name_label(name))
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }
    pub(crate) fn queued_for(&self, name: &str, waited: Duration) {
        self.queue_duration
            .get_or_create(&name_label(name))
            .observe(waited.as_secs_f64());
    }
}

/// `running_managed_controllers{name, manager}`: 1 while a controller runs, 0 after it stops.
#[derive(Clone, Debug)]
pub struct ControllerManagerMetrics {
    running: Family<Labels, Gauge>,
    manager: String,
}

impl ControllerManagerMetrics {
    /// Register the gauge family for the manager `manager` (Go: `cloud-controller-manager`).
    pub fn register(registry: &SharedRegistry, manager: &str) -> Self {
        ControllerManagerMetrics {
            running: registry.registered(
                "running_managed_controllers",
                "Indicates where instances of a controller are currently running",
                Family::default(),
            ),
            manager: manager.to_owned(),
        }
    }

    /// Mark the controller `name` as started.
    pub fn controller_started(&self, name: &str) {
        self.gauge(name).set(1);
    }

    /// Mark the controller `name` as stopped.
    pub fn controller_stopped(&self, name: &str) {
        self.gauge(name).set(0);
    }

    fn gauge(&self, name: &str) -> Gauge {
        let labels = labels(&[("manager", &self.manager), ("name", name)]);
        self.running.get_or_create(&labels).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};

    #[tokio::test(start_paused = true)]
    async fn workqueue_metrics_are_exposed_under_go_names() {
        let registry = SharedRegistry::new();
        let metrics = WorkqueueMetrics::register(&registry);
        let q: WorkQueue<String> = WorkQueue::with_metrics(
            "service",
            ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300)),
            &metrics,
        );
        q.add("a".into());
        q.add("b".into());
        q.add_rate_limited("c".into());
        let text = registry.encode();
        assert!(
            text.contains("workqueue_depth{name=\"service\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_adds_total{name=\"service\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_retries_total{name=\"service\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn running_managed_controllers() {
        let registry = SharedRegistry::new();
        let m = ControllerManagerMetrics::register(&registry, "cloud-controller-manager");
        m.controller_started("service");
        assert!(registry.encode().contains(
            "running_managed_controllers{manager=\"cloud-controller-manager\",name=\"service\"} 1"
        ));
        m.controller_stopped("service");
        assert!(registry.encode().contains(
            "running_managed_controllers{manager=\"cloud-controller-manager\",name=\"service\"} 0"
        ));
    }
}
