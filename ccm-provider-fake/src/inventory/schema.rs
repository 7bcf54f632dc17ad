//! The inventory's schema: the YAML document's types (their docs are the JSON schema's descriptions).

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_core::duration::GoDuration;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::random_spec::RandomFaultsSpec;

fn yes() -> bool {
    true
}

/// A whole fake cloud. Every field is optional; an empty document is an empty cloud.
///
/// ```
/// use ccm_provider_fake::Inventory;
///
/// let yaml = "instances:\n  - name: node-a\n    addresses: [{type: InternalIP, address: 10.0.0.11}]\n";
/// let inventory = Inventory::from_yaml_str(yaml, "inventory.yaml").unwrap();
/// assert_eq!(inventory.instances[0].name, "node-a");
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(
    title = "Fake cloud inventory",
    description = "The cloud that ccm-provider-fake simulates (--cloud-provider=fake --cloud-config=<this file>)."
)]
#[non_exhaustive]
pub struct Inventory {
    /// The provider name, used as the providerID prefix `<providerName>://`. Default `fake`.
    #[serde(default)]
    pub provider_name: Option<String>,
    /// Which provider capabilities are offered; each defaults to true.
    #[serde(default)]
    pub capabilities: CapabilitiesSpec,
    /// The CIDR load-balancer IPs are allocated from, in order. Default `203.0.113.0/24`.
    #[serde(default, rename = "loadBalancerIPPool")]
    pub load_balancer_ip_pool: Option<String>,
    /// The `ipMode` reported in load-balancer statuses; omitted when unset.
    #[serde(default, rename = "loadBalancerIPMode")]
    pub load_balancer_ip_mode: Option<IpModeSpec>,
    /// What `HasClusterID` answers. Default true.
    #[serde(default = "yes", rename = "hasClusterID")]
    #[schemars(default = "yes")]
    pub has_cluster_id: bool,
    /// Whether InstancesV2 bulk calls (`instance-metadata-bulk`, `instance-exists-bulk`, `instance-shutdown-bulk`) are answered natively.
    /// Default false: one call per node, like Go.
    #[serde(default)]
    pub supports_bulk: bool,
    /// Whether `list_load_balancers` answers natively, with pages of this many load balancers (at least 1).
    /// Default: no listing, like Go's providers (a starting service controller then ensures every Service).
    #[serde(default)]
    pub load_balancer_listing_page_size: Option<u32>,
    /// The clusters `ListClusters` reports.
    #[serde(default)]
    pub clusters: Vec<String>,
    /// The zone `GetZone` reports (the zone of "this machine"); `GetZone` is unimplemented when unset.
    #[serde(default)]
    pub local_zone: Option<ZoneSpec>,
    /// The instances (virtual machines), one per node.
    #[serde(default)]
    pub instances: Vec<InstanceSpec>,
    /// Routes that exist before the CCM starts (for example stale or blackhole ones).
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
    /// A delay before answering any operation without a latency of its own: a Go duration, such as `250ms`,
    /// `2s` or `1.5s`.
    #[serde(default, with = "ccm_core::duration::serde::option")]
    #[schemars(with = "Option<GoDuration>")]
    pub default_latency: Option<Duration>,
    /// A delay (a Go duration) per operation name (see the operation table in docs/fake-provider.md), such as
    /// `create: 2s`.
    #[serde(default)]
    pub latency: BTreeMap<String, GoDuration>,
    /// Errors injected into operations.
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// An API quota: calls beyond it are rejected with a throttling error. Default: no quota.
    #[serde(default)]
    pub quota: Option<QuotaSpec>,
    /// Random errors and latency (a seeded fault profile), optionally limited to a time window.
    #[serde(default)]
    pub random_faults: Option<RandomFaultsSpec>,
    /// A file the cloud writes its state to (instances and load balancers, JSON) whenever its load balancers
    /// change, so that a test can check the cloud of a CCM running in another process. Default: none.
    #[serde(default)]
    pub state_file: Option<String>,
    /// Start with the load balancers of `stateFile`, if it exists (written by an earlier CCM process: a cloud
    /// outlives the CCMs that use it). Default false: the cloud starts with none and overwrites the file.
    #[serde(default)]
    pub restore_state_file: bool,
}

/// An API quota, enforced as a token bucket (see `FakeCloud::set_quota`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct QuotaSpec {
    /// Requests per second the cloud accepts (greater than 0).
    pub requests_per_second: f64,
    /// Requests accepted at once after a quiet period (at least 1). Default: the rate, rounded up.
    #[serde(default)]
    pub burst: Option<u32>,
}

impl QuotaSpec {
    /// The burst: as given, or the rate rounded up (at least 1).
    pub fn effective_burst(&self) -> u32 {
        self.burst.unwrap_or_else(|| {
            let rounded = self.requests_per_second.ceil();
            if rounded.is_finite() && rounded >= 1.0 {
                // saturating float-to-int conversion
                rounded.min(f64::from(u32::MAX)) as u32
            } else {
                1
            }
        })
    }
}

impl Default for Inventory {
    /// An empty cloud: what an empty document means.
    fn default() -> Self {
        Inventory {
            provider_name: None,
            capabilities: CapabilitiesSpec::default(),
            load_balancer_ip_pool: None,
            load_balancer_ip_mode: None,
            has_cluster_id: true,
            supports_bulk: false,
            load_balancer_listing_page_size: None,
            clusters: Vec::new(),
            local_zone: None,
            instances: Vec::new(),
            routes: Vec::new(),
            default_latency: None,
            latency: BTreeMap::new(),
            faults: Vec::new(),
            quota: None,
            random_faults: None,
            state_file: None,
            restore_state_file: false,
        }
    }
}

/// Which capabilities the provider offers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct CapabilitiesSpec {
    /// The preferred instance API. When on, controllers never use `instances` or `zones`.
    #[serde(default = "yes", rename = "instancesV2")]
    #[schemars(default = "yes")]
    pub instances_v2: bool,
    /// The legacy V1 instance API.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub instances: bool,
    /// Zones (used only with the V1 instance API).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub zones: bool,
    /// Load balancers.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub load_balancer: bool,
    /// Pod-CIDR routes.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub routes: bool,
    /// Cluster listing.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub clusters: bool,
}

impl Default for CapabilitiesSpec {
    fn default() -> Self {
        CapabilitiesSpec {
            instances_v2: true,
            instances: true,
            zones: true,
            load_balancer: true,
            routes: true,
            clusters: true,
        }
    }
}

/// A load balancer's `ipMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum IpModeSpec {
    /// Traffic arrives with the load balancer's IP as destination.
    #[serde(rename = "VIP")]
    Vip,
    /// Traffic arrives through a proxy.
    Proxy,
}

impl IpModeSpec {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            IpModeSpec::Vip => "VIP",
            IpModeSpec::Proxy => "Proxy",
        }
    }
}

/// A zone and its region.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct ZoneSpec {
    /// The zone (failure domain).
    pub zone: String,
    /// The region.
    #[serde(default)]
    pub region: String,
}

/// One instance (virtual machine), serving the node of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct InstanceSpec {
    /// The node name.
    pub name: String,
    /// The providerID, `<providerName>://<id>`. Default `<providerName>://<name>`; `""` means the instance has
    /// no providerID (it is found by name only).
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    /// The instance type, written to `node.kubernetes.io/instance-type`.
    #[serde(default)]
    pub instance_type: String,
    /// The zone, written to `topology.kubernetes.io/zone`.
    #[serde(default)]
    pub zone: String,
    /// The region, written to `topology.kubernetes.io/region`.
    #[serde(default)]
    pub region: String,
    /// The node addresses, in order.
    #[serde(default)]
    pub addresses: Vec<AddressSpec>,
    /// Extra labels reported in the instance metadata (applied at node initialization).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Whether the instance is shut down (it still exists).
    #[serde(default)]
    pub shutdown: bool,
    /// Whether instance metadata is reported; when false the node controller skips the node.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub metadata: bool,
}

/// A node address.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AddressSpec {
    /// The address type.
    #[serde(rename = "type")]
    pub type_: AddressType,
    /// The address: an IP for `InternalIP`/`ExternalIP`, a name otherwise.
    pub address: String,
}

/// Node address types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum AddressType {
    /// `Hostname`.
    Hostname,
    /// `InternalIP`.
    #[serde(rename = "InternalIP")]
    InternalIp,
    /// `ExternalIP`.
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    /// `InternalDNS`.
    #[serde(rename = "InternalDNS")]
    InternalDns,
    /// `ExternalDNS`.
    #[serde(rename = "ExternalDNS")]
    ExternalDns,
}

impl AddressType {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressType::Hostname => "Hostname",
            AddressType::InternalIp => "InternalIP",
            AddressType::ExternalIp => "ExternalIP",
            AddressType::InternalDns => "InternalDNS",
            AddressType::ExternalDns => "ExternalDNS",
        }
    }

    pub(super) fn is_ip(self) -> bool {
        matches!(self, AddressType::InternalIp | AddressType::ExternalIp)
    }
}

/// A route that exists before the CCM starts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct RouteSpec {
    /// The cluster the route belongs to. Default `kubernetes`.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The cloud's name for the route. Default `<cluster>-<targetNode>-<cidr>`.
    #[serde(default)]
    pub name: Option<String>,
    /// The node the traffic goes to.
    pub target_node: String,
    /// The destination CIDR.
    #[serde(rename = "destinationCIDR")]
    pub destination_cidr: String,
    /// Whether the cloud reports the route as a blackhole (its target is gone).
    #[serde(default)]
    pub blackhole: bool,
}

/// An error injected into an operation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct FaultSpec {
    /// The operation name, for example `create` or `instance-metadata-by-provider-id`.
    pub operation: String,
    /// Only calls about this target fail (node name, providerID, `namespace/name`, CIDR or cluster).
    #[serde(default)]
    pub target: Option<String>,
    /// The kind of error.
    pub error: FaultKind,
    /// The message of an `other` error. Default `injected by the inventory`.
    #[serde(default)]
    pub message: Option<String>,
    /// The delay of a `retry` error (required) or a `throttled` error (optional): a Go duration, such as `30s`
    /// or `1m30s`.
    #[serde(default, with = "ccm_core::duration::serde::option")]
    #[schemars(with = "Option<GoDuration>")]
    pub retry_after: Option<Duration>,
    /// How many calls fail (at least 1). Default: every call.
    #[serde(default)]
    pub times: Option<u32>,
}

/// The kinds of injectable errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum FaultKind {
    /// A provider failure with no well-known kind.
    Other,
    /// The instance does not exist.
    InstanceNotFound,
    /// The operation is not implemented.
    NotImplemented,
    /// Another controller implements the load balancer.
    ImplementedElsewhere,
    /// Retry after `retryAfter`.
    Retry,
    /// The cloud API throttled the request.
    Throttled,
    /// The call timed out.
    Timeout,
}

impl Inventory {
    /// The JSON schema of the inventory format (draft 2020-12), pretty-printed with a final newline: the
    /// content of `docs/schema/fake-inventory.schema.json`.
    pub fn json_schema() -> String {
        let schema = schemars::schema_for!(Inventory);
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        text
    }
}
