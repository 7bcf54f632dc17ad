//! The Acme provider, what a vendor writes on top of its cloud's SDK (here [`crate::api`], an in-memory stand-in):
//! one type, [`AcmeCloud`], serves `InstancesV2` and `LoadBalancer` (`Some(self)`); `Instances`, `Zones`,
//! `Clusters` and `Routes` are absent on purpose. The SDK's errors become the kinds the controllers act on
//! (`From<ApiError> for CloudError`). The async [`factory`] reads the vendor flag `--acme-region` ([`AcmeArgs`])
//! and the inventory of `--cloud-config`, and connects in every replica before leader election.

use std::sync::Arc;

use async_trait::async_trait;
use ccm_core::helpers::{node_name, node_provider_id};
use ccm_core::{
    BoxError, CloudError, CloudProvider, ErrorKind, InstanceLookup, InstanceMetadata, InstancesV2,
    LoadBalancer, ProviderSettings,
};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};

use crate::api::{AcmeApi, ApiError, Balancer, Machine};

/// The provider name, and the providerID scheme: `acme://<region>/<machine id>`.
pub const PROVIDER: &str = "acme";

/// Acme's own flags, listed in `--help` under "Acme", each with an environment variable.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Acme")]
pub struct AcmeArgs {
    /// The Acme region the cluster's machines run in.
    #[arg(long = "acme-region", env = "ACME_REGION", default_value = "acme-1")]
    pub region: String,
}

/// The provider's factory, registered under [`PROVIDER`].
///
/// # Errors
///
/// Without `--cloud-config`, or if its inventory is invalid.
pub async fn factory(settings: ProviderSettings) -> Result<Arc<dyn CloudProvider>, BoxError> {
    let region = settings
        .vendor_args::<AcmeArgs>()
        .map_or("acme-1", |a| a.region.as_str());
    let inventory = settings
        .cloud_config_str()?
        .ok_or("the acme provider needs --cloud-config naming its inventory file")?;
    let api = AcmeApi::connect(region, inventory).await?;
    Ok(Arc::new(AcmeCloud { api: Arc::new(api) }))
}

/// The translation of the SDK's errors: the controllers act on the kind, the text is kept as context.
impl From<ApiError> for CloudError {
    fn from(err: ApiError) -> Self {
        let text = format!("acme API: {err}");
        match err {
            ApiError::NotFound(_) => CloudError::InstanceNotFound.context(text),
            ApiError::RateLimited(wait) => CloudError::Throttled {
                message: text,
                retry_after: Some(wait),
            },
            ApiError::Provisioning(_, wait) => CloudError::retry(text, wait),
            ApiError::BadRequest(_) => CloudError::message(text),
        }
    }
}

/// The Acme cloud provider.
#[derive(Debug, Clone)]
pub struct AcmeCloud {
    /// The connected API client.
    pub api: Arc<AcmeApi>,
}

impl AcmeCloud {
    /// The providerID of a machine.
    pub fn provider_id(&self, machine_id: &str) -> String {
        format!("{PROVIDER}://{}/{machine_id}", self.api.region())
    }

    /// The machine behind a Node: by its providerID, or by name when it has none yet.
    async fn machine(&self, node: &Node) -> Result<Machine, CloudError> {
        Ok(match node_provider_id(node) {
            "" => self.api.describe(node_name(node), true).await?,
            id => match id.strip_prefix(&self.provider_id("")) {
                Some(machine_id) => self.api.describe(machine_id, false).await?,
                None => {
                    let region = self.api.region();
                    let text = format!("providerID {id} is not an acme machine of region {region}");
                    return Err(CloudError::message(text));
                }
            },
        })
    }
}

impl CloudProvider for AcmeCloud {
    fn provider_name(&self) -> &str {
        PROVIDER
    }
    fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
        Some(self)
    }
    fn load_balancer(self: Arc<Self>) -> Option<Arc<dyn LoadBalancer>> {
        Some(self)
    }
}

#[async_trait]
impl InstancesV2 for AcmeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self.machine(node).await {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == ErrorKind::InstanceNotFound => Ok(false),
            Err(err) => Err(err),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(!self.machine(node).await?.running)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        let machine = self.machine(node).await?;
        let address = |type_: &str, address: &str| NodeAddress {
            type_: type_.to_owned(),
            address: address.to_owned(),
        };
        Ok(InstanceMetadata::new(self.provider_id(&machine.id))
            .with_instance_type(machine.size)
            .with_zone(machine.zone)
            .with_region(self.api.region())
            .with_addresses(vec![
                address("InternalIP", &machine.ip),
                address("Hostname", &machine.name),
            ])
            .with_labels([("acme.example.com/machine-id", machine.id)])
            .into())
    }
}

fn status(balancer: &Balancer) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            hostname: Some(balancer.hostname.clone()),
            ..Default::default()
        }]),
    }
}

fn members(nodes: &[Node]) -> Vec<String> {
    nodes.iter().map(|n| node_name(n).to_owned()).collect()
}

#[async_trait]
impl LoadBalancer for AcmeCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        Ok(self
            .api
            .get_load_balancer(&name)
            .await?
            .as_ref()
            .map(status))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        Ok(status(
            &self.api.put_load_balancer(&name, members(nodes)).await?,
        ))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.api.put_load_balancer(&name, members(nodes)).await?;
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        Ok(self.api.delete_load_balancer(&name).await?)
    }
}
