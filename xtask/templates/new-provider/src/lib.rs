//! The `{{name}}` cloud provider for Kubernetes cloud controller managers.
//!
//! [`{{type_name}}`] serves `InstancesV2` and `LoadBalancer` from one type (`Some(self)`); `Instances`, `Zones`,
//! `Clusters` and `Routes` are absent (declared so in `tests/conformance.rs`). The provider talks to the cloud
//! through [`Backend`], an **in-memory stand-in to replace with your cloud's SDK**. See the SDK's
//! `docs/vendor-guide.md` for the contract of every method.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use ccm_core::helpers::{node_name, node_provider_id};
use ccm_core::intercept::Operation;
use ccm_core::{
    BoxError, CloudError, CloudProvider, ErrorKind, InstanceLookup, InstanceMetadata, InstancesV2,
    LoadBalancer, ProviderSettings,
};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};

/// The provider name (`--cloud-provider`), and the providerID scheme: `{{name}}://<region>/<machine id>`.
pub const PROVIDER: &str = "{{name}}";

/// The provider's own flags, listed in `--help` under their own heading, each with an environment variable.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "{{name}} cloud")]
pub struct {{type_name}}Args {
    /// The region the cluster's machines run in.
    #[arg(long = "{{name}}-region", env = "{{env_prefix}}_REGION", default_value = "region-1")]
    pub region: String,
}

/// The provider factory, registered under [`PROVIDER`]: runs in every replica before leader election. Load
/// credentials, connect, start background refreshers (`settings.tasks`) here.
///
/// # Errors
///
/// If `--cloud-config` is not a valid inventory.
pub async fn factory(settings: ProviderSettings) -> Result<Arc<dyn CloudProvider>, BoxError> {
    let region = settings
        .vendor_args::<{{type_name}}Args>()
        .map_or("region-1", |a| a.region.as_str());
    // REPLACE: read your credentials and endpoint from `--cloud-config` and connect your SDK's client.
    let backend = match settings.cloud_config_str()? {
        Some(inventory) => Backend::from_inventory(inventory)?,
        None => Backend::default(),
    };
    Ok(Arc::new({{type_name}}::new(region, Arc::new(backend))))
}

/// The `{{name}}` cloud provider.
#[derive(Debug, Clone)]
pub struct {{type_name}} {
    region: String,
    backend: Arc<Backend>,
}

impl {{type_name}} {
    /// The provider for `region` over a cloud client.
    pub fn new(region: &str, backend: Arc<Backend>) -> Self {
        {{type_name}} {
            region: region.to_owned(),
            backend,
        }
    }

    /// The providerID of a machine.
    pub fn provider_id(&self, machine_id: &str) -> String {
        format!("{PROVIDER}://{}/{machine_id}", self.region)
    }

    /// The machine behind a Node (`op` is the call being made): by its providerID, or by name when it has none
    /// yet. An unknown machine is `InstanceNotFound`.
    fn machine(&self, op: Operation, node: &Node) -> Result<Machine, CloudError> {
        match node_provider_id(node) {
            "" => self.backend.machine(op, |m| m.name == node_name(node)),
            id => match id.strip_prefix(&self.provider_id("")) {
                Some(machine_id) => self.backend.machine(op, |m| m.id == machine_id),
                None => Err(CloudError::message(format!(
                    "providerID {id} is not a {PROVIDER} machine of region {}",
                    self.region
                ))),
            },
        }
    }
}

impl CloudProvider for {{type_name}} {
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
impl InstancesV2 for {{type_name}} {
    /// Whether the machine exists (a stopped machine exists); an unknown one is `Ok(false)`, not an error.
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self.machine(Operation::InstanceExists, node) {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == ErrorKind::InstanceNotFound => Ok(false),
            Err(err) => Err(err),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(!self.machine(Operation::InstanceShutdown, node)?.running)
    }

    /// Never `Ok(InstanceLookup::Skip)` for a machine that is gone: that is `Err(CloudError::InstanceNotFound)`.
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        let machine = self.machine(Operation::InstanceMetadata, node)?;
        Ok(InstanceMetadata::new(self.provider_id(&machine.id))
            .with_instance_type(machine.instance_type)
            .with_zone(machine.zone)
            .with_region(self.region.clone())
            .with_addresses(vec![
                NodeAddress {
                    type_: "InternalIP".to_owned(),
                    address: machine.ip,
                },
                NodeAddress {
                    type_: "Hostname".to_owned(),
                    address: machine.name,
                },
            ])
            .into())
    }
}

fn status(hostname: String) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            hostname: Some(hostname),
            ..Default::default()
        }]),
    }
}

fn members(nodes: &[Node]) -> Vec<String> {
    nodes.iter().map(|n| node_name(n).to_owned()).collect()
}

#[async_trait]
impl LoadBalancer for {{type_name}} {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let found = self.backend.load_balancer(Operation::GetLoadBalancer, &name)?;
        Ok(found.map(|_| status(format!("{name}.{}.lb.example", self.region))))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.backend
            .put_load_balancer(Operation::EnsureLoadBalancer, &name, members(nodes))?;
        Ok(status(format!("{name}.{}.lb.example", self.region)))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.backend
            .put_load_balancer(Operation::UpdateLoadBalancer, &name, members(nodes))
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.backend
            .delete_load_balancer(Operation::EnsureLoadBalancerDeleted, &name)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// REPLACE everything below with your cloud's SDK: an in-memory cloud so the crate builds, runs and passes the
// conformance suite before any real cloud is wired in.
// ---------------------------------------------------------------------------------------------------------------

/// A machine of the in-memory cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The machine id, unique in the region.
    pub id: String,
    /// Its host name: the name of its Kubernetes Node.
    pub name: String,
    /// The zone it runs in.
    pub zone: String,
    /// Its private IP address.
    pub ip: String,
    /// Its instance type.
    pub instance_type: String,
    /// Whether it runs (a stopped machine still exists).
    pub running: bool,
}

#[derive(Debug, Default)]
struct State {
    machines: Vec<Machine>,
    /// load balancer name → member node names.
    load_balancers: BTreeMap<String, Vec<String>>,
    /// Errors the next calls of an operation return (tests: [`Backend::fail_next`]).
    faults: Vec<(Operation, CloudError)>,
}

/// The in-memory cloud: machines and load balancers. **Replace with your cloud's SDK.**
#[derive(Debug, Default)]
pub struct Backend {
    state: Mutex<State>,
}

impl Backend {
    /// A cloud with the machines of an inventory: one per line, `<name> <id> <zone> <ip> <type> running|stopped`
    /// (`#` starts a comment).
    ///
    /// # Errors
    ///
    /// The line that is not a machine.
    pub fn from_inventory(inventory: &str) -> Result<Self, BoxError> {
        let backend = Backend::default();
        for (n, line) in inventory.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, id, zone, ip, instance_type, state] = fields[..] else {
                return Err(format!(
                    "inventory line {}: expected `<name> <id> <zone> <ip> <type> running|stopped`, got {line:?}",
                    n + 1
                )
                .into());
            };
            if state != "running" && state != "stopped" {
                return Err(format!("inventory line {}: state {state:?} is not running or stopped", n + 1).into());
            }
            backend.add_machine(Machine {
                id: id.to_owned(),
                name: name.to_owned(),
                zone: zone.to_owned(),
                ip: ip.to_owned(),
                instance_type: instance_type.to_owned(),
                running: state == "running",
            });
        }
        Ok(backend)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Add a machine.
    pub fn add_machine(&self, machine: Machine) {
        self.lock().machines.push(machine);
    }

    /// Make the next call of `operation` fail with `error` (tests).
    pub fn fail_next(&self, operation: Operation, error: CloudError) {
        self.lock().faults.push((operation, error));
    }

    /// The state, or the armed failure of `operation`.
    fn call(&self, operation: Operation) -> Result<MutexGuard<'_, State>, CloudError> {
        let mut state = self.lock();
        match state.faults.iter().position(|(armed, _)| *armed == operation) {
            Some(i) => Err(state.faults.remove(i).1),
            None => Ok(state),
        }
    }

    fn machine(&self, operation: Operation, matches: impl Fn(&Machine) -> bool) -> Result<Machine, CloudError> {
        let state = self.call(operation)?;
        state.machines.iter().find(|m| matches(m)).cloned().ok_or(CloudError::InstanceNotFound)
    }

    fn load_balancer(&self, operation: Operation, name: &str) -> Result<Option<Vec<String>>, CloudError> {
        Ok(self.call(operation)?.load_balancers.get(name).cloned())
    }

    fn put_load_balancer(&self, operation: Operation, name: &str, members: Vec<String>) -> Result<(), CloudError> {
        self.call(operation)?.load_balancers.insert(name.to_owned(), members);
        Ok(())
    }

    fn delete_load_balancer(&self, operation: Operation, name: &str) -> Result<(), CloudError> {
        self.call(operation)?.load_balancers.remove(name);
        Ok(())
    }

    /// The members of the load balancer `name`, `None` if there is none (tests).
    pub fn members(&self, name: &str) -> Option<Vec<String>> {
        self.lock().load_balancers.get(name).cloned()
    }
}
