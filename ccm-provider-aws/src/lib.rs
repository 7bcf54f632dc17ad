//! # ccm-provider-aws
//!
//! An AWS-style cloud provider on the official AWS SDK for Rust (`aws-config`, `aws-sdk-ec2`,
//! `aws-sdk-elasticloadbalancingv2`), written on the public API of `ccm-core` and `ccm-app` only, and its CCM
//! binary `aws-ccm`. A vendor can copy it as the start of a real CCM; `docs/aws-example.md` says what maps to
//! what, how to point it at a real account and what its tests (against the moto emulator) cannot show.
//!
//! | capability | AWS resources | module |
//! |---|---|---|
//! | `InstancesV2` (with native bulk lookups) | EC2 instances; providerID `aws:///<az>/<instance-id>` | [`instances`] |
//! | `LoadBalancer` | one `network` load balancer per Service, a target group per port, listeners | [`load_balancer`] |
//! | `Routes` | routes to instances in the route table tagged for the cluster | [`routes`] |
//! | errors | AWS codes → the kinds the controllers act on | [`errors`] |
//! | configuration | the standard AWS chain plus `--aws-cluster-id` | [`config`] |
//!
//! Ownership follows the AWS convention: a resource belongs to the cluster when it carries the tag
//! `kubernetes.io/cluster/<cluster-id>` (`owned` for what the CCM created, `shared` for what it may use).
//!
//! The crate is `publish = false`: `cargo xtask package` does not build it, so the AWS SDK's compile time stays
//! out of packaging.
//!
//! ```no_run
//! # async fn demo(settings: ccm_core::ProviderSettings) -> Result<(), ccm_core::BoxError> {
//! // What the `aws-ccm` binary registers: the factory reads the AWS chain and `--aws-cluster-id`, and checks
//! // both APIs once before the CCM starts.
//! let cloud = ccm_provider_aws::factory(settings).await?;
//! assert_eq!(cloud.provider_name(), "aws");
//! # Ok(()) }
//! ```

pub mod config;
pub mod errors;
pub mod instances;
pub mod load_balancer;
pub mod routes;

use std::sync::Arc;
use std::time::Duration;

use ccm_core::{BoxError, CloudProvider, InstancesV2, LoadBalancer, ProviderSettings, Routes};

pub use config::{AwsArgs, AwsClients, StartupError};
pub use errors::{AwsApiError, translate};

/// The provider name, and the providerID scheme: `aws:///<availability-zone>/<instance-id>`.
pub const PROVIDER: &str = "aws";

/// The prefix of the ownership tag: `kubernetes.io/cluster/<cluster-id>`.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// The tag value of resources the CCM created (and deletes).
pub const OWNED: &str = "owned";

/// The tag value of resources the cluster may use but does not own.
pub const SHARED: &str = "shared";

/// The tag naming the Service (`<namespace>/<name>`) of a load balancer and its target groups.
pub const SERVICE_NAME_TAG: &str = "kubernetes.io/service-name";

/// The AWS provider: one type serving `InstancesV2`, `LoadBalancer` and `Routes` (`Some(self)`); the V1
/// `Instances`, `Zones` and `Clusters` are absent on purpose.
#[derive(Debug, Clone)]
pub struct AwsCloud {
    clients: AwsClients,
    cluster_name: String,
    cluster_id: String,
    bulk_lookups: bool,
}

impl AwsCloud {
    /// A provider over `clients` for the cluster whose `--cluster-name` is `cluster_name` and whose resources
    /// are tagged with `cluster_id`.
    pub fn new(
        clients: AwsClients,
        cluster_name: impl Into<String>,
        cluster_id: impl Into<String>,
    ) -> Self {
        AwsCloud {
            clients,
            cluster_name: cluster_name.into(),
            cluster_id: cluster_id.into(),
            bulk_lookups: true,
        }
    }

    /// With or without native bulk lookups (`InstancesV2::supports_bulk`); on by default.
    pub fn with_bulk_lookups(mut self, bulk: bool) -> Self {
        self.bulk_lookups = bulk;
        self
    }

    /// The SDK clients.
    pub fn clients(&self) -> &AwsClients {
        &self.clients
    }

    /// The cluster ID this provider tags resources with.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The ownership tag key for a cluster name the controllers pass: this CCM's `--cluster-name` maps to its
    /// cluster ID, any other name to itself (so another cluster's calls never see this cluster's resources).
    pub fn cluster_tag(&self, cluster_name: &str) -> String {
        let id = if cluster_name == self.cluster_name {
            &self.cluster_id
        } else {
            cluster_name
        };
        format!("{CLUSTER_TAG_PREFIX}{id}")
    }
}

impl CloudProvider for AwsCloud {
    fn provider_name(&self) -> &str {
        PROVIDER
    }

    fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
        Some(self)
    }

    fn load_balancer(self: Arc<Self>) -> Option<Arc<dyn LoadBalancer>> {
        Some(self)
    }

    fn routes(self: Arc<Self>) -> Option<Arc<dyn Routes>> {
        Some(self)
    }
}

/// Whether `tags` (key, value) hold the ownership tag `key` with `owned` or `shared`.
pub fn has_cluster_tag<'a>(
    tags: impl IntoIterator<Item = (Option<&'a str>, Option<&'a str>)>,
    key: &str,
) -> bool {
    tags.into_iter()
        .any(|(k, v)| k == Some(key) && matches!(v, Some(OWNED) | Some(SHARED)))
}

/// The provider's factory, registered under [`PROVIDER`] by `aws-ccm`: the AWS chain, the vendor flags
/// ([`AwsArgs`]), then the start-up check ([`config::check`]).
///
/// # Errors
/// A [`StartupError`] saying what to set or check.
pub async fn factory(settings: ProviderSettings) -> Result<Arc<dyn CloudProvider>, BoxError> {
    let args = settings
        .vendor_args::<AwsArgs>()
        .cloned()
        .unwrap_or_default();
    let cluster_id = args
        .cluster_id
        .clone()
        .unwrap_or_else(|| settings.cluster_name.clone());
    if cluster_id.trim().is_empty() {
        return Err(StartupError::NoClusterId.into());
    }
    let sdk =
        config::load_sdk_config(Duration::from_secs(args.request_timeout_seconds.max(1))).await?;
    let clients = config::clients(&sdk, &[]);
    config::check(&clients).await?;
    tracing::info!(
        region = sdk.region().map(|r| r.as_ref()).unwrap_or_default(),
        cluster_id = %cluster_id,
        bulk_lookups = args.bulk_lookups,
        "AWS provider ready"
    );
    Ok(Arc::new(
        AwsCloud::new(clients, settings.cluster_name.clone(), cluster_id)
            .with_bulk_lookups(args.bulk_lookups),
    ))
}
