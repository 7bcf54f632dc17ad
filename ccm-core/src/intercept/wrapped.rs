//! The per-capability wrappers of [`InterceptedProvider`](super::InterceptedProvider): each trait method runs
//! through the interceptor chain, then calls the wrapped capability.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};

use super::{Chain, Operation as Op};
use crate::error::CloudError;
use crate::helpers::{node_name, node_provider_id, service_key};
use crate::listing::LoadBalancerPage;
use crate::provider::{Clusters, Instances, InstancesV2, LoadBalancer, Routes, Zones, one_by_one};
use crate::types::{InstanceLookup, Route, Zone};

pub(super) struct Wrapped<T: ?Sized> {
    pub(super) inner: Arc<T>,
    pub(super) chain: Chain,
}

/// The node's providerID, or its name if it has none.
fn node_target(node: &Node) -> &str {
    let id = node_provider_id(node);
    if id.is_empty() { node_name(node) } else { id }
}

/// The target of a bulk call: `<n> nodes`.
fn nodes_target(nodes: &[Node]) -> String {
    format!("{} nodes", nodes.len())
}

#[async_trait]
impl LoadBalancer for Wrapped<dyn LoadBalancer> {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let call = self.inner.get_load_balancer(cluster_name, service);
        let key = service_key(service);
        self.chain.call(Op::GetLoadBalancer, &key, call).await
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
        let call = self
            .inner
            .ensure_load_balancer(cluster_name, service, nodes);
        let key = service_key(service);
        self.chain.call(Op::EnsureLoadBalancer, &key, call).await
    }
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let call = self
            .inner
            .update_load_balancer(cluster_name, service, nodes);
        let key = service_key(service);
        self.chain.call(Op::UpdateLoadBalancer, &key, call).await
    }
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let call = self
            .inner
            .ensure_load_balancer_deleted(cluster_name, service);
        let key = service_key(service);
        let op = Op::EnsureLoadBalancerDeleted;
        self.chain.call(op, &key, call).await
    }
    fn supports_listing(&self) -> bool {
        self.inner.supports_listing()
    }
    async fn list_load_balancers(
        &self,
        cluster_name: &str,
        page_token: Option<String>,
    ) -> Result<LoadBalancerPage, CloudError> {
        let call = self.inner.list_load_balancers(cluster_name, page_token);
        let op = Op::ListLoadBalancers;
        self.chain.call(op, cluster_name, call).await
    }
}

#[async_trait]
impl Instances for Wrapped<dyn Instances> {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        let call = self.inner.node_addresses(node_name);
        self.chain.call(Op::NodeAddresses, node_name, call).await
    }
    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        let call = self.inner.node_addresses_by_provider_id(provider_id);
        let op = Op::NodeAddressesByProviderId;
        self.chain.call(op, provider_id, call).await
    }
    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        let call = self.inner.instance_id(node_name);
        self.chain.call(Op::InstanceId, node_name, call).await
    }
    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        let call = self.inner.instance_type(node_name);
        self.chain.call(Op::InstanceType, node_name, call).await
    }
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        let call = self.inner.instance_type_by_provider_id(provider_id);
        let op = Op::InstanceTypeByProviderId;
        self.chain.call(op, provider_id, call).await
    }
    async fn add_ssh_key_to_all_instances(&self, user: &str, key: &[u8]) -> Result<(), CloudError> {
        self.inner.add_ssh_key_to_all_instances(user, key).await
    }
    async fn current_node_name(&self, hostname: &str) -> Result<String, CloudError> {
        self.inner.current_node_name(hostname).await
    }
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        let call = self.inner.instance_exists_by_provider_id(provider_id);
        let op = Op::InstanceExistsByProviderId;
        self.chain.call(op, provider_id, call).await
    }
    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<bool, CloudError> {
        let call = self.inner.instance_shutdown_by_provider_id(provider_id);
        let op = Op::InstanceShutdownByProviderId;
        self.chain.call(op, provider_id, call).await
    }
}

#[async_trait]
impl InstancesV2 for Wrapped<dyn InstancesV2> {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        let call = self.inner.instance_exists(node);
        let op = Op::InstanceExists;
        self.chain.call(op, node_target(node), call).await
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let call = self.inner.instance_shutdown(node);
        let op = Op::InstanceShutdown;
        self.chain.call(op, node_target(node), call).await
    }
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        let call = self.inner.instance_metadata(node);
        let op = Op::InstanceMetadata;
        self.chain.call(op, node_target(node), call).await
    }
    fn supports_bulk(&self) -> bool {
        self.inner.supports_bulk()
    }
    // Without native bulk calls, the bulk methods go through the single calls, so each one is intercepted.
    async fn instance_metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_metadata(n)).await);
        }
        let call = self.inner.instance_metadata_bulk(nodes);
        let op = Op::InstanceMetadataBulk;
        self.chain.call(op, &nodes_target(nodes), call).await
    }
    async fn instance_exists_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_exists(n)).await);
        }
        let call = self.inner.instance_exists_bulk(nodes);
        let op = Op::InstanceExistsBulk;
        self.chain.call(op, &nodes_target(nodes), call).await
    }
    async fn instance_shutdown_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_shutdown(n)).await);
        }
        let call = self.inner.instance_shutdown_bulk(nodes);
        let op = Op::InstanceShutdownBulk;
        self.chain.call(op, &nodes_target(nodes), call).await
    }
}

#[async_trait]
impl Zones for Wrapped<dyn Zones> {
    async fn get_zone(&self) -> Result<Zone, CloudError> {
        let call = self.inner.get_zone();
        self.chain.call(Op::GetZone, "", call).await
    }
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        let call = self.inner.get_zone_by_provider_id(provider_id);
        let op = Op::GetZoneByProviderId;
        self.chain.call(op, provider_id, call).await
    }
    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        let call = self.inner.get_zone_by_node_name(node_name);
        let op = Op::GetZoneByNodeName;
        self.chain.call(op, node_name, call).await
    }
}

#[async_trait]
impl Clusters for Wrapped<dyn Clusters> {
    async fn list_clusters(&self) -> Result<Vec<String>, CloudError> {
        let call = self.inner.list_clusters();
        self.chain.call(Op::ListClusters, "", call).await
    }
    async fn master(&self, cluster_name: &str) -> Result<String, CloudError> {
        let call = self.inner.master(cluster_name);
        self.chain.call(Op::Master, cluster_name, call).await
    }
}

#[async_trait]
impl Routes for Wrapped<dyn Routes> {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        let call = self.inner.list_routes(cluster_name);
        self.chain.call(Op::ListRoutes, cluster_name, call).await
    }
    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let call = self.inner.create_route(cluster_name, name_hint, route);
        let cidr = &route.destination_cidr;
        self.chain.call(Op::CreateRoute, cidr, call).await
    }
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        let call = self.inner.delete_route(cluster_name, route);
        let cidr = &route.destination_cidr;
        self.chain.call(Op::DeleteRoute, cidr, call).await
    }
}
