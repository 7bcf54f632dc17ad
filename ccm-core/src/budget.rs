//! The cloud-call budget: a client-side rate limit on provider calls that adapts to the cloud, and per-operation
//! call metrics.
//!
//! Both are [`ProviderInterceptor`](crate::intercept::ProviderInterceptor)s for
//! [`InterceptedProvider`](crate::intercept::InterceptedProvider): they apply to every controller's provider calls.
//!
//! - [`RateLimitInterceptor`] lets calls go at once while the cloud accepts them. When the cloud throttles
//!   ([`CloudError::Throttled`](crate::CloudError::Throttled), or a call [times out](crate::CloudError::Timeout))
//!   it limits the rate to what the cloud accepted ([`adaptive`]: AIMD), holds the throttled call's operation
//!   class until the cloud's retry-after, and recovers gradually. An explicit hard cap (a token bucket for the
//!   whole provider) and per-operation buckets apply on top. A call waits instead of failing; waiting calls are
//!   served by [`CallPriority`] (new-node initialization first, periodic sweeps last); a waiting call gives up
//!   with an error when the shutdown token is cancelled, and the calls given up are reported in one log line.
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
//! // adaptive, with a hard cap of 20 calls/s and 2/s for load-balancer creation
//! let budget = CloudBudget::default().with_qps(20.0).with_burst(40).with_operation(Operation::EnsureLoadBalancer, 2.0, 4);
//! let cloud = InterceptedProvider::new(cloud)
//!     .with_interceptor(
//!         RateLimitInterceptor::new(&budget, CancellationToken::new()).unwrap().with_metrics(&registry),
//!     )
//!     .with_interceptor(CloudCallMetrics::register(&registry));
//! # }
//! ```

pub mod adaptive;
mod config;
mod interceptor;
mod metrics;
mod priority;
mod scheduler;

pub use adaptive::AimdConfig;
pub use config::{BudgetError, CloudBudget, OperationBudget};
pub use interceptor::{Abandoned, RateLimitInterceptor, is_abandoned};
pub use metrics::CloudCallMetrics;
pub use priority::CallPriority;
