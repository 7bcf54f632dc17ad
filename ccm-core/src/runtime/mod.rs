//! Runtime primitives shared by every controller: informers (shared caches), a rate-limited work queue,
//! Events, metrics, and the controller interface the runtime (`ccm-app`) drives.

pub mod controller;
pub mod events;
pub mod informer;
pub mod metrics;
pub mod ratelimit;
pub mod workers;
pub mod workqueue;
