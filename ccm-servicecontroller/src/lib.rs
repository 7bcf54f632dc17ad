//! # ccm-servicecontroller
//!
//! The service controller of a Kubernetes cloud controller manager: it creates, updates and deletes cloud load
//! balancers for `type: LoadBalancer` Services through the provider's [`ccm_core::LoadBalancer`], keeps their
//! backend hosts in line with the cluster's nodes, and writes `status.loadBalancer`. It behaves like Go's
//! `k8s.io/cloud-provider/controllers/service` (same finalizer, events, metrics, queue names, retry rules and
//! node predicates) and adds, as [`Config`] options:
//!
//! - batching of node changes: a pass starts once node changes have settled for
//!   [`Config::node_sync_debounce`] (100 ms; `0` starts it at once when the loop is idle), changes during a pass
//!   share the next one, and each load balancer gets the node set of its turn, so it gets at most one host update
//!   per pass instead of one pass over every load balancer per node event;
//! - an optional, jittered periodic re-ensure that repairs load balancers changed behind the controller's back
//!   ([`Config::periodic_reensure`]);
//! - claiming a named `loadBalancerClass` in addition to, or instead of, class-less Services
//!   ([`Config::load_balancer_class`], [`Config::class_less_services`]);
//! - an optional wider field list for "does this Service change need a sync"
//!   ([`Config::extended_update_fields`]).
//!
//! The decision logic is in [`predicates`] (pure functions; the retry decision is the controller kit's, `ccm_core::runtime::workers`); `docs/service-controller.md` in the
//! repository describes the behaviour, options, metrics, events and every difference from Go.
//!
//! ```no_run
//! use ccm_core::runtime::controller::ControllerDescriptor;
//! use ccm_servicecontroller::{descriptor, Config};
//!
//! let service: ControllerDescriptor = descriptor(Config::default().with_concurrent_service_syncs(2));
//! assert_eq!(service.name, "service-lb-controller");
//! assert_eq!(service.short_name(), "service");
//! ```
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

mod config;
mod controller;
mod error;
mod hosts;
mod locks;
pub mod metrics;
pub mod patches;
mod plan;
pub mod predicates;
mod state;
pub mod takeover;

use ccm_core::intercept::Capability;
use ccm_core::names;
use ccm_core::runtime::controller::{ControllerContext, ControllerDescriptor};

pub use config::{Config, Takeover};
pub use controller::ServiceController;
pub use error::Error;

/// The descriptor the runtime uses to start the service controller (`service-lb-controller`, alias `service`).
///
/// Its init function fails on an invalid `config`, and returns `Ok(None)` (logged) when the provider has no
/// load-balancer support, so the rest of the CCM keeps running, as in Go.
///
/// ```no_run
/// use std::time::Duration;
/// use ccm_servicecontroller::{descriptor, Config};
///
/// let d = descriptor(Config::default().with_periodic_reensure(Some(Duration::from_secs(1800))));
/// assert_eq!(d.aliases, vec!["service".to_string()]);
/// ```
pub fn descriptor(config: Config) -> ControllerDescriptor {
    ControllerDescriptor::build(
        names::controllers::SERVICE_LB,
        move |ctx: &ControllerContext| {
            config.validate()?;
            ctx.require(&[Capability::LoadBalancer])?;
            Ok(ServiceController::new(ctx, config.clone())?)
        },
    )
    .with_aliases(&[names::controllers::SERVICE_LB_ALIAS])
}

#[cfg(test)]
mod tests {
    mod retry;
}
