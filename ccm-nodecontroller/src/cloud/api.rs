//! Which instance API of the provider the node controllers use: InstancesV2 when the provider has it, otherwise
//! the V1 Instances API (with Zones if the provider has them); neither means the controllers cannot run.

use std::sync::Arc;
use std::time::Duration;

use ccm_core::intercept::{Capability, InterceptedProvider};
use ccm_core::{CloudProvider, Instances, InstancesV2, Zones};

use crate::error::Error;

/// What the node controllers need from the provider: InstancesV2, or else the V1 Instances.
pub(crate) const INSTANCES: [Capability; 2] = [Capability::InstancesV2, Capability::Instances];

/// The provider's instance API the calls go to.
#[derive(Clone)]
pub(crate) enum Api {
    V2(Arc<dyn InstancesV2>),
    V1 {
        instances: Arc<dyn Instances>,
        zones: Option<Arc<dyn Zones>>,
    },
}

/// The instance API of a provider, with a timeout on every call.
#[derive(Clone)]
pub(crate) struct CloudInstances {
    pub(super) api: Api,
    pub(super) provider_name: String,
    /// The limit of every call, for the `Debug` output (the calls are bounded by the kit's interceptor chain).
    timeout: Duration,
}

impl std::fmt::Debug for CloudInstances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudInstances")
            .field("provider", &self.provider_name)
            .field("v2", &self.is_v2())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl CloudInstances {
    /// The instance API `controller` needs: InstancesV2, or else Instances; neither is
    /// [`Error::InstancesUnsupported`]. Every call fails with [`CloudError::Timeout`](ccm_core::CloudError::Timeout)
    /// after `timeout` ([`InterceptedProvider::with_call_timeout`]).
    pub(crate) fn for_controller(
        provider: &Arc<dyn CloudProvider>,
        timeout: Duration,
        controller: &'static str,
    ) -> Result<Self, Error> {
        let timed =
            Arc::new(InterceptedProvider::new(Arc::clone(provider)).with_call_timeout(timeout));
        let unsupported = || Error::InstancesUnsupported {
            provider: provider.provider_name().to_owned(),
            controller,
        };
        let api = if let Some(v2) = Arc::clone(&timed).instances_v2() {
            Api::V2(v2)
        } else {
            Api::V1 {
                instances: Arc::clone(&timed).instances().ok_or_else(unsupported)?,
                zones: timed.zones(),
            }
        };
        Ok(CloudInstances {
            api,
            provider_name: provider.provider_name().to_owned(),
            timeout,
        })
    }

    pub(crate) fn is_v2(&self) -> bool {
        matches!(self.api, Api::V2(_))
    }

    pub(crate) fn provider_name(&self) -> &str {
        &self.provider_name
    }

    /// Whether the provider answers InstancesV2 bulk calls natively; the periodic loops then make one call per
    /// period for all nodes instead of one per node.
    pub(crate) fn supports_bulk(&self) -> bool {
        matches!(&self.api, Api::V2(v2) if v2.supports_bulk())
    }
}
