//! client-go compatible leader election on a `coordination.k8s.io/v1` Lease.
//!
//! This crate implements the algorithm of client-go's `tools/leaderelection` (the one the Go
//! cloud controller manager runs) so that Rust and Go replicas can share one Lease:
//!
//! * expiry is judged on the **local monotonic clock** from the last observed change of the lease
//!   record, never by comparing the remote `renewTime` with the local wall clock;
//! * every write is optimistic (a `replace` carrying the `resourceVersion`); a 409 means another
//!   replica won the race, not an error;
//! * the same fields are written the same way (`holderIdentity`, `leaseDurationSeconds`,
//!   `acquireTime`, `renewTime`, `leaseTransitions`), fields it does not manage are preserved;
//! * candidates also watch the Lease (one object, by field selector) and try the moment the lease
//!   they observed runs out, or at once when it is released: failover one lease duration after the
//!   dead leader's last renewal, not up to two jittered retry periods later (needs `list` and
//!   `watch` on the Lease; without them the candidates poll like client-go's);
//! * the leader renews every retry period and steps down when it cannot renew within the renew
//!   deadline, every API call being bounded by a timeout;
//! * the `LeaderElection` Events (`<identity> became leader` / `stopped leading`) go through the
//!   kit's recorder (`ccm_core::runtime::events`);
//! * on cancellation the lease is released (empty holder, `leaseDurationSeconds: 1`) so that
//!   failover takes about one retry period.
//!
//! ```no_run
//! use ccm_leaderelection::{LeaderElectionMetrics, LeaderElector, StepDownReason};
//! use prometheus_client::registry::Registry;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let mut registry = Registry::default();
//! let metrics = LeaderElectionMetrics::register(&mut registry);
//! let token = CancellationToken::new();
//! let handle = LeaderElector::builder(client, "kube-system", "cloud-controller-manager")
//!     .metrics(metrics)
//!     .build()?
//!     .run(token.child_token());
//! let health = handle.health(); // for the admin server's /healthz
//! # drop(health);
//! if handle.wait_leading().await.is_ok() {
//!     // run the controllers until leadership is lost
//!     match handle.lost().await {
//!         StepDownReason::Cancelled => {}
//!         reason => eprintln!("leaderelection lost: {reason}"),
//!     }
//! }
//! token.cancel();
//! handle.join().await?;
//! # Ok(())
//! # }
//! ```
//!
//! See `docs/leader-election.md` in the repository for the full semantics, flag mapping and the
//! migration from a Go CCM.
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

mod config;
mod election;
mod elector;
mod error;
mod handle;
mod metrics;

pub use config::{
    DEFAULT_HEALTH_TOLERANCE, DEFAULT_LEASE_DURATION, DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE,
    DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR, violations,
};
pub use elector::{DEFAULT_COMPONENT, EVENT_REASON, LeaderElector, LeaderElectorBuilder};
pub use error::Error;
pub use handle::{HEALTH_CHECK_NAME, LeaderHandle, LeaderHealth, LeaderState, StepDownReason};
pub use metrics::LeaderElectionMetrics;

/// The environment variable holding the pod name (set it with the downward API).
pub const POD_NAME_ENV: &str = "POD_NAME";

/// The default holder identity: `<POD_NAME>_<uuid>` if the `POD_NAME` environment variable is set
/// and not empty, else `<hostname>_<uuid>` (the reference CCM's `<hostname>_<uuid>`). The random
/// suffix keeps identities unique across restarts of the same pod.
///
/// ```
/// let identity = ccm_leaderelection::default_identity()?;
/// assert!(identity.contains('_'));
/// # Ok::<(), ccm_leaderelection::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::Hostname`] if `POD_NAME` is unset and the hostname cannot be read.
pub fn default_identity() -> Result<String, Error> {
    identity_from(std::env::var(POD_NAME_ENV).ok().as_deref(), hostname::get)
}

fn identity_from(
    pod_name: Option<&str>,
    hostname: impl FnOnce() -> std::io::Result<std::ffi::OsString>,
) -> Result<String, Error> {
    let base = match pod_name.map(str::trim).filter(|p| !p.is_empty()) {
        Some(pod) => pod.to_owned(),
        None => hostname()
            .map_err(Error::Hostname)?
            .to_string_lossy()
            .into_owned(),
    };
    Ok(format!("{base}_{}", uuid::Uuid::new_v4()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_prefers_the_pod_name() {
        let id = identity_from(Some("ccm-7d9f-abcde"), || panic!("hostname not needed")).unwrap();
        let (base, suffix) = id.split_once('_').expect("separator");
        assert_eq!(base, "ccm-7d9f-abcde");
        assert!(uuid::Uuid::parse_str(suffix).is_ok(), "{suffix}");
    }

    #[test]
    fn identity_falls_back_to_the_hostname() {
        let id = identity_from(Some("  "), || Ok("node-1".into())).unwrap();
        assert!(id.starts_with("node-1_"), "{id}");
        let id = identity_from(None, || Ok("node-2".into())).unwrap();
        assert!(id.starts_with("node-2_"), "{id}");
        let other = identity_from(None, || Ok("node-2".into())).unwrap();
        assert_ne!(id, other, "identities are unique per call");
    }

    #[test]
    fn identity_reports_hostname_errors() {
        let err = identity_from(None, || Err(std::io::Error::other("boom"))).unwrap_err();
        assert!(matches!(err, Error::Hostname(_)));
        assert!(err.to_string().contains("set POD_NAME"), "{err}");
    }
}
