//! Runtime primitives shared by every controller: informers (shared caches), a rate-limited work queue,
//! Events, metrics, the [`Controller`] builder that assembles them, the loops of controllers without keys
//! ([`every`](every::every) for periodic passes, [`debounce`] for debounced ones), and the controller interface
//! the runtime (`ccm-app`) drives.

pub mod builder;
pub mod controller;
pub mod debounce;
pub mod events;
pub mod every;
pub mod informer;
pub mod metrics;
pub mod prelude;
pub mod ratelimit;
pub mod workers;
pub mod workqueue;

pub use builder::Controller;
