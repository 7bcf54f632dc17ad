//! The crate's error type.

use ccm_core::CloudError;

/// What can go wrong in the service controller.
///
/// The messages of the sync errors follow the Go controller's (they end up in the `SyncLoadBalancerFailed`
/// event as `Error syncing load balancer: <message>`). Cloud errors keep their [`CloudError`] kind, so
/// [`ccm_core::find_cloud_error`] and [`CloudError::retry_after`] see through this type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting breaks a rule of [`Config::validate`](crate::Config::validate).
    #[error("invalid service controller configuration: {0}")]
    InvalidConfig(ccm_core::settings::InvalidSetting),
    /// The cloud provider has no load-balancer support.
    #[error(
        "the cloud provider {provider:?} does not support external load balancers; disable the service controller or use a provider with load balancers"
    )]
    LoadBalancersUnsupported {
        /// The provider's name.
        provider: String,
    },
    /// A queue key is not `namespace/name`.
    #[error("invalid service key {0:?}: expected namespace/name")]
    InvalidKey(String),
    /// `GetLoadBalancer` failed on the cleanup path.
    #[error("failed to check if load balancer exists before cleanup: {0}")]
    CheckBeforeCleanup(#[source] CloudError),
    /// `EnsureLoadBalancerDeleted` failed.
    #[error("failed to delete load balancer: {0}")]
    Delete(#[source] CloudError),
    /// `EnsureLoadBalancer` failed.
    #[error("failed to ensure load balancer: {0}")]
    Ensure(#[source] CloudError),
    /// `EnsureLoadBalancer` succeeded with a status that has no ingress entry (Go: a nil status).
    #[error(
        "service status returned by EnsureLoadBalancer is nil: the provider returned no ingress entry; it must return at least one, or a retry error while the load balancer is being built"
    )]
    EmptyStatus,
    /// `UpdateLoadBalancer` failed (node sync).
    #[error("failed to update load balancer hosts: {0}")]
    UpdateHosts(#[source] CloudError),
    /// Adding the cleanup finalizer failed.
    #[error("failed to add load balancer cleanup finalizer: {0}")]
    AddFinalizer(#[source] kube::Error),
    /// Removing the cleanup finalizer failed.
    #[error("failed to remove load balancer cleanup finalizer: {0}")]
    RemoveFinalizer(#[source] kube::Error),
    /// Writing `status.loadBalancer` failed.
    #[error("failed to update load balancer status: {0}")]
    PatchStatus(#[source] kube::Error),
    /// A finalizer patch kept conflicting with concurrent writers.
    #[error(
        "gave up changing the finalizers of service {key} after {attempts} conflicting attempts; it will be retried"
    )]
    FinalizerConflict {
        /// `namespace/name`.
        key: String,
        /// How many patches were tried.
        attempts: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn cloud_error_kinds_survive() {
        let err = Error::Ensure(CloudError::retry("building", Duration::from_secs(3)));
        let cloud = ccm_core::find_cloud_error(&err).unwrap();
        assert_eq!(cloud.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(
            err.to_string(),
            format!("failed to ensure load balancer: {cloud}")
        );
        assert!(
            Error::EmptyStatus
                .to_string()
                .starts_with("service status returned by EnsureLoadBalancer is nil")
        );
    }
}
