//! The pure analysis: a [`Snapshot`] of the cluster in, [`Finding`]s out. No I/O and no clock: the snapshot
//! carries `now`.

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_core::names::taints;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use crate::duration::format_go_duration;
use crate::finding::{CheckId, Finding, ObjectRef, Severity};
use crate::inspect::{
    elapsed, leader_election_enabled, node_is_not_ready, node_name, pod_is_running_and_ready,
    pod_node, pod_phase, provider_id, taints_in_scheduler_message, tolerations_of,
    unschedulable_message, untolerated_taints, waiting_nodes,
};
use crate::workload::{Workload, check_workload};

/// client-go's default lease duration, used when a Lease does not say.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The default `--uninitialized-threshold`.
pub const DEFAULT_UNINITIALIZED_THRESHOLD: Duration = Duration::from_secs(120);

/// Everything the checks look at, gathered at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When the snapshot was taken (the reference for every age).
    pub now: Timestamp,
    /// The nodes in scope.
    pub nodes: Vec<Node>,
    /// The CCM Deployments and DaemonSets found.
    pub workloads: Vec<Workload>,
    /// The CCM pods found.
    pub ccm_pods: Vec<Pod>,
    /// How the CCM was looked for, for messages (for example `Deployment or DaemonSet named
    /// cloud-controller-manager or labelled k8s-app=cloud-controller-manager in namespace kube-system`).
    pub ccm_search: String,
    /// The CNI pods found; `None` if they were not looked for (no node needed it).
    pub cni_pods: Option<Vec<Pod>>,
    /// How the CNI pods were looked for, for messages.
    pub cni_search: String,
    /// The leader Lease's namespace.
    pub lease_namespace: String,
    /// The leader Lease's name.
    pub lease_name: String,
    /// The leader Lease, if it exists.
    pub lease: Option<Lease>,
}

/// Tunables of the analysis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalysisConfig {
    /// How long a node may carry the uninitialized taint before it is an error.
    pub uninitialized_threshold: Duration,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            uninitialized_threshold: DEFAULT_UNINITIALIZED_THRESHOLD,
        }
    }
}

/// True if the nodes the snapshot holds need the CNI pods for the deadlock check: some node carries the
/// uninitialized taint for at least the threshold and is not ready. The gatherer uses this to skip listing
/// CNI pods when no node needs them.
pub fn needs_cni_pods(nodes: &[Node], now: Timestamp, config: &AnalysisConfig) -> bool {
    !deadlock_candidates(nodes, now, config).is_empty()
}

fn deadlock_candidates<'a>(
    nodes: &'a [Node],
    now: Timestamp,
    config: &AnalysisConfig,
) -> Vec<(&'a Node, Duration)> {
    let waiting = waiting_nodes(nodes, now);
    waiting
        .iter()
        .filter(|w| w.waited >= config.uninitialized_threshold)
        .filter_map(|w| {
            nodes
                .iter()
                .find(|n| node_name(n) == w.name)
                .filter(|n| node_is_not_ready(n))
                .map(|n| (n, w.waited))
        })
        .collect()
}

/// Run every check on `snapshot`. Findings come in check order; [`crate::Report`] sorts them by severity.
pub fn analyze(snapshot: &Snapshot, config: &AnalysisConfig) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.extend(check_uninitialized_nodes(snapshot, config));
    findings.extend(check_nodes_without_provider_id(snapshot));
    findings.extend(check_cni_deadlock(snapshot, config));
    findings.extend(check_ccm_pods(snapshot));
    findings.extend(check_workloads(snapshot));
    findings.extend(check_lease(snapshot));
    findings
}

fn node_ref(name: &str) -> ObjectRef {
    ObjectRef::new("Node", None, name)
}

fn pod_ref(pod: &Pod) -> ObjectRef {
    ObjectRef::new(
        "Pod",
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref().unwrap_or(""),
    )
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Nodes carrying the uninitialized taint: an error past the threshold, info before it.
pub fn check_uninitialized_nodes(snapshot: &Snapshot, config: &AnalysisConfig) -> Vec<Finding> {
    let threshold = config.uninitialized_threshold;
    let (overdue, recent): (Vec<_>, Vec<_>) = waiting_nodes(&snapshot.nodes, snapshot.now)
        .into_iter()
        .partition(|w| w.waited >= threshold);
    let mut findings = Vec::new();
    if !overdue.is_empty() {
        findings.push(
            Finding::new(
                CheckId::NodeUninitializedTooLong,
                Severity::Error,
                format!(
                    "{} carried the {} taint for at least {}: the cloud node controller has not initialized \
                     them, so ordinary pods cannot be scheduled there",
                    plural(overdue.len(), "node has", "nodes have"),
                    taints::UNINITIALIZED,
                    format_go_duration(threshold)
                ),
                "check that the CCM runs (see the other findings) and read its logs for errors about these \
                 nodes; the taint is removed once the cloud provider returns the node's instance metadata",
            )
            .with_objects(overdue.iter().map(|w| {
                node_ref(&w.name).with_detail(format!("waiting {}", format_go_duration(round_secs(w.waited))))
            })),
        );
    }
    if !recent.is_empty() {
        findings.push(
            Finding::new(
                CheckId::NodeWaitingForInitialization,
                Severity::Info,
                format!(
                    "{} waiting for the cloud node controller (less than {} so far)",
                    plural(recent.len(), "node is", "nodes are"),
                    format_go_duration(threshold)
                ),
                "nothing to do yet; if they keep waiting, check that the CCM runs",
            )
            .with_objects(recent.iter().map(|w| {
                node_ref(&w.name).with_detail(format!("waiting {}", format_go_duration(round_secs(w.waited))))
            })),
        );
    }
    findings
}

fn round_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// Nodes with neither a providerID nor the uninitialized taint.
pub fn check_nodes_without_provider_id(snapshot: &Snapshot) -> Vec<Finding> {
    let names: Vec<&str> = snapshot
        .nodes
        .iter()
        .filter(|n| provider_id(n).is_none())
        .filter(|n| crate::inspect::uninitialized_taint(n).is_none())
        .map(node_name)
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    vec![
        Finding::new(
            CheckId::NodeWithoutProviderId,
            Severity::Warning,
            format!(
                "{} neither a providerID nor the {} taint: the kubelet was probably not started with \
                 --cloud-provider=external, so the CCM never initializes {} (no addresses, zone labels or \
                 load-balancer membership from the cloud)",
                plural(names.len(), "node has", "nodes have"),
                taints::UNINITIALIZED,
                if names.len() == 1 { "it" } else { "them" }
            ),
            "start the kubelet with --cloud-provider=external (it then registers with the uninitialized taint), \
             or set spec.providerID; a node initialized without a providerID by an old CCM must be re-registered",
        )
        .with_objects(names.into_iter().map(node_ref)),
    ]
}

/// Nodes that are uninitialized and not ready while no CNI pod runs on them.
pub fn check_cni_deadlock(snapshot: &Snapshot, config: &AnalysisConfig) -> Vec<Finding> {
    let candidates = deadlock_candidates(&snapshot.nodes, snapshot.now, config);
    if candidates.is_empty() {
        return Vec::new();
    }
    let cni_pods = snapshot.cni_pods.as_deref().unwrap_or(&[]);
    if cni_pods.is_empty() {
        return vec![
            Finding::new(
                CheckId::CniNotFound,
                Severity::Warning,
                format!(
                    "{} uninitialized and not ready, and no CNI pod was found ({}): if the CNI is not \
                     installed, the nodes cannot become ready",
                    plural(candidates.len(), "node is", "nodes are"),
                    snapshot.cni_search
                ),
                format!(
                    "install the CNI with tolerations for {} and {}; if it is installed under another name, \
                     pass --cni-selector (and --cni-namespace) so the doctor can find its pods",
                    taints::UNINITIALIZED,
                    taints::NOT_READY
                ),
            )
            .with_objects(candidates.iter().map(|(n, _)| node_ref(node_name(n)))),
        ];
    }
    let mut objects = Vec::new();
    for (node, waited) in &candidates {
        let name = node_name(node);
        let on_node: Vec<&Pod> = cni_pods
            .iter()
            .filter(|p| pod_node(p) == Some(name))
            .collect();
        if on_node.iter().any(|p| pod_is_running_and_ready(p)) {
            continue;
        }
        objects.push(node_ref(name).with_detail(format!(
            "uninitialized and not ready for {}, {}",
            format_go_duration(round_secs(*waited)),
            if on_node.is_empty() {
                "no CNI pod on it".to_owned()
            } else {
                "its CNI pod is not running".to_owned()
            }
        )));
        objects.extend(
            on_node
                .iter()
                .map(|p| pod_ref(p).with_detail(format!("{}, not ready", pod_phase(p)))),
        );
    }
    if objects.is_empty() {
        return Vec::new();
    }
    vec![
        Finding::new(
            CheckId::CniCcmDeadlock,
            Severity::Error,
            format!(
                "nodes are uninitialized and not ready while their CNI pods are not running: the CNI waits for \
                 the node to be initialized (addresses, pod CIDR) and the CCM cannot be scheduled on a not-ready \
                 node, so neither can start (CNI pods searched: {})",
                snapshot.cni_search
            ),
            format!(
                "let the CCM run without the CNI: hostNetwork: true and tolerations for {} and {} \
                 (NoSchedule and NoExecute); make sure the CNI DaemonSet tolerates {} too",
                taints::UNINITIALIZED,
                taints::NOT_READY,
                taints::UNINITIALIZED
            ),
        )
        .with_objects(objects),
    ]
}

fn fix_for_taint(key: &str) -> String {
    match key {
        k if k == taints::UNINITIALIZED => format!(
            "tolerate {k} (value \"true\", effect NoSchedule): only the CCM removes this taint, so the CCM must \
             tolerate it"
        ),
        k if k == taints::NOT_READY => format!(
            "tolerate {k} (NoSchedule and NoExecute) and set hostNetwork: true, so the CCM does not wait for the CNI"
        ),
        k if k == taints::UNREACHABLE => format!("tolerate {k} (NoExecute)"),
        k if k == taints::CONTROL_PLANE || k == taints::MASTER => format!(
            "tolerate {} and {} (NoSchedule) to run on control-plane nodes",
            taints::CONTROL_PLANE,
            taints::MASTER
        ),
        k => format!("tolerate {k} or remove it from the nodes"),
    }
}

/// CCM pods the scheduler could not place.
pub fn check_ccm_pods(snapshot: &Snapshot) -> Vec<Finding> {
    let mut findings = Vec::new();
    for pod in &snapshot.ccm_pods {
        let Some(message) = unschedulable_message(pod) else {
            continue;
        };
        let mut named = taints_in_scheduler_message(message);
        let mut inferred = false;
        if named.is_empty() && message.contains("taint") {
            let tolerations = pod.spec.as_ref().map(tolerations_of).unwrap_or(&[]);
            named = untolerated_taints(&snapshot.nodes, tolerations);
            inferred = true;
        }
        let object = pod_ref(pod).with_detail(format!("Pending: {message}"));
        if named.is_empty() {
            findings.push(
                Finding::new(
                    CheckId::CcmPodUnschedulable,
                    Severity::Error,
                    format!("a CCM pod cannot be scheduled: {message}"),
                    "fix what the scheduler reports (node selector, affinity, resources); until the CCM runs, no \
                     node gets initialized",
                )
                .with_objects([object]),
            );
            continue;
        }
        let fix: Vec<String> = named.iter().map(|k| fix_for_taint(k)).collect();
        findings.push(
            Finding::new(
                CheckId::CcmPodUntoleratedTaint,
                Severity::Error,
                format!(
                    "a CCM pod cannot be scheduled: the nodes carry {} {} it does not tolerate: {}",
                    if named.len() == 1 { "a taint" } else { "taints" },
                    if inferred { "(read from the nodes)" } else { "(reported by the scheduler)" },
                    named.join(", ")
                ),
                format!("in the CCM's pod template, {}", fix.join("; ")),
            )
            .with_objects([object]),
        );
    }
    findings
}

/// The CCM workloads against the recommendations, or a finding that none was found.
pub fn check_workloads(snapshot: &Snapshot) -> Vec<Finding> {
    if snapshot.workloads.is_empty() {
        let (severity, message) = if snapshot.ccm_pods.is_empty() {
            (
                Severity::Warning,
                format!(
                    "no CCM was found ({}): nothing will initialize the nodes",
                    snapshot.ccm_search
                ),
            )
        } else {
            (
                Severity::Info,
                format!(
                    "CCM pods were found but no Deployment or DaemonSet ({}), for example static pods: the \
                     workload checks were skipped",
                    snapshot.ccm_search
                ),
            )
        };
        return vec![Finding::new(
            CheckId::CcmWorkloadNotFound,
            severity,
            message,
            "point the doctor at the CCM with --namespace, --workload or --workload-selector, or deploy it",
        )];
    }
    snapshot.workloads.iter().flat_map(check_workload).collect()
}

/// Whether leader election is on in the CCM found: `Some(true)` if any workload (or, without workloads, any
/// CCM pod) runs it, `Some(false)` if none does, `None` if no CCM was found.
pub fn leader_election_in_use(snapshot: &Snapshot) -> Option<bool> {
    if !snapshot.workloads.is_empty() {
        return Some(snapshot.workloads.iter().any(Workload::leader_election));
    }
    let specs: Vec<_> = snapshot
        .ccm_pods
        .iter()
        .filter_map(|p| p.spec.as_ref())
        .collect();
    if specs.is_empty() {
        return None;
    }
    Some(specs.into_iter().any(leader_election_enabled))
}

/// The leader Lease: missing while leader election is on, or not renewed within its duration.
pub fn check_lease(snapshot: &Snapshot) -> Vec<Finding> {
    let election = leader_election_in_use(snapshot);
    let lease_ref = ObjectRef::new(
        "Lease",
        Some(&snapshot.lease_namespace),
        &snapshot.lease_name,
    );
    let Some(lease) = &snapshot.lease else {
        if election == Some(true) {
            return vec![
                Finding::new(
                    CheckId::LeaseMissing,
                    Severity::Error,
                    format!(
                        "leader election is on but the Lease {}/{} does not exist: no CCM replica has become \
                         leader, so no controller runs",
                        snapshot.lease_namespace, snapshot.lease_name
                    ),
                    "check that a CCM pod runs and read its logs; if it uses another lock, pass --lease-namespace \
                     and --lease-name (its --leader-elect-resource-namespace and --leader-elect-resource-name)",
                )
                .with_objects([lease_ref]),
            ];
        }
        return Vec::new();
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_LEASE_DURATION);
    let holder = spec.holder_identity.filter(|h| !h.is_empty());
    let renewed = spec.renew_time.or(spec.acquire_time).map(|t| t.0);
    let since = renewed.map(|r| elapsed(r, snapshot.now));
    let stale = since.is_none_or(|s| s > duration);
    if !stale {
        return Vec::new();
    }
    let holder_text = match &holder {
        Some(h) => format!("held by {h}"),
        None => "held by no one".to_owned(),
    };
    let age_text = match since {
        Some(s) => format!(
            "last renewed {} ago",
            format_go_duration(round_secs(s))
        ),
        None => "never renewed".to_owned(),
    };
    let detail = format!(
        "{holder_text}, {age_text}, duration {}",
        format_go_duration(duration)
    );
    if election == Some(false) {
        return vec![
            Finding::new(
                CheckId::LeaseNotRenewed,
                Severity::Info,
                format!(
                    "the Lease {}/{} is stale ({detail}), but the CCM runs without leader election",
                    snapshot.lease_namespace, snapshot.lease_name
                ),
                "nothing to do; delete the Lease if no CCM uses it any more",
            )
            .with_objects([lease_ref.with_detail(detail)]),
        ];
    }
    vec![
        Finding::new(
            CheckId::LeaseNotRenewed,
            Severity::Error,
            format!(
                "the leader Lease {}/{} has not been renewed within its duration ({detail}): no CCM replica is \
                 leading, so no controller runs",
                snapshot.lease_namespace, snapshot.lease_name
            ),
            "check that the CCM pods run and can reach the API server (their logs show leader election \
             errors); the doctor compares against its own clock, so also rule out clock skew",
        )
        .with_objects([lease_ref.with_detail(detail)]),
    ]
}

/// Distinct check ids of `findings`, for tests and summaries.
pub fn check_ids(findings: &[Finding]) -> BTreeSet<CheckId> {
    findings.iter().map(|f| f.check).collect()
}
