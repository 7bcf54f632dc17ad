//! # ccm-routecontroller
//!
//! The route controller of a Kubernetes cloud controller manager (Go: `k8s.io/cloud-provider/controllers/route`,
//! controller name `node-route-controller`, alias `route`):
//!
//! - keeps one cloud route per Node and pod CIDR (`spec.podCIDRs`, or `spec.podCIDR`), created with the Node's UID
//!   as the name hint;
//! - deletes routes inside the cluster CIDRs (`--cluster-cidr`) that are blackholes or belong to no Node's pod
//!   CIDR, and never touches routes outside them;
//! - sets each Node's `NetworkUnavailable` condition: `False`/`RouteCreated` when all its routes exist,
//!   `True`/`NoRouteCreated` otherwise;
//! - emits Warning `FailedToCreateRoute` events on Nodes (component `route_controller`) and counts passes in
//!   `route_controller_route_sync_total`.
//!
//! Unlike the Go default ([`RouteSyncMode::Periodic`]: list every route from the cloud every 10 s, forever), the
//! default [`RouteSyncMode::EventDriven`] reconciles only when Nodes change, 250 ms after the change, retries
//! failures with backoff and repairs drift with a slow full resync. See `docs/route-controller.md`.
//!
//! The decisions are pure functions in [`mod@plan`] (what to delete, create and write) and [`filter`] (which Node
//! changes matter); the kit's [`Debounced`](ccm_core::runtime::debounce::Debounced) decides when passes run;
//! [`RouteController`] does the I/O.
//!
//! ```no_run
//! use ccm_routecontroller::{Config, descriptor};
//!
//! // In a CCM binary: register the descriptor with the runtime, which calls its init function.
//! let route = descriptor(Config::default().with_cluster_cidr("10.244.0.0/16"));
//! assert_eq!(route.name, "node-route-controller");
//! ```
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

pub mod config;
mod controller;
pub mod error;
pub mod filter;
pub mod metrics;
pub mod plan;
mod report;

use ccm_core::intercept::Capability;
use ccm_core::names;
use ccm_core::runtime::controller::{ControllerContext, ControllerDescriptor, NotStarted};

pub use config::{Config, RouteSyncMode, parse_cluster_cidrs};
pub use controller::{QUEUE_KEY, QUEUE_NAME, RouteController};
pub use error::Error;
pub use plan::{RoutePlan, plan};
pub use report::PassReport;

/// The controller descriptor for the runtime: name `node-route-controller`, alias `route`.
///
/// Its init function returns `Ok(None)` (logged) when `configure_cloud_routes` is false or the provider does not
/// support routes, an error when the configuration is invalid (for example an empty or malformed
/// `cluster_cidr`), and the controller otherwise.
///
/// ```no_run
/// use ccm_routecontroller::{Config, RouteSyncMode, descriptor};
///
/// let d = descriptor(Config::default().with_cluster_cidr("10.244.0.0/16").with_sync_mode(RouteSyncMode::Periodic));
/// assert_eq!(d.short_name(), "route");
/// ```
pub fn descriptor(config: Config) -> ControllerDescriptor {
    ControllerDescriptor::build(
        names::controllers::NODE_ROUTE,
        move |ctx: &ControllerContext| {
            if !config.configure_cloud_routes {
                let reason =
                    "--configure-cloud-routes is false: will not configure cloud provider routes";
                return Err(NotStarted(reason.to_owned()).into());
            }
            ctx.require(&[Capability::Routes])?;
            Ok(RouteController::new(ctx, config.clone())?)
        },
    )
    .with_aliases(&[names::controllers::NODE_ROUTE_ALIAS])
}
