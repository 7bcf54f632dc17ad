//! The ccm-core provider traits, implemented on [`FakeCloud`].

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_core::helpers::{
    default_load_balancer_name, load_balancer_source_ranges, node_name, node_provider_id,
    service_health_check_path_port, service_key,
};
use ccm_core::intercept::{Capability, Operation};
use ccm_core::listing::{
    LoadBalancerPage, ObservedLoadBalancer, ObservedPort, load_balancer_fingerprint,
};
use ccm_core::provider::one_by_one;
use ccm_core::{
    CloudError, CloudProvider, Clusters, InitializeContext, InstanceLookup, Instances, InstancesV2,
    LoadBalancer, ReloadContext, Route, Routes, Zone, Zones,
};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};

use crate::cloud::{
    FakeCloud, FakeLoadBalancer, FakePort, LOAD_BALANCER_CALL_LOG_LIMIT, State, push_bounded,
    sorted_unique,
};
use crate::fault::LoadBalancerCall;
use crate::instance::FakeInstance;

impl FakeCloud {
    /// Run `read` on the instance with `provider_id`, or fail with `InstanceNotFound`.
    fn with_provider_id<R>(
        &self,
        provider_id: &str,
        read: impl FnOnce(&FakeInstance, &str) -> R,
    ) -> Result<R, CloudError> {
        let st = self.lock();
        st.by_provider_id(provider_id)
            .map(|i| read(i, &st.provider_name))
            .ok_or(CloudError::InstanceNotFound)
    }

    /// Run `read` on the instance named `node_name`, or fail with `InstanceNotFound`.
    fn with_name<R>(
        &self,
        node_name: &str,
        read: impl FnOnce(&FakeInstance, &str) -> R,
    ) -> Result<R, CloudError> {
        let st = self.lock();
        st.instances
            .get(node_name)
            .map(|i| read(i, &st.provider_name))
            .ok_or(CloudError::InstanceNotFound)
    }

    /// Run `read` on the instance of `node` (by providerID, else by name), or fail with `InstanceNotFound`.
    fn with_node<R>(
        &self,
        node: &Node,
        read: impl FnOnce(&FakeInstance, &str) -> R,
    ) -> Result<R, CloudError> {
        let st = self.lock();
        st.by_node(node_name(node), node_provider_id(node))
            .map(|i| read(i, &st.provider_name))
            .ok_or(CloudError::InstanceNotFound)
    }
}

#[async_trait]
impl CloudProvider for FakeCloud {
    fn provider_name(&self) -> &str {
        &self.provider_name
    }

    async fn initialize(&self, ctx: InitializeContext) -> Result<(), CloudError> {
        drop(ctx);
        self.begin(Operation::Initialize, "").await
    }

    /// A changed `--cloud-config` is a new inventory: valid, it replaces the instances and the local zone
    /// ([`FakeCloud::reload_inventory`]); invalid, it is rejected with the error start-up would give. Without
    /// `--cloud-config` there is nothing to reload.
    async fn reload(&self, ctx: ReloadContext) -> Result<(), CloudError> {
        let text = match ctx.cloud_config_str() {
            Ok(Some(text)) => text,
            Ok(None) => return Err(CloudError::NotImplemented),
            Err(err) => {
                return Err(CloudError::message(format!(
                    "--cloud-config is not UTF-8 text: {err}"
                )));
            }
        };
        self.reload_inventory(text, "--cloud-config")
            .map_err(|err| CloudError::message(err.to_string()))
    }

    fn load_balancer(self: Arc<Self>) -> Option<Arc<dyn LoadBalancer>> {
        self.has_capability(Capability::LoadBalancer)
            .then_some(self)
    }

    fn instances(self: Arc<Self>) -> Option<Arc<dyn Instances>> {
        self.has_capability(Capability::Instances).then_some(self)
    }

    fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
        self.has_capability(Capability::InstancesV2).then_some(self)
    }

    fn zones(self: Arc<Self>) -> Option<Arc<dyn Zones>> {
        self.has_capability(Capability::Zones).then_some(self)
    }

    fn clusters(self: Arc<Self>) -> Option<Arc<dyn Clusters>> {
        self.has_capability(Capability::Clusters).then_some(self)
    }

    fn routes(self: Arc<Self>) -> Option<Arc<dyn Routes>> {
        self.has_capability(Capability::Routes).then_some(self)
    }

    fn has_cluster_id(&self) -> bool {
        self.lock().has_cluster_id
    }
}

#[async_trait]
impl InstancesV2 for FakeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.begin(Operation::InstanceExists, node_target(node))
            .await?;
        let st = self.lock();
        Ok(st
            .by_node(node_name(node), node_provider_id(node))
            .is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.begin(Operation::InstanceShutdown, node_target(node))
            .await?;
        self.with_node(node, |i, _| i.shutdown)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        self.begin(Operation::InstanceMetadata, node_target(node))
            .await?;
        self.with_node(node, lookup)
    }

    fn supports_bulk(&self) -> bool {
        self.lock().bulk
    }

    async fn instance_metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
        if !self.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_metadata(n)).await);
        }
        self.begin(Operation::InstanceMetadataBulk, &bulk_target(nodes))
            .await?;
        Ok(
            self.bulk_answers(nodes, Operation::InstanceMetadata, |found, provider| {
                let instance = found.ok_or(CloudError::InstanceNotFound)?;
                Ok(lookup(instance, provider))
            }),
        )
    }

    async fn instance_exists_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_exists(n)).await);
        }
        self.begin(Operation::InstanceExistsBulk, &bulk_target(nodes))
            .await?;
        Ok(
            self.bulk_answers(nodes, Operation::InstanceExists, |found, _| {
                Ok(found.is_some())
            }),
        )
    }

    async fn instance_shutdown_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_shutdown(n)).await);
        }
        self.begin(Operation::InstanceShutdownBulk, &bulk_target(nodes))
            .await?;
        Ok(
            self.bulk_answers(nodes, Operation::InstanceShutdown, |found, _| {
                Ok(found.ok_or(CloudError::InstanceNotFound)?.shutdown)
            }),
        )
    }
}

/// The call-log target of a bulk call (as ccm-core's interceptors name it).
fn bulk_target(nodes: &[Node]) -> String {
    format!("{} nodes", nodes.len())
}

impl FakeCloud {
    /// One answer per node for a native bulk call: a fault of the single-node operation `single_op` aimed at a
    /// node fails that node's item; otherwise `answer` gets the node's instance (if any).
    fn bulk_answers<T>(
        &self,
        nodes: &[Node],
        single_op: Operation,
        answer: impl Fn(Option<&FakeInstance>, &str) -> Result<T, CloudError>,
    ) -> Vec<Result<T, CloudError>> {
        let mut st = self.lock();
        nodes
            .iter()
            .map(|node| {
                if let Some(injected) = st.faults.fire(single_op, node_target(node)) {
                    return Err(injected.to_cloud_error(single_op, std::time::Duration::ZERO));
                }
                let found = st.by_node(node_name(node), node_provider_id(node));
                answer(found, &st.provider_name)
            })
            .collect()
    }
}

#[async_trait]
impl Instances for FakeCloud {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.begin(Operation::NodeAddresses, node_name).await?;
        self.with_name(node_name, |i, _| i.addresses.clone())
    }

    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        self.begin(Operation::NodeAddressesByProviderId, provider_id)
            .await?;
        self.with_provider_id(provider_id, |i, _| i.addresses.clone())
    }

    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        self.begin(Operation::InstanceId, node_name).await?;
        self.with_name(node_name, |i, provider| i.instance_id(provider))?
            .ok_or(CloudError::NotImplemented)
    }

    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.begin(Operation::InstanceType, node_name).await?;
        self.with_name(node_name, |i, _| i.instance_type.clone())
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        self.begin(Operation::InstanceTypeByProviderId, provider_id)
            .await?;
        self.with_provider_id(provider_id, |i, _| i.instance_type.clone())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        self.begin(Operation::InstanceExistsByProviderId, provider_id)
            .await?;
        Ok(self.lock().by_provider_id(provider_id).is_some())
    }

    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<bool, CloudError> {
        self.begin(Operation::InstanceShutdownByProviderId, provider_id)
            .await?;
        self.with_provider_id(provider_id, |i, _| i.shutdown)
    }
}

#[async_trait]
impl Zones for FakeCloud {
    async fn get_zone(&self) -> Result<Zone, CloudError> {
        self.begin(Operation::GetZone, "").await?;
        self.lock()
            .local_zone
            .clone()
            .ok_or(CloudError::NotImplemented)
    }

    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        self.begin(Operation::GetZoneByProviderId, provider_id)
            .await?;
        self.with_provider_id(provider_id, |i, _| {
            Zone::new(i.zone.clone(), i.region.clone())
        })
    }

    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        self.begin(Operation::GetZoneByNodeName, node_name).await?;
        self.with_name(node_name, |i, _| {
            Zone::new(i.zone.clone(), i.region.clone())
        })
    }
}

#[async_trait]
impl Clusters for FakeCloud {
    async fn list_clusters(&self) -> Result<Vec<String>, CloudError> {
        self.begin(Operation::ListClusters, "").await?;
        Ok(self
            .lock()
            .clusters
            .iter()
            .map(|(name, _)| name.clone())
            .collect())
    }

    async fn master(&self, cluster_name: &str) -> Result<String, CloudError> {
        self.begin(Operation::Master, cluster_name).await?;
        let st = self.lock();
        match st.clusters.iter().find(|(name, _)| name == cluster_name) {
            Some((_, master)) => Ok(master.clone()),
            None => {
                let known: Vec<&str> = st.clusters.iter().map(|(n, _)| n.as_str()).collect();
                Err(CloudError::provider(
                    format!("looking up the master of cluster {cluster_name:?}"),
                    format!(
                        "the fake cloud has no such cluster (known: [{}]); add it with set_clusters",
                        known.join(", ")
                    ),
                ))
            }
        }
    }
}

/// The load-balancer name of a Service: the Go default name, or `<cluster>-<namespace>-<name>` when the
/// Service has no UID (the default name would then be just `"a"`).
/// The call-log target of a Node (as ccm-core's interceptors name it): its providerID, else its name.
fn node_target(node: &Node) -> &str {
    let id = node_provider_id(node);
    if id.is_empty() { node_name(node) } else { id }
}

fn lb_name(cluster_name: &str, service: &Service) -> String {
    if service
        .metadata
        .uid
        .as_deref()
        .is_some_and(|u| !u.is_empty())
    {
        default_load_balancer_name(service)
    } else {
        let ns = service.metadata.namespace.as_deref().unwrap_or("default");
        let name = service.metadata.name.as_deref().unwrap_or_default();
        format!("{cluster_name}-{ns}-{name}")
    }
}

fn service_ports(service: &Service) -> Vec<FakePort> {
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    ports
        .iter()
        .map(|p| FakePort {
            name: p.name.clone().unwrap_or_default(),
            protocol: p
                .protocol
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "TCP".to_owned()),
            port: p.port,
            node_port: p.node_port,
        })
        .collect()
}

/// The metadata of `instance`, or a skip if it was built [`with_no_metadata`](FakeInstance::with_no_metadata).
fn lookup(instance: &FakeInstance, provider: &str) -> InstanceLookup {
    if instance.no_metadata {
        InstanceLookup::skip(format!(
            "fake instance {} is set to report no metadata",
            instance.name
        ))
    } else {
        instance.metadata(provider).into()
    }
}

fn host_names(nodes: &[Node]) -> Vec<String> {
    sorted_unique(nodes.iter().map(|n| node_name(n).to_owned()).collect())
}

/// The Service's `spec.loadBalancerIP`, if set.
fn requested_ip(key: &str, service: &Service) -> Result<Option<IpAddr>, CloudError> {
    let requested = service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_ip.as_deref())
        .unwrap_or_default();
    if requested.is_empty() {
        return Ok(None);
    }
    requested.parse().map(Some).map_err(|_| {
        CloudError::provider(
            format!("ensuring load balancer for service {key}"),
            format!("spec.loadBalancerIP {requested:?} is not an IP address; fix or remove it"),
        )
    })
}

impl FakeCloud {
    /// Remember a `create`/`update` call with its hosts (before its latency and fault, like the call log).
    fn record_lb_call(&self, op: Operation, service: &str, hosts: &[String]) {
        let call = LoadBalancerCall {
            op,
            service: service.to_owned(),
            hosts: hosts.to_vec(),
        };
        push_bounded(
            &mut self.lock().lb_calls,
            call,
            LOAD_BALANCER_CALL_LOG_LIMIT,
        );
    }

    /// Create or update the load balancer of `service` (under the state lock; no awaits).
    fn ensure_locked(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let key = service_key(service);
        let context = || format!("ensuring load balancer for service {key}");
        let source_ranges = load_balancer_source_ranges(service)
            .map_err(|e| CloudError::provider(context(), e))?
            .iter()
            .map(ToString::to_string)
            .collect();
        let requested = requested_ip(&key, service)?;
        let hosts = host_names(nodes);

        let mut st = self.lock();
        let current = st.load_balancers.get(&key).map(|lb| lb.ingress_ip.clone());
        let ingress_ip = match (requested, current) {
            (Some(ip), _) => {
                let text = ip.to_string();
                if let Some(owner) = st
                    .load_balancers
                    .values()
                    .find(|lb| lb.ingress_ip == text && lb.service != key)
                {
                    return Err(CloudError::provider(
                        context(),
                        format!(
                            "spec.loadBalancerIP {text} is already used by the load balancer of service {}",
                            owner.service
                        ),
                    ));
                }
                text
            }
            (None, Some(current)) => current,
            (None, None) => match st.allocate_ip() {
                Some(ip) => ip.to_string(),
                None => {
                    return Err(CloudError::provider(
                        context(),
                        format!(
                            "no free address left in the load balancer IP pool {}; delete a load balancer or use a larger pool",
                            st.lb_pool
                        ),
                    ));
                }
            },
        };
        let lb = FakeLoadBalancer {
            name: lb_name(cluster_name, service),
            service: key.clone(),
            cluster: cluster_name.to_owned(),
            hosts,
            ports: service_ports(service),
            ingress_ip,
            ip_mode: st.ip_mode.clone(),
            source_ranges,
            health_check: service_health_check_path_port(service),
            fingerprint: load_balancer_fingerprint(service),
        };
        let status = lb.status();
        tracing::debug!(service = %key, ip = %lb.ingress_ip, hosts = ?lb.hosts, "fake load balancer ensured");
        st.load_balancers.insert(key.clone(), lb);
        crate::snapshot::persist_locked(&st, &key);
        Ok(status)
    }
}

#[async_trait]
impl LoadBalancer for FakeCloud {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let key = service_key(service);
        self.begin(Operation::GetLoadBalancer, &key).await?;
        Ok(self
            .lock()
            .load_balancers
            .get(&key)
            .map(FakeLoadBalancer::status))
    }

    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        lb_name(cluster_name, service)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let key = service_key(service);
        self.record_lb_call(Operation::EnsureLoadBalancer, &key, &host_names(nodes));
        self.begin(Operation::EnsureLoadBalancer, &key).await?;
        self.ensure_locked(cluster_name, service, nodes)
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let key = service_key(service);
        let hosts = host_names(nodes);
        self.record_lb_call(Operation::UpdateLoadBalancer, &key, &hosts);
        self.begin(Operation::UpdateLoadBalancer, &key).await?;
        let mut st = self.lock();
        match st.load_balancers.get_mut(&key) {
            Some(lb) => {
                lb.hosts = hosts;
                crate::snapshot::persist_locked(&st, &key);
                Ok(())
            }
            None => Err(CloudError::provider(
                format!("updating load balancer hosts for service {key}"),
                "the load balancer does not exist in the fake cloud; ensure it first",
            )),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let key = service_key(service);
        self.begin(Operation::EnsureLoadBalancerDeleted, &key)
            .await?;
        let mut st = self.lock();
        if st.load_balancers.remove(&key).is_some() {
            tracing::debug!(service = %key, "fake load balancer deleted");
            crate::snapshot::persist_locked(&st, &key);
        }
        Ok(())
    }
    fn supports_listing(&self) -> bool {
        self.lock().listing.is_some()
    }

    async fn list_load_balancers(
        &self,
        cluster_name: &str,
        page_token: Option<String>,
    ) -> Result<LoadBalancerPage, CloudError> {
        self.begin(Operation::ListLoadBalancers, cluster_name)
            .await?;
        let st = self.lock();
        let Some(page_size) = st.listing else {
            return Err(CloudError::NotImplemented);
        };
        // The token is the service key of the last load balancer of the previous page.
        let after = page_token.unwrap_or_default();
        let mut page: Vec<&FakeLoadBalancer> = st
            .load_balancers
            .range::<String, _>((
                std::ops::Bound::Excluded(&after),
                std::ops::Bound::Unbounded,
            ))
            .map(|(_, lb)| lb)
            .filter(|lb| lb.cluster == cluster_name)
            .take(page_size + 1)
            .collect();
        let next_page = (page.len() > page_size).then(|| {
            page.truncate(page_size);
            page.last().map(|lb| lb.service.clone()).unwrap_or_default()
        });
        let items = page.into_iter().map(observed).collect();
        Ok(LoadBalancerPage::new(items, next_page))
    }
}

/// A fake load balancer as a listing reports it.
fn observed(lb: &FakeLoadBalancer) -> ObservedLoadBalancer {
    ObservedLoadBalancer::new(lb.name.clone(), lb.status())
        .with_ports(
            lb.ports
                .iter()
                .map(|p| {
                    ObservedPort::new(p.protocol.clone(), p.port, p.node_port.filter(|n| *n != 0))
                })
                .collect(),
        )
        .with_backends(lb.hosts.iter().cloned())
        .with_fingerprint(lb.fingerprint.clone())
}

#[async_trait]
impl Routes for FakeCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.begin(Operation::ListRoutes, cluster_name).await?;
        Ok(self.routes_in(cluster_name))
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let cidr = route.destination_cidr.as_str();
        self.begin(Operation::CreateRoute, cidr).await?;
        let context = || format!("creating route to {} for node {}", cidr, route.target_node);
        if cidr.parse::<ipnet::IpNet>().is_err() {
            return Err(CloudError::provider(
                context(),
                format!("{cidr:?} is not a CIDR"),
            ));
        }
        if route.target_node.is_empty() {
            return Err(CloudError::provider(
                context(),
                "the route has no target node",
            ));
        }
        let mut st = self.lock();
        let routes = st.routes.entry(cluster_name.to_owned()).or_default();
        if let Some(existing) = routes.get(cidr) {
            if existing.target_node == route.target_node {
                return Ok(());
            }
            return Err(CloudError::provider(
                context(),
                format!(
                    "the CIDR is already routed to node {}; delete that route first",
                    existing.target_node
                ),
            ));
        }
        let hint = if name_hint.is_empty() {
            route.target_node.as_str()
        } else {
            name_hint
        };
        let mut stored = route.clone();
        stored.name = State::route_name(cluster_name, hint, cidr);
        stored.blackhole = false;
        tracing::debug!(cluster = cluster_name, route = %stored.name, node = %stored.target_node, cidr, "fake route created");
        routes.insert(cidr.to_owned(), stored);
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        let cidr = route.destination_cidr.as_str();
        self.begin(Operation::DeleteRoute, cidr).await?;
        let mut st = self.lock();
        if let Some(routes) = st.routes.get_mut(cluster_name) {
            if routes.remove(cidr).is_some() {
                tracing::debug!(cluster = cluster_name, cidr, "fake route deleted");
            }
            if routes.is_empty() {
                st.routes.remove(cluster_name);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_balancer_call_log_keeps_the_most_recent_calls() {
        let cloud = FakeCloud::new();
        let hosts = vec!["node-a".to_owned()];
        for i in 0..LOAD_BALANCER_CALL_LOG_LIMIT + 2 {
            cloud.record_lb_call(
                Operation::UpdateLoadBalancer,
                &format!("default/svc-{i}"),
                &hosts,
            );
        }
        let calls = cloud.load_balancer_calls();
        assert_eq!(calls.len(), LOAD_BALANCER_CALL_LOG_LIMIT);
        assert_eq!(
            calls[0].service, "default/svc-2",
            "the oldest two were forgotten"
        );
        assert_eq!(
            calls.last().map(|c| c.service.as_str()),
            Some(format!("default/svc-{}", LOAD_BALANCER_CALL_LOG_LIMIT + 1).as_str())
        );
        cloud.clear_calls();
        assert!(cloud.load_balancer_calls().is_empty());
    }
}
