//! Where a workload's pods can run: the scheduler's node-selection rules (`nodeSelector`, required node
//! affinity with every operator and `matchFields` on `metadata.name`) and its taint rules, applied to the
//! nodes of a live cluster. A CCM whose rules no current node satisfies stays Pending forever, and so does every
//! node it should initialize.
//!
//! The matching follows the Kubernetes scheduler (v1.36): the `nodeSelector` entries must all equal the node's
//! labels; the required node-affinity terms are alternatives (a node must match one), the requirements of a term
//! must all hold, and a term that is empty or invalid matches no node; `NotIn` and `DoesNotExist` hold when the
//! label is absent; `Gt` and `Lt` compare a label value and the single value as 64-bit integers. A node fits
//! when its taints with the `NoSchedule` or `NoExecute` effect are all tolerated (a cordoned node counts as
//! tainted `node.kubernetes.io/unschedulable:NoSchedule`), counting the tolerations the API server's
//! `DefaultTolerationSeconds` admission plugin adds to every pod and, for a DaemonSet, those its controller adds.
//!
//! ```
//! use std::collections::BTreeMap;
//! use ccm_doctor::placement::requirement_matches;
//! use k8s_openapi::api::core::v1::NodeSelectorRequirement;
//!
//! let requirement = NodeSelectorRequirement {
//!     key: "node-role.kubernetes.io/master".into(),
//!     operator: "Exists".into(),
//!     values: None,
//! };
//! let labels = BTreeMap::from([("node-role.kubernetes.io/control-plane".to_owned(), String::new())]);
//! assert_eq!(requirement_matches(&requirement, &labels), Ok(false));
//! ```

use std::collections::BTreeMap;

use ccm_core::names::taints;
use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

use crate::finding::{CheckId, Finding, Severity};
use crate::inspect::{NO_EXECUTE, NO_SCHEDULE, node_name, node_taints, tolerates_taint};
use crate::node_labels::legacy_label;
use crate::workload::{Workload, WorkloadKind};

/// The only field a node affinity's `matchFields` may select on.
pub const METADATA_NAME_FIELD: &str = "metadata.name";

const EMPTY: &BTreeMap<String, String> = &BTreeMap::new();

fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    node.metadata.labels.as_ref().unwrap_or(EMPTY)
}

fn values(requirement: &NodeSelectorRequirement) -> &[String] {
    requirement.values.as_deref().unwrap_or(&[])
}

fn parse_int(value: &str) -> Option<i64> {
    value.parse::<i64>().ok()
}

/// Whether `labels` satisfy one `matchExpressions` requirement, or why the requirement is invalid (the API
/// server rejects such requirements; the scheduler treats their term as matching nothing).
///
/// # Errors
/// A message when the operator is unknown or the values do not suit it.
pub fn requirement_matches(
    requirement: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let key = requirement.key.as_str();
    let vals = values(requirement);
    let label = labels.get(key);
    match requirement.operator.as_str() {
        "In" | "NotIn" if vals.is_empty() => Err(format!(
            "{key} {}: the operator needs at least one value",
            requirement.operator
        )),
        "In" => Ok(label.is_some_and(|l| vals.contains(l))),
        "NotIn" => Ok(label.is_none_or(|l| !vals.contains(l))),
        "Exists" | "DoesNotExist" if !vals.is_empty() => Err(format!(
            "{key} {}: the operator takes no values",
            requirement.operator
        )),
        "Exists" => Ok(label.is_some()),
        "DoesNotExist" => Ok(label.is_none()),
        "Gt" | "Lt" => {
            let [single] = vals else {
                return Err(format!(
                    "{key} {}: the operator needs exactly one value",
                    requirement.operator
                ));
            };
            let Some(bound) = parse_int(single) else {
                return Err(format!(
                    "{key} {} {single}: the value must be an integer",
                    requirement.operator
                ));
            };
            let Some(have) = label.and_then(|l| parse_int(l)) else {
                return Ok(false);
            };
            Ok(if requirement.operator == "Gt" {
                have > bound
            } else {
                have < bound
            })
        }
        other => Err(format!(
            "{key} {other}: unknown operator (use In, NotIn, Exists, DoesNotExist, Gt or Lt)"
        )),
    }
}

/// Whether the node named `name` satisfies one `matchFields` requirement (`metadata.name` with `In` or `NotIn`
/// and exactly one value), or why the requirement is invalid.
///
/// # Errors
/// A message when the operator is not `In` or `NotIn` or there is not exactly one value.
pub fn field_requirement_matches(
    requirement: &NodeSelectorRequirement,
    name: &str,
) -> Result<bool, String> {
    let op = requirement.operator.as_str();
    if op != "In" && op != "NotIn" {
        return Err(format!(
            "field {} {op}: matchFields supports only In and NotIn",
            requirement.key
        ));
    }
    let [value] = values(requirement) else {
        return Err(format!(
            "field {} {op}: matchFields needs exactly one value",
            requirement.key
        ));
    };
    // The node's only field is its name; any other key reads as empty.
    let field = if requirement.key == METADATA_NAME_FIELD {
        name
    } else {
        ""
    };
    Ok((field == value) == (op == "In"))
}

/// Whether `node` satisfies a node-selector term: every `matchExpressions` and `matchFields` requirement holds.
/// An empty term matches no node.
///
/// # Errors
/// The first invalid requirement's message (the scheduler then treats the term as matching no node).
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> Result<bool, String> {
    let expressions = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if expressions.is_empty() && fields.is_empty() {
        return Ok(false);
    }
    let labels = node_labels(node);
    let mut matched = true;
    for requirement in expressions {
        matched &= requirement_matches(requirement, labels)?;
    }
    let name = node_name(node);
    for requirement in fields {
        let holds = field_requirement_matches(requirement, name)?;
        // As the scheduler: a node without a name has no fields to compare.
        matched &= holds || name.is_empty();
    }
    Ok(matched)
}

/// The required node-affinity terms of `spec`, if it has a required node affinity.
pub fn required_terms(spec: &PodSpec) -> Option<&[NodeSelectorTerm]> {
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .map(|s| s.node_selector_terms.as_slice())
}

/// True if `node`'s labels hold every `nodeSelector` entry of `spec`.
pub fn node_selector_matches(spec: &PodSpec, node: &Node) -> bool {
    let labels = node_labels(node);
    spec.node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// True if `node` satisfies the required node affinity of `spec` (one of its terms), or `spec` has none.
pub fn required_affinity_matches(spec: &PodSpec, node: &Node) -> bool {
    required_terms(spec).is_none_or(|terms| {
        terms
            .iter()
            .any(|term| term_matches(term, node).unwrap_or(false))
    })
}

/// True if the scheduler's node-selection rules of `spec` (node selector and required node affinity) accept
/// `node`.
pub fn selects_node(spec: &PodSpec, node: &Node) -> bool {
    node_selector_matches(spec, node) && required_affinity_matches(spec, node)
}

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some(effect.to_owned()),
        ..Default::default()
    }
}

/// The tolerations the pods of a `kind` workload with `spec` carry once created: the template's, plus
/// `not-ready` and `unreachable` (`NoExecute`) from the `DefaultTolerationSeconds` admission plugin (time-limited,
/// but they tolerate the taint for scheduling), plus, for a DaemonSet, those its controller adds (the
/// `NoSchedule` pressure and `unschedulable` taints, and `network-unavailable` with the host network).
pub fn effective_tolerations(spec: &PodSpec, kind: WorkloadKind) -> Vec<Toleration> {
    let mut all: Vec<Toleration> = spec.tolerations.clone().unwrap_or_default();
    all.push(exists(taints::NOT_READY, NO_EXECUTE));
    all.push(exists(taints::UNREACHABLE, NO_EXECUTE));
    if kind == WorkloadKind::DaemonSet {
        for key in [
            taints::DISK_PRESSURE,
            taints::MEMORY_PRESSURE,
            taints::PID_PRESSURE,
            taints::UNSCHEDULABLE,
        ] {
            all.push(exists(key, NO_SCHEDULE));
        }
        if spec.host_network == Some(true) {
            all.push(exists(taints::NETWORK_UNAVAILABLE, NO_SCHEDULE));
        }
    }
    all
}

/// The keys of `node`'s taints that keep a pod with `tolerations` off it: `NoSchedule` and `NoExecute` taints
/// not tolerated, and `node.kubernetes.io/unschedulable` for a cordoned node (as the scheduler's
/// `NodeUnschedulable` filter), each once, in the node's order.
pub fn blocking_taints(node: &Node, tolerations: &[Toleration]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let cordon = cordoned.then(|| Taint {
        key: taints::UNSCHEDULABLE.to_owned(),
        effect: NO_SCHEDULE.to_owned(),
        ..Default::default()
    });
    for taint in node_taints(node).iter().chain(cordon.as_ref()) {
        if (taint.effect == NO_SCHEDULE || taint.effect == NO_EXECUTE)
            && !tolerates_taint(tolerations, taint)
            && !keys.contains(&taint.key)
        {
            keys.push(taint.key.clone());
        }
    }
    keys
}

/// One node-selection rule and how many nodes it rules out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleOutcome {
    /// The rule, for example `nodeSelector node-role.kubernetes.io/master=""` or `required node affinity term 1
    /// (a In (x,y), b Exists)`.
    pub rule: String,
    /// The label keys the rule reads.
    pub keys: Vec<String>,
    /// How many of the nodes fail it.
    pub ruled_out: usize,
    /// Why the rule can match nothing, if it is invalid.
    pub invalid: Option<String>,
}

/// Where a workload's pods can run among some nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// How many nodes were considered.
    pub nodes: usize,
    /// The nodes the node-selection rules accept.
    pub selected: Vec<String>,
    /// The nodes both the node-selection rules and the taints accept.
    pub fitting: Vec<String>,
    /// Each `nodeSelector` entry and required node-affinity term, with the nodes it rules out.
    pub rules: Vec<RuleOutcome>,
    /// For the selected nodes that taints keep the pods off: each blocking taint key and on how many of them.
    pub blocking_taints: BTreeMap<String, usize>,
}

/// A requirement as written in a finding: `key In (a,b)`, `key Exists`, `key Gt 3`.
pub fn describe_requirement(requirement: &NodeSelectorRequirement) -> String {
    let vals = values(requirement);
    match requirement.operator.as_str() {
        "In" | "NotIn" => format!(
            "{} {} ({})",
            requirement.key,
            requirement.operator,
            vals.join(",")
        ),
        _ if vals.is_empty() => format!("{} {}", requirement.key, requirement.operator),
        _ => format!(
            "{} {} {}",
            requirement.key,
            requirement.operator,
            vals.join(",")
        ),
    }
}

/// A term as written in a finding: its requirements, `field ` before `matchFields` ones.
pub fn describe_term(term: &NodeSelectorTerm) -> String {
    let expressions = term
        .match_expressions
        .iter()
        .flatten()
        .map(describe_requirement);
    let fields = term
        .match_fields
        .iter()
        .flatten()
        .map(|r| format!("field {}", describe_requirement(r)));
    let parts: Vec<String> = expressions.chain(fields).collect();
    if parts.is_empty() {
        "empty".to_owned()
    } else {
        parts.join(", ")
    }
}

fn term_validity(term: &NodeSelectorTerm) -> Option<String> {
    let expressions = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if expressions.is_empty() && fields.is_empty() {
        return Some("an empty term matches no node".to_owned());
    }
    expressions
        .iter()
        .find_map(|r| requirement_matches(r, EMPTY).err())
        .or_else(|| {
            fields
                .iter()
                .find_map(|r| field_requirement_matches(r, "").err())
        })
}

/// Evaluate where pods of a `kind` workload with `spec` can run among `nodes`.
pub fn evaluate(spec: &PodSpec, kind: WorkloadKind, nodes: &[Node]) -> Placement {
    let mut rules = Vec::new();
    for (key, value) in spec.node_selector.iter().flatten() {
        let ruled_out = nodes
            .iter()
            .filter(|n| node_labels(n).get(key) != Some(value))
            .count();
        rules.push(RuleOutcome {
            rule: format!("nodeSelector {key}={value:?}"),
            keys: vec![key.clone()],
            ruled_out,
            invalid: None,
        });
    }
    if let Some(terms) = required_terms(spec) {
        if terms.is_empty() {
            rules.push(RuleOutcome {
                rule: "required node affinity without terms".to_owned(),
                keys: Vec::new(),
                ruled_out: nodes.len(),
                invalid: Some("a required node affinity needs at least one term".to_owned()),
            });
        }
        for (i, term) in terms.iter().enumerate() {
            let ruled_out = nodes
                .iter()
                .filter(|n| !term_matches(term, n).unwrap_or(false))
                .count();
            rules.push(RuleOutcome {
                rule: format!(
                    "required node affinity term {} ({})",
                    i + 1,
                    describe_term(term)
                ),
                keys: term
                    .match_expressions
                    .iter()
                    .flatten()
                    .map(|r| r.key.clone())
                    .collect(),
                ruled_out,
                invalid: term_validity(term),
            });
        }
    }
    let tolerations = effective_tolerations(spec, kind);
    let mut placement = Placement {
        nodes: nodes.len(),
        rules,
        ..Placement::default()
    };
    for node in nodes.iter().filter(|n| selects_node(spec, n)) {
        let name = node_name(node).to_owned();
        placement.selected.push(name.clone());
        let blocking = blocking_taints(node, &tolerations);
        if blocking.is_empty() {
            placement.fitting.push(name);
        }
        for key in blocking {
            *placement.blocking_taints.entry(key).or_default() += 1;
        }
    }
    placement
}

/// What a placement no node satisfies means. Pods already running keep running (the rules are
/// `IgnoredDuringExecution`), but none can be placed.
const CONSEQUENCE: &str = "so the scheduler can place none of its pods: a CCM pod that is not running stays Pending, and the nodes it \
     should initialize wait for it";

fn nodes_text(n: usize) -> String {
    if n == 1 {
        "1 node".to_owned()
    } else {
        format!("{n} nodes")
    }
}

/// The live placement check: an error when `nodes` is not empty and none of them can run `workload`'s pods,
/// naming each rule that rules nodes out (and how many) and the taints that keep its pods off the nodes it
/// selects. No nodes, no verdict.
pub fn check_placement(workload: &Workload, nodes: &[Node]) -> Vec<Finding> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let placement = evaluate(&workload.pod_spec, workload.kind, nodes);
    if !placement.fitting.is_empty() {
        return Vec::new();
    }
    let what = format!("{} {}", workload.kind.as_str(), workload.name);
    let total = placement.nodes;
    let restrictive: Vec<&RuleOutcome> =
        placement.rules.iter().filter(|r| r.ruled_out > 0).collect();
    let rules_text = restrictive
        .iter()
        .map(|r| match &r.invalid {
            Some(why) => format!("{} matches no node: {why}", r.rule),
            None => format!("{} rules out {} of {total}", r.rule, r.ruled_out),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let several_terms = required_terms(&workload.pod_spec).is_some_and(|t| t.len() > 1);
    let alternatives = if several_terms {
        " (the required node affinity terms are alternatives: a node must match one)"
    } else {
        ""
    };
    let taints_text = placement
        .blocking_taints
        .iter()
        .map(|(k, n)| format!("{k} on {}", nodes_text(*n)))
        .collect::<Vec<_>>()
        .join(", ");
    let message = if placement.selected.is_empty() {
        format!(
            "{what} can run on none of the {}: no node satisfies its node selection ({rules_text}){alternatives}, \
             {CONSEQUENCE}",
            nodes_text(total)
        )
    } else {
        let also = if rules_text.is_empty() {
            String::new()
        } else {
            format!(
                "; the node selection leaves {} of {total}: {rules_text}",
                placement.selected.len()
            )
        };
        format!(
            "{what} can run on none of the {}: the nodes its node selection accepts carry taints it does not \
             tolerate ({taints_text}){also}, {CONSEQUENCE}",
            nodes_text(total)
        )
    };
    let mut fixes = Vec::new();
    let mut replaced: Vec<String> = Vec::new();
    for rule in &restrictive {
        for key in &rule.keys {
            if let Some(legacy) = legacy_label(key)
                && !replaced.contains(key)
            {
                replaced.push(key.clone());
                fixes.push(format!(
                    "select {} instead of {key} ({})",
                    legacy.replacement, legacy.history
                ));
            }
        }
    }
    if !restrictive.is_empty() {
        fixes.push(
            "compare the nodeSelector and required node affinity with the nodes' labels and correct them, or \
             label the nodes that should run the CCM"
                .to_owned(),
        );
    }
    if !placement.blocking_taints.is_empty() {
        fixes.push(format!(
            "tolerate the taints of the nodes it should run on ({})",
            placement
                .blocking_taints
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let detail = format!(
        "0 of {total} fit; {} selected by its rules",
        placement.selected.len()
    );
    vec![
        Finding::new(
            CheckId::NoNodeFitsPlacement,
            Severity::Error,
            message,
            fixes.join("; "),
        )
        .with_objects([workload.object_ref().with_detail(detail)]),
    ]
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
