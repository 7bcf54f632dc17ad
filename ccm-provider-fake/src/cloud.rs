//! [`FakeCloud`]: the shared in-memory state and the knobs tests turn.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ccm_core::intercept::{Capability, Operation};
use ccm_core::{CloudError, Route, Zone};
use ipnet::{IpNet, Ipv4Net};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, NodeAddress, PortStatus,
};
use tokio::sync::Notify;

use crate::fault::{Call, Fault, FaultTable, LoadBalancerCall};
use crate::instance::FakeInstance;
use crate::quota::{Quota, QuotaError};

/// The provider name [`FakeCloud::new`] uses and [`FakeCloud::register`] registers.
pub const PROVIDER_NAME: &str = "fake";

/// The cluster [`FakeCloud::insert_route`] files routes under (the `--cluster-name` default).
pub const DEFAULT_CLUSTER: &str = "kubernetes";

/// The default load-balancer IP pool (TEST-NET-3, documentation addresses).
pub const DEFAULT_LOAD_BALANCER_IP_POOL: &str = "203.0.113.0/24";

/// How many calls the call log ([`FakeCloud::calls`]) keeps: the most recent ones. The log used to keep every
/// call, so a reference CCM over 10,000 nodes grew by one entry per node every address-sync period, for as long
/// as it ran. [`FakeCloud::call_count`] counts every call.
pub const CALL_LOG_LIMIT: usize = 10_000;

/// How many `create` and `update` calls [`FakeCloud::load_balancer_calls`] keeps, the most recent ones (each holds
/// the call's hosts, up to one per node).
pub const LOAD_BALANCER_CALL_LOG_LIMIT: usize = 1_000;

/// Append `item`, dropping the oldest entries beyond `limit`.
pub(crate) fn push_bounded<T>(log: &mut VecDeque<T>, item: T, limit: usize) {
    if log.len() >= limit {
        log.pop_front();
    }
    log.push_back(item);
}

/// A port of a fake load balancer, copied from the Service's `spec.ports`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakePort {
    /// The port name (`""` if unnamed).
    pub name: String,
    /// The protocol (`TCP` if the Service did not say).
    pub protocol: String,
    /// The load balancer's port.
    pub port: i32,
    /// The node port traffic is sent to, if allocated.
    pub node_port: Option<i32>,
}

/// A load balancer of the fake cloud, one per Service.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FakeLoadBalancer {
    /// The cloud name: `"a"` + the Service UID without dashes (cut to 32 characters), or
    /// `<cluster>-<namespace>-<name>` for a Service without UID.
    pub name: String,
    /// The service key, `namespace/name`.
    pub service: String,
    /// The cluster name the controller passed.
    pub cluster: String,
    /// The backend node names, sorted, without duplicates.
    pub hosts: Vec<String>,
    /// The Service's ports.
    pub ports: Vec<FakePort>,
    /// The ingress IP, allocated in order from the pool (or the Service's `spec.loadBalancerIP`) and stable for
    /// the load balancer's lifetime.
    pub ingress_ip: String,
    /// The `ipMode` reported in the status, if set with [`FakeCloud::set_ip_mode`].
    pub ip_mode: Option<String>,
    /// The allowed source CIDRs (from `spec.loadBalancerSourceRanges` or the annotation; `0.0.0.0/0` if none).
    pub source_ranges: Vec<String>,
    /// The health check `(path, node port)` for `externalTrafficPolicy: Local` Services.
    pub health_check: Option<(String, i32)>,
    /// The [fingerprint](ccm_core::listing::load_balancer_fingerprint) of the Service as last ensured, reported by
    /// [`list_load_balancers`](ccm_core::LoadBalancer::list_load_balancers).
    pub fingerprint: String,
}

impl FakeLoadBalancer {
    /// The status `ensure_load_balancer` and `get_load_balancer` report: one ingress entry with the IP (and
    /// `ipMode`), and a port status per port.
    pub fn status(&self) -> LoadBalancerStatus {
        let ports: Vec<PortStatus> = self
            .ports
            .iter()
            .map(|p| PortStatus {
                port: p.port,
                protocol: p.protocol.clone(),
                error: None,
            })
            .collect();
        LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(self.ingress_ip.clone()),
                ip_mode: self.ip_mode.clone(),
                ports: (!ports.is_empty()).then_some(ports),
                hostname: None,
            }]),
        }
    }
}

/// Everything the fake cloud knows, behind one mutex.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) provider_name: String,
    pub(crate) capabilities: BTreeSet<Capability>,
    pub(crate) has_cluster_id: bool,
    pub(crate) bulk: bool,
    /// Whether `list_load_balancers` answers natively, and how many load balancers a page holds.
    pub(crate) listing: Option<usize>,
    pub(crate) instances: BTreeMap<String, FakeInstance>,
    pub(crate) local_zone: Option<Zone>,
    pub(crate) lb_pool: IpNet,
    pub(crate) lb_cursor: usize,
    pub(crate) ip_mode: Option<String>,
    pub(crate) load_balancers: BTreeMap<String, FakeLoadBalancer>,
    pub(crate) lb_calls: VecDeque<LoadBalancerCall>,
    /// cluster → destination CIDR → route.
    pub(crate) routes: BTreeMap<String, BTreeMap<String, Route>>,
    /// cluster name → master address.
    pub(crate) clusters: Vec<(String, String)>,
    /// The most recent [`CALL_LOG_LIMIT`] calls.
    pub(crate) calls: VecDeque<Call>,
    /// Every call since the last clear, per operation (exact, however long the log grew).
    pub(crate) call_counts: BTreeMap<Operation, usize>,
    pub(crate) faults: FaultTable,
    pub(crate) quota: Option<Quota>,
    pub(crate) throttled: usize,
    /// Where [`crate::snapshot`] writes the state, if anywhere.
    pub(crate) state_file: Option<std::path::PathBuf>,
    /// Filled in on every inventory instance after a reload (see [`crate::reload`]).
    pub(crate) instance_defaults: crate::reload::InstanceDefaults,
}

impl State {
    /// Log `call`, forgetting the oldest beyond [`CALL_LOG_LIMIT`], and count it.
    fn log_call(&mut self, call: Call) {
        *self.call_counts.entry(call.op).or_default() += 1;
        push_bounded(&mut self.calls, call, CALL_LOG_LIMIT);
    }

    fn new(provider_name: &str) -> Self {
        State {
            provider_name: provider_name.to_owned(),
            capabilities: Capability::ALL.into_iter().collect(),
            has_cluster_id: true,
            bulk: false,
            listing: None,
            instances: BTreeMap::new(),
            local_zone: None,
            lb_pool: default_pool(),
            lb_cursor: 0,
            ip_mode: None,
            load_balancers: BTreeMap::new(),
            lb_calls: VecDeque::new(),
            routes: BTreeMap::new(),
            clusters: Vec::new(),
            calls: VecDeque::new(),
            call_counts: BTreeMap::new(),
            faults: FaultTable::default(),
            quota: None,
            throttled: 0,
            state_file: None,
            instance_defaults: crate::reload::InstanceDefaults::default(),
        }
    }

    /// The instance serving a providerID; `""` matches nothing.
    pub(crate) fn by_provider_id(&self, provider_id: &str) -> Option<&FakeInstance> {
        if provider_id.is_empty() {
            return None;
        }
        let name = &self.provider_name;
        // Most providerIDs are the default `<provider>://<name>`: look that instance up by name first, so a
        // lookup costs no scan of the whole inventory (the benchmarks ask once per node and period).
        let named = provider_id
            .strip_prefix(name.as_str())
            .and_then(|rest| rest.strip_prefix("://"))
            .and_then(|instance| self.instances.get(instance))
            .filter(|i| i.has_provider_id(name, provider_id));
        named.or_else(|| {
            self.instances
                .values()
                .find(|i| i.has_provider_id(name, provider_id))
        })
    }

    /// The instance of a node: by `spec.providerID` when set (a foreign or unknown providerID matches
    /// nothing), else by name.
    pub(crate) fn by_node(&self, name: &str, provider_id: &str) -> Option<&FakeInstance> {
        if provider_id.is_empty() {
            self.instances.get(name)
        } else {
            self.by_provider_id(provider_id)
        }
    }

    /// The next free ingress IP, or `None` when the pool is exhausted.
    pub(crate) fn allocate_ip(&mut self) -> Option<IpAddr> {
        let in_use: BTreeSet<IpAddr> = self
            .load_balancers
            .values()
            .filter_map(|lb| lb.ingress_ip.parse().ok())
            .collect();
        let (ip, next) = allocate(&self.lb_pool, self.lb_cursor, &in_use)?;
        self.lb_cursor = next;
        Some(ip)
    }

    /// A fresh route name: `<cluster>-<hint>-<cidr>` with `/` and `:` replaced by `-`.
    pub(crate) fn route_name(cluster: &str, hint: &str, cidr: &str) -> String {
        let cidr: String = cidr
            .chars()
            .map(|c| if c == '/' || c == ':' { '-' } else { c })
            .collect();
        format!("{cluster}-{hint}-{cidr}")
    }
}

fn default_pool() -> IpNet {
    IpNet::V4(
        Ipv4Net::new(Ipv4Addr::new(203, 0, 113, 0), 24).expect("24 is a valid IPv4 prefix length"),
    )
}

/// The addresses of `pool` that may be handed out, in order: IPv4 pools skip the network and broadcast
/// addresses (except /31 and /32), IPv6 pools skip the subnet-router anycast address (except /127 and /128).
fn pool_hosts(pool: &IpNet) -> impl Iterator<Item = IpAddr> + '_ {
    let skip_first = matches!(pool, IpNet::V6(net) if net.prefix_len() < 127);
    pool.hosts().skip(usize::from(skip_first))
}

/// Pick the first address of `pool` at or after index `cursor` (wrapping around) that is not in `in_use`.
/// Returns the address and the cursor for the next allocation.
pub(crate) fn allocate(
    pool: &IpNet,
    cursor: usize,
    in_use: &BTreeSet<IpAddr>,
) -> Option<(IpAddr, usize)> {
    let after = pool_hosts(pool).enumerate().skip(cursor);
    let before = pool_hosts(pool).enumerate().take(cursor);
    after
        .chain(before)
        .find(|(_, ip)| !in_use.contains(ip))
        .map(|(index, ip)| (ip, index + 1))
}

/// An in-memory cloud implementing every ccm-core provider trait.
///
/// Clones are cheap and share one state, so a test keeps a clone and changes the cloud (removes an instance,
/// shuts one down, injects a fault) while the controllers use another through `Arc<dyn CloudProvider>`; every
/// change is visible to the next call. Nothing is random: load-balancer IPs are handed out in order.
///
/// Note that the inherent [`routes`](FakeCloud::routes) and [`load_balancer`](FakeCloud::load_balancer)
/// (inspection helpers) shadow the [`CloudProvider`](ccm_core::CloudProvider) accessors of the same names; call
/// those as `CloudProvider::routes(Arc::new(cloud.clone()))` or through an `Arc<dyn CloudProvider>`.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use ccm_core::CloudProvider;
/// use ccm_provider_fake::{Fault, FakeCloud, FakeInstance, InjectedError, Operation};
///
/// let cloud = FakeCloud::new();
/// cloud.add_instance(FakeInstance::new("node-a").with_internal_ip("10.0.0.11").with_zone("zone-a", "region-1"));
/// cloud.inject(Operation::EnsureLoadBalancer, Fault::once(InjectedError::Retry(Duration::from_secs(42))));
/// let provider: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
/// // ... run controllers with `provider`, then:
/// cloud.set_shutdown("node-a", true);
/// assert_eq!(cloud.call_count(Operation::EnsureLoadBalancer), 0);
/// ```
#[derive(Clone)]
pub struct FakeCloud {
    pub(crate) provider_name: Arc<str>,
    pub(crate) state: Arc<Mutex<State>>,
    /// Woken whenever a call is logged.
    pub(crate) called: Arc<Notify>,
}

impl std::fmt::Debug for FakeCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("FakeCloud")
            .field("provider_name", &self.provider_name)
            .field("instances", &st.instances.len())
            .field("load_balancers", &st.load_balancers.len())
            .field("calls", &st.calls.len())
            .finish_non_exhaustive()
    }
}

impl Default for FakeCloud {
    fn default() -> Self {
        FakeCloud::new()
    }
}

impl FakeCloud {
    /// An empty cloud named `fake` with every capability (including InstancesV2) on and the load-balancer pool
    /// `203.0.113.0/24`.
    pub fn new() -> Self {
        FakeCloud {
            provider_name: Arc::from(PROVIDER_NAME),
            state: Arc::new(Mutex::new(State::new(PROVIDER_NAME))),
            called: Arc::new(Notify::new()),
        }
    }

    /// Rename the provider: providerIDs become `<name>://...`. Call it while building the cloud, before
    /// handing out clones (clones made earlier keep reporting the old name from `provider_name()`).
    pub fn with_provider_name(mut self, name: &str) -> Self {
        self.provider_name = Arc::from(name);
        self.lock().provider_name = name.to_owned();
        self
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The provider name (the providerID prefix).
    pub fn name(&self) -> &str {
        &self.provider_name
    }

    // ----- capabilities -----

    /// Switch a capability on or off; the accessor of a capability that is off returns `None`.
    pub fn set_capability(&self, cap: Capability, enabled: bool) {
        let mut st = self.lock();
        if enabled {
            st.capabilities.insert(cap);
        } else {
            st.capabilities.remove(&cap);
        }
    }

    /// Whether a capability is on.
    pub fn has_capability(&self, cap: Capability) -> bool {
        self.lock().capabilities.contains(&cap)
    }

    /// What [`CloudProvider::has_cluster_id`](ccm_core::CloudProvider::has_cluster_id) answers (default true).
    pub fn set_has_cluster_id(&self, has: bool) {
        self.lock().has_cluster_id = has;
    }

    /// Answer [`InstancesV2`](ccm_core::InstancesV2) bulk calls natively (`supports_bulk` = true): one
    /// `instance-metadata-bulk` / `instance-exists-bulk` / `instance-shutdown-bulk` call, with one latency and one
    /// fault check, answers for every node. Off by default, like Go (one call per node). A fault of the single-node operation aimed at a
    /// node ([`inject_for`](Self::inject_for)) fails that node's item of a bulk answer.
    pub fn set_bulk(&self, enabled: bool) {
        self.lock().bulk = enabled;
    }

    /// Answer [`list_load_balancers`](ccm_core::LoadBalancer::list_load_balancers) natively (`supports_listing` =
    /// true) with pages of `page_size` load balancers (at least 1), or not at all (`None`, the default, like Go's
    /// providers: a new leader then ensures every load balancer). Each page is one `list-load-balancers` call with
    /// its own latency, fault check and quota token.
    pub fn set_listing(&self, page_size: Option<usize>) {
        self.lock().listing = page_size.map(|n| n.max(1));
    }

    // ----- instances -----

    /// Add an instance, replacing any instance of the same name.
    pub fn add_instance(&self, instance: FakeInstance) {
        self.lock()
            .instances
            .insert(instance.name.clone(), instance);
    }

    /// Remove (terminate) the instance of a node; returns whether it existed.
    pub fn remove_instance(&self, node_name: &str) -> bool {
        self.lock().instances.remove(node_name).is_some()
    }

    /// Shut an instance down (it still exists) or start it; returns whether it exists.
    pub fn set_shutdown(&self, node_name: &str, shutdown: bool) -> bool {
        self.update_instance(node_name, |i| i.shutdown = shutdown)
    }

    /// Replace an instance's addresses; returns whether it exists.
    pub fn set_addresses(&self, node_name: &str, addresses: Vec<NodeAddress>) -> bool {
        self.update_instance(node_name, |i| i.addresses = addresses)
    }

    /// Change an instance in place; returns whether it exists.
    ///
    /// ```
    /// use ccm_provider_fake::{FakeCloud, FakeInstance};
    /// let cloud = FakeCloud::new();
    /// cloud.add_instance(FakeInstance::new("node-a"));
    /// assert!(cloud.update_instance("node-a", |i| i.instance_type = "fake.xlarge".into()));
    /// assert_eq!(cloud.instance("node-a").unwrap().instance_type, "fake.xlarge");
    /// ```
    pub fn update_instance(&self, node_name: &str, change: impl FnOnce(&mut FakeInstance)) -> bool {
        match self.lock().instances.get_mut(node_name) {
            Some(instance) => {
                change(instance);
                true
            }
            None => false,
        }
    }

    /// The instance of a node, with its providerID resolved (`Some("")` if it has none).
    pub fn instance(&self, node_name: &str) -> Option<FakeInstance> {
        let st = self.lock();
        st.instances
            .get(node_name)
            .map(|i| resolved(i, &st.provider_name))
    }

    /// Every instance, ordered by node name, with providerIDs resolved. (Shadows the
    /// [`CloudProvider::instances`](ccm_core::CloudProvider::instances) accessor; see [`FakeCloud`].)
    pub fn instances(&self) -> Vec<FakeInstance> {
        self.all_instances()
    }

    /// The same as [`instances`](Self::instances), under a name that no provider trait uses.
    pub fn all_instances(&self) -> Vec<FakeInstance> {
        let st = self.lock();
        st.instances
            .values()
            .map(|i| resolved(i, &st.provider_name))
            .collect()
    }

    /// The zone `get_zone` reports (the zone of "this machine"); unset, `get_zone` answers
    /// [`CloudError::NotImplemented`].
    pub fn set_local_zone(&self, zone: Option<Zone>) {
        self.lock().local_zone = zone;
    }

    // ----- load balancers -----

    /// Every load balancer, ordered by service key.
    pub fn load_balancers(&self) -> Vec<FakeLoadBalancer> {
        self.lock().load_balancers.values().cloned().collect()
    }

    /// The load balancer of a Service (`namespace/name`).
    pub fn load_balancer(&self, service_key: &str) -> Option<FakeLoadBalancer> {
        self.lock().load_balancers.get(service_key).cloned()
    }

    /// Replace a load balancer's hosts behind the controller's back (drift); returns whether it exists.
    pub fn set_load_balancer_hosts(&self, service_key: &str, hosts: Vec<String>) -> bool {
        match self.lock().load_balancers.get_mut(service_key) {
            Some(lb) => {
                lb.hosts = sorted_unique(hosts);
                true
            }
            None => false,
        }
    }

    /// Delete a load balancer behind the controller's back; returns whether it existed.
    pub fn remove_load_balancer(&self, service_key: &str) -> bool {
        let mut st = self.lock();
        let removed = st.load_balancers.remove(service_key).is_some();
        crate::snapshot::persist_locked(&st, service_key);
        removed
    }

    /// The `create` and `update` calls with the hosts they carried, in order, including calls that failed (like
    /// the call log): all of them, or the most recent [`LOAD_BALANCER_CALL_LOG_LIMIT`] once there were more;
    /// cleared by [`clear_calls`](Self::clear_calls).
    pub fn load_balancer_calls(&self) -> Vec<LoadBalancerCall> {
        self.lock().lb_calls.iter().cloned().collect()
    }

    /// Use another pool for new load-balancer IPs; allocation restarts at its first address. Existing load
    /// balancers keep their IPs.
    pub fn set_load_balancer_ip_pool(&self, pool: IpNet) {
        let mut st = self.lock();
        st.lb_pool = pool.trunc();
        st.lb_cursor = 0;
    }

    /// The `ipMode` (`VIP` or `Proxy`) reported in load-balancer statuses; `None` (the default) omits it.
    /// Applies to load balancers ensured from now on.
    pub fn set_ip_mode(&self, ip_mode: Option<&str>) {
        self.lock().ip_mode = ip_mode.map(str::to_owned);
    }

    // ----- routes -----

    /// Every route of every cluster, ordered by cluster then destination CIDR.
    pub fn routes(&self) -> Vec<Route> {
        self.lock()
            .routes
            .values()
            .flat_map(|r| r.values().cloned())
            .collect()
    }

    /// The routes of one cluster, ordered by destination CIDR.
    pub fn routes_in(&self, cluster: &str) -> Vec<Route> {
        self.lock()
            .routes
            .get(cluster)
            .map(|r| r.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Pre-seed a route of cluster `kubernetes` (for example a stale or blackhole one), replacing any route
    /// to the same CIDR. A route without name is named `kubernetes-<target node>-<cidr>`.
    pub fn insert_route(&self, route: Route) {
        self.insert_route_in(DEFAULT_CLUSTER, route);
    }

    /// [`insert_route`](Self::insert_route) into another cluster.
    pub fn insert_route_in(&self, cluster: &str, mut route: Route) {
        if route.name.is_empty() {
            route.name = State::route_name(cluster, &route.target_node, &route.destination_cidr);
        }
        self.lock()
            .routes
            .entry(cluster.to_owned())
            .or_default()
            .insert(route.destination_cidr.clone(), route);
    }

    /// Remove every route of every cluster.
    pub fn clear_routes(&self) {
        self.lock().routes.clear();
    }

    // ----- clusters -----

    /// The clusters `list_clusters` reports, in order; each one's master address is
    /// `master.<cluster>.<provider>.invalid` unless set with [`set_master`](Self::set_master).
    pub fn set_clusters(&self, clusters: Vec<String>) {
        let mut st = self.lock();
        let provider = st.provider_name.clone();
        st.clusters = clusters
            .into_iter()
            .map(|c| {
                let master = format!("master.{c}.{provider}.invalid");
                (c, master)
            })
            .collect();
    }

    /// Set (adding the cluster if needed) the master address `master(cluster)` reports.
    pub fn set_master(&self, cluster: &str, address: &str) {
        let mut st = self.lock();
        match st.clusters.iter_mut().find(|(c, _)| c == cluster) {
            Some(entry) => entry.1 = address.to_owned(),
            None => st.clusters.push((cluster.to_owned(), address.to_owned())),
        }
    }

    // ----- call log -----

    /// The calls received, in order: all of them, or the most recent [`CALL_LOG_LIMIT`] once there were more (a
    /// CCM that runs for days must not keep every call it ever made; [`call_count`](Self::call_count) stays exact).
    /// A call is logged when it arrives, before its latency and fault.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.iter().cloned().collect()
    }

    /// The operations of the logged calls ([`calls`](Self::calls)), in order (the Go fake's `Calls`, whose names
    /// are their [`as_str`](Operation::as_str)).
    pub fn call_ops(&self) -> Vec<Operation> {
        self.lock().calls.iter().map(|c| c.op).collect()
    }

    /// How many calls of `op` were received since creation or the last [`clear_calls`](Self::clear_calls):
    /// exact, also beyond what the log keeps.
    pub fn call_count(&self, op: Operation) -> usize {
        self.lock().call_counts.get(&op).copied().unwrap_or(0)
    }

    /// The targets of the logged calls of `op` ([`calls`](Self::calls)), in order.
    pub fn call_targets(&self, op: Operation) -> Vec<String> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.op == op)
            .map(|c| c.target.clone())
            .collect()
    }

    /// Wait until at least `count` calls of `op` have been logged (counting calls logged before, until
    /// [`clear_calls`](Self::clear_calls)). Wrap it in `tokio::time::timeout` in tests.
    ///
    /// ```no_run
    /// # async fn example(cloud: ccm_provider_fake::FakeCloud) {
    /// use std::time::Duration;
    /// use ccm_provider_fake::Operation;
    ///
    /// // ... start a service controller using `cloud` ...
    /// tokio::time::timeout(Duration::from_secs(30), cloud.wait_for_calls(Operation::EnsureLoadBalancer, 1))
    ///     .await
    ///     .expect("the controller ensured the load balancer");
    /// # }
    /// ```
    pub async fn wait_for_calls(&self, op: Operation, count: usize) {
        loop {
            let notified = self.called.notified();
            tokio::pin!(notified);
            // register before checking, so a call logged in between is not missed
            notified.as_mut().enable();
            if self.call_count(op) >= count {
                return;
            }
            notified.await;
        }
    }

    /// Forget every logged call (and [`load_balancer_calls`](Self::load_balancer_calls) and the
    /// [`throttled_count`](Self::throttled_count)).
    pub fn clear_calls(&self) {
        let mut st = self.lock();
        st.calls.clear();
        st.call_counts.clear();
        st.lb_calls.clear();
        st.throttled = 0;
    }

    // ----- quota -----

    /// Enforce an API quota like a real cloud's: a token bucket of `requests_per_second`, holding at most
    /// `burst` requests (full when set). Every call except `initialize` takes a token when it arrives (a bulk
    /// call takes one); a call that finds none is rejected at once, before its latency and faults, with
    /// [`CloudError::Throttled`] carrying the time until the next token, and is counted in
    /// [`throttled_count`](Self::throttled_count). Rejected calls are still logged. Uses tokio time, so paused
    /// test time works.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use ccm_core::{CloudProvider, ErrorKind};
    /// use ccm_provider_fake::{FakeCloud, FakeInstance};
    /// use k8s_openapi::api::core::v1::Node;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let cloud = FakeCloud::new();
    /// cloud.add_instance(FakeInstance::new("node-a"));
    /// cloud.set_quota(2.0, 2).unwrap();
    /// let v2 = Arc::new(cloud.clone()).instances_v2().unwrap();
    /// let mut node = Node::default();
    /// node.metadata.name = Some("node-a".into());
    /// assert!(v2.instance_exists(&node).await.unwrap());
    /// assert!(v2.instance_exists(&node).await.unwrap());
    /// let err = v2.instance_exists(&node).await.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Throttled);
    /// assert_eq!(cloud.throttled_count(), 1);
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`QuotaError`] if the rate is not a finite number above 0 or the burst is 0 (the quota is unchanged).
    pub fn set_quota(&self, requests_per_second: f64, burst: u32) -> Result<(), QuotaError> {
        let quota = Quota::new(requests_per_second, burst)?;
        self.lock().quota = Some(quota);
        Ok(())
    }

    /// Remove the quota: no call is throttled any more.
    pub fn clear_quota(&self) {
        self.lock().quota = None;
    }

    /// How many calls the quota rejected (since creation or the last [`clear_calls`](Self::clear_calls)).
    pub fn throttled_count(&self) -> usize {
        self.lock().throttled
    }

    // ----- faults -----

    /// Make calls of `op` fail with `fault.error`, `fault.times` times. Faults of one operation fire in the order
    /// injected.
    pub fn inject(&self, op: Operation, fault: Fault) {
        self.lock().faults.inject(op, None, fault);
    }

    /// Like [`inject`](Self::inject), but only calls whose target (node name, providerID, service key, CIDR,
    /// cluster; the table in [`Operation`]'s documentation says which) equals `target` fail.
    pub fn inject_for(&self, op: Operation, target: &str, fault: Fault) {
        self.lock().faults.inject(op, Some(target), fault);
    }

    /// How many injected faults of `op` have not been used up (an `Always` fault counts as one).
    pub fn pending_faults(&self, op: Operation) -> usize {
        self.lock().faults.pending(op)
    }

    /// Delay every answer to `op` by `latency` (`tokio::time::sleep`, so paused test time works); zero removes
    /// the delay.
    pub fn set_latency(&self, op: Operation, latency: Duration) {
        self.lock().faults.set_latency(op, latency);
    }

    /// Delay every operation without a latency of its own (the Go fake's `RequestDelay`).
    pub fn set_default_latency(&self, latency: Duration) {
        self.lock().faults.set_default_latency(latency);
    }

    /// Remove every injected fault and latency, and the random-fault profile.
    pub fn clear_faults(&self) {
        let mut st = self.lock();
        st.faults.clear_faults();
        st.faults.clear_latency();
    }

    /// Remove every latency, keeping the injected faults.
    pub fn clear_latency(&self) {
        self.lock().faults.clear_latency();
    }

    // ----- call plumbing -----

    /// Log the call, check the quota, wait the op's latency (fixed plus random), and return the injected error
    /// if one fires (a counted fault first, else a random one).
    pub(crate) async fn begin(&self, op: Operation, target: &str) -> Result<(), CloudError> {
        let (latency, throttled, random_error) = {
            let mut st = self.lock();
            st.log_call(Call::new(op, target));
            let throttled = match st.quota.as_mut() {
                Some(quota) if op != Operation::Initialize => match quota.try_take() {
                    Ok(()) => None,
                    Err(retry_after) => Some(quota.error(op, retry_after)),
                },
                _ => None,
            };
            if throttled.is_some() {
                st.throttled += 1;
            }
            let random = st.faults.roll(op, tokio::time::Instant::now());
            (
                st.faults.latency(op) + random.latency,
                throttled,
                random.error,
            )
        };
        self.called.notify_waiters();
        if let Some(err) = throttled {
            tracing::debug!(op = op.as_str(), target, error = %err, "fake cloud call rejected by the quota");
            return Err(err);
        }
        tracing::debug!(op = op.as_str(), target, latency = ?latency, "fake cloud call");
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let injected = self.lock().faults.fire(op, target).or(random_error);
        match injected {
            Some(error) => {
                let err = error.to_cloud_error(op, latency);
                tracing::debug!(op = op.as_str(), target, error = %err, "fake cloud call fails with an injected error");
                Err(err)
            }
            None => Ok(()),
        }
    }
}

/// A copy of `instance` with its providerID resolved.
fn resolved(instance: &FakeInstance, provider_name: &str) -> FakeInstance {
    let mut copy = instance.clone();
    copy.provider_id = Some(instance.resolved_provider_id(provider_name));
    copy
}

pub(crate) fn sorted_unique(mut names: Vec<String>) -> Vec<String> {
    names.retain(|n| !n.is_empty());
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_call_log_keeps_the_most_recent_calls_and_counts_every_one() {
        let cloud = FakeCloud::new();
        let total = CALL_LOG_LIMIT + 5;
        for i in 0..total {
            cloud
                .begin(Operation::InstanceMetadata, &format!("node-{i}"))
                .await
                .unwrap();
        }
        cloud
            .begin(Operation::InstanceExists, "last")
            .await
            .unwrap();
        let calls = cloud.calls();
        assert_eq!(calls.len(), CALL_LOG_LIMIT);
        assert_eq!(calls[0].target, "node-6", "the oldest six were forgotten");
        assert_eq!(
            calls.last(),
            Some(&Call::new(Operation::InstanceExists, "last"))
        );
        assert_eq!(cloud.call_count(Operation::InstanceMetadata), total);
        assert_eq!(cloud.call_count(Operation::InstanceExists), 1);
        assert_eq!(cloud.call_count(Operation::EnsureLoadBalancer), 0);
        cloud.clear_calls();
        assert!(cloud.calls().is_empty());
        assert_eq!(cloud.call_count(Operation::InstanceMetadata), 0);
    }

    #[test]
    fn a_bounded_log_drops_from_the_front() {
        let mut log = VecDeque::new();
        for i in 0..5 {
            push_bounded(&mut log, i, 3);
        }
        assert_eq!(log, [2, 3, 4]);
    }

    fn ips(pool: &str, in_use: &[&str], cursor: usize) -> Option<(String, usize)> {
        let pool: IpNet = pool.parse().unwrap();
        let in_use = in_use.iter().map(|s| s.parse().unwrap()).collect();
        allocate(&pool, cursor, &in_use).map(|(ip, next)| (ip.to_string(), next))
    }

    #[test]
    fn a_provider_id_finds_its_instance_whether_it_names_one_or_not() {
        let mut state = State::new("fake");
        for instance in [
            FakeInstance::new("a").with_provider_id("fake://b"),
            FakeInstance::new("b").with_provider_id("fake:///zone-a/i-b"),
            FakeInstance::new("c"),
            FakeInstance::new("d").without_provider_id(),
        ] {
            state.instances.insert(instance.name.clone(), instance);
        }
        let found = |id: &str| state.by_provider_id(id).map(|i| i.name.as_str());
        assert_eq!(found("fake://b"), Some("a"));
        assert_eq!(found("fake:///zone-a/i-b"), Some("b"));
        assert_eq!(found("fake://c"), Some("c"));
        assert_eq!(found("fake://a"), None);
        assert_eq!(found("fake://d"), None);
        assert_eq!(found("other://c"), None);
        assert_eq!(found(""), None);
    }

    #[test]
    fn allocation_is_in_order_and_skips_used_addresses() {
        assert_eq!(
            ips("203.0.113.0/24", &[], 0),
            Some(("203.0.113.1".into(), 1))
        );
        assert_eq!(
            ips("203.0.113.0/24", &[], 1),
            Some(("203.0.113.2".into(), 2))
        );
        assert_eq!(
            ips("203.0.113.0/24", &["203.0.113.2"], 1),
            Some(("203.0.113.3".into(), 3))
        );
    }

    #[test]
    fn allocation_wraps_and_reports_exhaustion() {
        // /30 has two usable hosts: .1 and .2
        assert_eq!(
            ips("10.0.0.0/30", &["10.0.0.1"], 0),
            Some(("10.0.0.2".into(), 2))
        );
        assert_eq!(
            ips("10.0.0.0/30", &["10.0.0.2"], 2),
            Some(("10.0.0.1".into(), 1))
        );
        assert_eq!(ips("10.0.0.0/30", &["10.0.0.1", "10.0.0.2"], 0), None);
        assert_eq!(ips("10.0.0.5/32", &[], 0), Some(("10.0.0.5".into(), 1)));
    }

    #[test]
    fn ipv6_pool_skips_the_anycast_address() {
        assert_eq!(
            ips("2001:db8::/120", &[], 0),
            Some(("2001:db8::1".into(), 1))
        );
        assert_eq!(
            ips("2001:db8::/64", &["2001:db8::1"], 0),
            Some(("2001:db8::2".into(), 2))
        );
    }

    #[test]
    fn route_names_are_cluster_hint_cidr() {
        assert_eq!(
            State::route_name("kubernetes", "uid-1", "10.244.1.0/24"),
            "kubernetes-uid-1-10.244.1.0-24"
        );
        assert_eq!(
            State::route_name("c", "n", "fd00:10::/64"),
            "c-n-fd00-10---64"
        );
    }

    #[test]
    fn sorted_unique_drops_empty_and_duplicates() {
        let v = sorted_unique(vec!["b".into(), "a".into(), "b".into(), String::new()]);
        assert_eq!(v, ["a", "b"]);
    }
}
