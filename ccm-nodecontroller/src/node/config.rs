//! The cloud node controller's settings: Go's flag defaults, and their validation.

use std::time::Duration;

use ccm_core::names;
use ccm_core::settings::InvalidSetting;

use crate::DEFAULT_CLOUD_CALL_TIMEOUT;
use crate::error::Error;
use crate::prefetch::DEFAULT_INITIALIZATION_BATCH;

/// Default of `--node-status-update-frequency` (Go: 5 minutes).
pub const DEFAULT_NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(5 * 60);
/// Default of `--concurrent-node-syncs` (Go: 1).
pub const DEFAULT_CONCURRENT_NODE_SYNCS: usize = 1;

/// Settings of the cloud node controller. `Default` gives the Go reference's flag defaults.
///
/// ```
/// use std::time::Duration;
/// use ccm_nodecontroller::CloudNodeConfig;
///
/// let config = CloudNodeConfig::default()
///     .with_concurrent_node_syncs(10)
///     .with_node_status_update_frequency(Duration::from_secs(60));
/// assert_eq!(config.status_update_workers(), 10);
/// assert!(config.validate().is_ok());
/// ```
///
/// Every field has a setter `with_<field>` (`getset`); `Default` (`educe`) takes the default each field names.
#[derive(Debug, Clone, PartialEq, Eq, getset::WithSetters, educe::Educe)]
#[educe(Default)]
#[getset(set_with = "pub")]
#[non_exhaustive]
pub struct Config {
    /// `--concurrent-node-syncs` (default 1, must be > 0): workers initializing nodes.
    #[educe(Default(expression = DEFAULT_CONCURRENT_NODE_SYNCS))]
    pub concurrent_node_syncs: usize,
    /// `--concurrent-node-status-updates` (default 0 = use `concurrent_node_syncs`): nodes whose addresses are
    /// refreshed at once by the periodic sync.
    pub concurrent_node_status_updates: usize,
    /// `--node-status-update-frequency` (default 5 minutes, must be > 0): the period of the address sync.
    #[educe(Default(expression = DEFAULT_NODE_STATUS_UPDATE_FREQUENCY))]
    pub node_status_update_frequency: Duration,
    /// The longest a single cloud call may take before it counts as failed (default 30 s, must be > 0). Go has
    /// no limit, so one hung call blocks a worker forever.
    #[educe(Default(expression = DEFAULT_CLOUD_CALL_TIMEOUT))]
    pub cloud_call_timeout: Duration,
    /// The most nodes waiting for initialization whose metadata one bulk call asks about, with a provider that
    /// answers bulk calls natively (default [`DEFAULT_INITIALIZATION_BATCH`]; 0 = off, one call per node as in
    /// Go; see [`crate::prefetch`]).
    #[educe(Default(expression = DEFAULT_INITIALIZATION_BATCH))]
    pub initialization_batch: usize,
}

impl Config {
    /// How many nodes the periodic address sync handles at once.
    pub fn status_update_workers(&self) -> usize {
        match self.concurrent_node_status_updates {
            0 => self.concurrent_node_syncs,
            workers => workers,
        }
    }

    /// Every rule the settings break, in field order (Go: `--concurrent-node-syncs` must be > 0; the periods
    /// must be > 0).
    pub fn violations(&self) -> Vec<InvalidSetting> {
        [
            InvalidSetting::positive("concurrent_node_syncs", self.concurrent_node_syncs),
            InvalidSetting::non_zero(
                "node_status_update_frequency",
                self.node_status_update_frequency,
            ),
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
                controller: names::controllers::CLOUD_NODE,
                setting,
            }),
            None => Ok(()),
        }
    }
}
