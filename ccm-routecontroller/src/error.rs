//! The crate's error type.

use std::time::Duration;

use ccm_core::CloudError;

/// Everything that can go wrong in the route controller: invalid configuration at startup, and failures of a
/// reconcile pass (which the controller logs and retries with backoff).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `--cluster-cidr` is empty although routes are configured.
    #[error(
        "the route controller needs --cluster-cidr (for example 10.244.0.0/16, or a dual-stack pair such as \
         10.244.0.0/16,fd00:10:244::/56); set it, or disable routes with --configure-cloud-routes=false"
    )]
    MissingClusterCidr,
    /// One entry of `--cluster-cidr` is not a CIDR.
    #[error(
        "invalid --cluster-cidr entry {value:?}: {reason}; use CIDR notation such as 10.244.0.0/16 or \
         fd00:10:244::/56"
    )]
    InvalidClusterCidr {
        /// The entry as written.
        value: String,
        /// Why it did not parse.
        reason: String,
    },
    /// More than two CIDRs were given.
    #[error(
        "--cluster-cidr has {count} CIDRs but at most 2 are allowed (one IPv4 and one IPv6 for dual-stack)"
    )]
    TooManyClusterCidrs {
        /// How many were given.
        count: usize,
    },
    /// Two CIDRs of the same IP family were given.
    #[error(
        "--cluster-cidr {first} and {second} are of the same IP family; two CIDRs must be a dual-stack pair \
         (one IPv4 and one IPv6)"
    )]
    NotDualStack {
        /// The first CIDR.
        first: String,
        /// The second CIDR.
        second: String,
    },
    /// A duration setting is out of range.
    #[error("invalid route controller setting {setting} = {value:?}: {reason}")]
    InvalidDuration {
        /// The setting (flag) name.
        setting: &'static str,
        /// The value given.
        value: Duration,
        /// What is required.
        reason: &'static str,
    },
    /// The concurrency limit is zero.
    #[error(
        "invalid route controller setting max_concurrent_route_operations = 0: it must be at least 1 \
         (the default is 200)"
    )]
    ZeroConcurrency,
    /// The provider does not implement routes.
    #[error(
        "cloud provider {provider:?} does not support routes; disable the route controller or set \
         --configure-cloud-routes=false"
    )]
    RoutesNotSupported {
        /// The provider's name.
        provider: String,
    },
    /// Listing the cloud's routes failed; the pass is retried with backoff.
    #[error("failed to list routes of cluster {cluster:?} from the cloud provider: {source}")]
    ListRoutes {
        /// `--cluster-name`.
        cluster: String,
        /// The provider's error.
        #[source]
        source: CloudError,
    },
    /// Some route operations or condition writes of a pass failed; the pass is retried with backoff.
    #[error(
        "route reconciliation incomplete: {failed_deletes} route deletions, {failed_creates} route creations \
         and {failed_conditions} NetworkUnavailable condition writes failed (see the logs and Node events); \
         retrying with backoff"
    )]
    Incomplete {
        /// Deletions that failed.
        failed_deletes: usize,
        /// Creations that failed.
        failed_creates: usize,
        /// Condition patches that failed.
        failed_conditions: usize,
    },
    /// Patching the `NetworkUnavailable` condition of a Node failed.
    #[error("failed to patch the NetworkUnavailable condition of node {node:?}: {source}")]
    PatchCondition {
        /// The Node's name.
        node: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}
