//! Settings: the command-line flags, the config file, and the resolved, validated [`CcmOptions`].
//!
//! Every setting exists once, in [`Settings`], whose fields are all optional. The same struct is parsed from the
//! command line (clap, Go flag names) and from the YAML config file given with `--config` (camelCase keys, unknown
//! keys rejected); its doc comments are both the `--help` text and the JSON schema's descriptions. The effective
//! options are `CcmOptions::default()` (the Go reference's defaults), overridden by the file, overridden by flags
//! given explicitly on the command line.
//!
//! ```
//! use ccm_app::options::{CcmOptions, Settings};
//! use std::time::Duration;
//!
//! let file: Settings = serde_json::from_value(serde_json::json!({"kubeApiQps": 50.0, "nodeMonitorPeriod": "10s"})).unwrap();
//! let mut flags = Settings::default();
//! flags.kube_api_qps = Some(100.0);
//! let options = CcmOptions::resolve(&CcmOptions::default(), &file, &flags);
//! assert_eq!(options.kube_api_qps, 100.0); // the flag wins
//! assert_eq!(options.node_monitor_period, Duration::from_secs(10)); // from the file
//! assert_eq!(options.kube_api_burst, 30); // the default
//! ```

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ccm_core::budget::{CloudBudget, OperationBudget};
use ccm_core::intercept::Operation;
use ccm_core::names;
use clap::{Args, ValueEnum};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use ccm_core::duration::{DurationError, GoDuration, format_go_duration};

/// Parse a boolean the way Go's `strconv.ParseBool` does (`1`, `t`, `T`, `TRUE`, `true`, `True`, and the
/// `0`/`f`/`false` forms).
///
/// ```
/// assert_eq!(ccm_app::options::parse_go_bool("True"), Ok(true));
/// assert!(ccm_app::options::parse_go_bool("yes").is_err());
/// ```
///
/// # Errors
///
/// A message naming the accepted values.
pub fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!(
            "invalid boolean {other:?}; use true or false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False)"
        )),
    }
}

fn parse_duration_flag(value: &str) -> Result<GoDuration, String> {
    value.parse().map_err(|e: DurationError| e.to_string())
}

/// One `--cloud-api-operation-limit` value: an operation's call-log name and its limit.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct OperationLimit {
    /// The operation ([`Operation::as_str`] names it).
    pub operation: Operation,
    /// Its rate and burst.
    pub limit: OperationBudget,
}

/// Parse `OPERATION=QPS:BURST` or `OPERATION=QPS` (burst = QPS rounded up, at least 1).
///
/// ```
/// use ccm_app::options::parse_operation_limit;
/// let limit = parse_operation_limit("create=2:4").unwrap();
/// assert_eq!((limit.operation.as_str(), limit.limit.qps, limit.limit.burst), ("create", 2.0, 4));
/// assert_eq!(parse_operation_limit("list-routes=0.5").unwrap().limit.burst, 1);
/// assert!(parse_operation_limit("nope=1:1").is_err());
/// ```
///
/// # Errors
///
/// A message saying what is wrong: the shape, an unknown operation, or a rate or burst that is not a number.
pub fn parse_operation_limit(value: &str) -> Result<OperationLimit, String> {
    let shape = || {
        format!(
            "invalid operation limit {value:?}: expected OPERATION=QPS:BURST (or OPERATION=QPS), such as create=2:4"
        )
    };
    let (name, limit) = value.split_once('=').ok_or_else(shape)?;
    let operation = Operation::from_name(name)
        .filter(|op| op.is_intercepted())
        .ok_or_else(|| {
            format!(
                "unknown cloud operation {name:?} in {value:?}; known operations: {}",
                Operation::intercepted_names()
            )
        })?;
    let (qps, burst) = match limit.split_once(':') {
        Some((qps, burst)) => (qps, Some(burst)),
        None => (limit, None),
    };
    let qps: f64 = qps
        .parse()
        .ok()
        .filter(|q: &f64| q.is_finite() && *q >= 0.0)
        .ok_or_else(|| format!("{}: the rate {qps:?} is not a number >= 0", shape()))?;
    let burst = match burst {
        Some(burst) => burst
            .parse::<u32>()
            .map_err(|_| format!("{}: the burst {burst:?} is not a whole number", shape()))?,
        // at most u32::MAX after the clamp, so the conversion cannot truncate
        None => qps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32,
    };
    Ok(OperationLimit {
        operation,
        limit: OperationBudget { qps, burst },
    })
}

/// The log line format (`--logging-format`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Which nodes the cloud node lifecycle controller may taint and delete (`--node-lifecycle-ownership`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NodeOwnershipOption {
    /// Only nodes whose providerID starts with `<provider name>://`.
    #[default]
    ProviderIdPrefix,
    /// Every node (the Go behaviour).
    AllNodes,
}

/// How the route controller is triggered (`--route-sync-mode`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RouteSyncModeOption {
    /// Reconcile every `--route-reconciliation-period` (the Go default).
    Periodic,
    /// Reconcile on node changes, `--route-event-debounce` after the change, with a full pass every
    /// `--route-resync-period`.
    #[default]
    EventDriven,
}

/// Every setting of the CCM, each optional: the command-line flags and the config file's keys.
///
/// On the command line the names are the Go reference's (`--kube-api-qps`); in the config file they are camelCase
/// (`kubeApiQps`). Booleans on the command line are written `--flag` or `--flag=false` (as with Go's flag
/// package, `--flag false` does not work). Durations use Go's notation (`10s`, `5m`, `1h30m`).
#[derive(Debug, Clone, Default, PartialEq, Args, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(
    title = "Cloud controller manager configuration",
    description = "Settings of a cloud controller manager built with ccm-app (--config FILE). Every key is optional and \
                   has the same meaning and default as the command-line flag of the same name; flags given on the \
                   command line override the file."
)]
#[non_exhaustive]
pub struct Settings {
    // ---- cloud provider ----
    /// The provider to use (the name it is registered under). Required unless the binary sets a default.
    #[arg(long, value_name = "NAME", help_heading = "Cloud provider")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_provider: Option<String>,

    /// The path of the provider's configuration file, passed to the provider. Default: none.
    #[arg(long, value_name = "PATH", help_heading = "Cloud provider")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_config: Option<PathBuf>,

    /// Start even if the provider reports no cluster ID (deprecated in Go; kept for compatibility). Default: false.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Cloud provider")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_untagged_cloud: Option<bool>,

    // ---- Kubernetes client ----
    /// The kubeconfig file with the cluster address and credentials. Default: none (in-cluster configuration).
    #[arg(long, value_name = "PATH", help_heading = "Kubernetes client")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,

    /// The address of the Kubernetes API server (overrides the kubeconfig's). Default: none.
    #[arg(long, value_name = "URL", help_heading = "Kubernetes client")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master: Option<String>,

    /// Requests per second each client of the CCM may send to the API server (a token bucket per client, as in
    /// client-go; 0 means 5, negative means unlimited). Default: 20.
    #[arg(long, value_name = "QPS", help_heading = "Kubernetes client")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_api_qps: Option<f32>,

    /// The burst of each client's token bucket (0 means 10). Default: 30.
    #[arg(long, value_name = "N", help_heading = "Kubernetes client")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_api_burst: Option<i32>,

    /// Accepted for compatibility; requests are always sent as JSON. Default: application/vnd.kubernetes.protobuf.
    #[arg(long, value_name = "TYPE", help_heading = "Kubernetes client")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_api_content_type: Option<String>,

    /// Accepted for compatibility; every controller uses the CCM's own credentials (a warning is logged when
    /// true). Default: false.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Kubernetes client")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_service_account_credentials: Option<bool>,

    // ---- controllers ----
    /// The controllers to run, comma separated: `name` enables, `-name` disables, `*` means every controller that
    /// is on by default; the first mention of a controller wins. Default: *.
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        allow_hyphen_values = true,
        help_heading = "Controllers"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controllers: Option<Vec<String>>,

    /// The pause between starting two controllers (jittered up to twice as long). Default: 0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_start_interval: Option<GoDuration>,

    /// The shared informers ask controllers to re-read every cached Node and Service at a random interval between
    /// this and twice this; 0s disables it. Default: 12h0m0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_resync_period: Option<GoDuration>,

    /// The name of the cluster, passed to every load-balancer and route call. Default: kubernetes.
    #[arg(long, value_name = "NAME", help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,

    /// The pod CIDR range of the cluster (one CIDR or a comma-separated dual-stack pair), used by the route
    /// controller. Default: none.
    #[arg(
        long = "cluster-cidr",
        value_name = "CIDRS",
        help_heading = "Controllers"
    )]
    #[serde(rename = "clusterCIDR", skip_serializing_if = "Option::is_none")]
    pub cluster_cidr: Option<String>,

    /// Accepted for compatibility; the CCM does not allocate node CIDRs. Default: false.
    #[arg(long = "allocate-node-cidrs", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Controllers")]
    #[serde(rename = "allocateNodeCIDRs", skip_serializing_if = "Option::is_none")]
    pub allocate_node_cidrs: Option<bool>,

    /// Accepted for compatibility; unused by the CCM. Default: RangeAllocator.
    #[arg(long, value_name = "TYPE", help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cidr_allocator_type: Option<String>,

    /// Whether the route controller creates cloud routes for the nodes' pod CIDRs. Default: true.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configure_cloud_routes: Option<bool>,

    /// How often the route controller reconciles routes. Default: 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_reconciliation_period: Option<GoDuration>,

    /// How often the node lifecycle controller checks NotReady nodes against the cloud. Default: 5s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_monitor_period: Option<GoDuration>,

    /// How often the cloud node controller refreshes the addresses of initialized nodes. Default: 5m0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_status_update_frequency: Option<GoDuration>,

    /// Deprecated no-op, accepted for compatibility. Default: 0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_sync_period: Option<GoDuration>,

    /// Accepted for compatibility; unused. Default: none.
    #[arg(long, value_name = "NAME", help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_cloud_volume_plugin: Option<String>,

    /// Nodes the cloud node controller initializes in parallel (must be > 0). Default: 1.
    #[arg(long, value_name = "N", help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_node_syncs: Option<i32>,

    /// Nodes whose addresses are refreshed in parallel; 0 means --concurrent-node-syncs. Default: 0.
    #[arg(long, value_name = "N", help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_node_status_updates: Option<i32>,

    /// Services the service controller syncs in parallel (must be > 0). Default: 1.
    #[arg(long, value_name = "N", help_heading = "Controllers")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_service_syncs: Option<i32>,

    // ---- controller settings (SDK additions) ----
    /// SDK addition: the longest a single cloud call of the node controllers may take. Default: 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_call_timeout: Option<GoDuration>,

    /// SDK addition: nodes the lifecycle controller checks at once (Go: 1). Default: 10.
    #[arg(long, value_name = "N", help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_lifecycle_concurrency: Option<i32>,

    /// SDK addition: which nodes the lifecycle controller may taint and delete: provider-id-prefix (nodes whose
    /// providerID has this provider's prefix) or all-nodes (Go). Default: provider-id-prefix.
    #[arg(
        long,
        value_name = "RULE",
        help_heading = "Controllers (SDK additions)"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_lifecycle_ownership: Option<NodeOwnershipOption>,

    /// SDK addition: never delete or taint a node that still has the uninitialized taint (Go: false). Default:
    /// true.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protect_initializing_nodes: Option<bool>,

    /// SDK addition: also manage LoadBalancer Services with this spec.loadBalancerClass. Default: none.
    #[arg(
        long,
        value_name = "CLASS",
        help_heading = "Controllers (SDK additions)"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer_class: Option<String>,

    /// SDK addition: manage LoadBalancer Services without a loadBalancerClass (the Go behaviour). Default: true.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_less_services: Option<bool>,

    /// SDK addition: re-ensure every load balancer this often to repair drift; 0s disables it (Go never
    /// does). Default: 0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_periodic_reensure: Option<GoDuration>,

    /// SDK addition: first retry delay of a failed Service sync, doubled per failure. Default: 5s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_retry_base_delay: Option<GoDuration>,

    /// SDK addition: longest retry delay of a failed Service sync. Default: 5m0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_retry_max_delay: Option<GoDuration>,

    /// SDK addition: opt-in quiet period that ends a burst of node changes before load balancer hosts are
    /// updated. 0s (the default) has none: a node change starts a host-update pass at once when none is running,
    /// and changes during a pass share the next one. Default: 0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_node_sync_debounce: Option<GoDuration>,

    /// SDK addition: with --service-node-sync-debounce, the longest a stream of node changes may delay load
    /// balancer host updates. Default: 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_node_sync_max_delay: Option<GoDuration>,

    /// SDK addition: also re-ensure a load balancer when allocateLoadBalancerNodePorts or the ipFamilies values
    /// change (Go compares only the ipFamilies count). Default: false.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_extended_update_fields: Option<bool>,

    /// SDK addition: how the route controller is triggered: periodic (Go) or event-driven. Default:
    /// event-driven.
    #[arg(
        long,
        value_name = "MODE",
        help_heading = "Controllers (SDK additions)"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_sync_mode: Option<RouteSyncModeOption>,

    /// SDK addition: in event-driven mode, how long after a node change a route pass starts; changes within it are
    /// batched into one pass. Capped at --route-reconciliation-period. Default: 250ms.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_event_debounce: Option<GoDuration>,

    /// SDK addition: in event-driven mode, a full route pass runs this long after the last one even when nothing
    /// changed. Default: 5m0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_resync_period: Option<GoDuration>,

    /// SDK addition: in event-driven mode, the cap of the retry backoff after a failed route pass. Default:
    /// 5m0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_max_retry_backoff: Option<GoDuration>,

    /// SDK addition: cloud route operations in flight at once (Go: 200). Default: 200.
    #[arg(long, value_name = "N", help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_max_concurrent_operations: Option<i32>,

    /// SDK addition: calls per second the CCM may make to the cloud provider, all controllers together (a token
    /// bucket; calls wait for a token); 0 disables the limit. Default: 50.
    #[arg(long, value_name = "QPS", help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_api_qps: Option<f64>,

    /// SDK addition: the burst of the cloud-call token bucket. Default: 100.
    #[arg(long, value_name = "N", help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_api_burst: Option<u32>,

    /// SDK addition: extra limits for single cloud operations, by call-log name (`create`,
    /// `instance-metadata-by-provider-id`, `list-routes`, ...), each `{qps, burst}`; a call needs a token from its
    /// operation's bucket and from the provider-wide one. On the command line: --cloud-api-operation-limit.
    /// Default: none.
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_api_operation_limits: Option<BTreeMap<String, OperationBudget>>,

    /// SDK addition: a limit for one cloud operation, `OPERATION=QPS:BURST` (or `OPERATION=QPS`, burst = QPS
    /// rounded up), by call-log name, for example `create=2:4`; repeat the flag for several operations. Adds to
    /// and overrides the config file's `cloudApiOperationLimits`. Default: none.
    #[arg(long = "cloud-api-operation-limit", value_name = "OPERATION=QPS:BURST",
          value_parser = parse_operation_limit, help_heading = "Controllers (SDK additions)")]
    #[serde(skip)]
    pub cloud_api_operation_limit: Option<Vec<OperationLimit>>,

    /// SDK addition: how long instance metadata answers (addresses, type, zone) are reused; concurrent identical
    /// questions always share one cloud call. Existence and shutdown answers are never reused, so the lifecycle
    /// controller always decides on a fresh answer. 0 = share concurrent calls only. Default: 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag,
          help_heading = "Controllers (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_instance_cache_ttl: Option<GoDuration>,

    // ---- scope (SDK additions) ----
    /// SDK addition: watch (and so manage) only Nodes matching this label selector. Default: every Node.
    #[arg(long, value_name = "SELECTOR", help_heading = "Scope (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<String>,

    /// SDK addition: watch (and so manage) only Services matching this label selector. Default: every Service.
    #[arg(long, value_name = "SELECTOR", help_heading = "Scope (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_selector: Option<String>,

    /// SDK addition: watch (and so manage) only Services in this namespace. Default: every namespace.
    #[arg(long, value_name = "NAMESPACE", help_heading = "Scope (SDK additions)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,

    // ---- leader election ----
    /// Run the controllers only in the replica that holds the leader lease. Default: true.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect: Option<bool>,

    /// How long followers wait before taking over a lease that is not renewed. Default: 15s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect_lease_duration: Option<GoDuration>,

    /// How long the leader retries renewing before it gives up leadership. Default: 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect_renew_deadline: Option<GoDuration>,

    /// The interval between acquire and renew attempts. Default: 2s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect_retry_period: Option<GoDuration>,

    /// The lock type; only `leases` is supported (as in Go). Default: leases.
    #[arg(long, value_name = "TYPE", help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect_resource_lock: Option<String>,

    /// The name of the Lease. Default: cloud-controller-manager.
    #[arg(long, value_name = "NAME", help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect_resource_name: Option<String>,

    /// The namespace of the Lease. Default: kube-system.
    #[arg(long, value_name = "NAMESPACE", help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect_resource_namespace: Option<String>,

    /// SDK addition: release the Lease on a clean shutdown so another replica takes over at once (Go leaves it to
    /// expire). Default: true.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, help_heading = "Leader election")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_elect_release_on_cancel: Option<bool>,

    // ---- serving ----
    /// The HTTPS port of /healthz, /readyz, /livez, /metrics and /configz; 0 disables serving. Default: 10258.
    #[arg(long, value_name = "PORT", help_heading = "Serving")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secure_port: Option<u16>,

    /// The address the secure port listens on. Default: 0.0.0.0.
    #[arg(long, value_name = "IP", help_heading = "Serving")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind_address: Option<IpAddr>,

    /// A directory for the self-signed serving certificate (written on first start, reused afterwards); ignored
    /// with --tls-cert-file. Default: none (the certificate is generated in memory).
    #[arg(long, value_name = "DIR", help_heading = "Serving")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_dir: Option<PathBuf>,

    /// A PEM file with the serving certificate (and its chain). Default: none (self-signed).
    #[arg(long, value_name = "PATH", help_heading = "Serving")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert_file: Option<PathBuf>,

    /// A PEM file with the private key of --tls-cert-file. Default: none.
    #[arg(long, value_name = "PATH", help_heading = "Serving")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_private_key_file: Option<PathBuf>,

    /// SDK addition: how long a clean shutdown waits for controllers to finish in-flight work. Default: 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Serving")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_timeout: Option<GoDuration>,

    // ---- logging ----
    /// Log verbosity, as klog's -v: 0-3 info, 4-5 debug, 6 and above trace. `RUST_LOG`, when set, overrides it.
    /// Default: 0.
    #[arg(
        short = 'v',
        long = "v",
        value_name = "LEVEL",
        help_heading = "Logging"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<u8>,

    /// The log format: text or json. Default: text.
    #[arg(long, value_name = "FORMAT", help_heading = "Logging")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logging_format: Option<LogFormat>,
}

/// The effective, resolved settings of a CCM. `Default` gives the Go reference's defaults.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CcmOptions {
    /// `--cloud-provider`.
    pub cloud_provider: String,
    /// `--cloud-config`.
    pub cloud_config: Option<PathBuf>,
    /// `--allow-untagged-cloud`.
    pub allow_untagged_cloud: bool,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--master`.
    pub master: Option<String>,
    /// `--kube-api-qps`.
    pub kube_api_qps: f32,
    /// `--kube-api-burst`.
    pub kube_api_burst: i32,
    /// `--kube-api-content-type` (accepted, unused).
    pub kube_api_content_type: String,
    /// `--use-service-account-credentials` (accepted, unused).
    pub use_service_account_credentials: bool,
    /// `--controllers`.
    pub controllers: Vec<String>,
    /// `--controller-start-interval`.
    pub controller_start_interval: Duration,
    /// `--min-resync-period`.
    pub min_resync_period: Duration,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--cluster-cidr`.
    pub cluster_cidr: String,
    /// `--allocate-node-cidrs` (accepted, unused).
    pub allocate_node_cidrs: bool,
    /// `--cidr-allocator-type` (accepted, unused).
    pub cidr_allocator_type: String,
    /// `--configure-cloud-routes`.
    pub configure_cloud_routes: bool,
    /// `--route-reconciliation-period`.
    pub route_reconciliation_period: Duration,
    /// `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// `--node-status-update-frequency`.
    pub node_status_update_frequency: Duration,
    /// `--node-sync-period` (deprecated no-op).
    pub node_sync_period: Duration,
    /// `--external-cloud-volume-plugin` (accepted, unused).
    pub external_cloud_volume_plugin: String,
    /// `--concurrent-node-syncs`.
    pub concurrent_node_syncs: i32,
    /// `--concurrent-node-status-updates`.
    pub concurrent_node_status_updates: i32,
    /// `--concurrent-service-syncs`.
    pub concurrent_service_syncs: i32,
    /// `--cloud-call-timeout` (SDK addition).
    pub cloud_call_timeout: Duration,
    /// `--node-lifecycle-concurrency` (SDK addition).
    pub node_lifecycle_concurrency: i32,
    /// `--node-lifecycle-ownership` (SDK addition).
    pub node_lifecycle_ownership: NodeOwnershipOption,
    /// `--protect-initializing-nodes` (SDK addition).
    pub protect_initializing_nodes: bool,
    /// `--load-balancer-class` (SDK addition).
    pub load_balancer_class: Option<String>,
    /// `--class-less-services` (SDK addition).
    pub class_less_services: bool,
    /// `--service-periodic-reensure` (SDK addition; zero = off).
    pub service_periodic_reensure: Duration,
    /// `--service-retry-base-delay` (SDK addition).
    pub service_retry_base_delay: Duration,
    /// `--service-retry-max-delay` (SDK addition).
    pub service_retry_max_delay: Duration,
    /// `--service-node-sync-debounce` (SDK addition).
    pub service_node_sync_debounce: Duration,
    /// `--service-node-sync-max-delay` (SDK addition).
    pub service_node_sync_max_delay: Duration,
    /// `--service-extended-update-fields` (SDK addition).
    pub service_extended_update_fields: bool,
    /// `--route-sync-mode` (SDK addition).
    pub route_sync_mode: RouteSyncModeOption,
    /// `--route-event-debounce` (SDK addition).
    pub route_event_debounce: Duration,
    /// `--route-resync-period` (SDK addition).
    pub route_resync_period: Duration,
    /// `--route-max-retry-backoff` (SDK addition).
    pub route_max_retry_backoff: Duration,
    /// `--route-max-concurrent-operations` (SDK addition).
    pub route_max_concurrent_operations: i32,
    /// `--cloud-api-qps` (SDK addition; 0 = unlimited).
    pub cloud_api_qps: f64,
    /// `--cloud-api-burst` (SDK addition).
    pub cloud_api_burst: u32,
    /// `cloudApiOperationLimits` and `--cloud-api-operation-limit` (SDK addition).
    pub cloud_api_operation_limits: BTreeMap<String, OperationBudget>,
    /// `--cloud-instance-cache-ttl` (SDK addition; 0 = coalescing only).
    pub cloud_instance_cache_ttl: Duration,
    /// `--node-selector` (SDK addition).
    pub node_selector: Option<String>,
    /// `--service-selector` (SDK addition).
    pub service_selector: Option<String>,
    /// `--service-namespace` (SDK addition).
    pub service_namespace: Option<String>,
    /// `--leader-elect`.
    pub leader_elect: bool,
    /// `--leader-elect-lease-duration`.
    pub leader_elect_lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub leader_elect_renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub leader_elect_retry_period: Duration,
    /// `--leader-elect-resource-lock`.
    pub leader_elect_resource_lock: String,
    /// `--leader-elect-resource-name`.
    pub leader_elect_resource_name: String,
    /// `--leader-elect-resource-namespace`.
    pub leader_elect_resource_namespace: String,
    /// `--leader-elect-release-on-cancel` (SDK addition).
    pub leader_elect_release_on_cancel: bool,
    /// `--secure-port` (0 disables serving).
    pub secure_port: u16,
    /// `--bind-address`.
    pub bind_address: IpAddr,
    /// `--cert-dir`.
    pub cert_dir: Option<PathBuf>,
    /// `--tls-cert-file`.
    pub tls_cert_file: Option<PathBuf>,
    /// `--tls-private-key-file`.
    pub tls_private_key_file: Option<PathBuf>,
    /// `--shutdown-timeout` (SDK addition).
    pub shutdown_timeout: Duration,
    /// `-v`.
    pub verbosity: u8,
    /// `--logging-format`.
    pub logging_format: LogFormat,
}

/// Default of `--kube-api-qps` (the CCM's override of the generic 50).
pub const DEFAULT_KUBE_API_QPS: f32 = 20.0;
/// Default of `--kube-api-burst` (the CCM's override of the generic 100).
pub const DEFAULT_KUBE_API_BURST: i32 = 30;
/// Default of `--min-resync-period`.
pub const DEFAULT_MIN_RESYNC_PERIOD: Duration = Duration::from_secs(12 * 3600);
/// Default of `--shutdown-timeout`.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for CcmOptions {
    fn default() -> Self {
        // The SDK additions take their defaults from the controller crates.
        let node = ccm_nodecontroller::CloudNodeConfig::default();
        let lifecycle = ccm_nodecontroller::CloudNodeLifecycleConfig::default();
        let service = ccm_servicecontroller::Config::default();
        let route = ccm_routecontroller::Config::default();
        let budget = CloudBudget::default();
        CcmOptions {
            cloud_provider: String::new(),
            cloud_config: None,
            allow_untagged_cloud: false,
            kubeconfig: None,
            master: None,
            kube_api_qps: DEFAULT_KUBE_API_QPS,
            kube_api_burst: DEFAULT_KUBE_API_BURST,
            kube_api_content_type: "application/vnd.kubernetes.protobuf".to_owned(),
            use_service_account_credentials: false,
            controllers: vec![crate::controllers::ALL.to_owned()],
            controller_start_interval: Duration::ZERO,
            min_resync_period: DEFAULT_MIN_RESYNC_PERIOD,
            cluster_name: "kubernetes".to_owned(),
            cluster_cidr: String::new(),
            allocate_node_cidrs: false,
            cidr_allocator_type: "RangeAllocator".to_owned(),
            configure_cloud_routes: true,
            route_reconciliation_period: Duration::from_secs(10),
            node_monitor_period: Duration::from_secs(5),
            node_status_update_frequency: Duration::from_secs(5 * 60),
            node_sync_period: Duration::ZERO,
            external_cloud_volume_plugin: String::new(),
            concurrent_node_syncs: 1,
            concurrent_node_status_updates: 0,
            concurrent_service_syncs: 1,
            cloud_call_timeout: node.cloud_call_timeout,
            node_lifecycle_concurrency: i32::try_from(lifecycle.concurrency).unwrap_or(i32::MAX),
            node_lifecycle_ownership: NodeOwnershipOption::ProviderIdPrefix,
            protect_initializing_nodes: lifecycle.protect_initializing_nodes,
            load_balancer_class: service.load_balancer_class.clone(),
            class_less_services: service.class_less_services,
            service_periodic_reensure: service.periodic_reensure.unwrap_or(Duration::ZERO),
            service_retry_base_delay: service.retry_base_delay,
            service_retry_max_delay: service.retry_max_delay,
            service_node_sync_debounce: service.node_sync_debounce,
            service_node_sync_max_delay: service.node_sync_max_delay,
            service_extended_update_fields: service.extended_update_fields,
            route_sync_mode: match route.sync_mode {
                ccm_routecontroller::RouteSyncMode::Periodic => RouteSyncModeOption::Periodic,
                _ => RouteSyncModeOption::EventDriven,
            },
            route_event_debounce: route.event_debounce,
            route_resync_period: match route.sync_mode {
                ccm_routecontroller::RouteSyncMode::EventDriven { resync } => resync,
                _ => ccm_routecontroller::config::DEFAULT_RESYNC_PERIOD,
            },
            route_max_retry_backoff: route.max_retry_backoff,
            route_max_concurrent_operations: i32::try_from(route.max_concurrent_route_operations)
                .unwrap_or(i32::MAX),
            cloud_api_qps: budget.qps,
            cloud_api_burst: budget.burst,
            cloud_api_operation_limits: budget.operations,
            cloud_instance_cache_ttl: ccm_core::cache::DEFAULT_INSTANCE_CACHE_TTL,
            node_selector: None,
            service_selector: None,
            service_namespace: None,
            leader_elect: true,
            leader_elect_lease_duration: Duration::from_secs(15),
            leader_elect_renew_deadline: Duration::from_secs(10),
            leader_elect_retry_period: Duration::from_secs(2),
            leader_elect_resource_lock: "leases".to_owned(),
            leader_elect_resource_name: names::lease::NAME.to_owned(),
            leader_elect_resource_namespace: names::lease::NAMESPACE.to_owned(),
            leader_elect_release_on_cancel: true,
            secure_port: names::ports::CLOUD_CONTROLLER_MANAGER,
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            cert_dir: None,
            tls_cert_file: None,
            tls_private_key_file: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            verbosity: 0,
            logging_format: LogFormat::Text,
        }
    }
}

fn non_empty_path(p: &Path) -> Option<PathBuf> {
    (!p.as_os_str().is_empty()).then(|| p.to_path_buf())
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// `--controllers=` (an empty value) means an empty list, as with Go's string-slice flags.
fn controller_list(list: &[String]) -> Vec<String> {
    if list.len() == 1 && list[0].is_empty() {
        Vec::new()
    } else {
        list.to_vec()
    }
}

impl CcmOptions {
    /// `base`, overridden by the config file's `file`, overridden by the command line's `flags`.
    pub fn resolve(base: &CcmOptions, file: &Settings, flags: &Settings) -> CcmOptions {
        let mut options = base.clone();
        options.apply(file);
        options.apply(flags);
        options
    }

    /// Override every setting that `settings` sets.
    pub fn apply(&mut self, s: &Settings) {
        fn set<T: Clone>(target: &mut T, value: &Option<T>) {
            if let Some(v) = value {
                *target = v.clone();
            }
        }
        fn set_duration(target: &mut Duration, value: &Option<GoDuration>) {
            if let Some(v) = value {
                *target = v.get();
            }
        }
        set(&mut self.cloud_provider, &s.cloud_provider);
        if let Some(p) = &s.cloud_config {
            self.cloud_config = non_empty_path(p);
        }
        set(&mut self.allow_untagged_cloud, &s.allow_untagged_cloud);
        if let Some(p) = &s.kubeconfig {
            self.kubeconfig = non_empty_path(p);
        }
        if let Some(m) = &s.master {
            self.master = non_empty(m);
        }
        set(&mut self.kube_api_qps, &s.kube_api_qps);
        set(&mut self.kube_api_burst, &s.kube_api_burst);
        set(&mut self.kube_api_content_type, &s.kube_api_content_type);
        set(
            &mut self.use_service_account_credentials,
            &s.use_service_account_credentials,
        );
        if let Some(list) = &s.controllers {
            self.controllers = controller_list(list);
        }
        set_duration(
            &mut self.controller_start_interval,
            &s.controller_start_interval,
        );
        set_duration(&mut self.min_resync_period, &s.min_resync_period);
        set(&mut self.cluster_name, &s.cluster_name);
        set(&mut self.cluster_cidr, &s.cluster_cidr);
        set(&mut self.allocate_node_cidrs, &s.allocate_node_cidrs);
        set(&mut self.cidr_allocator_type, &s.cidr_allocator_type);
        set(&mut self.configure_cloud_routes, &s.configure_cloud_routes);
        set_duration(
            &mut self.route_reconciliation_period,
            &s.route_reconciliation_period,
        );
        set_duration(&mut self.node_monitor_period, &s.node_monitor_period);
        set_duration(
            &mut self.node_status_update_frequency,
            &s.node_status_update_frequency,
        );
        set_duration(&mut self.node_sync_period, &s.node_sync_period);
        set(
            &mut self.external_cloud_volume_plugin,
            &s.external_cloud_volume_plugin,
        );
        set(&mut self.concurrent_node_syncs, &s.concurrent_node_syncs);
        set(
            &mut self.concurrent_node_status_updates,
            &s.concurrent_node_status_updates,
        );
        set(
            &mut self.concurrent_service_syncs,
            &s.concurrent_service_syncs,
        );
        set_duration(&mut self.cloud_call_timeout, &s.cloud_call_timeout);
        set(
            &mut self.node_lifecycle_concurrency,
            &s.node_lifecycle_concurrency,
        );
        set(
            &mut self.node_lifecycle_ownership,
            &s.node_lifecycle_ownership,
        );
        set(
            &mut self.protect_initializing_nodes,
            &s.protect_initializing_nodes,
        );
        if let Some(v) = &s.load_balancer_class {
            self.load_balancer_class = non_empty(v);
        }
        set(&mut self.class_less_services, &s.class_less_services);
        set_duration(
            &mut self.service_periodic_reensure,
            &s.service_periodic_reensure,
        );
        set_duration(
            &mut self.service_retry_base_delay,
            &s.service_retry_base_delay,
        );
        set_duration(
            &mut self.service_retry_max_delay,
            &s.service_retry_max_delay,
        );
        set_duration(
            &mut self.service_node_sync_debounce,
            &s.service_node_sync_debounce,
        );
        set_duration(
            &mut self.service_node_sync_max_delay,
            &s.service_node_sync_max_delay,
        );
        set(
            &mut self.service_extended_update_fields,
            &s.service_extended_update_fields,
        );
        set(&mut self.route_sync_mode, &s.route_sync_mode);
        set_duration(&mut self.route_event_debounce, &s.route_event_debounce);
        set_duration(&mut self.route_resync_period, &s.route_resync_period);
        set_duration(
            &mut self.route_max_retry_backoff,
            &s.route_max_retry_backoff,
        );
        set(
            &mut self.route_max_concurrent_operations,
            &s.route_max_concurrent_operations,
        );
        set(&mut self.cloud_api_qps, &s.cloud_api_qps);
        set(&mut self.cloud_api_burst, &s.cloud_api_burst);
        set(
            &mut self.cloud_api_operation_limits,
            &s.cloud_api_operation_limits,
        );
        for flag in s.cloud_api_operation_limit.iter().flatten() {
            self.cloud_api_operation_limits
                .insert(flag.operation.as_str().to_owned(), flag.limit);
        }
        set_duration(
            &mut self.cloud_instance_cache_ttl,
            &s.cloud_instance_cache_ttl,
        );
        if let Some(v) = &s.node_selector {
            self.node_selector = non_empty(v);
        }
        if let Some(v) = &s.service_selector {
            self.service_selector = non_empty(v);
        }
        if let Some(v) = &s.service_namespace {
            self.service_namespace = non_empty(v);
        }
        set(&mut self.leader_elect, &s.leader_elect);
        set_duration(
            &mut self.leader_elect_lease_duration,
            &s.leader_elect_lease_duration,
        );
        set_duration(
            &mut self.leader_elect_renew_deadline,
            &s.leader_elect_renew_deadline,
        );
        set_duration(
            &mut self.leader_elect_retry_period,
            &s.leader_elect_retry_period,
        );
        set(
            &mut self.leader_elect_resource_lock,
            &s.leader_elect_resource_lock,
        );
        set(
            &mut self.leader_elect_resource_name,
            &s.leader_elect_resource_name,
        );
        set(
            &mut self.leader_elect_resource_namespace,
            &s.leader_elect_resource_namespace,
        );
        set(
            &mut self.leader_elect_release_on_cancel,
            &s.leader_elect_release_on_cancel,
        );
        set(&mut self.secure_port, &s.secure_port);
        set(&mut self.bind_address, &s.bind_address);
        if let Some(p) = &s.cert_dir {
            self.cert_dir = non_empty_path(p);
        }
        if let Some(p) = &s.tls_cert_file {
            self.tls_cert_file = non_empty_path(p);
        }
        if let Some(p) = &s.tls_private_key_file {
            self.tls_private_key_file = non_empty_path(p);
        }
        set_duration(&mut self.shutdown_timeout, &s.shutdown_timeout);
        set(&mut self.verbosity, &s.verbosity);
        set(&mut self.logging_format, &s.logging_format);
    }

    /// Every setting, as a complete [`Settings`]: what `/configz` serves, and a valid config file.
    pub fn to_settings(&self) -> Settings {
        let path = |p: &Option<PathBuf>| Some(p.clone().unwrap_or_default());
        let text = |s: &Option<String>| Some(s.clone().unwrap_or_default());
        Settings {
            cloud_provider: Some(self.cloud_provider.clone()),
            cloud_config: path(&self.cloud_config),
            allow_untagged_cloud: Some(self.allow_untagged_cloud),
            kubeconfig: path(&self.kubeconfig),
            master: text(&self.master),
            kube_api_qps: Some(self.kube_api_qps),
            kube_api_burst: Some(self.kube_api_burst),
            kube_api_content_type: Some(self.kube_api_content_type.clone()),
            use_service_account_credentials: Some(self.use_service_account_credentials),
            controllers: Some(self.controllers.clone()),
            controller_start_interval: Some(self.controller_start_interval.into()),
            min_resync_period: Some(self.min_resync_period.into()),
            cluster_name: Some(self.cluster_name.clone()),
            cluster_cidr: Some(self.cluster_cidr.clone()),
            allocate_node_cidrs: Some(self.allocate_node_cidrs),
            cidr_allocator_type: Some(self.cidr_allocator_type.clone()),
            configure_cloud_routes: Some(self.configure_cloud_routes),
            route_reconciliation_period: Some(self.route_reconciliation_period.into()),
            node_monitor_period: Some(self.node_monitor_period.into()),
            node_status_update_frequency: Some(self.node_status_update_frequency.into()),
            node_sync_period: Some(self.node_sync_period.into()),
            external_cloud_volume_plugin: Some(self.external_cloud_volume_plugin.clone()),
            concurrent_node_syncs: Some(self.concurrent_node_syncs),
            concurrent_node_status_updates: Some(self.concurrent_node_status_updates),
            concurrent_service_syncs: Some(self.concurrent_service_syncs),
            cloud_call_timeout: Some(self.cloud_call_timeout.into()),
            node_lifecycle_concurrency: Some(self.node_lifecycle_concurrency),
            node_lifecycle_ownership: Some(self.node_lifecycle_ownership),
            protect_initializing_nodes: Some(self.protect_initializing_nodes),
            load_balancer_class: text(&self.load_balancer_class),
            class_less_services: Some(self.class_less_services),
            service_periodic_reensure: Some(self.service_periodic_reensure.into()),
            service_retry_base_delay: Some(self.service_retry_base_delay.into()),
            service_retry_max_delay: Some(self.service_retry_max_delay.into()),
            service_node_sync_debounce: Some(self.service_node_sync_debounce.into()),
            service_node_sync_max_delay: Some(self.service_node_sync_max_delay.into()),
            service_extended_update_fields: Some(self.service_extended_update_fields),
            route_sync_mode: Some(self.route_sync_mode),
            route_event_debounce: Some(self.route_event_debounce.into()),
            route_resync_period: Some(self.route_resync_period.into()),
            route_max_retry_backoff: Some(self.route_max_retry_backoff.into()),
            route_max_concurrent_operations: Some(self.route_max_concurrent_operations),
            cloud_api_qps: Some(self.cloud_api_qps),
            cloud_api_burst: Some(self.cloud_api_burst),
            cloud_api_operation_limits: Some(self.cloud_api_operation_limits.clone()),
            // (the flag form adds to the map above)
            cloud_api_operation_limit: None,
            cloud_instance_cache_ttl: Some(self.cloud_instance_cache_ttl.into()),
            node_selector: text(&self.node_selector),
            service_selector: text(&self.service_selector),
            service_namespace: text(&self.service_namespace),
            leader_elect: Some(self.leader_elect),
            leader_elect_lease_duration: Some(self.leader_elect_lease_duration.into()),
            leader_elect_renew_deadline: Some(self.leader_elect_renew_deadline.into()),
            leader_elect_retry_period: Some(self.leader_elect_retry_period.into()),
            leader_elect_resource_lock: Some(self.leader_elect_resource_lock.clone()),
            leader_elect_resource_name: Some(self.leader_elect_resource_name.clone()),
            leader_elect_resource_namespace: Some(self.leader_elect_resource_namespace.clone()),
            leader_elect_release_on_cancel: Some(self.leader_elect_release_on_cancel),
            secure_port: Some(self.secure_port),
            bind_address: Some(self.bind_address),
            cert_dir: path(&self.cert_dir),
            tls_cert_file: path(&self.tls_cert_file),
            tls_private_key_file: path(&self.tls_private_key_file),
            shutdown_timeout: Some(self.shutdown_timeout.into()),
            verbosity: Some(self.verbosity),
            logging_format: Some(self.logging_format),
        }
    }

    /// The number of parallel address refreshes: `--concurrent-node-status-updates`, or
    /// `--concurrent-node-syncs` when it is 0.
    pub fn effective_node_status_updates(&self) -> i32 {
        if self.concurrent_node_status_updates == 0 {
            self.concurrent_node_syncs
        } else {
            self.concurrent_node_status_updates
        }
    }

    /// Check every rule that does not depend on the binary's controllers or provider, collecting all
    /// violations.
    pub fn validate(&self) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        let mut check = |ok: bool, error: ValidationError| {
            if !ok {
                errors.push(error);
            }
        };
        check(
            !self.cloud_provider.is_empty(),
            ValidationError::EmptyCloudProvider,
        );
        check(
            self.kube_api_burst >= 0,
            ValidationError::Negative {
                setting: "kube-api-burst",
                value: i64::from(self.kube_api_burst),
            },
        );
        check(
            self.kube_api_qps.is_finite(),
            ValidationError::Invalid {
                setting: "kube-api-qps",
                reason: format!("{} is not a number", self.kube_api_qps),
            },
        );
        check(
            self.concurrent_node_syncs > 0,
            ValidationError::NotPositive {
                setting: "concurrent-node-syncs",
                value: i64::from(self.concurrent_node_syncs),
            },
        );
        check(
            self.concurrent_node_status_updates >= 0,
            ValidationError::Negative {
                setting: "concurrent-node-status-updates",
                value: i64::from(self.concurrent_node_status_updates),
            },
        );
        check(
            self.concurrent_service_syncs > 0,
            ValidationError::NotPositive {
                setting: "concurrent-service-syncs",
                value: i64::from(self.concurrent_service_syncs),
            },
        );
        for (setting, value) in [
            (
                "node-lifecycle-concurrency",
                self.node_lifecycle_concurrency,
            ),
            (
                "route-max-concurrent-operations",
                self.route_max_concurrent_operations,
            ),
        ] {
            check(
                value > 0,
                ValidationError::NotPositive {
                    setting,
                    value: i64::from(value),
                },
            );
        }
        for (setting, value) in [
            ("cloud-call-timeout", self.cloud_call_timeout),
            ("service-retry-base-delay", self.service_retry_base_delay),
            (
                "route-reconciliation-period",
                self.route_reconciliation_period,
            ),
            ("node-monitor-period", self.node_monitor_period),
            (
                "node-status-update-frequency",
                self.node_status_update_frequency,
            ),
            ("shutdown-timeout", self.shutdown_timeout),
        ] {
            check(!value.is_zero(), ValidationError::ZeroDuration { setting });
        }
        check(
            self.cluster_name.is_empty() || !self.cluster_name.chars().any(char::is_control),
            ValidationError::Invalid {
                setting: "cluster-name",
                reason: "it contains control characters".to_owned(),
            },
        );
        check(
            self.tls_cert_file.is_some() == self.tls_private_key_file.is_some(),
            ValidationError::Invalid {
                setting: "tls-cert-file",
                reason: "--tls-cert-file and --tls-private-key-file must be given together"
                    .to_owned(),
            },
        );
        if let Some(ns) = &self.service_namespace {
            check(
                is_dns_label(ns),
                ValidationError::Invalid {
                    setting: "service-namespace",
                    reason: format!("{ns:?} is not a valid namespace name (a DNS-1123 label)"),
                },
            );
        }
        for (setting, selector) in [
            ("node-selector", &self.node_selector),
            ("service-selector", &self.service_selector),
        ] {
            if let Some(selector) = selector {
                check(
                    !selector.chars().any(char::is_control),
                    ValidationError::Invalid {
                        setting,
                        reason: format!("{selector:?} contains control characters"),
                    },
                );
            }
        }
        if let Err(err) = self.cloud_budget().validate() {
            errors.push(ValidationError::Invalid {
                setting: "cloud-api-qps",
                reason: err.to_string(),
            });
        }
        if self.leader_elect {
            errors.extend(self.validate_leader_election());
        }
        errors
    }

    /// The cloud-call budget of `--cloud-api-qps`, `--cloud-api-burst`, `cloudApiOperationLimits` and
    /// `--cloud-api-operation-limit`.
    pub fn cloud_budget(&self) -> CloudBudget {
        let mut budget = CloudBudget::default()
            .with_qps(self.cloud_api_qps)
            .with_burst(self.cloud_api_burst);
        // by name, as the config file gives them: `validate` reports an unknown one
        budget.operations.extend(
            self.cloud_api_operation_limits
                .iter()
                .map(|(name, limit)| (name.clone(), *limit)),
        );
        budget
    }

    fn validate_leader_election(&self) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        if self.leader_elect_resource_lock != "leases" {
            errors.push(ValidationError::Invalid {
                setting: "leader-elect-resource-lock",
                reason: format!(
                    "{:?} is not supported; the resource lock must be \"leases\"",
                    self.leader_elect_resource_lock
                ),
            });
        }
        for (setting, value) in [
            (
                "leader-elect-lease-duration",
                self.leader_elect_lease_duration,
            ),
            (
                "leader-elect-renew-deadline",
                self.leader_elect_renew_deadline,
            ),
            ("leader-elect-retry-period", self.leader_elect_retry_period),
        ] {
            if value < Duration::from_secs(1) {
                errors.push(ValidationError::Invalid {
                    setting,
                    reason: format!(
                        "{} is shorter than the minimum of 1s",
                        format_go_duration(value)
                    ),
                });
            }
        }
        if self.leader_elect_lease_duration <= self.leader_elect_renew_deadline {
            errors.push(ValidationError::Invalid {
                setting: "leader-elect-lease-duration",
                reason: format!(
                    "the lease duration ({}) must be greater than the renew deadline ({})",
                    format_go_duration(self.leader_elect_lease_duration),
                    format_go_duration(self.leader_elect_renew_deadline)
                ),
            });
        }
        if self.leader_elect_renew_deadline.as_secs_f64()
            <= self.leader_elect_retry_period.as_secs_f64() * ccm_leaderelection::JITTER_FACTOR
        {
            errors.push(ValidationError::Invalid {
                setting: "leader-elect-renew-deadline",
                reason: format!(
                    "the renew deadline ({}) must be greater than 1.2 × the retry period ({})",
                    format_go_duration(self.leader_elect_renew_deadline),
                    format_go_duration(self.leader_elect_retry_period)
                ),
            });
        }
        for (setting, value, label) in [
            (
                "leader-elect-resource-name",
                &self.leader_elect_resource_name,
                false,
            ),
            (
                "leader-elect-resource-namespace",
                &self.leader_elect_resource_namespace,
                true,
            ),
        ] {
            let ok = if label {
                is_dns_label(value)
            } else {
                is_dns_subdomain(value)
            };
            if !ok {
                errors.push(ValidationError::Invalid {
                    setting,
                    reason: format!(
                        "{value:?} is not a valid {} name",
                        if label { "namespace" } else { "Lease" }
                    ),
                });
            }
        }
        errors
    }
}

/// A DNS-1123 label: at most 63 lower-case alphanumerics or '-', starting and ending alphanumeric.
pub(crate) fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn is_dns_subdomain(value: &str) -> bool {
    value.len() <= 253 && value.split('.').all(is_dns_label)
}

/// One violated rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// `--cloud-provider` is empty and the binary sets no default.
    #[error("--cloud-provider cannot be empty; set it to the name of your cloud provider")]
    EmptyCloudProvider,
    /// A count that must be positive is not.
    #[error("--{setting} must be greater than 0, got {value}")]
    NotPositive {
        /// The flag name.
        setting: &'static str,
        /// The value given.
        value: i64,
    },
    /// A count that must not be negative is.
    #[error("--{setting} must not be negative, got {value}")]
    Negative {
        /// The flag name.
        setting: &'static str,
        /// The value given.
        value: i64,
    },
    /// A period is zero.
    #[error("--{setting} must be greater than 0s")]
    ZeroDuration {
        /// The flag name.
        setting: &'static str,
    },
    /// Any other invalid value.
    #[error("invalid --{setting}: {reason}")]
    Invalid {
        /// The flag name.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// `--controllers` names unknown controllers.
    #[error(transparent)]
    UnknownControllers(#[from] crate::controllers::UnknownControllers),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> CcmOptions {
        CcmOptions {
            cloud_provider: "fake".into(),
            ..CcmOptions::default()
        }
    }

    #[test]
    fn defaults_are_the_go_defaults() {
        let o = CcmOptions::default();
        assert_eq!(o.cloud_provider, "");
        assert_eq!(o.kube_api_qps, 20.0);
        assert_eq!(o.kube_api_burst, 30);
        assert_eq!(o.controllers, vec!["*"]);
        assert_eq!(o.min_resync_period, Duration::from_secs(43200));
        assert_eq!(o.cluster_name, "kubernetes");
        assert!(o.configure_cloud_routes);
        assert!(!o.allocate_node_cidrs);
        assert_eq!(o.route_reconciliation_period, Duration::from_secs(10));
        assert_eq!(o.node_monitor_period, Duration::from_secs(5));
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(300));
        assert_eq!(o.concurrent_node_syncs, 1);
        assert_eq!(o.concurrent_node_status_updates, 0);
        assert_eq!(o.effective_node_status_updates(), 1);
        assert_eq!(o.concurrent_service_syncs, 1);
        assert!(o.leader_elect);
        assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(o.leader_elect_renew_deadline, Duration::from_secs(10));
        assert_eq!(o.leader_elect_retry_period, Duration::from_secs(2));
        assert_eq!(o.leader_elect_resource_lock, "leases");
        assert_eq!(o.leader_elect_resource_name, "cloud-controller-manager");
        assert_eq!(o.leader_elect_resource_namespace, "kube-system");
        assert_eq!(o.secure_port, 10258);
        assert_eq!(o.bind_address.to_string(), "0.0.0.0");
        assert_eq!(o.controller_start_interval, Duration::ZERO);
        assert_eq!(
            o.kube_api_content_type,
            "application/vnd.kubernetes.protobuf"
        );
        assert!(!o.use_service_account_credentials);
        assert_eq!(
            o.validate(),
            vec![ValidationError::EmptyCloudProvider],
            "only the provider is missing"
        );
        assert!(valid().validate().is_empty());
    }

    #[test]
    fn precedence_defaults_then_file_then_flags() {
        let file = Settings {
            kube_api_qps: Some(50.0),
            kube_api_burst: Some(60),
            cluster_name: Some("from-file".into()),
            controllers: Some(vec!["*".into(), "-route".into()]),
            ..Settings::default()
        };
        let flags = Settings {
            kube_api_qps: Some(100.0),
            controllers: Some(vec!["service".into()]),
            ..Settings::default()
        };
        let o = CcmOptions::resolve(&valid(), &file, &flags);
        assert_eq!(o.kube_api_qps, 100.0);
        assert_eq!(o.kube_api_burst, 60);
        assert_eq!(o.cluster_name, "from-file");
        assert_eq!(o.controllers, vec!["service"]);
        assert_eq!(o.cloud_provider, "fake");
        assert_eq!(o.node_monitor_period, Duration::from_secs(5));
    }

    #[test]
    fn empty_values_clear_optional_settings() {
        let base = CcmOptions {
            kubeconfig: Some("/a".into()),
            master: Some("https://x".into()),
            node_selector: Some("a=b".into()),
            ..valid()
        };
        let flags = Settings {
            kubeconfig: Some(PathBuf::new()),
            master: Some(String::new()),
            node_selector: Some(String::new()),
            controllers: Some(vec![String::new()]),
            ..Settings::default()
        };
        let o = CcmOptions::resolve(&base, &Settings::default(), &flags);
        assert_eq!(o.kubeconfig, None);
        assert_eq!(o.master, None);
        assert_eq!(o.node_selector, None);
        assert!(o.controllers.is_empty());
    }

    #[test]
    fn to_settings_round_trips() {
        let mut o = valid();
        o.cloud_config = Some("/etc/cloud.yaml".into());
        o.node_selector = Some("a=b".into());
        o.min_resync_period = Duration::from_millis(1500);
        let again = CcmOptions::resolve(
            &CcmOptions::default(),
            &o.to_settings(),
            &Settings::default(),
        );
        assert_eq!(again, o);
        // and it survives serialization, so /configz output is a valid config file
        let json = serde_json::to_value(o.to_settings()).unwrap();
        let back: Settings = serde_json::from_value(json).unwrap();
        assert_eq!(back, o.to_settings());
    }

    #[test]
    fn validation_collects_every_violation() {
        let o = CcmOptions {
            cloud_provider: String::new(),
            kube_api_burst: -1,
            concurrent_node_syncs: 0,
            concurrent_node_status_updates: -1,
            concurrent_service_syncs: 0,
            node_monitor_period: Duration::ZERO,
            tls_cert_file: Some("/c".into()),
            service_namespace: Some("Bad_NS".into()),
            ..CcmOptions::default()
        };
        let messages: Vec<String> = o.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "--cloud-provider cannot be empty; set it to the name of your cloud provider",
                "--kube-api-burst must not be negative, got -1",
                "--concurrent-node-syncs must be greater than 0, got 0",
                "--concurrent-node-status-updates must not be negative, got -1",
                "--concurrent-service-syncs must be greater than 0, got 0",
                "--node-monitor-period must be greater than 0s",
                "invalid --tls-cert-file: --tls-cert-file and --tls-private-key-file must be given together",
                "invalid --service-namespace: \"Bad_NS\" is not a valid namespace name (a DNS-1123 label)",
            ]
        );
    }

    #[test]
    fn leader_election_rules() {
        let le = |lease: u64, renew: u64, retry_ms: u64| CcmOptions {
            leader_elect_lease_duration: Duration::from_secs(lease),
            leader_elect_renew_deadline: Duration::from_secs(renew),
            leader_elect_retry_period: Duration::from_millis(retry_ms),
            ..valid()
        };
        assert!(le(15, 10, 2000).validate().is_empty());
        let errs = le(10, 10, 2000).validate();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .to_string()
                .contains("must be greater than the renew deadline")
        );
        // 10s <= 1.2 × 9s
        let errs = le(15, 10, 9000).validate();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].to_string().contains("1.2 × the retry period (9s)"),
            "{}",
            errs[0]
        );
        let errs = le(15, 10, 500).validate();
        assert!(errs[0].to_string().contains("minimum of 1s"), "{}", errs[0]);
        // leader election off: the timings are not checked
        let off = CcmOptions {
            leader_elect: false,
            ..le(1, 10, 2000)
        };
        assert!(off.validate().is_empty());
        let lock = CcmOptions {
            leader_elect_resource_lock: "endpoints".into(),
            leader_elect_resource_namespace: "Kube_System".into(),
            leader_elect_resource_name: "".into(),
            ..valid()
        };
        let messages: Vec<String> = lock.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "invalid --leader-elect-resource-lock: \"endpoints\" is not supported; the resource lock must be \"leases\"",
                "invalid --leader-elect-resource-name: \"\" is not a valid Lease name",
                "invalid --leader-elect-resource-namespace: \"Kube_System\" is not a valid namespace name",
            ]
        );
    }

    #[test]
    fn go_bools() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Ok(false));
        }
        for bad in ["", "yes", "no", "tRUE", "2"] {
            assert!(parse_go_bool(bad).unwrap_err().contains("invalid boolean"));
        }
    }

    #[test]
    fn dns_names() {
        assert!(is_dns_label("kube-system"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label("A"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("cloud-controller-manager.example"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain(""));
    }
}
