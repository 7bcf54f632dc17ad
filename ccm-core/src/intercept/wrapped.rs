//! The per-capability wrappers of [`InterceptedProvider`](super::InterceptedProvider): each trait method runs
//! through the interceptor chain, then calls the wrapped capability.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};

use super::{Chain, Operation};
use crate::error::CloudError;
use crate::helpers::{node_name, node_provider_id, service_key};
use crate::listing::LoadBalancerPage;
use crate::provider::{Clusters, Instances, InstancesV2, LoadBalancer, Routes, Zones};
use crate::types::{InstanceLookup, Route, Zone};

pub(super) struct Wrapped<T: ?Sized> {
    pub(super) inner: Arc<T>,
    pub(super) chain: Chain,
}

fn node_target(node: &Node) -> &str {
    let id = node_provider_id(node);
    if id.is_empty() { node_name(node) } else { id }
}

#[async_trait]
impl LoadBalancer for Wrapped<dyn LoadBalancer> {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let key = service_key(service);
        self.chain
            .call(
                Operation::GetLoadBalancer,
                &key,
                self.inner.get_load_balancer(cluster_name, service),
            )
            .await
    }
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        self.inner.get_load_balancer_name(cluster_name, service)
    }
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let key = service_key(service);
        self.chain
            .call(
                Operation::EnsureLoadBalancer,
                &key,
                self.inner
                    .ensure_load_balancer(cluster_name, service, nodes),
            )
            .await
    }
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let key = service_key(service);
        self.chain
            .call(
                Operation::UpdateLoadBalancer,
                &key,
                self.inner
                    .update_load_balancer(cluster_name, service, nodes),
            )
            .await
    }
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let key = service_key(service);
        self.chain
            .call(
                Operation::EnsureLoadBalancerDeleted,
                &key,
                self.inner
                    .ensure_load_balancer_deleted(cluster_name, service),
            )
            .await
    }
    fn supports_listing(&self) -> bool {
        self.inner.supports_listing()
    }
    async fn list_load_balancers(
        &self,
        cluster_name: &str,
        page_token: Option<String>,
    ) -> Result<LoadBalancerPage, CloudError> {
        self.chain
            .call(
                Operation::ListLoadBalancers,
                cluster_name,
                self.inner.list_load_balancers(cluster_name, page_token),
            )
            .await
    }
}

#[async_trait]
impl Instances for Wrapped<dyn Instances> {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.chain
            .call(
                Operation::NodeAddresses,
                node_name,
                self.inner.node_addresses(node_name),
            )
            .await
    }
    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        self.chain
            .call(
                Operation::NodeAddressesByProviderId,
                provider_id,
                self.inner.node_addresses_by_provider_id(provider_id),
            )
            .await
    }
    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        self.chain
            .call(
                Operation::InstanceId,
                node_name,
                self.inner.instance_id(node_name),
            )
            .await
    }
    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.chain
            .call(
                Operation::InstanceType,
                node_name,
                self.inner.instance_type(node_name),
            )
            .await
    }
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        self.chain
            .call(
                Operation::InstanceTypeByProviderId,
                provider_id,
                self.inner.instance_type_by_provider_id(provider_id),
            )
            .await
    }
    async fn add_ssh_key_to_all_instances(&self, user: &str, key: &[u8]) -> Result<(), CloudError> {
        self.inner.add_ssh_key_to_all_instances(user, key).await
    }
    async fn current_node_name(&self, hostname: &str) -> Result<String, CloudError> {
        self.inner.current_node_name(hostname).await
    }
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        self.chain
            .call(
                Operation::InstanceExistsByProviderId,
                provider_id,
                self.inner.instance_exists_by_provider_id(provider_id),
            )
            .await
    }
    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<bool, CloudError> {
        self.chain
            .call(
                Operation::InstanceShutdownByProviderId,
                provider_id,
                self.inner.instance_shutdown_by_provider_id(provider_id),
            )
            .await
    }
}

#[async_trait]
impl InstancesV2 for Wrapped<dyn InstancesV2> {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.chain
            .call(
                Operation::InstanceExists,
                node_target(node),
                self.inner.instance_exists(node),
            )
            .await
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.chain
            .call(
                Operation::InstanceShutdown,
                node_target(node),
                self.inner.instance_shutdown(node),
            )
            .await
    }
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        self.chain
            .call(
                Operation::InstanceMetadata,
                node_target(node),
                self.inner.instance_metadata(node),
            )
            .await
    }
    fn supports_bulk(&self) -> bool {
        self.inner.supports_bulk()
    }
    async fn instance_metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            // Go through the single calls so each one is intercepted.
            return Ok(crate::provider::metadata_one_by_one(self, nodes).await);
        }
        let target = format!("{} nodes", nodes.len());
        self.chain
            .call(
                Operation::InstanceMetadataBulk,
                &target,
                self.inner.instance_metadata_bulk(nodes),
            )
            .await
    }
    async fn instance_exists_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(crate::provider::exists_one_by_one(self, nodes).await);
        }
        let target = format!("{} nodes", nodes.len());
        self.chain
            .call(
                Operation::InstanceExistsBulk,
                &target,
                self.inner.instance_exists_bulk(nodes),
            )
            .await
    }
    async fn instance_shutdown_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(crate::provider::shutdown_one_by_one(self, nodes).await);
        }
        let target = format!("{} nodes", nodes.len());
        self.chain
            .call(
                Operation::InstanceShutdownBulk,
                &target,
                self.inner.instance_shutdown_bulk(nodes),
            )
            .await
    }
}

#[async_trait]
impl Zones for Wrapped<dyn Zones> {
    async fn get_zone(&self) -> Result<Zone, CloudError> {
        self.chain
            .call(Operation::GetZone, "", self.inner.get_zone())
            .await
    }
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        self.chain
            .call(
                Operation::GetZoneByProviderId,
                provider_id,
                self.inner.get_zone_by_provider_id(provider_id),
            )
            .await
    }
    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        self.chain
            .call(
                Operation::GetZoneByNodeName,
                node_name,
                self.inner.get_zone_by_node_name(node_name),
            )
            .await
    }
}

#[async_trait]
impl Clusters for Wrapped<dyn Clusters> {
    async fn list_clusters(&self) -> Result<Vec<String>, CloudError> {
        self.chain
            .call(Operation::ListClusters, "", self.inner.list_clusters())
            .await
    }
    async fn master(&self, cluster_name: &str) -> Result<String, CloudError> {
        self.chain
            .call(
                Operation::Master,
                cluster_name,
                self.inner.master(cluster_name),
            )
            .await
    }
}

#[async_trait]
impl Routes for Wrapped<dyn Routes> {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.chain
            .call(
                Operation::ListRoutes,
                cluster_name,
                self.inner.list_routes(cluster_name),
            )
            .await
    }
    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        self.chain
            .call(
                Operation::CreateRoute,
                &route.destination_cidr,
                self.inner.create_route(cluster_name, name_hint, route),
            )
            .await
    }
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        self.chain
            .call(
                Operation::DeleteRoute,
                &route.destination_cidr,
                self.inner.delete_route(cluster_name, route),
            )
            .await
    }
}
