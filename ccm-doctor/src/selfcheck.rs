//! The self-check inside a running CCM: the `node-bootstrap-selfcheck` controller reads the shared Node cache
//! every 30 seconds, exports how many nodes wait for cloud initialization and how long the oldest has waited,
//! and logs a warning when a node has waited longer than the threshold.
//!
//! Metrics:
//!
//! | name | type | meaning |
//! |---|---|---|
//! | `cloud_controller_manager_nodes_waiting_for_initialization` | gauge | nodes carrying the uninitialized taint |
//! | `cloud_controller_manager_nodes_waiting_for_initialization_over_threshold` | gauge | those waiting at least the threshold |
//! | `cloud_controller_manager_oldest_uninitialized_node_age_seconds` | gauge | how long the oldest has waited (0 if none) |
//!
//! ```no_run
//! use ccm_doctor::selfcheck::{SelfCheckConfig, descriptor};
//! use std::time::Duration;
//!
//! let selfcheck = descriptor(SelfCheckConfig::default().with_threshold(Duration::from_secs(300)));
//! assert_eq!(selfcheck.name, "node-bootstrap-selfcheck");
//! // Register it with the runtime next to the other controllers.
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::BoxError;
use ccm_core::helpers::NodeFields;
use ccm_core::names::taints;
use ccm_core::runtime::Controller as Kit;
use ccm_core::runtime::controller::{Controller, ControllerContext, ControllerDescriptor};
use ccm_core::runtime::every::{Timing, every};
use ccm_core::runtime::informer::{NodeInformer, NodeStore};
use ccm_core::runtime::metrics::SharedRegistry;
use k8s_openapi::jiff::Timestamp;
use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;

use crate::analysis::DEFAULT_UNINITIALIZED_THRESHOLD;
use crate::inspect::{WaitingNode, waiting_nodes};
use ccm_core::duration::format_go_duration;

/// The controller's name for `--controllers`.
pub const NAME: &str = "node-bootstrap-selfcheck";
/// Its short alias.
pub const ALIAS: &str = "bootstrap-selfcheck";

/// Metric: nodes carrying the uninitialized taint.
pub const METRIC_WAITING: &str = "cloud_controller_manager_nodes_waiting_for_initialization";
/// Metric: nodes carrying the uninitialized taint for at least the threshold.
pub const METRIC_OVER_THRESHOLD: &str =
    "cloud_controller_manager_nodes_waiting_for_initialization_over_threshold";
/// Metric: seconds the oldest waiting node has waited (0 if none).
pub const METRIC_OLDEST_AGE: &str =
    "cloud_controller_manager_oldest_uninitialized_node_age_seconds";

/// The default period between checks.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// Settings of the self-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SelfCheckConfig {
    /// How often the Node cache is read (default 30 s).
    pub interval: Duration,
    /// How long a node may wait before a warning is logged (default 2 min).
    pub threshold: Duration,
}

impl Default for SelfCheckConfig {
    fn default() -> Self {
        SelfCheckConfig {
            interval: DEFAULT_INTERVAL,
            threshold: DEFAULT_UNINITIALIZED_THRESHOLD,
        }
    }
}

impl SelfCheckConfig {
    /// Set the period (a zero period is raised to one second).
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval.max(Duration::from_secs(1));
        self
    }

    /// Set the warning threshold.
    #[must_use]
    pub fn with_threshold(mut self, threshold: Duration) -> Self {
        self.threshold = threshold;
        self
    }
}

/// The wall clock node ages are measured against; replaceable in tests.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(Timestamp::now)
}

/// The gauges of the self-check.
#[derive(Debug, Clone, Default)]
pub struct SelfCheckMetrics {
    /// [`METRIC_WAITING`].
    pub waiting: Gauge,
    /// [`METRIC_OVER_THRESHOLD`].
    pub over_threshold: Gauge,
    /// [`METRIC_OLDEST_AGE`].
    pub oldest_age_seconds: Gauge<f64, AtomicU64>,
}

impl SelfCheckMetrics {
    /// Create the gauges and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        let metrics = SelfCheckMetrics::default();
        registry.register(
            METRIC_WAITING,
            "Number of nodes carrying the node.cloudprovider.kubernetes.io/uninitialized taint",
            metrics.waiting.clone(),
        );
        registry.register(
            METRIC_OVER_THRESHOLD,
            "Number of nodes that have waited for cloud initialization at least the self-check threshold",
            metrics.over_threshold.clone(),
        );
        registry.register(
            METRIC_OLDEST_AGE,
            "Seconds the oldest node waiting for cloud initialization has waited (0 if none)",
            metrics.oldest_age_seconds.clone(),
        );
        metrics
    }
}

/// What one check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSummary {
    /// Every waiting node, longest first.
    pub waiting: Vec<WaitingNode>,
    /// Names of the nodes at or over the threshold.
    pub over_threshold: Vec<String>,
    /// Names of the nodes that crossed the threshold since the previous check (a warning was logged for each).
    pub newly_over_threshold: Vec<String>,
}

/// The self-check controller.
pub struct NodeBootstrapSelfCheck {
    store: NodeStore,
    informer: Option<NodeInformer>,
    metrics: SelfCheckMetrics,
    config: SelfCheckConfig,
    clock: Clock,
    warned: BTreeSet<String>,
}

impl std::fmt::Debug for NodeBootstrapSelfCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeBootstrapSelfCheck")
            .field("store", &self.store)
            .field("config", &self.config)
            .field("warned", &self.warned)
            .finish_non_exhaustive()
    }
}

impl NodeBootstrapSelfCheck {
    /// A self-check over the shared Node informer of `ctx`, with its gauges registered in `ctx.metrics`. It
    /// waits for the informer's first list before the first check.
    pub fn new(ctx: &ControllerContext, config: SelfCheckConfig) -> Self {
        let informer = ctx.informers.nodes().clone();
        let mut check = Self::from_store(informer.store(), &ctx.metrics, config);
        check.informer = Some(informer);
        check
    }

    /// A self-check over any Node store (for tests, or a CCM with its own cache), registering its gauges in
    /// `registry`. The store is read as it is: there is no informer to wait for.
    ///
    /// ```
    /// use ccm_core::runtime::informer::Store;
    /// use ccm_core::runtime::metrics::SharedRegistry;
    /// use ccm_doctor::selfcheck::{NodeBootstrapSelfCheck, SelfCheckConfig};
    ///
    /// let registry = SharedRegistry::new();
    /// let mut check = NodeBootstrapSelfCheck::from_store(Store::new(), &registry, SelfCheckConfig::default());
    /// check.check_once();
    /// assert!(registry.encode().contains("cloud_controller_manager_nodes_waiting_for_initialization 0"));
    /// ```
    pub fn from_store(
        store: NodeStore,
        registry: &SharedRegistry,
        config: SelfCheckConfig,
    ) -> Self {
        NodeBootstrapSelfCheck {
            store,
            informer: None,
            metrics: SelfCheckMetrics::register(registry),
            config,
            clock: system_clock(),
            warned: BTreeSet::new(),
        }
    }

    /// Measure ages against `clock` instead of the system clock.
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Read the store once: set the gauges and log a warning for each node that crossed the threshold since
    /// the previous check.
    pub fn check_once(&mut self) -> CheckSummary {
        let now = (self.clock)();
        // (read from the compact cache: only the nodes that still carry the taint are made again)
        let nodes = self
            .store
            .select(|node| node.has_taint(taints::UNINITIALIZED));
        let waiting = waiting_nodes(nodes.iter().map(|n| n.as_ref()), now);
        let over: Vec<String> = waiting
            .iter()
            .filter(|w| w.waited >= self.config.threshold)
            .map(|w| w.name.clone())
            .collect();
        self.metrics
            .waiting
            .set(i64::try_from(waiting.len()).unwrap_or(i64::MAX));
        self.metrics
            .over_threshold
            .set(i64::try_from(over.len()).unwrap_or(i64::MAX));
        self.metrics
            .oldest_age_seconds
            .set(waiting.first().map_or(0.0, |w| w.waited.as_secs_f64()));

        let mut newly = Vec::new();
        for w in waiting.iter().filter(|w| w.waited >= self.config.threshold) {
            if self.warned.insert(w.name.clone()) {
                tracing::warn!(
                    node = %w.name,
                    waited = %format_go_duration(Duration::from_secs(w.waited.as_secs())),
                    threshold = %format_go_duration(self.config.threshold),
                    taint = taints::UNINITIALIZED,
                    "node has waited for cloud initialization longer than the threshold; check the cloud node \
                     controller's errors for it, and run the doctor (`doctor`) for the usual causes"
                );
                newly.push(w.name.clone());
            }
        }
        // Forget nodes that are initialized or gone, so a node that is tainted again is reported again.
        self.warned.retain(|name| over.contains(name));
        CheckSummary {
            waiting,
            over_threshold: over,
            newly_over_threshold: newly,
        }
    }
}

#[async_trait]
impl Controller for NodeBootstrapSelfCheck {
    async fn run(mut self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        let kit = match self.informer.take() {
            Some(informer) => Kit::new(NAME).waits_for(&informer),
            None => Kit::new(NAME),
        };
        let checks = every(self.config.interval, 0.0, Timing::NonSliding);
        kit.with_loop(move |shutdown| async move {
            checks.run_sync(&shutdown, || drop(self.check_once())).await;
        })
        .run_loops(shutdown)
        .await;
        Ok(())
    }
}

/// The `node-bootstrap-selfcheck` controller (alias `bootstrap-selfcheck`), enabled by default.
pub fn descriptor(config: SelfCheckConfig) -> ControllerDescriptor {
    ControllerDescriptor::new(NAME, move |ctx: &ControllerContext| {
        Ok(Some(
            Box::new(NodeBootstrapSelfCheck::new(ctx, config)) as Box<dyn Controller>
        ))
    })
    .with_aliases(&[ALIAS])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::runtime::informer::StoreWriter;
    use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn node(name: &str, created: Timestamp, tainted: bool) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(created)),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: tainted.then(|| {
                    vec![Taint {
                        key: taints::UNINITIALIZED.into(),
                        value: Some("true".into()),
                        effect: "NoSchedule".into(),
                        time_added: None,
                    }]
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// A wall clock that follows tokio's (paused) clock from `base`.
    fn tokio_clock(base: Timestamp) -> Clock {
        let start = tokio::time::Instant::now();
        Arc::new(move || {
            let elapsed = tokio::time::Instant::now() - start;
            base + k8s_openapi::jiff::SignedDuration::try_from(elapsed).unwrap_or_default()
        })
    }

    fn metric(registry: &SharedRegistry, name: &str) -> f64 {
        let text = registry.encode();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in {text}"))
            .trim()
            .parse()
            .unwrap()
    }

    fn base() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn config_builders() {
        let c = SelfCheckConfig::default();
        assert_eq!(c.interval, Duration::from_secs(30));
        assert_eq!(c.threshold, Duration::from_secs(120));
        let c = c
            .with_interval(Duration::ZERO)
            .with_threshold(Duration::from_secs(5));
        assert_eq!(c.interval, Duration::from_secs(1));
        assert_eq!(c.threshold, Duration::from_secs(5));
        let d = descriptor(SelfCheckConfig::default());
        assert_eq!(d.name, NAME);
        assert_eq!(d.short_name(), ALIAS);
        assert!(!d.disabled_by_default);
    }

    #[tokio::test(start_paused = true)]
    async fn gauges_and_warnings_follow_the_store() {
        let registry = SharedRegistry::new();
        let store = StoreWriter::new();
        let config = SelfCheckConfig::default().with_threshold(Duration::from_secs(60));
        let mut check = NodeBootstrapSelfCheck::from_store(store.store(), &registry, config)
            .with_clock(tokio_clock(base()));

        let empty = check.check_once();
        assert!(empty.waiting.is_empty());
        assert_eq!(metric(&registry, METRIC_WAITING), 0.0);
        assert_eq!(metric(&registry, METRIC_OVER_THRESHOLD), 0.0);
        assert_eq!(metric(&registry, METRIC_OLDEST_AGE), 0.0);

        let ten_seconds_ago = base() - k8s_openapi::jiff::SignedDuration::from_secs(10);
        store.insert("a".into(), Arc::new(node("a", ten_seconds_ago, true)));
        store.insert("b".into(), Arc::new(node("b", base(), true)));
        store.insert(
            "done".into(),
            Arc::new(node("done", ten_seconds_ago, false)),
        );
        let first = check.check_once();
        assert_eq!(first.waiting.len(), 2);
        assert_eq!(first.waiting[0].name, "a");
        assert!(first.over_threshold.is_empty());
        assert_eq!(metric(&registry, METRIC_WAITING), 2.0);
        assert_eq!(metric(&registry, METRIC_OLDEST_AGE), 10.0);

        // 50 s later, a has waited 60 s: it crosses the threshold once.
        tokio::time::advance(Duration::from_secs(50)).await;
        let second = check.check_once();
        assert_eq!(second.over_threshold, vec!["a".to_owned()]);
        assert_eq!(second.newly_over_threshold, vec!["a".to_owned()]);
        assert_eq!(metric(&registry, METRIC_OVER_THRESHOLD), 1.0);
        assert_eq!(metric(&registry, METRIC_OLDEST_AGE), 60.0);

        tokio::time::advance(Duration::from_secs(10)).await;
        let third = check.check_once();
        assert_eq!(third.over_threshold, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(third.newly_over_threshold, vec!["b".to_owned()]);

        // a is initialized: it leaves the gauges; tainted again later, it is warned about again.
        store.insert("a".into(), Arc::new(node("a", ten_seconds_ago, false)));
        let fourth = check.check_once();
        assert_eq!(fourth.over_threshold, vec!["b".to_owned()]);
        assert!(fourth.newly_over_threshold.is_empty());
        assert_eq!(metric(&registry, METRIC_WAITING), 1.0);
        assert_eq!(metric(&registry, METRIC_OLDEST_AGE), 60.0);
        store.insert("a".into(), Arc::new(node("a", ten_seconds_ago, true)));
        let fifth = check.check_once();
        assert_eq!(fifth.newly_over_threshold, vec!["a".to_owned()]);

        store.remove("a");
        store.remove("b");
        let last = check.check_once();
        assert!(last.waiting.is_empty());
        assert_eq!(metric(&registry, METRIC_WAITING), 0.0);
        assert_eq!(metric(&registry, METRIC_OVER_THRESHOLD), 0.0);
        assert_eq!(metric(&registry, METRIC_OLDEST_AGE), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_controller_checks_every_interval_until_shutdown() {
        let registry = SharedRegistry::new();
        let store = StoreWriter::new();
        let config = SelfCheckConfig::default()
            .with_interval(Duration::from_secs(30))
            .with_threshold(Duration::from_secs(45));
        let check = NodeBootstrapSelfCheck::from_store(store.store(), &registry, config)
            .with_clock(tokio_clock(base()));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(Box::new(check).run(shutdown.clone()));

        // The first check runs at once, on an empty store.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(metric(&registry, METRIC_WAITING), 0.0);

        // A node appears at t=1s; nothing changes until the next tick at t=30s.
        store.insert("n".into(), Arc::new(node("n", base(), true)));
        tokio::time::sleep(Duration::from_secs(28)).await; // t=29s
        assert_eq!(metric(&registry, METRIC_WAITING), 0.0);
        tokio::time::sleep(Duration::from_secs(2)).await; // t=31s, after the tick at 30s
        assert_eq!(metric(&registry, METRIC_WAITING), 1.0);
        assert_eq!(metric(&registry, METRIC_OLDEST_AGE), 30.0);
        assert_eq!(metric(&registry, METRIC_OVER_THRESHOLD), 0.0);

        tokio::time::sleep(Duration::from_secs(30)).await; // t=61s, after the tick at 60s
        assert_eq!(metric(&registry, METRIC_OLDEST_AGE), 60.0);
        assert_eq!(metric(&registry, METRIC_OVER_THRESHOLD), 1.0);

        shutdown.cancel();
        task.await.unwrap().unwrap();
    }
}
