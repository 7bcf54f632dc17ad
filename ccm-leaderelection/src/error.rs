//! The crate's error type.

use std::time::Duration;

/// Everything that can go wrong while configuring or running leader election.
///
/// Configuration problems are reported by
/// [`LeaderElectorBuilder::build`](crate::LeaderElectorBuilder::build). API failures inside the
/// election loop are retried and only logged; their variants give the log lines precise messages.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lease duration does not exceed the renew deadline.
    #[error(
        "invalid leader election configuration: the lease duration ({lease_duration:?}) must be \
         greater than the renew deadline ({renew_deadline:?}); raise --leader-elect-lease-duration \
         or lower --leader-elect-renew-deadline"
    )]
    LeaseDurationNotAboveRenewDeadline {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },

    /// The renew deadline does not exceed the jittered retry period.
    #[error(
        "invalid leader election configuration: the renew deadline ({renew_deadline:?}) must be \
         greater than 1.2 × the retry period ({retry_period:?} × 1.2 = {minimum:?}); raise \
         --leader-elect-renew-deadline or lower --leader-elect-retry-period"
    )]
    RenewDeadlineNotAboveRetryPeriod {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
        /// The jittered retry period the renew deadline must exceed.
        minimum: Duration,
    },

    /// A duration setting is below one second.
    #[error("invalid leader election configuration: the {setting} ({value:?}) must be at least 1s")]
    DurationTooShort {
        /// The setting, e.g. `lease duration`.
        setting: &'static str,
        /// The configured value.
        value: Duration,
    },

    /// The lease duration does not fit the Lease's `leaseDurationSeconds` (an `int32`).
    #[error(
        "invalid leader election configuration: the lease duration ({value:?}) does not fit in \
         the Lease's leaseDurationSeconds field (at most {max} seconds)"
    )]
    LeaseDurationTooLong {
        /// The configured value.
        value: Duration,
        /// The largest accepted number of seconds.
        max: i32,
    },

    /// The per-request API timeout is zero or not below the renew deadline.
    #[error(
        "invalid leader election configuration: the API request timeout ({api_timeout:?}) must be \
         greater than zero and less than the renew deadline ({renew_deadline:?})"
    )]
    InvalidApiTimeout {
        /// The configured timeout.
        api_timeout: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },

    /// The Lease name or namespace is not a valid Kubernetes object name.
    #[error("invalid leader election lease {what} {value:?}: {reason}")]
    InvalidLeaseName {
        /// `name` or `namespace`.
        what: &'static str,
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// The holder identity is empty.
    #[error(
        "invalid leader election configuration: the identity must not be empty; pass an explicit \
         identity or use default_identity()"
    )]
    EmptyIdentity,

    /// The hostname needed for the default identity could not be read.
    #[error(
        "cannot determine the hostname for the leader election identity: {0}; set POD_NAME or \
         pass an explicit identity"
    )]
    Hostname(#[source] std::io::Error),

    /// A request to the Kubernetes API failed.
    #[error("failed to {operation} lease {lease}: {source}")]
    Api {
        /// What was attempted (`get`, `create`, `update`).
        operation: &'static str,
        /// `namespace/name` of the Lease.
        lease: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },

    /// A request to the Kubernetes API did not finish within the configured API timeout.
    #[error("failed to {operation} lease {lease}: no answer from the apiserver within {timeout:?}")]
    Timeout {
        /// What was attempted (`get`, `create`, `update`).
        operation: &'static str,
        /// `namespace/name` of the Lease.
        lease: String,
        /// The timeout that expired.
        timeout: Duration,
    },

    /// The health check failed: this replica believes it leads but has not renewed for too long.
    #[error(
        "failed election to renew leadership on lease {lease}: the last successful renewal was \
         {elapsed:?} ago, more than the lease duration plus tolerance ({limit:?}); the election \
         loop is stuck and the process should be restarted"
    )]
    RenewalOverdue {
        /// `namespace/name` of the Lease.
        lease: String,
        /// Time since the last successful renewal.
        elapsed: Duration,
        /// Lease duration plus the configured tolerance.
        limit: Duration,
    },

    /// The election task panicked or was aborted.
    #[error("the leader election task ended abnormally: {0}")]
    Task(#[source] tokio::task::JoinError),
}
