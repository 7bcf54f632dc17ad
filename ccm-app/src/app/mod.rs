//! The runtime: the command line, the builder and start-up in order ([`builder`]), the pieces start-up wires from
//! their option groups ([`assemble`], [`provider`]), the started CCM leading, running and draining the controllers
//! ([`supervisor`]), SIGTERM/SIGINT ([`signals`]), the vendor's flags and config section ([`vendor`]); and here,
//! what they share: the errors and the status.

mod assemble;
mod builder;
mod provider;
mod signals;
mod supervisor;
mod vendor;

use std::time::Duration;

use ccm_core::registry::RegistryError;
use ccm_core::{BoxError, CloudError};
use ccm_leaderelection::StepDownReason;

use crate::admin::AdminError;
use crate::client::ClientError;
use crate::config_file::ConfigFileError;
use crate::controllers::CatalogError;
use crate::options::ValidationError;

pub use builder::{CcmBuilder, CloudControllerManager};
pub use supervisor::RunningCcm;
pub use vendor::VENDOR_HELP_HEADING;

/// Problems found before anything starts: bad flags, an unusable config file, invalid settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// The command line does not parse (unknown flag, bad value), or `--help` / `--version` was asked for.
    #[error("{0}")]
    Args(#[source] clap::Error),
    /// The config file cannot be read or parsed.
    #[error(transparent)]
    ConfigFile(#[from] ConfigFileError),
    /// Settings violate one or more rules.
    #[error("invalid settings: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<ValidationError>),
    /// The binary registered controllers with clashing names (a programming error).
    #[error("invalid controller registration: {0}")]
    Catalog(#[from] CatalogError),
    /// The binary's vendor flags or config section clash with the runtime's (a programming error).
    #[error("invalid vendor extension: {0}")]
    VendorExtension(String),
    /// The webhooks cannot be set up: a bad registration (a programming error), or a webhook port whose
    /// certificate, TLS settings or address cannot be used.
    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),
}

impl StartupError {
    /// The process exit code: clap's for argument errors (0 for `--help`, 2 for usage errors), otherwise 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartupError::Args(err) => u8::try_from(err.exit_code()).unwrap_or(2),
            _ => 1,
        }
    }
}

/// Why a running CCM stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The settings are invalid (when [`CcmBuilder::start`] is called with unchecked options).
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// The Kubernetes client cannot be built.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The provider cannot be created.
    #[error(transparent)]
    Provider(#[from] RegistryError),
    /// `--cloud-provider` names no provider of this binary (for example `external`).
    #[error(
        "cloud provider {name:?} could not be initialized: no provider runs in this process; set \
         --cloud-provider to one of: {known}"
    )]
    NoProvider {
        /// The name given.
        name: String,
        /// The registered names.
        known: String,
    },
    /// `--use-service-account-credentials` with a client given by [`CcmBuilder::with_client`] but no connection
    /// for the controllers' own clients.
    #[error(
        "--use-service-account-credentials needs a connection without credentials for the controllers' clients; \
         call with_service_account_connection beside with_client"
    )]
    NoServiceAccountConnection,
    /// The provider has no cluster ID and `--allow-untagged-cloud` is off.
    #[error(
        "no cluster ID found: a cluster ID is required for the cloud provider to function properly; this check \
         can be bypassed by setting --allow-untagged-cloud"
    )]
    NoClusterId,
    /// The admin server cannot start.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// Leader election cannot be configured.
    #[error("leader election: {0}")]
    LeaderElection(#[source] ccm_leaderelection::Error),
    /// The API server did not become healthy in time.
    #[error("failed to wait for the API server to be healthy within {waited:?}: {last}")]
    ApiServerUnhealthy {
        /// How long the runtime waited.
        waited: Duration,
        /// The last error or answer.
        last: String,
    },
    /// A scope selector is rejected by the API server.
    #[error("invalid --{setting} {value:?}: the API server rejected it: {reason}")]
    InvalidScope {
        /// The flag name.
        setting: &'static str,
        /// The selector.
        value: String,
        /// The API server's message.
        reason: String,
    },
    /// `CloudProvider::initialize` failed.
    #[error("cloud provider initialization failed: {0}")]
    Initialize(#[source] CloudError),
    /// A controller's init function failed.
    #[error("error starting controller {name}: {source}")]
    ControllerInit {
        /// The controller.
        name: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// A running controller returned an error or panicked.
    #[error("controller {name} failed: {reason}")]
    ControllerFailed {
        /// The controller.
        name: String,
        /// What happened.
        reason: String,
    },
    /// This replica lost leadership (Go: "leaderelection lost", exit 1).
    #[error("leaderelection lost: {0}")]
    LeadershipLost(StepDownReason),
    /// The runtime task itself panicked.
    #[error("the runtime task ended abnormally: {0}")]
    Panicked(String),
}

/// Where a CCM is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CcmStatus {
    /// Creating clients, the provider and the admin server.
    Starting,
    /// Campaigning for the leader Lease (another replica leads).
    WaitingForLeadership,
    /// Leading (or leader election is off): initializing the provider and starting controllers.
    Leading,
    /// Every enabled controller has been started and the informers are running.
    Running,
    /// Stopping controllers, releasing the Lease, stopping the admin server.
    ShuttingDown,
    /// Everything has stopped.
    Stopped,
}

/// Builders and parsers the unit tests of the submodules share.
#[cfg(test)]
mod test_support {
    use std::sync::Arc;

    use ccm_core::provider::CloudProvider;
    use ccm_core::registry::ProviderRegistry;

    use super::{CcmBuilder, CloudControllerManager, StartupError};
    use crate::options::CcmOptions;

    pub(super) struct Named;
    impl CloudProvider for Named {
        fn provider_name(&self) -> &str {
            "fake"
        }
    }

    pub(super) fn builder() -> CcmBuilder {
        let registry = ProviderRegistry::new();
        registry
            .register("fake", |_| async {
                Ok(Arc::new(Named) as Arc<dyn CloudProvider>)
            })
            .unwrap();
        CloudControllerManager::builder(registry).with_default_controllers()
    }

    pub(super) fn parse(args: &[&str]) -> Result<CcmOptions, StartupError> {
        let mut argv = vec!["ccm"];
        argv.extend_from_slice(args);
        builder().parse_args(argv)
    }

    pub(super) fn error(args: &[&str]) -> String {
        match parse(args) {
            Ok(_) => panic!("{args:?} should be rejected"),
            Err(err) => err.to_string(),
        }
    }
}
