//! The pure analysis: a [`Snapshot`] of the cluster in, [`Finding`]s out. No I/O and no clock: the snapshot
//! carries `now`.

use std::time::Duration;

use ccm_core::names::taints;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use crate::finding::{CheckId, Finding, ObjectRef, Severity};
use crate::inspect::{
    LEASE_NAME_FLAG, LEASE_NAMESPACE_FLAG, elapsed, leader_election_enabled, node_is_not_ready,
    node_name, pod_is_running_and_ready, pod_node, pod_phase, provider_id, string_flag,
    taints_in_scheduler_message, tolerations_of, unschedulable_message, untolerated_taints,
    waiting_nodes,
};
use crate::node_labels::check_node_labels;
use crate::placement::check_placement;
use crate::workload::{Workload, check_workload};
use ccm_core::duration::format_go_duration;

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
    /// How the CCM was looked for, for messages (for example `searched: Deployment or DaemonSet named
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
///
/// ```
/// use ccm_doctor::{AnalysisConfig, CheckId, Snapshot, analyze};
///
/// let snapshot = Snapshot {
///     now: "2026-01-01T00:00:00Z".parse().unwrap(),
///     nodes: vec![],
///     workloads: vec![],
///     ccm_pods: vec![],
///     ccm_search: "searched: namespace kube-system".into(),
///     cni_pods: None,
///     cni_search: String::new(),
///     lease_namespace: "kube-system".into(),
///     lease_name: "cloud-controller-manager".into(),
///     lease: None,
/// };
/// let findings = analyze(&snapshot, &AnalysisConfig::default());
/// assert_eq!(findings[0].check, CheckId::CcmWorkloadNotFound);
/// ```
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
                node_ref(&w.name).with_detail(format!(
                    "waiting {}",
                    format_go_duration(round_secs(w.waited))
                ))
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
                    if named.len() == 1 {
                        "a taint"
                    } else {
                        "taints"
                    },
                    if inferred {
                        "(read from the nodes)"
                    } else {
                        "(reported by the scheduler)"
                    },
                    named.join(", ")
                ),
                format!("in the CCM's pod template, {}", fix.join("; ")),
            )
            .with_objects([object]),
        );
    }
    findings
}

/// The CCM workloads against the recommendations, their node labels, and whether any node in scope can run
/// them; or a finding that none was found.
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
    let mut findings = Vec::new();
    for workload in &snapshot.workloads {
        findings.extend(check_workload(workload));
        findings.extend(check_node_labels(workload, Some(&snapshot.nodes)));
        findings.extend(check_placement(workload, &snapshot.nodes));
    }
    findings
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

/// Where the leader Lease is: the overrides if given, else the CCM's own `--leader-elect-resource-namespace` and
/// `--leader-elect-resource-name` (from its workloads, else its pods), else `kube-system/cloud-controller-manager`.
pub fn lease_location(
    workloads: &[Workload],
    pods: &[Pod],
    namespace_override: Option<&str>,
    name_override: Option<&str>,
) -> (String, String) {
    let specs: Vec<&k8s_openapi::api::core::v1::PodSpec> = workloads
        .iter()
        .map(|w| &w.pod_spec)
        .chain(pods.iter().filter_map(|p| p.spec.as_ref()))
        .collect();
    let from_ccm = |flag: &str| {
        specs
            .iter()
            .find_map(|spec| string_flag(spec.containers.iter(), flag))
    };
    let namespace = namespace_override
        .map(str::to_owned)
        .or_else(|| from_ccm(LEASE_NAMESPACE_FLAG))
        .unwrap_or_else(|| ccm_core::names::lease::NAMESPACE.to_owned());
    let name = name_override
        .map(str::to_owned)
        .or_else(|| from_ccm(LEASE_NAME_FLAG))
        .unwrap_or_else(|| ccm_core::names::lease::NAME.to_owned());
    (namespace, name)
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
        Some(s) => format!("last renewed {} ago", format_go_duration(round_secs(s))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{NO_EXECUTE, NO_SCHEDULE};
    use crate::workload::Replicas;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::api::core::v1::{
        Container, NodeCondition, NodeSpec, NodeStatus, PodCondition, PodSpec, PodStatus, Taint,
        Toleration,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
    use k8s_openapi::jiff::SignedDuration;

    fn now() -> Timestamp {
        "2026-05-01T10:00:00Z".parse().unwrap()
    }

    fn ago(secs: i64) -> Timestamp {
        now() - SignedDuration::from_secs(secs)
    }

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn uninit() -> Taint {
        taint(taints::UNINITIALIZED, Some("true"), NO_SCHEDULE)
    }

    struct NodeBuilder(Node);

    impl NodeBuilder {
        fn new(name: &str, age_secs: i64) -> Self {
            // Labelled as kubeadm labels control-plane nodes, where the CCM runs (untainted unless a test says).
            NodeBuilder(Node {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    creation_timestamp: Some(Time(ago(age_secs))),
                    labels: Some([(taints::CONTROL_PLANE.to_owned(), String::new())].into()),
                    ..Default::default()
                },
                spec: Some(NodeSpec {
                    provider_id: Some(format!("fake://{name}")),
                    taints: Some(vec![]),
                    ..Default::default()
                }),
                status: Some(NodeStatus {
                    conditions: Some(vec![NodeCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            })
        }
        fn taint(mut self, t: Taint) -> Self {
            self.0
                .spec
                .as_mut()
                .unwrap()
                .taints
                .as_mut()
                .unwrap()
                .push(t);
            self
        }
        fn uninitialized(self) -> Self {
            let mut b = self.taint(uninit());
            b.0.spec.as_mut().unwrap().provider_id = None;
            b
        }
        fn not_ready(mut self) -> Self {
            self.0.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
            self
        }
        fn no_provider_id(mut self) -> Self {
            self.0.spec.as_mut().unwrap().provider_id = None;
            self
        }
        fn build(self) -> Node {
            self.0
        }
    }

    fn pod(
        name: &str,
        node: Option<&str>,
        phase: &str,
        conditions: Vec<(&str, &str, Option<&str>, Option<&str>)>,
    ) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("kube-system".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                containers: vec![Container {
                    name: "c".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(
                    conditions
                        .into_iter()
                        .map(|(type_, status, reason, message)| PodCondition {
                            type_: type_.into(),
                            status: status.into(),
                            reason: reason.map(Into::into),
                            message: message.map(Into::into),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn unschedulable(name: &str, message: &str) -> Pod {
        pod(
            name,
            None,
            "Pending",
            vec![(
                "PodScheduled",
                "False",
                Some("Unschedulable"),
                Some(message),
            )],
        )
    }

    fn running(name: &str, node: &str) -> Pod {
        pod(
            name,
            Some(node),
            "Running",
            vec![("Ready", "True", None, None)],
        )
    }

    fn good_workload() -> Workload {
        let tol = |key: &str, effect: &str| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Default::default()
        };
        Workload {
            kind: crate::workload::WorkloadKind::Deployment,
            namespace: Some("kube-system".into()),
            name: "cloud-controller-manager".into(),
            labels: Default::default(),
            selector: None,
            replicas: Replicas::Fixed(1),
            pod_spec: PodSpec {
                host_network: Some(true),
                node_selector: Some([(taints::CONTROL_PLANE.to_owned(), String::new())].into()),
                tolerations: Some(vec![
                    tol(taints::UNINITIALIZED, NO_SCHEDULE),
                    tol(taints::NOT_READY, NO_SCHEDULE),
                    tol(taints::NOT_READY, NO_EXECUTE),
                    tol(taints::UNREACHABLE, NO_EXECUTE),
                    tol(taints::CONTROL_PLANE, NO_SCHEDULE),
                    tol(taints::MASTER, NO_SCHEDULE),
                ]),
                containers: vec![Container {
                    name: "ccm".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    fn lease(holder: Option<&str>, renewed_ago: Option<i64>, duration: Option<i32>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(ccm_core::names::lease::NAME.into()),
                namespace: Some(ccm_core::names::lease::NAMESPACE.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                renew_time: renewed_ago.map(|s| MicroTime(ago(s))),
                lease_duration_seconds: duration,
                ..Default::default()
            }),
        }
    }

    /// A healthy cluster: initialized ready nodes, a good CCM Deployment, a fresh Lease.
    fn healthy() -> Snapshot {
        Snapshot {
            now: now(),
            nodes: vec![
                NodeBuilder::new("n1", 3600).build(),
                NodeBuilder::new("n2", 60).build(),
            ],
            workloads: vec![good_workload()],
            ccm_pods: vec![running("ccm-1", "n1")],
            ccm_search: "searched: the CCM".into(),
            cni_pods: None,
            cni_search: "the CNI pods".into(),
            lease_namespace: ccm_core::names::lease::NAMESPACE.into(),
            lease_name: ccm_core::names::lease::NAME.into(),
            lease: Some(lease(Some("ccm-1_abc"), Some(3), Some(15))),
        }
    }

    fn config(threshold_secs: u64) -> AnalysisConfig {
        AnalysisConfig {
            uninitialized_threshold: Duration::from_secs(threshold_secs),
        }
    }

    fn ids(findings: &[Finding]) -> Vec<(CheckId, Severity)> {
        findings.iter().map(|f| (f.check, f.severity)).collect()
    }

    #[test]
    fn a_healthy_cluster_has_no_findings() {
        assert_eq!(analyze(&healthy(), &AnalysisConfig::default()), vec![]);
        assert_eq!(
            AnalysisConfig::default().uninitialized_threshold,
            Duration::from_secs(120)
        );
    }

    #[test]
    fn uninitialized_nodes_against_the_threshold() {
        let mut s = healthy();
        s.nodes = vec![
            NodeBuilder::new("old", 600).uninitialized().build(),
            NodeBuilder::new("exact", 120).uninitialized().build(),
            NodeBuilder::new("new", 30).uninitialized().build(),
            NodeBuilder::new("done", 600).build(),
        ];
        let findings = analyze(&s, &config(120));
        assert_eq!(
            ids(&findings),
            vec![
                (CheckId::NodeUninitializedTooLong, Severity::Error),
                (CheckId::NodeWaitingForInitialization, Severity::Info),
            ]
        );
        let names: Vec<(&str, Option<&str>)> = findings[0]
            .objects
            .iter()
            .map(|o| (o.name.as_str(), o.detail.as_deref()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("old", Some("waiting 10m0s")),
                ("exact", Some("waiting 2m0s"))
            ]
        );
        assert!(findings[0].message.starts_with("2 nodes have carried the node.cloudprovider.kubernetes.io/uninitialized taint for at least 2m0s"));
        assert_eq!(findings[1].objects[0].name, "new");
        assert!(findings[1].message.starts_with("1 node is waiting"));

        // A zero threshold makes every waiting node an error; the taint's timeAdded wins over creation.
        let mut timed = uninit();
        timed.time_added = Some(Time(ago(5)));
        s.nodes = vec![
            NodeBuilder::new("timed", 9999)
                .taint(timed)
                .no_provider_id()
                .build(),
        ];
        let findings = analyze(&s, &config(0));
        assert_eq!(
            ids(&findings),
            vec![(CheckId::NodeUninitializedTooLong, Severity::Error)]
        );
        assert_eq!(findings[0].objects[0].detail.as_deref(), Some("waiting 5s"));
        assert!(findings[0].message.starts_with("1 node has carried"));
    }

    #[test]
    fn nodes_without_provider_id() {
        let mut s = healthy();
        s.nodes = vec![
            NodeBuilder::new("bare", 600).no_provider_id().build(),
            NodeBuilder::new("bare2", 600).no_provider_id().build(),
            // Waiting nodes have no providerID yet: that is expected.
            NodeBuilder::new("waiting", 1).uninitialized().build(),
            NodeBuilder::new("ok", 600).build(),
        ];
        let findings = analyze(&s, &config(120));
        assert_eq!(
            ids(&findings),
            vec![
                (CheckId::NodeWaitingForInitialization, Severity::Info),
                (CheckId::NodeWithoutProviderId, Severity::Warning),
            ]
        );
        let names: Vec<&str> = findings[1]
            .objects
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(names, vec!["bare", "bare2"]);
        assert!(findings[1].message.contains("--cloud-provider=external"));
        // An empty providerID counts as none.
        let mut empty = NodeBuilder::new("empty", 600).build();
        empty.spec.as_mut().unwrap().provider_id = Some(String::new());
        s.nodes = vec![empty];
        assert_eq!(
            ids(&analyze(&s, &config(120))),
            vec![(CheckId::NodeWithoutProviderId, Severity::Warning)]
        );
    }

    fn deadlocked_nodes() -> Vec<Node> {
        vec![
            NodeBuilder::new("stuck", 600)
                .uninitialized()
                .taint(taint(taints::NOT_READY, None, NO_SCHEDULE))
                .not_ready()
                .build(),
            // Uninitialized but ready: not deadlocked.
            NodeBuilder::new("ready", 600).uninitialized().build(),
        ]
    }

    #[test]
    fn cni_deadlock() {
        let mut s = healthy();
        s.nodes = deadlocked_nodes();
        assert!(needs_cni_pods(&s.nodes, s.now, &config(120)));
        assert!(!needs_cni_pods(&s.nodes, s.now, &config(601)));
        assert!(!needs_cni_pods(&healthy().nodes, s.now, &config(0)));

        // The CNI pod on the node is pending.
        s.cni_pods = Some(vec![
            pod("calico-node-x", Some("stuck"), "Pending", vec![]),
            running("calico-node-y", "ready"),
        ]);
        let findings = check_cni_deadlock(&s, &config(120));
        assert_eq!(
            ids(&findings),
            vec![(CheckId::CniCcmDeadlock, Severity::Error)]
        );
        let objects: Vec<String> = findings[0]
            .objects
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            objects,
            vec![
                "Node stuck (uninitialized and not ready for 10m0s, its CNI pod is not running)"
                    .to_owned(),
                "Pod kube-system/calico-node-x (Pending, not ready)".to_owned(),
            ]
        );
        assert!(findings[0].message.contains("the CNI pods"));
        assert!(findings[0].fix.contains("hostNetwork: true"));

        // No CNI pod on that node at all.
        s.cni_pods = Some(vec![running("calico-node-y", "ready")]);
        let findings = check_cni_deadlock(&s, &config(120));
        assert_eq!(
            findings[0].objects[0].detail.as_deref(),
            Some("uninitialized and not ready for 10m0s, no CNI pod on it")
        );

        // A running but not ready CNI pod does not help.
        s.cni_pods = Some(vec![pod(
            "calico-node-x",
            Some("stuck"),
            "Running",
            vec![("Ready", "False", None, None)],
        )]);
        assert_eq!(
            ids(&check_cni_deadlock(&s, &config(120))),
            vec![(CheckId::CniCcmDeadlock, Severity::Error)]
        );

        // A running, ready CNI pod: the node waits for something else.
        s.cni_pods = Some(vec![running("calico-node-x", "stuck")]);
        assert_eq!(check_cni_deadlock(&s, &config(120)), vec![]);

        // No CNI pod found anywhere.
        for none in [None, Some(vec![])] {
            s.cni_pods = none;
            let findings = check_cni_deadlock(&s, &config(120));
            assert_eq!(
                ids(&findings),
                vec![(CheckId::CniNotFound, Severity::Warning)]
            );
            assert_eq!(
                findings[0].objects,
                vec![ObjectRef::new("Node", None, "stuck")]
            );
            assert!(findings[0].message.contains("(the CNI pods)"));
            assert!(findings[0].fix.contains("--cni-selector"));
        }

        // Below the threshold: no verdict yet.
        s.cni_pods = Some(vec![pod("calico-node-x", Some("stuck"), "Pending", vec![])]);
        assert_eq!(check_cni_deadlock(&s, &config(3600)), vec![]);

        // A node with the not-ready taint but a True Ready condition still counts as not ready.
        s.nodes = vec![
            NodeBuilder::new("tainted", 600)
                .uninitialized()
                .taint(taint(taints::NOT_READY, None, NO_EXECUTE))
                .build(),
        ];
        s.cni_pods = Some(vec![]);
        assert_eq!(
            ids(&check_cni_deadlock(&s, &config(120))),
            vec![(CheckId::CniNotFound, Severity::Warning)]
        );
    }

    #[test]
    fn unschedulable_ccm_pods() {
        let mut s = healthy();
        s.nodes = vec![
            NodeBuilder::new("n1", 10)
                .uninitialized()
                .taint(taint(taints::NOT_READY, None, NO_SCHEDULE))
                .build(),
        ];
        s.ccm_pods = vec![
            unschedulable(
                "ccm-a",
                "0/3 nodes are available: 3 node(s) had untolerated taint \
                 {node.cloudprovider.kubernetes.io/uninitialized: true}. preemption: 0/3 nodes are available: 3 \
                 Preemption is not helpful for scheduling.",
            ),
            unschedulable(
                "ccm-b",
                "0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: not helpful",
            ),
            unschedulable(
                "ccm-c",
                "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
            ),
            running("ccm-d", "n1"),
            pod("ccm-e", None, "Pending", vec![]),
        ];
        let findings = check_ccm_pods(&s);
        assert_eq!(
            ids(&findings),
            vec![
                (CheckId::CcmPodUntoleratedTaint, Severity::Error),
                (CheckId::CcmPodUntoleratedTaint, Severity::Error),
                (CheckId::CcmPodUnschedulable, Severity::Error),
            ]
        );
        let a = &findings[0];
        assert_eq!(a.objects[0].name, "ccm-a");
        assert!(
            a.message.ends_with(
                "the nodes carry a taint (reported by the scheduler) it does not tolerate: \
             node.cloudprovider.kubernetes.io/uninitialized"
            ),
            "{}",
            a.message
        );
        assert!(a.fix.contains("only the CCM removes this taint"));
        assert!(
            a.objects[0]
                .detail
                .as_deref()
                .unwrap()
                .starts_with("Pending: 0/3 nodes are available")
        );

        // The newer message names no taint: they are read from the nodes.
        let b = &findings[1];
        assert!(
            b.message.ends_with(
                "the nodes carry taints (read from the nodes) it does not tolerate: \
             node.cloudprovider.kubernetes.io/uninitialized, node.kubernetes.io/not-ready"
            ),
            "{}",
            b.message
        );
        assert!(b.fix.contains("hostNetwork: true"));

        assert!(
            findings[2]
                .message
                .contains("didn't match Pod's node affinity")
        );

        // Taint fixes by kind.
        assert!(fix_for_taint(taints::CONTROL_PLANE).contains(taints::MASTER));
        assert!(fix_for_taint(taints::MASTER).contains(taints::CONTROL_PLANE));
        assert!(fix_for_taint(taints::UNREACHABLE).contains("NoExecute"));
        assert_eq!(fix_for_taint("x"), "tolerate x or remove it from the nodes");

        // A taint message with nothing left to name: reported as unschedulable.
        s.nodes = vec![];
        let only_b = Snapshot {
            ccm_pods: vec![s.ccm_pods[1].clone()],
            ..s.clone()
        };
        assert_eq!(
            ids(&check_ccm_pods(&only_b)),
            vec![(CheckId::CcmPodUnschedulable, Severity::Error)]
        );
    }

    #[test]
    fn workloads_found_or_not() {
        let mut s = healthy();
        s.workloads = vec![];
        let findings = check_workloads(&s);
        assert_eq!(
            ids(&findings),
            vec![(CheckId::CcmWorkloadNotFound, Severity::Info)]
        );
        assert!(findings[0].message.contains("static pods"));
        s.ccm_pods = vec![];
        let findings = check_workloads(&s);
        assert_eq!(
            ids(&findings),
            vec![(CheckId::CcmWorkloadNotFound, Severity::Warning)]
        );
        assert!(findings[0].message.contains("searched: the CCM"));

        let mut bad = good_workload();
        bad.pod_spec.host_network = None;
        s.workloads = vec![good_workload(), bad];
        assert_eq!(
            ids(&check_workloads(&s)),
            vec![(CheckId::NoHostNetwork, Severity::Warning)]
        );
    }

    #[test]
    fn leader_election_source() {
        let mut s = healthy();
        assert_eq!(leader_election_in_use(&s), Some(true));
        let mut off = good_workload();
        off.pod_spec.containers[0].args = Some(vec!["--leader-elect=false".into()]);
        s.workloads = vec![off.clone()];
        assert_eq!(leader_election_in_use(&s), Some(false));
        s.workloads = vec![off, good_workload()];
        assert_eq!(leader_election_in_use(&s), Some(true));
        // Without workloads, the pods decide.
        s.workloads = vec![];
        assert_eq!(leader_election_in_use(&s), Some(true));
        s.ccm_pods[0].spec.as_mut().unwrap().containers[0].args =
            Some(vec!["--leader-elect=false".into()]);
        assert_eq!(leader_election_in_use(&s), Some(false));
        s.ccm_pods = vec![];
        assert_eq!(leader_election_in_use(&s), None);
    }

    #[test]
    fn where_the_lease_is() {
        let defaults = (
            ccm_core::names::lease::NAMESPACE.to_owned(),
            ccm_core::names::lease::NAME.to_owned(),
        );
        assert_eq!(lease_location(&[], &[], None, None), defaults);
        let mut w = good_workload();
        w.pod_spec.containers[0].args = Some(vec![
            "--leader-elect-resource-namespace=ccm-system".into(),
            "--leader-elect-resource-name".into(),
            "lock".into(),
        ]);
        assert_eq!(
            lease_location(std::slice::from_ref(&w), &[], None, None),
            ("ccm-system".to_owned(), "lock".to_owned())
        );
        assert_eq!(
            lease_location(std::slice::from_ref(&w), &[], Some("ns"), None),
            ("ns".to_owned(), "lock".to_owned())
        );
        assert_eq!(
            lease_location(std::slice::from_ref(&w), &[], Some("ns"), Some("n")),
            ("ns".to_owned(), "n".to_owned())
        );
        // Pods stand in for workloads (static pods).
        let mut p = running("ccm-1", "n1");
        p.spec.as_mut().unwrap().containers[0].args =
            Some(vec!["--leader-elect-resource-name=pod-lock".into()]);
        assert_eq!(
            lease_location(&[good_workload()], &[p], None, None),
            (defaults.0.clone(), "pod-lock".to_owned())
        );
    }

    #[test]
    fn lease_checks() {
        let mut s = healthy();
        // Fresh, at the limit, and past it.
        s.lease = Some(lease(Some("a"), Some(15), Some(15)));
        assert_eq!(check_lease(&s), vec![]);
        s.lease = Some(lease(Some("a"), Some(16), Some(15)));
        let findings = check_lease(&s);
        assert_eq!(
            ids(&findings),
            vec![(CheckId::LeaseNotRenewed, Severity::Error)]
        );
        assert_eq!(
            findings[0].objects[0].to_string(),
            "Lease kube-system/cloud-controller-manager (held by a, last renewed 16s ago, duration 15s)"
        );
        // The default duration is client-go's 15 s.
        s.lease = Some(lease(Some("a"), Some(14), None));
        assert_eq!(check_lease(&s), vec![]);
        s.lease = Some(lease(Some("a"), Some(20), None));
        assert_eq!(
            ids(&check_lease(&s)),
            vec![(CheckId::LeaseNotRenewed, Severity::Error)]
        );
        // A long duration tolerates an older renewal.
        s.lease = Some(lease(Some("a"), Some(50), Some(60)));
        assert_eq!(check_lease(&s), vec![]);
        // Released and never renewed.
        s.lease = Some(lease(Some(""), None, Some(1)));
        let findings = check_lease(&s);
        assert_eq!(
            findings[0].objects[0].detail.as_deref(),
            Some("held by no one, never renewed, duration 1s")
        );
        // acquireTime stands in for a missing renewTime.
        let mut acquired = lease(Some("a"), None, Some(15));
        acquired.spec.as_mut().unwrap().acquire_time = Some(MicroTime(ago(2)));
        s.lease = Some(acquired);
        assert_eq!(check_lease(&s), vec![]);
        // A Lease without spec is stale.
        s.lease = Some(Lease::default());
        assert_eq!(
            ids(&check_lease(&s)),
            vec![(CheckId::LeaseNotRenewed, Severity::Error)]
        );

        // Stale while leader election is off: harmless.
        let mut off = good_workload();
        off.pod_spec.containers[0].args = Some(vec!["--leader-elect=false".into()]);
        s.workloads = vec![off.clone()];
        s.lease = Some(lease(Some("a"), Some(600), Some(15)));
        assert_eq!(
            ids(&check_lease(&s)),
            vec![(CheckId::LeaseNotRenewed, Severity::Info)]
        );

        // Missing.
        s.lease = None;
        assert_eq!(check_lease(&s), vec![]);
        s.workloads = vec![good_workload()];
        let findings = check_lease(&s);
        assert_eq!(
            ids(&findings),
            vec![(CheckId::LeaseMissing, Severity::Error)]
        );
        assert_eq!(
            findings[0].objects,
            vec![ObjectRef::new(
                "Lease",
                Some("kube-system"),
                "cloud-controller-manager"
            )]
        );
        assert!(findings[0].fix.contains("--lease-name"));
        // No CCM found at all: the missing Lease is not reported (the missing workload is).
        s.workloads = vec![];
        s.ccm_pods = vec![];
        assert_eq!(check_lease(&s), vec![]);
        // A renewal in the future (clock skew) is fresh.
        s.lease = Some(lease(Some("a"), Some(-30), Some(15)));
        assert_eq!(check_lease(&s), vec![]);
    }

    #[test]
    fn a_stuck_cluster_reports_everything_in_check_order() {
        let mut workload = good_workload();
        workload.pod_spec.tolerations = None;
        let s = Snapshot {
            nodes: deadlocked_nodes(),
            workloads: vec![workload],
            ccm_pods: vec![unschedulable(
                "ccm-a",
                "0/2 nodes are available: 2 node(s) had untolerated taint \
                 {node.cloudprovider.kubernetes.io/uninitialized: true}.",
            )],
            cni_pods: Some(vec![pod("calico-node-x", Some("stuck"), "Pending", vec![])]),
            lease: None,
            ..healthy()
        };
        let findings = analyze(&s, &config(0));
        assert_eq!(
            ids(&findings),
            vec![
                (CheckId::NodeUninitializedTooLong, Severity::Error),
                (CheckId::CniCcmDeadlock, Severity::Error),
                (CheckId::CcmPodUntoleratedTaint, Severity::Error),
                (CheckId::MissingUninitializedToleration, Severity::Error),
                (CheckId::MissingNotReadyToleration, Severity::Error),
                (CheckId::MissingUnreachableToleration, Severity::Warning),
                (CheckId::MissingControlPlaneToleration, Severity::Error),
                (CheckId::NoNodeFitsPlacement, Severity::Error),
                (CheckId::LeaseMissing, Severity::Error),
            ]
        );
        let report = crate::Report::new("t", findings);
        assert_eq!(report.exit_code(), 2);
        assert_eq!(
            report.findings().last().map(|f| f.check),
            Some(CheckId::MissingUnreachableToleration)
        );
    }
}
