//! [`CloudCallMetrics`]: calls, errors and latency of every cloud call, by operation.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::error::CloudError;
use crate::intercept::{CallInfo, ProviderInterceptor};
use crate::runtime::metrics::{Labels, SharedRegistry, labels};

/// Per-operation cloud-call metrics (an SDK addition; the Go framework has none):
///
/// - `cloudprovider_api_requests_total{operation, result}` (`result` = `success` or `error`);
/// - `cloudprovider_api_request_errors_total{operation, kind}` (`kind` from [`ErrorKind::as_str`](crate::ErrorKind::as_str));
/// - `cloudprovider_api_request_duration_seconds{operation}` (histogram, 1 ms to about 65 s), measured from the
///   start of the call through every interceptor before it (so including any wait for budget when the
///   [`RateLimitInterceptor`](super::RateLimitInterceptor) comes first; that wait alone is
///   [`RateLimitInterceptor::with_metrics`](super::RateLimitInterceptor::with_metrics)'
///   `cloudprovider_api_budget_wait_seconds`).
#[derive(Debug, Clone)]
pub struct CloudCallMetrics {
    requests: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    duration: Family<Labels, Histogram>,
}

impl CloudCallMetrics {
    /// Create the families and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        CloudCallMetrics {
            requests: registry.registered(
                "cloudprovider_api_requests",
                "Cloud provider calls, by operation and result",
                Family::default(),
            ),
            errors: registry.registered(
                "cloudprovider_api_request_errors",
                "Failed cloud provider calls, by operation and error kind",
                Family::default(),
            ),
            duration: registry.registered(
                "cloudprovider_api_request_duration_seconds",
                "Latency of cloud provider calls, by operation",
                Family::new_with_constructor(latency_histogram),
            ),
        }
    }
}

pub(super) fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
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
    use crate::intercept::Operation;

    impl CloudCallMetrics {
        fn requests(&self, operation: Operation, result: &str) -> u64 {
            let labels = labels(&[("operation", operation.as_str()), ("result", result)]);
            self.requests.get_or_create(&labels).get()
        }
    }

    fn call(op: Operation) -> CallInfo<'static> {
        CallInfo::new(op, "n1")
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
