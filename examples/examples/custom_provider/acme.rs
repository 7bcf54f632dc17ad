//! "Acme", a small in-memory cloud written against the ccm-core traits the way a vendor writes theirs (it does
//! not use the fake provider): machines with `acme://<region>/<id>` providerIDs, load balancers that take a
//! moment to provision (they answer "retry after" first) and report a hostname, and per-cluster route tables.
//!
//! It supports `InstancesV2`, `LoadBalancer` and `Routes`; the legacy `Instances` and `Zones` are left out, so
//! the conformance suite reports their clauses as skipped.
//!
//! [`factory`] is what a vendor hands to the conformance suite: a fresh cloud, the fixture naming its
//! machines, and an inspector for load-balancer backends.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ccm_conformance::{ConformanceFixture, ConformanceSubject, InstanceRef, LoadBalancerInspector};
use ccm_core::helpers::{node_name, node_provider_id, service_key};
use ccm_core::intercept::Capability;
use ccm_core::{
    BoxError, CloudError, CloudProvider, InstanceLookup, InstanceMetadata, InstancesV2,
    LoadBalancer, Route, Routes,
};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};
use tokio::time::Instant;

/// The provider name, and the providerID scheme.
pub const PROVIDER: &str = "acme";
/// The one region of this cloud.
pub const REGION: &str = "acme-1";
/// How long a new load balancer takes to provision.
pub const PROVISIONING: Duration = Duration::from_millis(50);

/// A machine.
#[derive(Debug, Clone)]
struct Machine {
    id: String,
    zone: String,
    private_ip: String,
    running: bool,
}

/// A load balancer: a hostname, the backends, and when it is ready.
#[derive(Debug, Clone)]
struct Balancer {
    hostname: String,
    backends: BTreeSet<String>,
    ready_at: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// node name → machine.
    machines: BTreeMap<String, Machine>,
    /// service key → load balancer.
    balancers: BTreeMap<String, Balancer>,
    /// cluster → destination CIDR → (target node, route name).
    routes: BTreeMap<String, BTreeMap<String, (String, String)>>,
}

/// The Acme cloud. Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct AcmeCloud {
    state: Arc<Mutex<State>>,
}

impl AcmeCloud {
    /// A cloud with machines `worker-1` to `worker-4`; `worker-2` is stopped.
    pub fn new() -> Self {
        let cloud = AcmeCloud::default();
        for n in 1..=4 {
            cloud.lock().machines.insert(
                format!("worker-{n}"),
                Machine {
                    id: format!("i-{n:04}"),
                    zone: format!("{REGION}{}", if n % 2 == 0 { 'b' } else { 'a' }),
                    private_ip: format!("192.168.10.{n}"),
                    running: n != 2,
                },
            );
        }
        cloud
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The providerID of a machine.
    pub fn provider_id(machine_id: &str) -> String {
        format!("{PROVIDER}://{REGION}/{machine_id}")
    }

    /// The node name and machine behind a Node: by providerID when it has one, else by name.
    fn find(&self, node: &Node) -> Option<(String, Machine)> {
        let st = self.lock();
        match node_provider_id(node) {
            "" => st
                .machines
                .get(node_name(node))
                .map(|m| (node_name(node).to_owned(), m.clone())),
            provider_id => {
                let id = provider_id.strip_prefix(&format!("{PROVIDER}://{REGION}/"))?;
                st.machines
                    .iter()
                    .find(|(_, m)| m.id == id)
                    .map(|(name, m)| (name.clone(), m.clone()))
            }
        }
    }

    /// The backends of a Service's load balancer.
    pub fn backends(&self, service: &Service) -> Option<Vec<String>> {
        self.lock()
            .balancers
            .get(&service_key(service))
            .map(|b| b.backends.iter().cloned().collect())
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
    fn routes(self: Arc<Self>) -> Option<Arc<dyn Routes>> {
        Some(self)
    }
}

#[async_trait]
impl InstancesV2 for AcmeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.find(node).is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        match self.find(node) {
            Some((_, machine)) => Ok(!machine.running),
            None => Err(CloudError::InstanceNotFound
                .context(format!("describing node {}", node_name(node)))),
        }
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        let (name, machine) = self.find(node).ok_or_else(|| {
            CloudError::InstanceNotFound.context(format!("describing node {}", node_name(node)))
        })?;
        Ok(InstanceMetadata::new(Self::provider_id(&machine.id))
            .with_instance_type("a1.small")
            .with_zone(machine.zone)
            .with_region(REGION)
            .with_addresses(vec![
                NodeAddress {
                    type_: "InternalIP".to_owned(),
                    address: machine.private_ip,
                },
                NodeAddress {
                    type_: "Hostname".to_owned(),
                    address: name,
                },
            ])
            .with_label("acme.example.com/machine-id", machine.id)
            .into())
    }
}

fn status(hostname: &str) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            hostname: Some(hostname.to_owned()),
            ..Default::default()
        }]),
    }
}

#[async_trait]
impl LoadBalancer for AcmeCloud {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        Ok(self
            .lock()
            .balancers
            .get(&service_key(service))
            .map(|b| status(&b.hostname)))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let key = service_key(service);
        let name = self.get_load_balancer_name(cluster_name, service);
        let backends = nodes.iter().map(|n| node_name(n).to_owned()).collect();
        let mut st = self.lock();
        let balancer = st.balancers.entry(key.clone()).or_insert_with(|| Balancer {
            hostname: format!("{name}.{REGION}.lb.acme.example"),
            backends: BTreeSet::new(),
            ready_at: Instant::now() + PROVISIONING,
        });
        balancer.backends = backends;
        let now = Instant::now();
        if now < balancer.ready_at {
            return Err(CloudError::retry(
                format!("load balancer {name} of service {key} is being provisioned"),
                balancer.ready_at - now,
            ));
        }
        Ok(status(&balancer.hostname))
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let key = service_key(service);
        match self.lock().balancers.get_mut(&key) {
            Some(balancer) => {
                balancer.backends = nodes.iter().map(|n| node_name(n).to_owned()).collect();
                Ok(())
            }
            None => Err(CloudError::message(format!(
                "service {key} has no acme load balancer to update"
            ))),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        self.lock().balancers.remove(&service_key(service));
        Ok(())
    }
}

#[async_trait]
impl Routes for AcmeCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        let st = self.lock();
        Ok(st
            .routes
            .get(cluster_name)
            .into_iter()
            .flatten()
            .map(|(cidr, (target, name))| {
                Route::new(target.clone(), cidr.clone()).with_name(name.clone())
            })
            .collect())
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let mut st = self.lock();
        if !st.machines.contains_key(&route.target_node) {
            return Err(CloudError::message(format!(
                "cannot route {} to {}: no such machine",
                route.destination_cidr, route.target_node
            )));
        }
        st.routes
            .entry(cluster_name.to_owned())
            .or_default()
            .insert(
                route.destination_cidr.clone(),
                (
                    route.target_node.clone(),
                    format!("{cluster_name}-{name_hint}"),
                ),
            );
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        if let Some(table) = self.lock().routes.get_mut(cluster_name) {
            table.remove(&route.destination_cidr);
        }
        Ok(())
    }
}

/// Reads an Acme load balancer's backends for the suite.
#[derive(Debug, Clone)]
pub struct AcmeInspector(pub AcmeCloud);

#[async_trait]
impl LoadBalancerInspector for AcmeInspector {
    async fn backend_nodes(
        &self,
        _cluster: &str,
        service: &Service,
    ) -> Result<Option<Vec<String>>, BoxError> {
        Ok(self.0.backends(service))
    }
}

fn worker(n: u32) -> InstanceRef {
    InstanceRef::new(format!("worker-{n}"))
        .with_provider_id(AcmeCloud::provider_id(&format!("i-{n:04}")))
        .with_internal_ip(format!("192.168.10.{n}"))
}

/// What the suite needs to know about this cloud: which machine runs, which is stopped, one that does not
/// exist, the backends to use.
pub fn fixture() -> ConformanceFixture {
    ConformanceFixture::new()
        .with_running(worker(1))
        .with_stopped(worker(2))
        .with_unknown(InstanceRef::new("ghost").with_provider_id(AcmeCloud::provider_id("i-9999")))
        .with_backend_nodes(vec![worker(1), worker(3), worker(4)])
        .with_call_timeout(Duration::from_secs(10))
        .with_ready_timeout(Duration::from_secs(10))
        .with_clause_timeout(Duration::from_secs(60))
        .without_capabilities([
            Capability::Instances,
            Capability::Zones,
            Capability::Clusters,
        ])
}

/// A fresh Acme cloud for one clause.
pub async fn factory() -> ConformanceSubject {
    let cloud = AcmeCloud::new();
    ConformanceSubject::new(Arc::new(cloud.clone()), fixture()).with_inspector(AcmeInspector(cloud))
}
