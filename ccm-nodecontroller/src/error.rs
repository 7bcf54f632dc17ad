//! The crate's error type.

use ccm_core::intercept::Operation;
use ccm_core::{CloudError, ErrorKind};

use crate::addresses::NodeIpError;

/// Why a node controller could not be built, or why one node could not be synced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is out of range.
    #[error("invalid {controller} configuration: {setting}")]
    InvalidConfig {
        /// The controller (`cloud-node-controller` or `cloud-node-lifecycle-controller`).
        controller: &'static str,
        /// Which setting breaks which rule.
        setting: ccm_core::settings::InvalidSetting,
    },
    /// The provider has neither InstancesV2 nor Instances (Go: "cloud provider does not support instances").
    #[error(
        "cloud provider {provider:?} does not support instances: the {controller} needs InstancesV2 or Instances \
         (disable the controller with --controllers=-{controller} if this is intended)"
    )]
    InstancesUnsupported {
        /// The provider's name.
        provider: String,
        /// The controller that cannot run.
        controller: &'static str,
    },
    /// A cloud call failed.
    #[error("cloud provider call {operation} for node {node} failed: {source}")]
    Cloud {
        /// The node.
        node: String,
        /// The provider operation that failed (for example [`Operation::InstanceMetadata`], shown as
        /// `instance-metadata-by-provider-id`). When the V1 API falls back from a by-providerID call to a by-name
        /// call, the by-name one ([`Operation::NodeAddresses`], [`Operation::InstanceType`],
        /// [`Operation::GetZoneByNodeName`]).
        operation: Operation,
        /// The provider's error; its [`kind`](CloudError::kind) tells timeouts, throttling and so on apart.
        #[source]
        source: CloudError,
    },
    /// A bulk cloud call (one call for many nodes) failed as a whole.
    #[error(
        "cloud provider bulk call {operation} for {nodes} nodes failed: {source}; the nodes are checked again \
         next period"
    )]
    BulkCloud {
        /// How many nodes the call was about.
        nodes: usize,
        /// The provider operation (for example [`Operation::InstanceMetadataBulk`]).
        operation: Operation,
        /// The provider's error.
        #[source]
        source: CloudError,
    },
    /// The provider returned metadata without a providerID for a node that has none (Go 1.30 behaviour).
    #[error(
        "cloud provider does not set node provider ID for node {node}: the node stays tainted until the \
         provider's instance metadata includes one (or the kubelet sets --provider-id)"
    )]
    MissingProviderId {
        /// The node.
        node: String,
    },
    /// The provided-node-ip annotation is invalid or matches no cloud address.
    #[error("provided node ip for node {node} is not valid: {source}")]
    InvalidNodeIp {
        /// The node.
        node: String,
        /// What is wrong with it.
        #[source]
        source: NodeIpError,
    },
    /// A Kubernetes API call failed.
    #[error("failed to {action} node {node}: {source}")]
    Kube {
        /// The node.
        node: String,
        /// What was being done (for example `patch the spec of`).
        action: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Every guarded patch was rejected (the node kept changing, or the API server refused the change).
    #[error(
        "failed to {action} node {node}: rejected {attempts} times, last with: {source}; it will be retried with \
         backoff"
    )]
    Contended {
        /// The node.
        node: String,
        /// What was being done.
        action: &'static str,
        /// How many patches were tried.
        attempts: u32,
        /// The last rejection (409 conflict, or 422 when a `test` failed or the change is invalid).
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The kind of the cloud error behind this error, if it is one.
    pub fn cloud_kind(&self) -> Option<ErrorKind> {
        match self {
            Error::Cloud { source, .. } | Error::BulkCloud { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}
