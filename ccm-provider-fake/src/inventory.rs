//! The inventory: a YAML description of a fake cloud, so a CCM can be pointed at a described "cloud" with
//! `--cloud-provider=fake --cloud-config=inventory.yaml`.
//!
//! The format is documented in `docs/fake-provider.md`; its JSON schema (generated from these types) is
//! `docs/schema/fake-inventory.schema.json`. Unknown keys are rejected, and every error names the file and the
//! field path, for example `inventory.yaml: instances[2].addresses[0].address: invalid IP address "10.0.0.300"`.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use ccm_core::duration::GoDuration;
use ccm_core::helpers::ProviderId;
use ccm_core::intercept::{Capability, Operation};
use ccm_core::{Route, Zone};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::NodeAddress;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::cloud::{DEFAULT_CLUSTER, FakeCloud, PROVIDER_NAME};
use crate::fault::{Fault, InjectedError, Times};
use crate::instance::FakeInstance;
use crate::quota::QuotaError;
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
    /// Whether InstancesV2 bulk calls (`instance-metadata-bulk`, `instance-exists-bulk`) are answered natively.
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
    fn as_str(self) -> &'static str {
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

    fn is_ip(self) -> bool {
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

/// A bad inventory. Every variant names the file (`file`) and, where there is one, the field path (`path`,
/// such as `instances[2].addresses[0].address`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InventoryError {
    /// The file could not be read.
    #[error("{file}: cannot read the fake cloud inventory: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid YAML (or not one document).
    #[error("{file}{}: {message}", suffix(.at))]
    Syntax {
        /// The file.
        file: String,
        /// Where in the file, if known.
        at: Option<Position>,
        /// The parser's explanation.
        message: String,
    },
    /// A key the format does not have (a typo?).
    #[error("{file}: {path}: unknown field {field:?}{}; expected one of: {expected}", suffix(.at))]
    UnknownField {
        /// The file.
        file: String,
        /// The path of the mapping holding the key.
        path: String,
        /// The unknown key.
        field: String,
        /// The keys allowed there, comma separated.
        expected: String,
        /// Where in the file, if known.
        at: Option<Position>,
    },
    /// A value of the wrong type, an unknown enum value or a missing required field.
    #[error("{file}: {path}: {message}{}", suffix(.at))]
    WrongType {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// What was wrong.
        message: String,
        /// Where in the file, if known.
        at: Option<Position>,
    },
    /// An address of type `InternalIP`/`ExternalIP` that is not an IP address.
    #[error("{file}: {path}: invalid IP address {value:?}")]
    InvalidIp {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
    },
    /// A CIDR that does not parse, or has host bits set.
    #[error("{file}: {path}: invalid CIDR {value:?}: {reason}")]
    InvalidCidr {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
        /// Why.
        reason: String,
    },
    /// A providerID that is not `<providerName>://<id>`.
    #[error("{file}: {path}: invalid provider ID {value:?}: {reason}")]
    InvalidProviderId {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
        /// Why.
        reason: String,
    },
    /// Two entries with the same identity (instance name, providerID, route CIDR).
    #[error("{file}: {path}: duplicate {what} {value:?}, already used at {first}")]
    Duplicate {
        /// The file.
        file: String,
        /// The field path of the second occurrence.
        path: String,
        /// What is duplicated (`instance name`, ...).
        what: &'static str,
        /// The value.
        value: String,
        /// The field path of the first occurrence.
        first: String,
    },
    /// An operation name (in `faults` or `latency`) the fake cloud does not have.
    #[error("{file}: {path}: unknown operation {value:?}; known operations: {known}")]
    UnknownOperation {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
        /// The operation names, comma separated.
        known: String,
    },
    /// Any other invalid value.
    #[error("{file}: {path}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// A 1-based line and column in the inventory file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The line, from 1.
    pub line: u64,
    /// The column, from 1.
    pub column: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

fn suffix(at: &Option<Position>) -> String {
    at.map(|p| format!(" ({p})")).unwrap_or_default()
}

impl InventoryError {
    /// The file (or origin) the error is about.
    pub fn file(&self) -> &str {
        match self {
            InventoryError::Read { file, .. }
            | InventoryError::Syntax { file, .. }
            | InventoryError::UnknownField { file, .. }
            | InventoryError::WrongType { file, .. }
            | InventoryError::InvalidIp { file, .. }
            | InventoryError::InvalidCidr { file, .. }
            | InventoryError::InvalidProviderId { file, .. }
            | InventoryError::Duplicate { file, .. }
            | InventoryError::UnknownOperation { file, .. }
            | InventoryError::Invalid { file, .. } => file,
        }
    }

    /// The field path the error is about, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            InventoryError::Read { .. } | InventoryError::Syntax { .. } => None,
            InventoryError::UnknownField { path, .. }
            | InventoryError::WrongType { path, .. }
            | InventoryError::InvalidIp { path, .. }
            | InventoryError::InvalidCidr { path, .. }
            | InventoryError::InvalidProviderId { path, .. }
            | InventoryError::Duplicate { path, .. }
            | InventoryError::UnknownOperation { path, .. }
            | InventoryError::Invalid { path, .. } => Some(path),
        }
    }
}

/// The root path, as shown in messages.
const ROOT: &str = "(top level)";

/// True if the text has no YAML content (only blanks, comments and document markers).
fn is_blank(yaml: &str) -> bool {
    yaml.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---" || l == "...")
}

fn location(err: &serde_saphyr::Error) -> Option<Position> {
    err.location()
        .filter(|loc| loc.line() > 0)
        .map(|loc| Position {
            line: loc.line(),
            column: loc.column(),
        })
}

/// `message` without a trailing ` at line N, column M` (the position is shown separately).
fn without_location(message: &str) -> String {
    if let Some((head, tail)) = message.rsplit_once(" at line ") {
        let mut parts = tail.splitn(2, ", column ");
        let numeric = |s: Option<&str>| {
            s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        };
        if numeric(parts.next()) && numeric(parts.next()) {
            return head.to_owned();
        }
    }
    message.to_owned()
}

/// The parser's message in the words of the inventory format, without its position.
fn humanize(message: &str) -> String {
    let message = without_location(message);
    match message.as_str() {
        "expected sequence start" => "expected a list".to_owned(),
        "expected mapping start" => "expected a mapping of keys to values".to_owned(),
        "invalid boolean" => "expected true or false".to_owned(),
        _ => message,
    }
}

/// Turn a deserialization error at `path` into an [`InventoryError`].
fn classify(file: &str, path: String, err: &serde_saphyr::Error) -> InventoryError {
    let at = location(err);
    let file = file.to_owned();
    let path = if path.is_empty() || path == "." {
        ROOT.to_owned()
    } else {
        path
    };
    match err.without_snippet() {
        serde_saphyr::Error::SerdeUnknownField {
            field, expected, ..
        } => {
            // serde_path_to_error reports the unknown key as the last path segment; point at its mapping
            let parent = match path.strip_suffix(field.as_str()) {
                Some(p) => p.trim_end_matches('.').to_owned(),
                None => path.clone(),
            };
            InventoryError::UnknownField {
                file,
                path: if parent.is_empty() {
                    ROOT.to_owned()
                } else {
                    parent
                },
                field: field.clone(),
                expected: expected.join(", "),
                at,
            }
        }
        serde_saphyr::Error::SerdeInvalidType {
            unexpected,
            expected,
            ..
        }
        | serde_saphyr::Error::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => InventoryError::WrongType {
            file,
            path,
            message: format!("expected {expected}, found {unexpected}"),
            at,
        },
        serde_saphyr::Error::SerdeUnknownVariant {
            variant, expected, ..
        } => InventoryError::WrongType {
            file,
            path,
            message: format!(
                "unknown value {variant:?}; expected one of: {}",
                expected.join(", ")
            ),
            at,
        },
        serde_saphyr::Error::SerdeMissingField { field, .. } => InventoryError::WrongType {
            file,
            path,
            message: format!("missing required field {field:?}"),
            at,
        },
        serde_saphyr::Error::MultipleDocuments { .. } => InventoryError::Syntax {
            file,
            at,
            message: "the inventory must be a single YAML document; remove the extra `---` section"
                .to_owned(),
        },
        other if path != ROOT => InventoryError::WrongType {
            file,
            path,
            message: humanize(&other.to_string()),
            at,
        },
        other => InventoryError::Syntax {
            file,
            at,
            message: humanize(&other.to_string()),
        },
    }
}

impl Inventory {
    /// Parse an inventory from YAML; `origin` (usually the file name) prefixes every error. Unknown keys and
    /// wrong types are errors; values (IPs, CIDRs, providerIDs, operation names) are checked by
    /// [`FakeCloud::from_inventory`].
    pub fn from_yaml_str(yaml: &str, origin: &str) -> Result<Inventory, InventoryError> {
        if is_blank(yaml) {
            return Ok(Inventory::default());
        }
        let mut options = serde_saphyr::Options::default();
        options.with_snippet = false;
        // serde_path_to_error knows where a deserialization error happened; hand the inner error back to the
        // parser (so it stops cleanly) and keep the path aside.
        let mut failed_at: Option<String> = None;
        let parsed = serde_saphyr::with_deserializer_from_str_with_options(yaml, options, |de| {
            serde_path_to_error::deserialize::<_, Inventory>(de).map_err(|err| {
                failed_at = Some(err.path().to_string());
                err.into_inner()
            })
        });
        parsed.map_err(|err| classify(origin, failed_at.unwrap_or_default(), &err))
    }

    /// The JSON schema of the inventory format (draft 2020-12), pretty-printed with a final newline: the
    /// content of `docs/schema/fake-inventory.schema.json`.
    pub fn json_schema() -> String {
        let schema = schemars::schema_for!(Inventory);
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Checks values while building the cloud, naming `file` and the field path in errors.
pub(crate) struct Checker<'a> {
    pub(crate) file: &'a str,
}

impl Checker<'_> {
    fn ip(&self, path: String, value: &str) -> Result<IpAddr, InventoryError> {
        value.parse().map_err(|_| InventoryError::InvalidIp {
            file: self.file.to_owned(),
            path,
            value: value.to_owned(),
        })
    }

    fn cidr(&self, path: String, value: &str) -> Result<IpNet, InventoryError> {
        let invalid = |reason: String| InventoryError::InvalidCidr {
            file: self.file.to_owned(),
            path: path.clone(),
            value: value.to_owned(),
            reason,
        };
        let net: IpNet = value.parse().map_err(|_| {
            invalid("expected an address and a prefix length, such as 10.244.0.0/16".to_owned())
        })?;
        if net.trunc() != net {
            return Err(invalid(format!(
                "host bits are set; did you mean {}?",
                net.trunc()
            )));
        }
        Ok(net)
    }

    fn provider_id(
        &self,
        path: String,
        value: &str,
        provider_name: &str,
    ) -> Result<(), InventoryError> {
        let invalid = |reason: String| InventoryError::InvalidProviderId {
            file: self.file.to_owned(),
            path: path.clone(),
            value: value.to_owned(),
            reason,
        };
        let parsed = ProviderId::parse(value)
            .map_err(|_| invalid(format!("expected {provider_name}://<instance id>")))?;
        if parsed.provider() != provider_name {
            return Err(invalid(format!(
                "it belongs to provider {:?}, not {provider_name:?}; use {provider_name}://{}",
                parsed.provider(),
                parsed.instance()
            )));
        }
        Ok(())
    }

    pub(crate) fn operation(&self, path: String, value: &str) -> Result<Operation, InventoryError> {
        Operation::from_name(value).ok_or_else(|| InventoryError::UnknownOperation {
            file: self.file.to_owned(),
            path,
            value: value.to_owned(),
            known: Operation::names(),
        })
    }

    /// The [`InjectedError`] of a fault of `kind` at field path `base`, checking that `message` and
    /// `retry_after` are given only where they mean something.
    pub(crate) fn injected_error(
        &self,
        base: &str,
        kind: FaultKind,
        message: Option<&str>,
        retry_after: Option<Duration>,
    ) -> Result<InjectedError, InventoryError> {
        let check = self;
        let error = match kind {
            FaultKind::Other => InjectedError::Other(
                message
                    .map(str::to_owned)
                    .unwrap_or_else(|| "injected by the inventory".to_owned()),
            ),
            FaultKind::InstanceNotFound => InjectedError::InstanceNotFound,
            FaultKind::NotImplemented => InjectedError::NotImplemented,
            FaultKind::ImplementedElsewhere => InjectedError::ImplementedElsewhere,
            FaultKind::Retry => match retry_after {
                Some(after) => InjectedError::Retry(after),
                None => {
                    return Err(check.invalid(
                        format!("{base}.retryAfter"),
                        "a retry error needs retryAfter, such as 30s",
                    ));
                }
            },
            FaultKind::Throttled => match retry_after {
                Some(after) => InjectedError::ThrottledFor(after),
                None => InjectedError::Throttled,
            },
            FaultKind::Timeout => InjectedError::Timeout,
        };
        if message.is_some() && kind != FaultKind::Other {
            return Err(check.invalid(
                format!("{base}.message"),
                "only an error of kind other takes a message",
            ));
        }
        if retry_after.is_some() && !matches!(kind, FaultKind::Retry | FaultKind::Throttled) {
            return Err(check.invalid(
                format!("{base}.retryAfter"),
                "only errors of kind retry and throttled take retryAfter",
            ));
        }
        Ok(error)
    }

    pub(crate) fn invalid(&self, path: String, message: impl Into<String>) -> InventoryError {
        InventoryError::Invalid {
            file: self.file.to_owned(),
            path,
            message: message.into(),
        }
    }

    fn non_empty(&self, path: String, value: &str, what: &str) -> Result<(), InventoryError> {
        if value.trim().is_empty() {
            return Err(self.invalid(path, format!("{what} must not be empty")));
        }
        Ok(())
    }

    fn unique(
        &self,
        seen: &mut HashMap<String, String>,
        path: String,
        what: &'static str,
        value: &str,
    ) -> Result<(), InventoryError> {
        if let Some(first) = seen.get(value) {
            return Err(InventoryError::Duplicate {
                file: self.file.to_owned(),
                path,
                what,
                value: value.to_owned(),
                first: first.clone(),
            });
        }
        seen.insert(value.to_owned(), path);
        Ok(())
    }
}

/// Whether `key` is a valid Kubernetes label key (`[prefix/]name`).
fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let valid_prefix = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !valid_prefix {
            return Some(format!(
                "label key prefix {prefix:?} must be a lower-case DNS subdomain"
            ));
        }
    }
    if name.is_empty() {
        return Some("label key name must not be empty".to_owned());
    }
    label_value_problem(name).map(|p| format!("label key name {name:?} {p}"))
}

/// Why `value` is not a valid label value (`""` is valid).
fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if value.len() > 63 {
        return Some("must be at most 63 characters".to_owned());
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if !value.starts_with(alnum) || !value.ends_with(alnum) {
        return Some("must start and end with a letter or digit".to_owned());
    }
    if !value
        .chars()
        .all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
    {
        return Some("may contain only letters, digits, '-', '_' and '.'".to_owned());
    }
    None
}

impl FakeCloud {
    /// Build a cloud from a parsed inventory, checking every value; `origin` names the file in errors.
    pub fn from_inventory(inventory: Inventory, origin: &str) -> Result<FakeCloud, InventoryError> {
        let check = Checker { file: origin };
        let provider_name = match inventory.provider_name.as_deref() {
            None => PROVIDER_NAME.to_owned(),
            Some(name) => {
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                if !valid {
                    return Err(check.invalid(
                        "providerName".into(),
                        format!("{name:?} is not a valid provider name; use letters, digits, '-', '_' or '.'"),
                    ));
                }
                name.to_owned()
            }
        };
        let cloud = FakeCloud::new().with_provider_name(&provider_name);

        let caps = &inventory.capabilities;
        for (cap, on) in [
            (Capability::InstancesV2, caps.instances_v2),
            (Capability::Instances, caps.instances),
            (Capability::Zones, caps.zones),
            (Capability::LoadBalancer, caps.load_balancer),
            (Capability::Routes, caps.routes),
            (Capability::Clusters, caps.clusters),
        ] {
            cloud.set_capability(cap, on);
        }
        if let Some(pool) = inventory.load_balancer_ip_pool.as_deref() {
            let net = check.cidr("loadBalancerIPPool".into(), pool)?;
            if net.hosts().next().is_none() {
                return Err(check.invalid(
                    "loadBalancerIPPool".into(),
                    "the pool has no usable address",
                ));
            }
            cloud.set_load_balancer_ip_pool(net);
        }
        cloud.set_ip_mode(inventory.load_balancer_ip_mode.map(IpModeSpec::as_str));
        cloud.set_has_cluster_id(inventory.has_cluster_id);
        cloud.set_bulk(inventory.supports_bulk);
        if inventory.load_balancer_listing_page_size == Some(0) {
            return Err(check.invalid(
                "loadBalancerListingPageSize".into(),
                "a page must hold at least one load balancer; use 1 or more, or leave it out for no listing",
            ));
        }
        cloud.set_listing(
            inventory
                .load_balancer_listing_page_size
                .and_then(|n| usize::try_from(n).ok()),
        );

        let mut cluster_names = HashMap::new();
        for (i, cluster) in inventory.clusters.iter().enumerate() {
            let path = format!("clusters[{i}]");
            check.non_empty(path.clone(), cluster, "a cluster name")?;
            check.unique(&mut cluster_names, path, "cluster", cluster)?;
        }
        cloud.set_clusters(inventory.clusters.clone());
        if let Some(zone) = &inventory.local_zone {
            check.non_empty("localZone.zone".into(), &zone.zone, "the zone")?;
            cloud.set_local_zone(Some(Zone::new(zone.zone.clone(), zone.region.clone())));
        }

        let mut names = HashMap::new();
        let mut provider_ids = HashMap::new();
        for (i, spec) in inventory.instances.iter().enumerate() {
            let base = format!("instances[{i}]");
            check.non_empty(format!("{base}.name"), &spec.name, "the instance name")?;
            check.unique(
                &mut names,
                format!("{base}.name"),
                "instance name",
                &spec.name,
            )?;
            let mut instance = FakeInstance::new(spec.name.clone())
                .with_instance_type(spec.instance_type.clone())
                .with_zone(spec.zone.clone(), spec.region.clone())
                .with_shutdown(spec.shutdown);
            let resolved = match spec.provider_id.as_deref() {
                None => format!("{provider_name}://{}", spec.name),
                Some("") => {
                    instance = instance.without_provider_id();
                    String::new()
                }
                Some(id) => {
                    check.provider_id(format!("{base}.providerID"), id, &provider_name)?;
                    instance = instance.with_provider_id(id);
                    id.to_owned()
                }
            };
            if !resolved.is_empty() {
                check.unique(
                    &mut provider_ids,
                    format!("{base}.providerID"),
                    "provider ID",
                    &resolved,
                )?;
            }
            let mut addresses = Vec::with_capacity(spec.addresses.len());
            for (j, address) in spec.addresses.iter().enumerate() {
                let path = format!("{base}.addresses[{j}].address");
                let value = if address.type_.is_ip() {
                    check.ip(path, &address.address)?.to_string()
                } else {
                    check.non_empty(path, &address.address, "the address")?;
                    address.address.clone()
                };
                addresses.push(NodeAddress {
                    type_: address.type_.as_str().to_owned(),
                    address: value,
                });
            }
            instance = instance.with_addresses(addresses);
            for (key, value) in &spec.labels {
                let path = format!("{base}.labels.{key}");
                if let Some(problem) = label_key_problem(key) {
                    return Err(check.invalid(path, problem));
                }
                if let Some(problem) = label_value_problem(value) {
                    return Err(check.invalid(path, format!("label value {value:?} {problem}")));
                }
                instance = instance.with_label(key.clone(), value.clone());
            }
            if !spec.metadata {
                instance = instance.with_no_metadata();
            }
            cloud.add_instance(instance);
        }

        let mut route_keys = HashMap::new();
        for (i, spec) in inventory.routes.iter().enumerate() {
            let base = format!("routes[{i}]");
            let cluster = spec
                .cluster
                .clone()
                .unwrap_or_else(|| DEFAULT_CLUSTER.to_owned());
            check.non_empty(format!("{base}.cluster"), &cluster, "the cluster")?;
            check.non_empty(
                format!("{base}.targetNode"),
                &spec.target_node,
                "the target node",
            )?;
            let cidr = check.cidr(format!("{base}.destinationCIDR"), &spec.destination_cidr)?;
            let key = format!("{cluster} {cidr}");
            check.unique(
                &mut route_keys,
                format!("{base}.destinationCIDR"),
                "route (cluster and CIDR)",
                &key,
            )?;
            let mut route = Route::new(spec.target_node.clone(), cidr.to_string())
                .with_blackhole(spec.blackhole);
            if let Some(name) = &spec.name {
                check.non_empty(format!("{base}.name"), name, "the route name")?;
                route = route.with_name(name.clone());
            }
            cloud.insert_route_in(&cluster, route);
        }

        if let Some(latency) = inventory.default_latency {
            cloud.set_default_latency(latency);
        }
        for (name, latency) in &inventory.latency {
            let op = check.operation(format!("latency.{name}"), name)?;
            cloud.set_latency(op, latency.get());
        }
        for (i, spec) in inventory.faults.iter().enumerate() {
            let base = format!("faults[{i}]");
            let op = check.operation(format!("{base}.operation"), &spec.operation)?;
            let error = check.injected_error(
                &base,
                spec.error,
                spec.message.as_deref(),
                spec.retry_after,
            )?;
            let times = match spec.times {
                None => Times::Always,
                Some(0) => {
                    return Err(check.invalid(
                        format!("{base}.times"),
                        "must be at least 1; omit it to fail every call",
                    ));
                }
                Some(1) => Times::Once,
                Some(n) => Times::N(n),
            };
            let fault = Fault { error, times };
            match spec.target.as_deref() {
                Some(target) => cloud.inject_for(op, target, fault),
                None => cloud.inject(op, fault),
            }
        }
        if let Some(quota) = &inventory.quota {
            cloud
                .set_quota(quota.requests_per_second, quota.effective_burst())
                .map_err(|err| {
                    let path = match err {
                        QuotaError::ZeroBurst => "quota.burst",
                        _ => "quota.requestsPerSecond",
                    };
                    check.invalid(path.into(), err.to_string())
                })?;
        }
        if let Some(spec) = &inventory.random_faults {
            cloud.lock().faults.set_random(spec.build(&check)?);
        }
        if let Some(path) = &inventory.state_file {
            check.non_empty("stateFile".into(), path, "the state file path")?;
            if inventory.restore_state_file {
                cloud
                    .restore_state_file(Path::new(path))
                    .map_err(|err| check.invalid("stateFile".into(), err.to_string()))?;
            } else {
                cloud.set_state_file(Path::new(path));
            }
        }
        Ok(cloud)
    }

    /// Build a cloud from inventory YAML; `origin` (usually the file name) prefixes every error.
    ///
    /// ```
    /// use ccm_provider_fake::FakeCloud;
    ///
    /// let err = FakeCloud::from_inventory_str(
    ///     "instances:\n  - name: a\n    addresses: [{type: InternalIP, address: 10.0.0.300}]\n",
    ///     "inventory.yaml",
    /// )
    /// .unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"inventory.yaml: instances[0].addresses[0].address: invalid IP address "10.0.0.300""#
    /// );
    /// ```
    pub fn from_inventory_str(yaml: &str, origin: &str) -> Result<FakeCloud, InventoryError> {
        FakeCloud::from_inventory(Inventory::from_yaml_str(yaml, origin)?, origin)
    }

    /// Build a cloud from an inventory file; errors name the file as given.
    ///
    /// ```no_run
    /// use std::path::Path;
    /// use ccm_provider_fake::FakeCloud;
    ///
    /// match FakeCloud::from_inventory_file(Path::new("inventory.yaml")) {
    ///     Ok(cloud) => println!("{} instances", cloud.instances().len()),
    ///     Err(err) => eprintln!("{err}"), // inventory.yaml: instances[0].name: ...
    /// }
    /// ```
    pub fn from_inventory_file(path: &Path) -> Result<FakeCloud, InventoryError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| InventoryError::Read {
            file: file.clone(),
            source,
        })?;
        FakeCloud::from_inventory_str(&text, &file)
    }

    /// Build a cloud from inventory YAML read from `reader` (such as the opened `--cloud-config`).
    pub fn from_inventory_reader(
        reader: &mut dyn Read,
        origin: &str,
    ) -> Result<FakeCloud, InventoryError> {
        let mut text = String::new();
        reader
            .read_to_string(&mut text)
            .map_err(|source| InventoryError::Read {
                file: origin.to_owned(),
                source,
            })?;
        FakeCloud::from_inventory_str(&text, origin)
    }
}
