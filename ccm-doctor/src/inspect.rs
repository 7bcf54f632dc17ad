//! Small pure readers of Kubernetes objects shared by the checks and the self-check: taints and tolerations,
//! node readiness, how long a node has waited for initialization, pod state, the `--leader-elect` flag, and the
//! taints named in a scheduler message.

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_core::names::{conditions, taints};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, Taint, Toleration};
use k8s_openapi::jiff::Timestamp;

/// The effect of the taints the doctor cares about.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// The effect of eviction taints.
pub const NO_EXECUTE: &str = "NoExecute";

/// True if `toleration` tolerates a taint `key=value:effect`, with the scheduler's rules: an empty effect
/// matches every effect; an empty key with operator `Exists` matches every key; `Exists` ignores the value;
/// `Equal` (the default operator) compares values.
pub fn toleration_matches(toleration: &Toleration, key: &str, value: &str, effect: &str) -> bool {
    if let Some(e) = toleration.effect.as_deref()
        && !e.is_empty()
        && e != effect
    {
        return false;
    }
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    let tkey = toleration.key.as_deref().unwrap_or("");
    if tkey.is_empty() {
        return operator == "Exists";
    }
    if tkey != key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => toleration.value.as_deref().unwrap_or("") == value,
        _ => false,
    }
}

/// True if any of `tolerations` tolerates the taint `key=value:effect`.
pub fn tolerates(tolerations: &[Toleration], key: &str, value: &str, effect: &str) -> bool {
    tolerations
        .iter()
        .any(|t| toleration_matches(t, key, value, effect))
}

/// True if any of `tolerations` tolerates `taint`.
pub fn tolerates_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerates(
        tolerations,
        &taint.key,
        taint.value.as_deref().unwrap_or(""),
        &taint.effect,
    )
}

/// The pod spec's tolerations (empty if none).
pub fn tolerations_of(spec: &PodSpec) -> &[Toleration] {
    spec.tolerations.as_deref().unwrap_or(&[])
}

/// The node's taints (empty if none).
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// The node's uninitialized taint, if it carries one.
pub fn uninitialized_taint(node: &Node) -> Option<&Taint> {
    node_taints(node)
        .iter()
        .find(|t| t.key == taints::UNINITIALIZED)
}

/// The node's name (empty if unnamed).
pub fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

/// The node's providerID, if set and non-empty.
pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
}

/// True if the node's `Ready` condition is `True`. A node without the condition (its kubelet has not
/// reported) is not ready.
pub fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == conditions::READY))
        .is_some_and(|c| c.status == "True")
}

/// True if the node is not ready: its `Ready` condition is not `True`, or it carries the not-ready taint.
pub fn node_is_not_ready(node: &Node) -> bool {
    !node_is_ready(node) || node_taints(node).iter().any(|t| t.key == taints::NOT_READY)
}

/// When the node started waiting for initialization: the uninitialized taint's `timeAdded` if set, else the
/// node's `creationTimestamp`. `None` if the node is not waiting (or has neither time).
pub fn waiting_since(node: &Node) -> Option<Timestamp> {
    let taint = uninitialized_taint(node)?;
    taint
        .time_added
        .as_ref()
        .map(|t| t.0)
        .or_else(|| node.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// How long from `since` to `now`; zero if `since` is in the future (clock skew).
pub fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    let nanos = now.as_nanosecond() - since.as_nanosecond();
    if nanos <= 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// A node waiting for the cloud node controller to initialize it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingNode {
    /// The node's name.
    pub name: String,
    /// How long it has waited (zero if unknown).
    pub waited: Duration,
}

/// Every node carrying the uninitialized taint and how long it has waited at `now`, longest first (ties by
/// name).
pub fn waiting_nodes<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    now: Timestamp,
) -> Vec<WaitingNode> {
    let mut waiting: Vec<WaitingNode> = nodes
        .into_iter()
        .filter(|n| uninitialized_taint(n).is_some())
        .map(|n| WaitingNode {
            name: node_name(n).to_owned(),
            waited: waiting_since(n)
                .map(|since| elapsed(since, now))
                .unwrap_or(Duration::ZERO),
        })
        .collect();
    waiting.sort_by(|a, b| b.waited.cmp(&a.waited).then_with(|| a.name.cmp(&b.name)));
    waiting
}

/// The pod's phase (`Pending` if unknown).
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// True if the pod is `Running` and its `Ready` condition is `True`.
pub fn pod_is_running_and_ready(pod: &Pod) -> bool {
    pod_phase(pod) == "Running"
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True")
}

/// The node a pod is bound to, if any.
pub fn pod_node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The scheduler's verdict on a pod it could not place: the message of a `PodScheduled=False` condition with
/// reason `Unschedulable`, if the pod is still pending and has one.
pub fn unschedulable_message(pod: &Pod) -> Option<&str> {
    if pod_phase(pod) != "Pending" {
        return None;
    }
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?;
    if condition.status != "False" || condition.reason.as_deref() != Some("Unschedulable") {
        return None;
    }
    Some(condition.message.as_deref().unwrap_or(""))
}

/// The taint keys a scheduler message names, in order of appearance without repeats: the `{key: value}`
/// after "taint" in messages such as `0/3 nodes are available: 3 node(s) had untolerated taint
/// {node.cloudprovider.kubernetes.io/uninitialized: true}` (and the older `had taint {key: value}, that the pod
/// didn't tolerate`). Newer schedulers write `had untolerated taint(s)` without naming them: then this is empty.
pub fn taints_in_scheduler_message(message: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut rest = message;
    while let Some(open) = rest.find('{') {
        let before = &rest[..open];
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let inside = &after[..close];
        // Only braces that follow the word "taint" in the same clause.
        let clause_start = before.rfind([',', '.', ':']).map(|i| i + 1).unwrap_or(0);
        if before[clause_start..].contains("taint") {
            let key = inside.split(':').next().unwrap_or("").trim();
            if !key.is_empty() && !keys.iter().any(|k| k == key) {
                keys.push(key.to_owned());
            }
        }
        rest = &after[close + 1..];
    }
    keys
}

/// Whether the process configured by `containers` runs leader election, read from `--leader-elect` in their
/// commands and arguments (the last occurrence wins, as with Go's flag parsing). Go's CCM defaults to `true`.
///
/// Returns `None` if no container sets the flag, so the caller applies the default.
pub fn leader_elect_flag<'a>(containers: impl IntoIterator<Item = &'a Container>) -> Option<bool> {
    let mut setting = None;
    for container in containers {
        let tokens = container
            .command
            .iter()
            .flatten()
            .chain(container.args.iter().flatten());
        for token in tokens {
            let Some(rest) = token.strip_prefix("--leader-elect") else {
                continue;
            };
            if rest.is_empty() {
                setting = Some(true);
            } else if let Some(value) = rest.strip_prefix('=')
                && let Some(parsed) = parse_go_bool(value)
            {
                setting = Some(parsed);
            }
        }
    }
    setting
}

/// The value of the string flag `flag` (for example `--leader-elect-resource-name`) in the containers' commands
/// and arguments, in either pflag form (`--flag=value` or `--flag value`); the last occurrence wins.
pub fn string_flag<'a>(
    containers: impl IntoIterator<Item = &'a Container>,
    flag: &str,
) -> Option<String> {
    let mut value = None;
    for container in containers {
        let tokens: Vec<&String> = container
            .command
            .iter()
            .flatten()
            .chain(container.args.iter().flatten())
            .collect();
        for (i, token) in tokens.iter().enumerate() {
            let Some(rest) = token.strip_prefix(flag) else {
                continue;
            };
            if let Some(v) = rest.strip_prefix('=') {
                value = Some(v.to_owned());
            } else if rest.is_empty()
                && let Some(next) = tokens.get(i + 1)
                && !next.starts_with('-')
            {
                value = Some((*next).clone());
            }
        }
    }
    value.filter(|v| !v.is_empty())
}

/// The `--leader-elect-resource-namespace` flag of the pod spec's containers.
pub const LEASE_NAMESPACE_FLAG: &str = "--leader-elect-resource-namespace";
/// The `--leader-elect-resource-name` flag of the pod spec's containers.
pub const LEASE_NAME_FLAG: &str = "--leader-elect-resource-name";

/// True if leader election is on in `spec` (Go's default when the flag is absent).
pub fn leader_election_enabled(spec: &PodSpec) -> bool {
    leader_elect_flag(spec.containers.iter()).unwrap_or(true)
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Distinct taint keys among `nodes` (NoSchedule and NoExecute effects) that `tolerations` do not tolerate.
pub fn untolerated_taints<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    tolerations: &[Toleration],
) -> Vec<String> {
    let keys: BTreeSet<String> = nodes
        .into_iter()
        .flat_map(node_taints)
        .filter(|t| t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE)
        .filter(|t| !tolerates_taint(tolerations, t))
        .map(|t| t.key.clone())
        .collect();
    keys.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        NodeCondition, NodeSpec, NodeStatus, PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn tol(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    }

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn toleration_rules() {
        let uninit = taints::UNINITIALIZED;
        // Exact Equal.
        assert!(toleration_matches(
            &tol(
                Some(uninit),
                Some("Equal"),
                Some("true"),
                Some("NoSchedule")
            ),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Default operator is Equal.
        assert!(toleration_matches(
            &tol(Some(uninit), None, Some("true"), None),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Wrong value.
        assert!(!toleration_matches(
            &tol(Some(uninit), Some("Equal"), Some("false"), None),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Missing value with Equal does not match "true".
        assert!(!toleration_matches(
            &tol(Some(uninit), None, None, None),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Exists ignores the value.
        assert!(toleration_matches(
            &tol(Some(uninit), Some("Exists"), None, None),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Effect must match when set.
        assert!(!toleration_matches(
            &tol(Some(uninit), Some("Exists"), None, Some("NoExecute")),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        assert!(toleration_matches(
            &tol(Some(uninit), Some("Exists"), None, Some("")),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Wildcard.
        assert!(toleration_matches(
            &tol(None, Some("Exists"), None, None),
            "anything",
            "x",
            NO_EXECUTE
        ));
        assert!(toleration_matches(
            &tol(Some(""), Some("Exists"), None, Some("NoSchedule")),
            "anything",
            "",
            NO_SCHEDULE
        ));
        assert!(!toleration_matches(
            &tol(None, Some("Exists"), None, Some("NoSchedule")),
            "anything",
            "",
            NO_EXECUTE
        ));
        // An empty key with Equal matches nothing.
        assert!(!toleration_matches(
            &tol(None, Some("Equal"), None, None),
            "k",
            "",
            NO_SCHEDULE
        ));
        // Other key.
        assert!(!toleration_matches(
            &tol(Some("other"), Some("Exists"), None, None),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Unknown operator.
        assert!(!toleration_matches(
            &tol(Some(uninit), Some("Gt"), Some("1"), None),
            uninit,
            "true",
            NO_SCHEDULE
        ));
        // Empty-value taints.
        assert!(tolerates_taint(
            &[tol(Some(taints::NOT_READY), Some("Equal"), Some(""), None)],
            &taint(taints::NOT_READY, None, NO_EXECUTE)
        ));
    }

    fn node(name: &str, created: &str, node_taints: Vec<Taint>, ready: Option<&str>) -> Node {
        Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(ts(created))),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(node_taints),
                ..Default::default()
            }),
            status: ready.map(|status| NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn readiness() {
        assert!(node_is_ready(&node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![],
            Some("True")
        )));
        assert!(!node_is_ready(&node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![],
            Some("False")
        )));
        assert!(!node_is_ready(&node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![],
            Some("Unknown")
        )));
        assert!(!node_is_ready(&node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![],
            None
        )));
        assert!(node_is_not_ready(&node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![],
            None
        )));
        assert!(node_is_not_ready(&node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![taint(taints::NOT_READY, None, NO_SCHEDULE)],
            Some("True")
        )));
        assert!(!node_is_not_ready(&node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![],
            Some("True")
        )));
    }

    #[test]
    fn waiting_uses_time_added_then_creation() {
        let now = ts("2026-01-01T00:10:00Z");
        let plain = node(
            "plain",
            "2026-01-01T00:00:00Z",
            vec![taint(taints::UNINITIALIZED, Some("true"), NO_SCHEDULE)],
            None,
        );
        let mut with_time = taint(taints::UNINITIALIZED, Some("true"), NO_SCHEDULE);
        with_time.time_added = Some(Time(ts("2026-01-01T00:09:00Z")));
        let timed = node("timed", "2026-01-01T00:00:00Z", vec![with_time], None);
        let future = node(
            "future",
            "2026-01-01T01:00:00Z",
            vec![taint(taints::UNINITIALIZED, Some("true"), NO_SCHEDULE)],
            None,
        );
        let mut no_time = future.clone();
        no_time.metadata.name = Some("no-time".into());
        no_time.metadata.creation_timestamp = None;
        let done = node("done", "2026-01-01T00:00:00Z", vec![], None);
        assert_eq!(waiting_since(&done), None);
        let waiting = waiting_nodes([&timed, &done, &plain, &future, &no_time], now);
        assert_eq!(
            waiting,
            vec![
                WaitingNode {
                    name: "plain".into(),
                    waited: Duration::from_secs(600)
                },
                WaitingNode {
                    name: "timed".into(),
                    waited: Duration::from_secs(60)
                },
                WaitingNode {
                    name: "future".into(),
                    waited: Duration::ZERO
                },
                WaitingNode {
                    name: "no-time".into(),
                    waited: Duration::ZERO
                },
            ]
        );
    }

    #[test]
    fn scheduler_messages() {
        assert_eq!(
            taints_in_scheduler_message(
                "0/3 nodes are available: 3 node(s) had untolerated taint \
                 {node.cloudprovider.kubernetes.io/uninitialized: true}. preemption: 0/3 nodes are \
                 available: 3 Preemption is not helpful for scheduling."
            ),
            vec![taints::UNINITIALIZED.to_owned()]
        );
        assert_eq!(
            taints_in_scheduler_message(
                "0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, \
                 2 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) had untolerated \
                 taint {node-role.kubernetes.io/control-plane: }, 1 node(s) didn't match {weird: braces}."
            ),
            vec![
                taints::CONTROL_PLANE.to_owned(),
                taints::NOT_READY.to_owned()
            ]
        );
        assert_eq!(
            taints_in_scheduler_message(
                "0/1 nodes are available: 1 node(s) had taint {node.kubernetes.io/not-ready: }, that the pod \
                 didn't tolerate."
            ),
            vec![taints::NOT_READY.to_owned()]
        );
        assert!(
            taints_in_scheduler_message(
                "0/17 nodes are available: 17 node(s) had untolerated taint(s). preemption: 0/17"
            )
            .is_empty()
        );
        assert!(taints_in_scheduler_message("").is_empty());
        assert!(taints_in_scheduler_message("had taint {unterminated").is_empty());
        assert!(taints_in_scheduler_message("had taint {}").is_empty());
    }

    fn pod(phase: Option<&str>, cond: Option<(&str, &str, Option<&str>, Option<&str>)>) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: phase.map(Into::into),
                conditions: cond.map(|(type_, status, reason, message)| {
                    vec![PodCondition {
                        type_: type_.into(),
                        status: status.into(),
                        reason: reason.map(Into::into),
                        message: message.map(Into::into),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pod_states() {
        let p = pod(
            Some("Pending"),
            Some(("PodScheduled", "False", Some("Unschedulable"), Some("msg"))),
        );
        assert_eq!(unschedulable_message(&p), Some("msg"));
        let no_message = pod(
            None,
            Some(("PodScheduled", "False", Some("Unschedulable"), None)),
        );
        assert_eq!(pod_phase(&no_message), "Pending");
        assert_eq!(unschedulable_message(&no_message), Some(""));
        let scheduling_gated = pod(
            Some("Pending"),
            Some(("PodScheduled", "False", Some("SchedulingGated"), Some("x"))),
        );
        assert_eq!(unschedulable_message(&scheduling_gated), None);
        let scheduled = pod(Some("Pending"), Some(("PodScheduled", "True", None, None)));
        assert_eq!(unschedulable_message(&scheduled), None);
        let running = pod(
            Some("Running"),
            Some((
                "PodScheduled",
                "False",
                Some("Unschedulable"),
                Some("stale"),
            )),
        );
        assert_eq!(unschedulable_message(&running), None);
        assert_eq!(unschedulable_message(&Pod::default()), None);

        assert!(pod_is_running_and_ready(&pod(
            Some("Running"),
            Some(("Ready", "True", None, None))
        )));
        assert!(!pod_is_running_and_ready(&pod(
            Some("Running"),
            Some(("Ready", "False", None, None))
        )));
        assert!(!pod_is_running_and_ready(&pod(Some("Running"), None)));
        assert!(!pod_is_running_and_ready(&pod(
            Some("Pending"),
            Some(("Ready", "True", None, None))
        )));
    }

    fn container(command: &[&str], args: &[&str]) -> Container {
        Container {
            name: "c".into(),
            command: Some(command.iter().map(|s| (*s).to_owned()).collect()),
            args: Some(args.iter().map(|s| (*s).to_owned()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn leader_elect_flag_parsing() {
        assert_eq!(leader_elect_flag([&container(&["ccm"], &[])]), None);
        assert_eq!(
            leader_elect_flag([&container(&["ccm"], &["--leader-elect=false"])]),
            Some(false)
        );
        assert_eq!(
            leader_elect_flag([&container(&["ccm", "--leader-elect=0"], &[])]),
            Some(false)
        );
        assert_eq!(
            leader_elect_flag([&container(&["ccm"], &["--leader-elect"])]),
            Some(true)
        );
        assert_eq!(
            leader_elect_flag([&container(
                &[],
                &["--leader-elect=false", "--leader-elect=True"]
            )]),
            Some(true)
        );
        // Unparseable values and other flags with the same prefix are ignored.
        assert_eq!(
            leader_elect_flag([&container(
                &[],
                &[
                    "--leader-elect=maybe",
                    "--leader-elect-lease-duration=15s",
                    "--leader-elect-resource-name=x"
                ]
            )]),
            None
        );
        let spec = PodSpec {
            containers: vec![container(&[], &["--leader-elect=F"])],
            ..Default::default()
        };
        assert!(!leader_election_enabled(&spec));
        assert!(leader_election_enabled(&PodSpec::default()));
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Some(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Some(false));
        }
        assert_eq!(parse_go_bool("yes"), None);
    }

    #[test]
    fn string_flags() {
        let c = container(
            &["ccm", "--leader-elect-resource-name=first"],
            &[
                "--leader-elect-resource-namespace",
                "ccm-system",
                "--leader-elect-resource-name=lock",
                "--leader-elect-resource-names=other",
            ],
        );
        assert_eq!(string_flag([&c], LEASE_NAME_FLAG).as_deref(), Some("lock"));
        assert_eq!(
            string_flag([&c], LEASE_NAMESPACE_FLAG).as_deref(),
            Some("ccm-system")
        );
        // A flag at the end, or followed by another flag, has no value.
        let dangling = container(
            &[],
            &[
                "--leader-elect-resource-name",
                "--v=2",
                "--leader-elect-resource-namespace",
            ],
        );
        assert_eq!(string_flag([&dangling], LEASE_NAME_FLAG), None);
        assert_eq!(string_flag([&dangling], LEASE_NAMESPACE_FLAG), None);
        let empty = container(&[], &["--leader-elect-resource-name="]);
        assert_eq!(string_flag([&empty], LEASE_NAME_FLAG), None);
        assert_eq!(string_flag([&container(&[], &[])], LEASE_NAME_FLAG), None);
    }

    #[test]
    fn untolerated_taints_of_nodes() {
        let n1 = node(
            "a",
            "2026-01-01T00:00:00Z",
            vec![
                taint(taints::UNINITIALIZED, Some("true"), NO_SCHEDULE),
                taint(taints::NOT_READY, None, NO_SCHEDULE),
                taint("soft", None, "PreferNoSchedule"),
            ],
            None,
        );
        let n2 = node(
            "b",
            "2026-01-01T00:00:00Z",
            vec![taint(taints::CONTROL_PLANE, None, NO_SCHEDULE)],
            None,
        );
        assert_eq!(
            untolerated_taints(
                [&n1, &n2],
                &[tol(Some(taints::NOT_READY), Some("Exists"), None, None)]
            ),
            vec![
                taints::CONTROL_PLANE.to_owned(),
                taints::UNINITIALIZED.to_owned()
            ]
        );
        assert!(
            untolerated_taints([&n1, &n2], &[tol(None, Some("Exists"), None, None)]).is_empty()
        );
        assert_eq!(provider_id(&n1), None);
    }
}
