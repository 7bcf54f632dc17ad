//! Settings: the command-line flags, the config file, and the resolved, validated [`CcmOptions`].
//!
//! Every setting is declared once, in the table below (the forms: `settings!` in `define.rs`): its doc comment,
//! ending with "Default: ...", is the `--help` text and the JSON schema's description; `#[arg]` gives flag name,
//! value name, parser and help heading; `#[serde]` only renames a config-file key. From the table follow
//! [`Settings`], all optional, parsed both from the command line (Go flag names) and from the YAML `--config` file
//! (camelCase keys, unknown keys rejected); [`CcmOptions`] with the Go reference's defaults; [`CcmOptions::apply`];
//! and [`CcmOptions::to_settings`], what `/configz` serves. [`CcmOptions::validate`] (`validate.rs`) holds the
//! rules; the controllers read the resolved values in ccm-app's `defaults` module. The effective options are
//! `CcmOptions::default()`, overridden by the file, overridden by flags given explicitly on the command line.
//!
//! ```
//! use ccm_app::options::{CcmOptions, KubeApiLimit, Settings};
//! use std::time::Duration;
//!
//! let file: Settings = serde_json::from_value(serde_json::json!({"kubeApiQps": 50.0, "nodeMonitorPeriod": "10s"})).unwrap();
//! let mut flags = Settings::default();
//! flags.kube_api_qps = Some(100.0.into());
//! let options = CcmOptions::resolve(&CcmOptions::default(), &file, &flags);
//! assert_eq!(options.kube_api_qps, 100.0); // the flag wins
//! assert_eq!(options.node_monitor_period, Duration::from_secs(10)); // from the file
//! assert_eq!(options.kube_api_burst, KubeApiLimit::Auto); // the default: decided at start
//! ```

mod define;
mod migration;
mod parse;
mod validate;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use ccm_core::budget::{CloudBudget, OperationBudget};
use ccm_core::duration::GoDuration;
use ccm_core::names;
use ccm_nodecontroller::{CloudNodeConfig, CloudNodeLifecycleConfig};
use ccm_routecontroller::{Config as RouteConfig, RouteSyncMode};
use ccm_servicecontroller::{Config as ServiceConfig, Takeover as ServiceTakeover};

use define::settings;
pub use parse::{
    KubeApiLimit, LogFormat, NodeOwnershipOption, OperationLimit, RouteSyncModeOption,
    ServiceTakeoverOption,
};
pub(crate) use parse::{parse_go_bool, parse_operation_limit};
pub use validate::ValidationError;
pub(crate) use validate::invalid;

/// Go's default of `--kube-api-qps` (the CCM's override of the generic 50): the limit when the flag is unset and
/// the API server does not run API Priority and Fairness, or when only `--kube-api-burst` is set.
pub(crate) const DEFAULT_KUBE_API_QPS: f32 = 20.0;
/// Go's default of `--kube-api-burst` (the CCM's override of the generic 100), used as [`DEFAULT_KUBE_API_QPS`].
pub(crate) const DEFAULT_KUBE_API_BURST: i32 = 30;

settings! {
    // ---- cloud provider ----
    /// The provider to use (the name it is registered under). Required unless the binary sets a default.
    #[arg(long, value_name = "NAME", help_heading = "Cloud provider")]
    cloud_provider: String = String::new(),

    /// The path of the provider's configuration file, passed to the provider. Default: none.
    #[arg(long, value_name = "PATH", help_heading = "Cloud provider")]
    cloud_config: Option<PathBuf> as PathBuf = None,

    /// SDK addition: how often --cloud-config and the files the provider declared are checked for changes; a
    /// change is handed to the provider's reload hook (no restart; a rejected file keeps the old configuration and
    /// yields a CloudConfigReloadFailed Warning Event). 0s disables watching. Default: 10s.
    #[arg(long, value_name = "DURATION", help_heading = "Cloud provider")]
    cloud_config_reload_interval: Duration as GoDuration = Duration::from_secs(10),

    /// Start even if the provider reports no cluster ID (deprecated in Go; kept for compatibility). Default: false.
    #[arg(long, help_heading = "Cloud provider")]
    allow_untagged_cloud: bool = false,

    // ---- Kubernetes client ----
    /// The kubeconfig file with the cluster address and credentials. Default: none (in-cluster configuration).
    #[arg(long, value_name = "PATH", help_heading = "Kubernetes client")]
    kubeconfig: Option<PathBuf> as PathBuf = None,

    /// The address of the Kubernetes API server (overrides the kubeconfig's). Default: none.
    #[arg(long, value_name = "URL", help_heading = "Kubernetes client")]
    master: Option<String> as String = None,

    /// Requests per second each client of the CCM may send to the API server (a token bucket per client, as in
    /// client-go; 0 means 5, negative means unlimited). Unset (or `auto`): no client-side limit when the API server
    /// runs API Priority and Fairness (detected at start), Go's 20 otherwise; --kube-api-qps=20
    /// --kube-api-burst=30 is Go's fixed behaviour. Default: auto.
    #[arg(long, value_name = "QPS", help_heading = "Kubernetes client")]
    kube_api_qps: KubeApiLimit<f32> = KubeApiLimit::Auto,

    /// The burst of each client's token bucket (0 means 10). Unset (or `auto`): decided with --kube-api-qps (Go's
    /// 30 when only --kube-api-qps is set). Default: auto.
    #[arg(long, value_name = "N", help_heading = "Kubernetes client")]
    kube_api_burst: KubeApiLimit<i32> = KubeApiLimit::Auto,

    /// Accepted for compatibility; requests are always sent as JSON. Default: application/vnd.kubernetes.protobuf.
    #[arg(long, value_name = "TYPE", help_heading = "Kubernetes client")]
    kube_api_content_type: String = "application/vnd.kubernetes.protobuf".to_owned(),

    /// Accepted for compatibility; every controller uses the CCM's own credentials (a warning is logged when
    /// true). Default: false.
    #[arg(long, help_heading = "Kubernetes client")]
    use_service_account_credentials: bool = false,

    // ---- controllers ----
    /// The controllers to run, comma separated: `name` enables, `-name` disables, `*` means every controller that
    /// is on by default; the first mention of a controller wins. Default: *.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', allow_hyphen_values = true,
          help_heading = "Controllers")]
    controllers: Vec<String> as Vec<String> = vec![crate::controllers::ALL.to_owned()],

    /// The pause between starting two controllers (jittered up to twice as long). Default: 0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers")]
    controller_start_interval: Duration as GoDuration = Duration::ZERO,

    /// The shared informers ask controllers to re-read every cached Node and Service at a random interval between
    /// this and twice this; 0s disables it. Default: 12h0m0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers")]
    min_resync_period: Duration as GoDuration = Duration::from_secs(12 * 3600),

    /// The name of the cluster, passed to every load-balancer and route call. Default: kubernetes.
    #[arg(long, value_name = "NAME", help_heading = "Controllers")]
    cluster_name: String = "kubernetes".to_owned(),

    /// The pod CIDR range of the cluster (one CIDR or a comma-separated dual-stack pair), used by the route
    /// controller. Default: none.
    #[arg(long = "cluster-cidr", value_name = "CIDRS", help_heading = "Controllers")]
    #[serde(rename = "clusterCIDR")]
    cluster_cidr: String = String::new(),

    /// Accepted for compatibility; the CCM does not allocate node CIDRs. Default: false.
    #[arg(long = "allocate-node-cidrs", help_heading = "Controllers")]
    #[serde(rename = "allocateNodeCIDRs")]
    allocate_node_cidrs: bool = false,

    /// Accepted for compatibility; unused by the CCM. Default: RangeAllocator.
    #[arg(long, value_name = "TYPE", help_heading = "Controllers")]
    cidr_allocator_type: String = "RangeAllocator".to_owned(),

    /// Whether the route controller creates cloud routes for the nodes' pod CIDRs. Default: true.
    #[arg(long, help_heading = "Controllers")]
    configure_cloud_routes: bool = true,

    /// How often the route controller reconciles routes. Default: 10s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers")]
    route_reconciliation_period: Duration as GoDuration = Duration::from_secs(10),

    /// How often the node lifecycle controller checks NotReady nodes against the cloud. Default: 5s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers")]
    node_monitor_period: Duration as GoDuration = Duration::from_secs(5),

    /// How often the cloud node controller refreshes the addresses of initialized nodes. Default: 5m0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers")]
    node_status_update_frequency: Duration as GoDuration = Duration::from_secs(5 * 60),

    /// Deprecated no-op, accepted for compatibility. Default: 0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers")]
    node_sync_period: Duration as GoDuration = Duration::ZERO,

    /// Accepted for compatibility; unused. Default: none.
    #[arg(long, value_name = "NAME", help_heading = "Controllers")]
    external_cloud_volume_plugin: String = String::new(),

    /// Nodes the cloud node controller initializes in parallel (must be > 0). Default: 1.
    #[arg(long, value_name = "N", help_heading = "Controllers")]
    concurrent_node_syncs: i32 = 1,

    /// Nodes whose addresses are refreshed in parallel; 0 means --concurrent-node-syncs. Default: 0.
    #[arg(long, value_name = "N", help_heading = "Controllers")]
    concurrent_node_status_updates: i32 = 0,

    /// Services the service controller syncs in parallel (must be > 0). Default: 1.
    #[arg(long, value_name = "N", help_heading = "Controllers")]
    concurrent_service_syncs: i32 = 1,

    // ---- controller settings (SDK additions); their defaults come from the controller crates ----
    /// SDK addition: the longest a single cloud call of the node controllers may take. Default: 30s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    cloud_call_timeout: Duration as GoDuration = CloudNodeConfig::default().cloud_call_timeout,

    /// SDK addition: nodes the lifecycle controller checks at once (Go: 1). Default: 10.
    #[arg(long, value_name = "N", help_heading = "Controllers (SDK additions)")]
    node_lifecycle_concurrency: i32 = count(CloudNodeLifecycleConfig::default().concurrency),

    /// SDK addition: which nodes the lifecycle controller may taint and delete: provider-id-prefix (nodes whose
    /// providerID has this provider's prefix) or all-nodes (Go). Default: provider-id-prefix.
    #[arg(long, value_name = "RULE", help_heading = "Controllers (SDK additions)")]
    node_lifecycle_ownership: NodeOwnershipOption = NodeOwnershipOption::ProviderIdPrefix,

    /// SDK addition: never delete or taint a node that still has the uninitialized taint (Go: false). Default:
    /// true.
    #[arg(long, help_heading = "Controllers (SDK additions)")]
    protect_initializing_nodes: bool = CloudNodeLifecycleConfig::default().protect_initializing_nodes,

    /// SDK addition: also manage LoadBalancer Services with this spec.loadBalancerClass. Default: none.
    #[arg(long, value_name = "CLASS", help_heading = "Controllers (SDK additions)")]
    load_balancer_class: Option<String> as String = ServiceConfig::default().load_balancer_class,

    /// SDK addition: manage LoadBalancer Services without a loadBalancerClass (the Go behaviour). Default: true.
    #[arg(long, help_heading = "Controllers (SDK additions)")]
    class_less_services: bool = ServiceConfig::default().class_less_services,

    /// SDK addition: re-ensure every load balancer this often to repair drift; 0s disables it (Go never
    /// does). Default: 0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    service_periodic_reensure: Duration as GoDuration =
        ServiceConfig::default().periodic_reensure.unwrap_or(Duration::ZERO),

    /// SDK addition: first retry delay of a failed Service sync, doubled per failure. Default: 5s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    service_retry_base_delay: Duration as GoDuration = ServiceConfig::default().retry_base_delay,

    /// SDK addition: longest retry delay of a failed Service sync. Default: 5m0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    service_retry_max_delay: Duration as GoDuration = ServiceConfig::default().retry_max_delay,

    /// SDK addition: how long node changes must settle before load balancer hosts are updated, so the Nodes of
    /// one burst share one update per load balancer; changes during a pass share the next one; 0s starts a pass
    /// at once when none is running. Default: 100ms.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    service_node_sync_debounce: Duration as GoDuration = ServiceConfig::default().node_sync_debounce,

    /// SDK addition: the longest a stream of node changes may delay load balancer host updates (at least
    /// --service-node-sync-debounce). Default: 1s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    service_node_sync_max_delay: Duration as GoDuration = ServiceConfig::default().node_sync_max_delay,

    /// SDK addition: also re-ensure a load balancer when allocateLoadBalancerNodePorts or the ipFamilies values
    /// change (Go compares only the ipFamilies count). Default: false.
    #[arg(long, help_heading = "Controllers (SDK additions)")]
    service_extended_update_fields: bool = ServiceConfig::default().extended_update_fields,

    /// SDK addition: what a starting service controller (a new leader, a restarted CCM) does with existing load
    /// balancers: compare (list them and ensure only those missing or different; providers without a listing get
    /// ensure-all) or ensure-all (Go). Default: compare.
    #[arg(long, value_name = "MODE", help_heading = "Controllers (SDK additions)")]
    service_takeover: ServiceTakeoverOption = match ServiceConfig::default().takeover {
        ServiceTakeover::EnsureAll => ServiceTakeoverOption::EnsureAll,
        _ => ServiceTakeoverOption::Compare,
    },

    /// SDK addition: how the route controller is triggered: periodic (Go) or event-driven. Default:
    /// event-driven.
    #[arg(long, value_name = "MODE", help_heading = "Controllers (SDK additions)")]
    route_sync_mode: RouteSyncModeOption = match RouteConfig::default().sync_mode {
        RouteSyncMode::Periodic => RouteSyncModeOption::Periodic,
        _ => RouteSyncModeOption::EventDriven,
    },

    /// SDK addition: in event-driven mode, how long after a node change a route pass starts; changes within it are
    /// batched into one pass. Capped at --route-reconciliation-period. Default: 250ms.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    route_event_debounce: Duration as GoDuration = RouteConfig::default().event_debounce,

    /// SDK addition: in event-driven mode, a full route pass runs this long after the last one even when nothing
    /// changed. Default: 5m0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    route_resync_period: Duration as GoDuration = match RouteConfig::default().sync_mode {
        RouteSyncMode::EventDriven { resync } => resync,
        _ => ccm_routecontroller::config::DEFAULT_RESYNC_PERIOD,
    },

    /// SDK addition: in event-driven mode, the cap of the retry backoff after a failed route pass. Default:
    /// 5m0s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    route_max_retry_backoff: Duration as GoDuration = RouteConfig::default().max_retry_backoff,

    /// SDK addition: cloud route operations in flight at once (Go: 200). Default: 200.
    #[arg(long, value_name = "N", help_heading = "Controllers (SDK additions)")]
    route_max_concurrent_operations: i32 = count(RouteConfig::default().max_concurrent_route_operations),

    /// SDK addition: a hard cap on the calls per second the CCM makes to the cloud provider, all controllers
    /// together (a token bucket; calls wait for a token); 0 = no hard cap. The budget adapts to the cloud either
    /// way: no limit while it accepts calls, a lower rate when it throttles. Default: 0.
    #[arg(long, value_name = "QPS", help_heading = "Controllers (SDK additions)")]
    cloud_api_qps: f64 = CloudBudget::default().qps,

    /// SDK addition: the burst of the --cloud-api-qps hard cap (unused without one). Default: 100.
    #[arg(long, value_name = "N", help_heading = "Controllers (SDK additions)")]
    cloud_api_burst: u32 = CloudBudget::default().burst,

    /// SDK addition: extra limits for single cloud operations, by call-log name (`create`,
    /// `instance-metadata-by-provider-id`, `list-routes`, ...), each `{qps, burst}`; a call needs a token from its
    /// operation's bucket and from the provider-wide one. On the command line: --cloud-api-operation-limit.
    /// Default: none.
    #[arg(skip)]
    cloud_api_operation_limits: BTreeMap<String, OperationBudget> = CloudBudget::default().operations,

    /// SDK addition: a limit for one cloud operation, `OPERATION=QPS:BURST` (or `OPERATION=QPS`, burst = QPS
    /// rounded up), by call-log name, for example `create=2:4`; repeat the flag for several operations. Adds to
    /// and overrides the config file's `cloudApiOperationLimits`. Default: none.
    #[arg(long = "cloud-api-operation-limit", value_name = "OPERATION=QPS:BURST",
          value_parser = parse_operation_limit, help_heading = "Controllers (SDK additions)")]
    flag_only cloud_api_operation_limit: Vec<OperationLimit> => add_operation_limits,

    /// SDK addition: how long instance metadata answers (addresses, type, zone) are reused; concurrent identical
    /// questions always share one cloud call. Existence and shutdown answers are never reused, so the lifecycle
    /// controller always decides on a fresh answer. 0 = share concurrent calls only. Default: 30s.
    #[arg(long, value_name = "DURATION", help_heading = "Controllers (SDK additions)")]
    cloud_instance_cache_ttl: Duration as GoDuration = ccm_core::cache::DEFAULT_INSTANCE_CACHE_TTL,

    // ---- scope (SDK additions) ----
    /// SDK addition: watch (and so manage) only Nodes matching this label selector. Default: every Node.
    #[arg(long, value_name = "SELECTOR", help_heading = "Scope (SDK additions)")]
    node_selector: Option<String> as String = None,

    /// SDK addition: watch (and so manage) only Services matching this label selector. Default: every Service.
    #[arg(long, value_name = "SELECTOR", help_heading = "Scope (SDK additions)")]
    service_selector: Option<String> as String = None,

    /// SDK addition: watch (and so manage) only Services in this namespace. Default: every namespace.
    #[arg(long, value_name = "NAMESPACE", help_heading = "Scope (SDK additions)")]
    service_namespace: Option<String> as String = None,

    // ---- leader election ----
    /// Run the controllers only in the replica that holds the leader lease. Default: true.
    #[arg(long, help_heading = "Leader election")]
    leader_elect: bool = true,

    /// How long followers wait before taking over a lease that is not renewed. Default: 15s.
    #[arg(long, value_name = "DURATION", help_heading = "Leader election")]
    leader_elect_lease_duration: Duration as GoDuration = Duration::from_secs(15),

    /// How long the leader retries renewing before it gives up leadership. Default: 10s.
    #[arg(long, value_name = "DURATION", help_heading = "Leader election")]
    leader_elect_renew_deadline: Duration as GoDuration = Duration::from_secs(10),

    /// The interval between acquire and renew attempts. Default: 2s.
    #[arg(long, value_name = "DURATION", help_heading = "Leader election")]
    leader_elect_retry_period: Duration as GoDuration = Duration::from_secs(2),

    /// The lock type; only `leases` is supported (as in Go). Default: leases.
    #[arg(long, value_name = "TYPE", help_heading = "Leader election")]
    leader_elect_resource_lock: String = "leases".to_owned(),

    /// The name of the Lease. Default: cloud-controller-manager.
    #[arg(long, value_name = "NAME", help_heading = "Leader election")]
    leader_elect_resource_name: String = names::lease::NAME.to_owned(),

    /// The namespace of the Lease. Default: kube-system.
    #[arg(long, value_name = "NAMESPACE", help_heading = "Leader election")]
    leader_elect_resource_namespace: String = names::lease::NAMESPACE.to_owned(),

    /// SDK addition: release the Lease on a clean shutdown so another replica takes over at once (Go leaves it to
    /// expire). Default: true.
    #[arg(long, help_heading = "Leader election")]
    leader_elect_release_on_cancel: bool = true,

    // ---- serving ----
    /// The HTTPS port of /healthz, /readyz, /livez, /metrics and /configz; 0 disables serving. Default: 10258.
    #[arg(long, value_name = "PORT", help_heading = "Serving")]
    secure_port: u16 = names::ports::CLOUD_CONTROLLER_MANAGER,

    /// The address the secure port listens on. Default: 0.0.0.0.
    #[arg(long, value_name = "IP", help_heading = "Serving")]
    bind_address: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED),

    /// A directory for the self-signed serving certificate (written on first start, reused afterwards); ignored
    /// with --tls-cert-file. Default: none (the certificate is generated in memory).
    #[arg(long, value_name = "DIR", help_heading = "Serving")]
    cert_dir: Option<PathBuf> as PathBuf = None,

    /// A PEM file with the serving certificate (and its chain). Default: none (self-signed).
    #[arg(long, value_name = "PATH", help_heading = "Serving")]
    tls_cert_file: Option<PathBuf> as PathBuf = None,

    /// A PEM file with the private key of --tls-cert-file. Default: none.
    #[arg(long, value_name = "PATH", help_heading = "Serving")]
    tls_private_key_file: Option<PathBuf> as PathBuf = None,

    /// The minimum TLS version of the secure port: VersionTLS12 or VersionTLS13 (Go's names; rustls implements
    /// neither TLS 1.0 nor 1.1). Default: none (TLS 1.2).
    #[arg(long, value_name = "VERSION", help_heading = "Serving")]
    tls_min_version: Option<String> as String = None,

    /// The TLS 1.2 cipher suites of the secure port, comma separated, by Go's names (e.g.
    /// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); only the AEAD suites rustls implements are accepted. TLS 1.3 suites
    /// are always on, as in Go. Default: none (rustls's defaults).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', help_heading = "Serving")]
    tls_cipher_suites: Vec<String> as Vec<String> = Vec::new(),

    /// The key exchange mechanisms of the secure port, comma separated, as Go's numeric crypto/tls CurveID
    /// values: 23 (P-256), 24 (P-384), 29 (X25519); 25 (P-521) and 4588 (X25519MLKEM768) are Go's but not
    /// implemented by rustls's ring provider and rejected. Default: none (rustls's defaults: X25519, P-256,
    /// P-384).
    #[arg(long, value_name = "IDS", value_delimiter = ',', help_heading = "Serving")]
    tls_curve_preferences: Vec<String> as Vec<String> = Vec::new(),

    /// A certificate for the clients that ask for certain names (TLS SNI): `CERT,KEY` (the names are read from
    /// the certificate) or `CERT,KEY:NAME,*.DOMAIN` (explicit names, `*.` matching one label); repeat the flag for
    /// several. An exact name beats a wildcard, explicit names beat names read from a certificate; other clients
    /// get --tls-cert-file (or the self-signed certificate). The files are re-read when they change. Default:
    /// none.
    #[arg(long, value_name = "CERT,KEY[:NAMES]", help_heading = "Serving")]
    tls_sni_cert_key: Vec<String> as Vec<String> = Vec::new(),

    /// Accepted for Go compatibility: the secure port never serves HTTP/2 (its TLS handshake offers http/1.1
    /// only), as if this were always true. Default: false.
    #[arg(long, help_heading = "Serving")]
    disable_http2_serving: bool = false,

    /// Go's limit of concurrent streams per HTTP/2 connection (0 = Go's default); must not be negative.
    /// Accepted for compatibility, without effect: HTTP/2 is not served. Default: 0.
    #[arg(long, value_name = "N", help_heading = "Serving")]
    http2_max_streams_per_connection: i32 = 0,

    /// Bind the secure and webhook ports with SO_REUSEPORT, so several processes can listen on the same port
    /// (Linux balances the connections between them). Default: false.
    #[arg(long, help_heading = "Serving")]
    permit_port_sharing: bool = false,

    /// Bind the secure and webhook ports with SO_REUSEADDR. The SDK (like Go's net package) sets it on Unix in
    /// any case, so a restarted CCM can bind a port whose old connections are in TIME_WAIT; the flag is accepted
    /// for Go compatibility. Default: false.
    #[arg(long, help_heading = "Serving")]
    permit_address_sharing: bool = false,

    /// SDK addition: how long a clean shutdown waits for controllers to finish in-flight work. Default: 30s.
    #[arg(long, value_name = "DURATION", help_heading = "Serving")]
    shutdown_timeout: Duration as GoDuration = Duration::from_secs(30),

    // ---- webhooks ----
    /// The admission webhooks to serve, comma separated: `name` enables, `-name` disables, `*` means every webhook
    /// that is on by default; the first mention of a webhook wins. Default: none (as in Go: no webhook runs and the
    /// webhook port is not bound unless this is set, --webhooks=* for all).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', allow_hyphen_values = true,
          help_heading = "Webhooks")]
    webhooks: Vec<String> as Vec<String> = Vec::new(),

    /// The address the webhook port listens on. Default: 0.0.0.0.
    #[arg(long, value_name = "IP", help_heading = "Webhooks")]
    webhook_bind_address: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED),

    /// The HTTPS port of the admission webhooks; 0 disables them; must differ from --secure-port. Default: 10260.
    #[arg(long, value_name = "PORT", help_heading = "Webhooks")]
    webhook_secure_port: u16 = names::ports::CLOUD_CONTROLLER_MANAGER_WEBHOOK,

    /// A directory for the webhook port's self-signed certificate (the pair
    /// cloud-controller-manager-webhook.crt/.key, written on first start, reused afterwards); ignored with
    /// --webhook-tls-cert-file. Default: none (generated in memory).
    #[arg(long, value_name = "DIR", help_heading = "Webhooks")]
    webhook_cert_dir: Option<PathBuf> as PathBuf = None,

    /// A PEM file with the webhook port's certificate (and its chain); re-read when it changes. Default: none
    /// (self-signed).
    #[arg(long, value_name = "PATH", help_heading = "Webhooks")]
    webhook_tls_cert_file: Option<PathBuf> as PathBuf = None,

    /// A PEM file with the private key of --webhook-tls-cert-file. Default: none.
    #[arg(long, value_name = "PATH", help_heading = "Webhooks")]
    webhook_tls_private_key_file: Option<PathBuf> as PathBuf = None,

    /// The TLS 1.2 cipher suites of the webhook port, as --tls-cipher-suites. Default: none (rustls's defaults).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', help_heading = "Webhooks")]
    webhook_tls_cipher_suites: Vec<String> as Vec<String> = Vec::new(),

    /// The minimum TLS version of the webhook port, as --tls-min-version. Default: none (TLS 1.2).
    #[arg(long, value_name = "VERSION", help_heading = "Webhooks")]
    webhook_tls_min_version: Option<String> as String = None,

    /// The key exchange mechanisms of the webhook port, as --tls-curve-preferences. Default: none.
    #[arg(long, value_name = "IDS", value_delimiter = ',', help_heading = "Webhooks")]
    webhook_tls_curve_preferences: Vec<String> as Vec<String> = Vec::new(),

    /// SNI certificates of the webhook port, as --tls-sni-cert-key (repeatable). Default: none.
    #[arg(long, value_name = "CERT,KEY[:NAMES]", help_heading = "Webhooks")]
    webhook_tls_sni_cert_key: Vec<String> as Vec<String> = Vec::new(),

    /// Accepted for Go compatibility: the webhook port never serves HTTP/2, as if this were always true.
    /// Default: false.
    #[arg(long, help_heading = "Webhooks")]
    webhook_disable_http2_serving: bool = false,

    // ---- authentication of the secure port ----
    /// A kubeconfig with rights to create tokenreviews.authentication.k8s.io and to read the
    /// extension-apiserver-authentication ConfigMap. Default: none (the in-cluster configuration; without it,
    /// bearer tokens are not checked and the ConfigMap is not read).
    #[arg(long, value_name = "PATH", help_heading = "Authentication")]
    authentication_kubeconfig: Option<PathBuf> as PathBuf = None,

    /// Do not read missing client and request-header CAs from the kube-system/extension-apiserver-authentication
    /// ConfigMap. Default: false.
    #[arg(long, help_heading = "Authentication")]
    authentication_skip_lookup: bool = false,

    /// Start even if the extension-apiserver-authentication ConfigMap cannot be read (requests may then be
    /// treated as anonymous). Default: false.
    #[arg(long, help_heading = "Authentication")]
    authentication_tolerate_lookup_failure: bool = false,

    /// How long TokenReview answers (authenticated or not) are reused. Default: 10s.
    #[arg(long, value_name = "DURATION", help_heading = "Authentication")]
    authentication_token_webhook_cache_ttl: Duration as GoDuration = Duration::from_secs(10),

    /// A PEM bundle of CAs: a client certificate signed by one of them authenticates as its common name, in the
    /// groups of its organizations. Default: none (read from the extension-apiserver-authentication ConfigMap).
    #[arg(long, value_name = "PATH", help_heading = "Authentication")]
    client_ca_file: Option<PathBuf> as PathBuf = None,

    /// A PEM bundle of CAs of authenticating proxies: a client certificate signed by one of them may name the
    /// user in the --requestheader-username-headers. Default: none (read from the
    /// extension-apiserver-authentication ConfigMap).
    #[arg(long, value_name = "PATH", help_heading = "Authentication")]
    requestheader_client_ca_file: Option<PathBuf> as PathBuf = None,

    /// The common names a request-header client certificate may have, comma separated; empty allows any.
    /// Default: none.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', help_heading = "Authentication")]
    requestheader_allowed_names: Vec<String> as Vec<String> = Vec::new(),

    /// The request headers to read the user name from; the first one set wins. Default: x-remote-user.
    #[arg(long, value_name = "HEADERS", value_delimiter = ',', help_heading = "Authentication")]
    requestheader_username_headers: Vec<String> as Vec<String> = vec!["x-remote-user".to_owned()],

    /// The request headers to read the user's UID from; the first one set wins. When set, it must include
    /// X-Remote-Uid (the header the API server's aggregator sends). Default: none.
    #[arg(long, value_name = "HEADERS", value_delimiter = ',', help_heading = "Authentication")]
    requestheader_uid_headers: Vec<String> as Vec<String> = Vec::new(),

    /// The request headers to read the groups from. Default: x-remote-group.
    #[arg(long, value_name = "HEADERS", value_delimiter = ',', help_heading = "Authentication")]
    requestheader_group_headers: Vec<String> as Vec<String> = vec!["x-remote-group".to_owned()],

    /// The prefixes of the request headers that carry extra user information. Default: x-remote-extra-.
    #[arg(long, value_name = "PREFIXES", value_delimiter = ',', help_heading = "Authentication")]
    requestheader_extra_headers_prefix: Vec<String> as Vec<String> = vec!["x-remote-extra-".to_owned()],

    // ---- authorization of the secure port ----
    /// A kubeconfig with rights to create subjectaccessreviews.authorization.k8s.io. Default: none (the
    /// in-cluster configuration; without it, only --authorization-always-allow-paths and system:masters are
    /// allowed).
    #[arg(long, value_name = "PATH", help_heading = "Authorization")]
    authorization_kubeconfig: Option<PathBuf> as PathBuf = None,

    /// Paths anyone may read without authorization, comma separated; `/prefix/*` matches every path below.
    /// Default: /healthz,/readyz,/livez.
    #[arg(long, value_name = "PATHS", value_delimiter = ',', help_heading = "Authorization")]
    authorization_always_allow_paths: Vec<String> as Vec<String> =
        ["/healthz", "/readyz", "/livez"].map(str::to_owned).to_vec(),

    /// How long allowing SubjectAccessReview answers are reused. Default: 10s.
    #[arg(long, value_name = "DURATION", help_heading = "Authorization")]
    authorization_webhook_cache_authorized_ttl: Duration as GoDuration = Duration::from_secs(10),

    /// How long denying SubjectAccessReview answers are reused. Default: 10s.
    #[arg(long, value_name = "DURATION", help_heading = "Authorization")]
    authorization_webhook_cache_unauthorized_ttl: Duration as GoDuration = Duration::from_secs(10),

    // ---- logging ----
    /// Log verbosity, as klog's -v: 0-3 info, 4-5 debug, 6 and above trace. `RUST_LOG`, when set, overrides it.
    /// Default: 0.
    #[arg(short = 'v', long = "v", value_name = "LEVEL", help_heading = "Logging")]
    verbosity: u8 = 0,

    /// The log format: text or json. Default: text.
    #[arg(long, value_name = "FORMAT", help_heading = "Logging")]
    logging_format: LogFormat = LogFormat::Text,

    /// With --logging-format=json: write info messages to standard output and errors to standard error
    /// (otherwise everything goes to standard error). Default: false.
    #[arg(long, help_heading = "Logging")]
    log_json_split_stream: bool = false,

    /// With --log-json-split-stream: Go's buffer of the info stream, a size such as 64Ki or 1M (0 = no
    /// buffering). Validated as Go does; the SDK writes every line at once, so the value has no further effect.
    /// Default: 0.
    #[arg(long, value_name = "SIZE", help_heading = "Logging")]
    log_json_info_buffer_size: String = "0".to_owned(),

    /// With --logging-format=text: write info messages to standard output and errors to standard error.
    /// Default: false.
    #[arg(long, help_heading = "Logging")]
    log_text_split_stream: bool = false,

    /// With --log-text-split-stream: as --log-json-info-buffer-size. Default: 0.
    #[arg(long, value_name = "SIZE", help_heading = "Logging")]
    log_text_info_buffer_size: String = "0".to_owned(),

    // ---- leader migration ----
    /// Go's leader migration (moving cloud controllers from kube-controller-manager to the CCM). In-tree cloud
    /// providers were removed in Kubernetes 1.31, so there is nothing to migrate: accepted, with Go's validation
    /// of --leader-migration-config, and a warning; the CCM uses its own leader election only. Default: false.
    #[arg(long, help_heading = "Leader migration")]
    enable_leader_migration: bool = false,

    /// The LeaderMigrationConfiguration file of --enable-leader-migration; read and validated as Go does (only
    /// with --enable-leader-migration). Default: none.
    #[arg(long, value_name = "PATH", help_heading = "Leader migration")]
    leader_migration_config: Option<PathBuf> as PathBuf = None,
}

/// A count of the controller crates' configs as the `i32` of the Go flags.
fn count(value: usize) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// `--cloud-api-operation-limit`: each flag adds to `cloudApiOperationLimits`, replacing the file's entry for the
/// same operation.
fn add_operation_limits(options: &mut CcmOptions, limits: &[OperationLimit]) {
    let limits = limits
        .iter()
        .map(|flag| (flag.operation.as_str().to_owned(), flag.limit));
    options.cloud_api_operation_limits.extend(limits);
}

impl CcmOptions {
    /// `base`, overridden by the config file's `file`, overridden by the command line's `flags`.
    pub fn resolve(base: &CcmOptions, file: &Settings, flags: &Settings) -> CcmOptions {
        let mut options = base.clone();
        options.apply(file);
        options.apply(flags);
        options
    }

    /// The cloud-call budget of `--cloud-api-qps`, `--cloud-api-burst`, `cloudApiOperationLimits` and
    /// `--cloud-api-operation-limit`.
    pub fn cloud_budget(&self) -> CloudBudget {
        let mut budget = CloudBudget::default()
            .with_qps(self.cloud_api_qps)
            .with_burst(self.cloud_api_burst);
        // by name, as the config file gives them: `validate` reports an unknown one
        let limits = self.cloud_api_operation_limits.clone();
        budget.operations.extend(limits);
        budget
    }
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
        assert_eq!(o.kube_api_qps, KubeApiLimit::Auto, "decided at start");
        assert_eq!(o.kube_api_burst, KubeApiLimit::Auto);
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
        assert_eq!(
            crate::defaults::cloud_node_config(&o).status_update_workers(),
            1
        );
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
        // the secure port's delegated authentication and authorization
        assert_eq!(o.authentication_kubeconfig, None);
        assert_eq!(o.authorization_kubeconfig, None);
        assert!(!o.authentication_skip_lookup);
        assert!(!o.authentication_tolerate_lookup_failure);
        assert_eq!(
            o.authentication_token_webhook_cache_ttl,
            Duration::from_secs(10)
        );
        assert_eq!(
            o.authorization_webhook_cache_authorized_ttl,
            Duration::from_secs(10)
        );
        assert_eq!(
            o.authorization_webhook_cache_unauthorized_ttl,
            Duration::from_secs(10)
        );
        assert_eq!(
            o.authorization_always_allow_paths,
            vec!["/healthz", "/readyz", "/livez"]
        );
        assert_eq!(o.client_ca_file, None);
        assert_eq!(o.requestheader_client_ca_file, None);
        assert!(o.requestheader_allowed_names.is_empty());
        assert_eq!(o.requestheader_username_headers, vec!["x-remote-user"]);
        assert!(o.requestheader_uid_headers.is_empty());
        assert_eq!(o.requestheader_group_headers, vec!["x-remote-group"]);
        assert_eq!(
            o.requestheader_extra_headers_prefix,
            vec!["x-remote-extra-"]
        );
        assert_eq!(o.tls_min_version, None);
        assert!(o.tls_cipher_suites.is_empty());
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
            kube_api_qps: Some(50.0.into()),
            kube_api_burst: Some(60.into()),
            cluster_name: Some("from-file".into()),
            controllers: Some(vec!["*".into(), "-route".into()]),
            ..Settings::default()
        };
        let flags = Settings {
            kube_api_qps: Some(100.0.into()),
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

    /// Fails if a declaration's conversion loses a value, or if apply or to_settings misses a setting: every
    /// field of a fully set `Settings` survives apply + to_settings, for two samples whose every field differs
    /// (so every field differs from its default in at least one of them).
    #[test]
    fn every_setting_survives_apply_and_to_settings() {
        let samples = [Settings::sample(0), Settings::sample(1)];
        let json = samples.each_ref().map(|s| serde_json::to_value(s).unwrap());
        for (key, value) in json[0].as_object().unwrap() {
            assert_ne!(value, &json[1][key], "the samples of {key} are equal");
        }
        for mut full in samples {
            // the flag-only --cloud-api-operation-limit is served as part of cloudApiOperationLimits
            let flags = full.cloud_api_operation_limit.take().unwrap();
            assert_ne!(
                flags[0].limit,
                full.cloud_api_operation_limits.as_ref().unwrap()[flags[0].operation.as_str()]
            );
            let mut options = CcmOptions::default();
            options.apply(&full);
            assert_eq!(options.to_settings(), full);
            let flags = Settings {
                cloud_api_operation_limit: Some(flags),
                ..Settings::default()
            };
            let with_flags = CcmOptions::resolve(&options, &Settings::default(), &flags);
            let limit = &flags.cloud_api_operation_limit.as_ref().unwrap()[0];
            assert_eq!(
                with_flags.cloud_api_operation_limits[limit.operation.as_str()],
                limit.limit
            );
        }
    }

    #[test]
    fn configz_has_every_config_file_key() {
        let served = serde_json::to_value(CcmOptions::default().to_settings()).unwrap();
        let mut served: Vec<&String> = served.as_object().unwrap().keys().collect();
        let schema = serde_json::to_value(schemars::schema_for!(Settings)).unwrap();
        let mut keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        served.sort();
        keys.sort();
        assert_eq!(served, keys);
    }
}
