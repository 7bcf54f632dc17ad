//! The cloud-call budget: a client-side rate limit on provider calls, and per-operation call metrics.
//!
//! Both are [`ProviderInterceptor`]s for [`InterceptedProvider`](crate::intercept::InterceptedProvider), so they
//! apply to every provider call the controllers make, whichever controller makes it.
//!
//! - [`RateLimitInterceptor`] holds a token bucket for the whole provider and, optionally, one per operation.
//!   A call waits for a token instead of failing; a waiting call gives up with an error when the shutdown token is
//!   cancelled.
//! - [`CloudCallMetrics`] counts calls, measures their latency and classifies their errors, labelled by operation.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ccm_core::budget::{CloudBudget, CloudCallMetrics, RateLimitInterceptor};
//! use ccm_core::intercept::{InterceptedProvider, Operation};
//! use ccm_core::runtime::metrics::SharedRegistry;
//! use tokio_util::sync::CancellationToken;
//!
//! # fn demo(cloud: Arc<dyn ccm_core::CloudProvider>) {
//! let registry = SharedRegistry::new();
//! let budget = CloudBudget::default().with_qps(20.0).with_burst(40).with_operation(Operation::EnsureLoadBalancer, 2.0, 4);
//! let cloud = InterceptedProvider::new(cloud)
//!     .with_interceptor(
//!         RateLimitInterceptor::new(&budget, CancellationToken::new()).unwrap().with_metrics(&registry),
//!     )
//!     .with_interceptor(CloudCallMetrics::register(&registry));
//! # }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::CloudError;
use crate::intercept::{CallInfo, Operation, ProviderInterceptor};
use crate::runtime::metrics::SharedRegistry;
use crate::runtime::workqueue::BucketRateLimiter;

/// How fast the CCM may call the cloud.
///
/// The default, 50 calls per second with a burst of 100 for the whole provider, keeps a 1,000-node cluster's
/// steady load (address sync, lifecycle checks) far below it while bounding a startup storm. Set `qps` to 0 to
/// turn the limit off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct CloudBudget {
    /// Calls per second for the whole provider; 0 turns the limit off.
    #[serde(default = "default_qps")]
    pub qps: f64,
    /// How many calls may go out at once after a quiet period.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// Extra limits for single operations, by [`Operation`] name (`create`, `instance-metadata-by-provider-id`,
    /// `list-routes`, ...; not `initialize`, which is not intercepted). A call must get a token from both its
    /// operation's bucket and the provider's.
    #[serde(default)]
    pub operations: BTreeMap<String, OperationBudget>,
}

/// The limit of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperationBudget {
    /// Calls per second.
    pub qps: f64,
    /// Burst.
    pub burst: u32,
}

fn default_qps() -> f64 {
    50.0
}
fn default_burst() -> u32 {
    100
}

impl Default for CloudBudget {
    fn default() -> Self {
        CloudBudget {
            qps: default_qps(),
            burst: default_burst(),
            operations: BTreeMap::new(),
        }
    }
}

/// An invalid budget.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// A rate is negative or not a number.
    #[error("cloud budget for {scope}: qps must be a finite number >= 0, got {qps}")]
    InvalidQps {
        /// `provider` or the operation name.
        scope: String,
        /// The value given.
        qps: f64,
    },
    /// A burst of zero with a positive rate.
    #[error("cloud budget for {scope}: burst must be at least 1 when qps > 0")]
    ZeroBurst {
        /// `provider` or the operation name.
        scope: String,
    },
    /// An operation name that no intercepted provider method has.
    #[error(
        "cloud budget: unknown operation {name:?}; known operations: {}",
        Operation::intercepted_names()
    )]
    UnknownOperation {
        /// The name given.
        name: String,
    },
}

impl CloudBudget {
    /// No limit at all.
    pub fn unlimited() -> Self {
        CloudBudget {
            qps: 0.0,
            burst: 0,
            operations: BTreeMap::new(),
        }
    }
    /// Set the provider-wide rate.
    pub fn with_qps(mut self, qps: f64) -> Self {
        self.qps = qps;
        self
    }
    /// Set the provider-wide burst.
    pub fn with_burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }
    /// Add a limit for one operation.
    pub fn with_operation(mut self, operation: Operation, qps: f64, burst: u32) -> Self {
        self.operations.insert(
            operation.as_str().to_owned(),
            OperationBudget { qps, burst },
        );
        self
    }
    /// Check every rate, burst and operation name.
    pub fn validate(&self) -> Result<(), BudgetError> {
        check("provider", self.qps, self.burst)?;
        for (name, op) in &self.operations {
            if !Operation::from_name(name).is_some_and(Operation::is_intercepted) {
                return Err(BudgetError::UnknownOperation { name: name.clone() });
            }
            check(name, op.qps, op.burst)?;
        }
        Ok(())
    }
    /// True if the provider-wide limit is on.
    pub fn is_limited(&self) -> bool {
        self.qps > 0.0
    }
}

fn check(scope: &str, qps: f64, burst: u32) -> Result<(), BudgetError> {
    if !qps.is_finite() || qps < 0.0 {
        return Err(BudgetError::InvalidQps {
            scope: scope.to_owned(),
            qps,
        });
    }
    if qps > 0.0 && burst == 0 {
        return Err(BudgetError::ZeroBurst {
            scope: scope.to_owned(),
        });
    }
    Ok(())
}

/// Waits for budget before each provider call.
#[derive(Debug)]
pub struct RateLimitInterceptor {
    provider: Option<BucketRateLimiter>,
    operations: HashMap<Operation, BucketRateLimiter>,
    shutdown: CancellationToken,
    waits: Option<Family<OpLabels, Histogram>>,
}

impl RateLimitInterceptor {
    /// A limiter for `budget`; waiting calls fail once `shutdown` is cancelled.
    pub fn new(budget: &CloudBudget, shutdown: CancellationToken) -> Result<Self, BudgetError> {
        budget.validate()?;
        let provider = budget
            .is_limited()
            .then(|| BucketRateLimiter::new(budget.qps, budget.burst));
        let operations = budget
            .operations
            .iter()
            .filter(|(_, b)| b.qps > 0.0)
            .filter_map(|(name, b)| {
                Some((
                    Operation::from_name(name)?,
                    BucketRateLimiter::new(b.qps, b.burst),
                ))
            })
            .collect();
        Ok(RateLimitInterceptor {
            provider,
            operations,
            shutdown,
            waits: None,
        })
    }

    /// Observe how long each call waited for budget in `registry`, as
    /// `cloudprovider_api_budget_wait_seconds{operation}` (a histogram from 1 ms to about 65 s; calls that did
    /// not wait land in the lowest bucket). A growing wait means the budget, not the cloud, limits the CCM.
    pub fn with_metrics(mut self, registry: &SharedRegistry) -> Self {
        let family: Family<OpLabels, Histogram> = Family::new_with_constructor(latency_histogram);
        registry.register(
            "cloudprovider_api_budget_wait_seconds",
            "Time cloud provider calls waited for the client-side cloud-call budget, by operation",
            family.clone(),
        );
        self.waits = Some(family);
        self
    }

    /// How long a call of `operation` issued now would wait (and reserve its tokens).
    fn reserve(&self, operation: Operation) -> Duration {
        let op_wait = self
            .operations
            .get(&operation)
            .map(BucketRateLimiter::reserve)
            .unwrap_or_default();
        let provider_wait = self
            .provider
            .as_ref()
            .map(BucketRateLimiter::reserve)
            .unwrap_or_default();
        op_wait.max(provider_wait)
    }
}

#[async_trait]
impl ProviderInterceptor for RateLimitInterceptor {
    async fn before_call(&self, call: &CallInfo<'_>) -> Result<(), CloudError> {
        let wait = self.reserve(call.operation);
        if let Some(waits) = &self.waits {
            waits
                .get_or_create(&labels(&[("operation", call.operation.as_str())]))
                .observe(wait.as_secs_f64());
        }
        if wait.is_zero() {
            return Ok(());
        }
        tracing::trace!(operation = %call.operation, target = call.target, ?wait, "waiting for cloud budget");
        tokio::select! {
            _ = tokio::time::sleep(wait) => Ok(()),
            _ = self.shutdown.cancelled() => Err(CloudError::msg(format!(
                "cloud call {} for {} abandoned while waiting for budget: shutting down",
                call.operation, call.target
            ))),
        }
    }
}

type OpLabels = Vec<(String, String)>;

/// Per-operation cloud-call metrics (an SDK addition; the Go framework has none):
///
/// - `cloudprovider_api_requests_total{operation, result}` (`result` = `success` or `error`);
/// - `cloudprovider_api_request_errors_total{operation, kind}` (`kind` from [`ErrorKind::as_str`](crate::ErrorKind::as_str));
/// - `cloudprovider_api_request_duration_seconds{operation}` (histogram, 1 ms to about 65 s), measured from the
///   start of the call through every interceptor before it (so including any wait for budget when the
///   [`RateLimitInterceptor`] comes first; that wait alone is
///   [`RateLimitInterceptor::with_metrics`]' `cloudprovider_api_budget_wait_seconds`).
#[derive(Debug, Clone)]
pub struct CloudCallMetrics {
    requests: Family<OpLabels, Counter>,
    errors: Family<OpLabels, Counter>,
    duration: Family<OpLabels, Histogram>,
}

impl CloudCallMetrics {
    /// Create the families and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        let metrics = CloudCallMetrics {
            requests: Family::default(),
            errors: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
        };
        registry.register(
            "cloudprovider_api_requests",
            "Cloud provider calls, by operation and result",
            metrics.requests.clone(),
        );
        registry.register(
            "cloudprovider_api_request_errors",
            "Failed cloud provider calls, by operation and error kind",
            metrics.errors.clone(),
        );
        registry.register(
            "cloudprovider_api_request_duration_seconds",
            "Latency of cloud provider calls, by operation",
            metrics.duration.clone(),
        );
        metrics
    }

    /// Calls of `operation` with `result` (`success` or `error`) so far.
    pub fn requests(&self, operation: Operation, result: &str) -> u64 {
        self.requests
            .get_or_create(&labels(&[
                ("operation", operation.as_str()),
                ("result", result),
            ]))
            .get()
    }
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn labels(pairs: &[(&str, &str)]) -> OpLabels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl ProviderInterceptor for CloudCallMetrics {
    fn after_call(&self, call: &CallInfo<'_>, elapsed: Duration, outcome: Result<(), &CloudError>) {
        let op = call.operation.as_str();
        let result = if outcome.is_ok() { "success" } else { "error" };
        self.requests
            .get_or_create(&labels(&[("operation", op), ("result", result)]))
            .inc();
        self.duration
            .get_or_create(&labels(&[("operation", op)]))
            .observe(elapsed.as_secs_f64());
        if let Err(err) = outcome {
            self.errors
                .get_or_create(&labels(&[("operation", op), ("kind", err.kind().as_str())]))
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    fn call(op: Operation) -> CallInfo<'static> {
        CallInfo::new(op, "n1")
    }

    #[test]
    fn validation() {
        assert!(CloudBudget::default().validate().is_ok());
        assert!(CloudBudget::unlimited().validate().is_ok());
        assert!(matches!(
            CloudBudget::default().with_qps(-1.0).validate(),
            Err(BudgetError::InvalidQps { .. })
        ));
        assert!(matches!(
            CloudBudget::default().with_burst(0).validate(),
            Err(BudgetError::ZeroBurst { .. })
        ));
        for name in ["nope", "instance-metadata", "initialize"] {
            let mut budget = CloudBudget::default();
            budget
                .operations
                .insert(name.to_owned(), OperationBudget { qps: 1.0, burst: 1 });
            let err = budget.validate().unwrap_err();
            assert!(
                err.to_string().contains(&format!(
                    "unknown operation \"{name}\"; known operations: get-load-balancer, create"
                )),
                "{err}"
            );
        }
        assert!(
            CloudBudget::default()
                .with_operation(Operation::EnsureLoadBalancer, 1.0, 1)
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn config_file_shape() {
        let budget: CloudBudget = serde_json::from_str(
            r#"{"qps": 5, "operations": {"list-routes": {"qps": 0.1, "burst": 1}}}"#,
        )
        .unwrap();
        assert_eq!(budget.burst, 100);
        assert_eq!(budget.operations[Operation::ListRoutes.as_str()].burst, 1);
        assert!(serde_json::from_str::<CloudBudget>(r#"{"qsp": 5}"#).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn calls_wait_for_budget_instead_of_failing() {
        let limiter = RateLimitInterceptor::new(
            &CloudBudget::default().with_qps(10.0).with_burst(2),
            CancellationToken::new(),
        )
        .unwrap();
        let start = Instant::now();
        for _ in 0..12 {
            limiter
                .before_call(&call(Operation::InstanceExists))
                .await
                .unwrap();
        }
        // 2 immediately, then 10 more at 10/s.
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn operation_limits_stack_with_provider_limit() {
        let budget = CloudBudget::default()
            .with_qps(100.0)
            .with_burst(100)
            .with_operation(Operation::ListRoutes, 1.0, 1);
        let limiter = RateLimitInterceptor::new(&budget, CancellationToken::new()).unwrap();
        let start = Instant::now();
        for _ in 0..3 {
            limiter
                .before_call(&call(Operation::ListRoutes))
                .await
                .unwrap();
        }
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        let start = Instant::now();
        limiter
            .before_call(&call(Operation::InstanceExists))
            .await
            .unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "other operations are not slowed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_call_respects_shutdown() {
        let token = CancellationToken::new();
        let limiter = RateLimitInterceptor::new(
            &CloudBudget::default().with_qps(0.01).with_burst(1),
            token.clone(),
        )
        .unwrap();
        limiter
            .before_call(&call(Operation::InstanceExists))
            .await
            .unwrap();
        let cancel = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            token.cancel();
        };
        let info = call(Operation::InstanceExists);
        let (result, ()) = tokio::join!(limiter.before_call(&info), cancel);
        assert!(result.unwrap_err().to_string().contains("shutting down"));
    }

    #[tokio::test(start_paused = true)]
    async fn budget_waits_are_observed() {
        let registry = SharedRegistry::new();
        let limiter = RateLimitInterceptor::new(
            &CloudBudget::default().with_qps(1.0).with_burst(1),
            CancellationToken::new(),
        )
        .unwrap()
        .with_metrics(&registry);
        for _ in 0..3 {
            limiter
                .before_call(&call(Operation::ListRoutes))
                .await
                .unwrap();
        }
        let text = registry.encode();
        let op = Operation::ListRoutes;
        assert!(
            text.contains(&format!(
                r#"cloudprovider_api_budget_wait_seconds_count{{operation="{op}"}} 3"#
            )),
            "{text}"
        );
        // one after another: waited 0 s, 1 s and 1 s
        assert!(
            text.contains(&format!(
                r#"cloudprovider_api_budget_wait_seconds_sum{{operation="{op}"}} 2.0"#
            )),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unlimited_never_waits() {
        let limiter =
            RateLimitInterceptor::new(&CloudBudget::unlimited(), CancellationToken::new()).unwrap();
        let start = Instant::now();
        for _ in 0..10_000 {
            limiter
                .before_call(&call(Operation::InstanceMetadata))
                .await
                .unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[test]
    fn metrics_by_operation_result_and_kind() {
        let registry = SharedRegistry::new();
        let m = CloudCallMetrics::register(&registry);
        m.after_call(
            &call(Operation::EnsureLoadBalancer),
            Duration::from_millis(5),
            Ok(()),
        );
        m.after_call(
            &call(Operation::EnsureLoadBalancer),
            Duration::from_millis(5),
            Err(&CloudError::retry("x", Duration::from_secs(1))),
        );
        let text = registry.encode();
        let op = Operation::EnsureLoadBalancer;
        for line in [
            format!(r#"cloudprovider_api_requests_total{{operation="{op}",result="success"}} 1"#),
            format!(r#"cloudprovider_api_requests_total{{operation="{op}",result="error"}} 1"#),
            format!(r#"cloudprovider_api_request_errors_total{{operation="{op}",kind="retry"}} 1"#),
            format!(r#"cloudprovider_api_request_duration_seconds_count{{operation="{op}"}} 2"#),
        ] {
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert_eq!(m.requests(Operation::EnsureLoadBalancer, "success"), 1);
    }
}
