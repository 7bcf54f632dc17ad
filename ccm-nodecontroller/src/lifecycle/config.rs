//! The cloud node lifecycle controller's settings: Go's flag defaults, the SDK's safety rules, and their
//! validation.

use std::time::Duration;

use ccm_core::names;
use ccm_core::settings::InvalidSetting;

use super::NodeOwnership;
use crate::DEFAULT_CLOUD_CALL_TIMEOUT;
use crate::error::Error;

/// Default of `--node-monitor-period` (Go: 5 s).
pub const DEFAULT_NODE_MONITOR_PERIOD: Duration = Duration::from_secs(5);
/// Default number of nodes checked at once (Go checks one at a time).
pub const DEFAULT_CONCURRENCY: usize = 10;

/// Settings of the cloud node lifecycle controller. `Default` gives the Go reference's flag defaults plus the
/// safety rules described on [`NodeOwnership`] and [`Config::protect_initializing_nodes`].
///
/// ```
/// use std::time::Duration;
/// use ccm_nodecontroller::{CloudNodeLifecycleConfig, NodeOwnership};
///
/// let go_compatible = CloudNodeLifecycleConfig::default()
///     .with_ownership(NodeOwnership::AllNodes)
///     .with_protect_initializing_nodes(false)
///     .with_concurrency(1);
/// assert_eq!(go_compatible.node_monitor_period, Duration::from_secs(5));
/// ```
///
/// Every field has a setter `with_<field>` (`getset`); `Default` (`educe`) takes the default each field names.
#[derive(Debug, Clone, PartialEq, Eq, getset::WithSetters, educe::Educe)]
#[educe(Default)]
#[getset(set_with = "pub")]
#[non_exhaustive]
pub struct Config {
    /// `--node-monitor-period` (default 5 s, must be > 0): the pause between two passes over the nodes.
    #[educe(Default(expression = DEFAULT_NODE_MONITOR_PERIOD))]
    pub node_monitor_period: Duration,
    /// Nodes checked at once (default 10, must be > 0; Go: 1).
    #[educe(Default(expression = DEFAULT_CONCURRENCY))]
    pub concurrency: usize,
    /// Which nodes are handled (default [`NodeOwnership::ProviderIdPrefix`]).
    pub ownership: NodeOwnership,
    /// Leave nodes that still carry `node.cloudprovider.kubernetes.io/uninitialized` alone (default true; Go:
    /// false, so a node could be deleted before it was ever initialized).
    #[educe(Default = true)]
    pub protect_initializing_nodes: bool,
    /// The longest a single cloud call may take (default 30 s, must be > 0).
    #[educe(Default(expression = DEFAULT_CLOUD_CALL_TIMEOUT))]
    pub cloud_call_timeout: Duration,
}

impl Config {
    /// Every rule the settings break, in field order: the period, the concurrency and the cloud call timeout
    /// must be > 0.
    pub fn violations(&self) -> Vec<InvalidSetting> {
        [
            InvalidSetting::non_zero("node_monitor_period", self.node_monitor_period),
            InvalidSetting::positive("concurrency", self.concurrency),
            InvalidSetting::non_zero("cloud_call_timeout", self.cloud_call_timeout),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// Check the settings: the first of [`violations`](Self::violations).
    pub fn validate(&self) -> Result<(), Error> {
        match self.violations().into_iter().next() {
            Some(setting) => Err(Error::InvalidConfig {
                controller: names::controllers::CLOUD_NODE_LIFECYCLE,
                setting,
            }),
            None => Ok(()),
        }
    }
}
