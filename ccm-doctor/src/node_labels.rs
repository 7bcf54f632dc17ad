//! Node labels a placement should not rely on: one that Kubernetes no longer sets on nodes by default, and
//! deprecated beta labels that are still set but have a GA replacement. Checked in lint mode (no nodes to look
//! at) and in live mode (where the nodes tell whether the label is still there).
//!
//! Each entry was checked against the Kubernetes sources and changelogs (see docs/doctor.md, "Node labels"):
//!
//! - `node-role.kubernetes.io/master`: kubeadm added `node-role.kubernetes.io/control-plane` next to it in 1.20
//!   (KEP-2067, "Rename the kubeadm master label and taint"), stopped adding it to new control-plane nodes in
//!   1.24 and removes it from existing ones on `kubeadm upgrade apply` (kubernetes/kubernetes#107533,
//!   CHANGELOG-1.24); kubeadm v1.36 labels control-plane nodes `node-role.kubernetes.io/control-plane` and
//!   `node.kubernetes.io/exclude-from-external-load-balancers` only (cmd/kubeadm/app/phases/markcontrolplane).
//!   Its taint followed in 1.25 (kubernetes/kubernetes#110095).
//! - `beta.kubernetes.io/os` and `beta.kubernetes.io/arch`: GA as `kubernetes.io/os` and `kubernetes.io/arch` in
//!   1.14; k8s.io/kubelet/pkg/apis/well_known_labels.go announces that the kubelet stops applying the beta
//!   labels in 1.19, but the v1.36 kubelet still sets both (pkg/kubelet/kubelet_node_status.go, `initialNode`).
//! - `failure-domain.beta.kubernetes.io/zone` and `/region`, `beta.kubernetes.io/instance-type`: GA as
//!   `topology.kubernetes.io/zone`, `/region` and `node.kubernetes.io/instance-type` in 1.17 (k8s.io/api
//!   core/v1/well_known_labels.go marks the beta keys deprecated); with the in-tree cloud providers gone from
//!   the kubelet, only the cloud node controller writes them: k8s.io/cloud-provider v0.36
//!   (controllers/node/node_controller.go) and this SDK still write both keys, a CCM not built on either may not.
//!
//! ```
//! use ccm_doctor::node_labels::{LabelStatus, legacy_label};
//!
//! let master = legacy_label("node-role.kubernetes.io/master").unwrap();
//! assert_eq!(master.status, LabelStatus::NoLongerSet);
//! assert_eq!(master.replacement, "node-role.kubernetes.io/control-plane");
//! assert!(legacy_label("kubernetes.io/os").is_none());
//! ```

use ccm_core::names::{labels, taints};
use k8s_openapi::api::core::v1::{Node, NodeSelectorTerm, PodSpec};

use crate::finding::{CheckId, Finding, Severity};
use crate::workload::Workload;

/// Whether Kubernetes still sets a legacy label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelStatus {
    /// No longer set on the nodes of a cluster set up with current tools: rules that need it match nothing.
    NoLongerSet,
    /// Deprecated, still set today, with a GA replacement set on the same nodes.
    Deprecated,
}

/// A node label a placement should not rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyLabel {
    /// The label key.
    pub key: &'static str,
    /// What to select instead.
    pub replacement: &'static str,
    /// Whether it is still set.
    pub status: LabelStatus,
    /// Since when and by whom, with the source.
    pub history: &'static str,
}

/// Every legacy node label the doctor knows, with its replacement and its history.
pub const LEGACY_NODE_LABELS: &[LegacyLabel] = &[
    LegacyLabel {
        key: taints::MASTER,
        replacement: taints::CONTROL_PLANE,
        status: LabelStatus::NoLongerSet,
        history: "kubeadm stopped adding it to new control-plane nodes in Kubernetes 1.24 and removes it on \
                  upgrade, kubernetes/kubernetes#107533",
    },
    LegacyLabel {
        key: labels::OS_BETA,
        replacement: labels::OS,
        status: LabelStatus::Deprecated,
        history: "deprecated since Kubernetes 1.14, when kubernetes.io/os became GA; the kubelet still sets it in \
                  1.36 although its removal was announced for 1.19",
    },
    LegacyLabel {
        key: labels::ARCH_BETA,
        replacement: labels::ARCH,
        status: LabelStatus::Deprecated,
        history: "deprecated since Kubernetes 1.14, when kubernetes.io/arch became GA; the kubelet still sets it \
                  in 1.36 although its removal was announced for 1.19",
    },
    LegacyLabel {
        key: labels::FAILURE_DOMAIN_BETA_ZONE,
        replacement: labels::TOPOLOGY_ZONE,
        status: LabelStatus::Deprecated,
        history: "deprecated since Kubernetes 1.17; only the cloud node controller of a CCM built on \
                  k8s.io/cloud-provider (or this SDK) still writes it",
    },
    LegacyLabel {
        key: labels::FAILURE_DOMAIN_BETA_REGION,
        replacement: labels::TOPOLOGY_REGION,
        status: LabelStatus::Deprecated,
        history: "deprecated since Kubernetes 1.17; only the cloud node controller of a CCM built on \
                  k8s.io/cloud-provider (or this SDK) still writes it",
    },
    LegacyLabel {
        key: labels::INSTANCE_TYPE_BETA,
        replacement: labels::INSTANCE_TYPE,
        status: LabelStatus::Deprecated,
        history: "deprecated since Kubernetes 1.17; only the cloud node controller of a CCM built on \
                  k8s.io/cloud-provider (or this SDK) still writes it",
    },
];

/// The legacy label `key`, if it is one.
pub fn legacy_label(key: &str) -> Option<&'static LegacyLabel> {
    LEGACY_NODE_LABELS.iter().find(|l| l.key == key)
}

/// How a placement rule uses a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// Holds only on nodes that carry the label (`nodeSelector`, `In`, `Exists`, `Gt`, `Lt`).
    Needs,
    /// Holds on nodes without the label (`NotIn`, `DoesNotExist`): it keeps pods off labelled nodes.
    Avoids,
}

/// Where a placement rule sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `spec.nodeSelector`.
    NodeSelector,
    /// A required node-affinity term (index from 0).
    Required(usize),
    /// A preferred node-affinity term (index from 0).
    Preferred(usize),
}

impl Place {
    fn describe(self) -> String {
        match self {
            Place::NodeSelector => "nodeSelector".to_owned(),
            Place::Required(i) => format!("required node affinity term {}", i + 1),
            Place::Preferred(i) => format!("preferred node affinity term {}", i + 1),
        }
    }
}

/// One use of a label by a placement rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelUse {
    /// The label key.
    pub key: String,
    /// How it is used.
    pub usage: Usage,
    /// Where.
    pub place: Place,
}

fn term_uses(term: &NodeSelectorTerm, place: Place, out: &mut Vec<LabelUse>) {
    for requirement in term.match_expressions.iter().flatten() {
        let usage = match requirement.operator.as_str() {
            "NotIn" | "DoesNotExist" => Usage::Avoids,
            _ => Usage::Needs,
        };
        out.push(LabelUse {
            key: requirement.key.clone(),
            usage,
            place,
        });
    }
}

/// Every label the node-selection rules of `spec` read, in order: `nodeSelector`, required terms, preferred
/// terms.
pub fn label_uses(spec: &PodSpec) -> Vec<LabelUse> {
    let mut uses: Vec<LabelUse> = spec
        .node_selector
        .iter()
        .flatten()
        .map(|(key, _)| LabelUse {
            key: key.clone(),
            usage: Usage::Needs,
            place: Place::NodeSelector,
        })
        .collect();
    let affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    if let Some(affinity) = affinity {
        let required = affinity
            .required_during_scheduling_ignored_during_execution
            .iter()
            .flat_map(|r| r.node_selector_terms.iter());
        for (i, term) in required.enumerate() {
            term_uses(term, Place::Required(i), &mut uses);
        }
        let preferred = affinity
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten();
        for (i, term) in preferred.enumerate() {
            term_uses(&term.preference, Place::Preferred(i), &mut uses);
        }
    }
    uses
}

/// True if every pod of `spec` needs the label `key`: the `nodeSelector` has it, or every required term needs
/// it (no alternative term does without).
pub fn placement_requires(spec: &PodSpec, key: &str) -> bool {
    let uses = label_uses(spec);
    if uses
        .iter()
        .any(|u| u.key == key && u.place == Place::NodeSelector)
    {
        return true;
    }
    let terms = crate::placement::required_terms(spec).unwrap_or(&[]);
    !terms.is_empty()
        && (0..terms.len()).all(|i| {
            uses.iter()
                .any(|u| u.key == key && u.usage == Usage::Needs && u.place == Place::Required(i))
        })
}

fn places(uses: &[&LabelUse]) -> String {
    let mut out: Vec<String> = Vec::new();
    for u in uses {
        let place = u.place.describe();
        if !out.contains(&place) {
            out.push(place);
        }
    }
    out.join(", ")
}

/// The legacy-label check of one workload. `nodes` is `None` in lint mode; in live mode a label no longer set
/// by Kubernetes that some node still carries is a warning instead of an error (the workload runs here, but not
/// on a cluster set up today).
pub fn check_node_labels(workload: &Workload, nodes: Option<&[Node]>) -> Vec<Finding> {
    let spec = &workload.pod_spec;
    let uses = label_uses(spec);
    let what = format!("{} {}", workload.kind.as_str(), workload.name);
    let mut findings = Vec::new();
    for legacy in LEGACY_NODE_LABELS {
        let mine: Vec<&LabelUse> = uses.iter().filter(|u| u.key == legacy.key).collect();
        if mine.is_empty() {
            continue;
        }
        let key = legacy.key;
        let instead = legacy.replacement;
        let object = || [workload.object_ref()];
        if legacy.status == LabelStatus::Deprecated {
            findings.push(
                Finding::new(
                    CheckId::DeprecatedNodeLabel,
                    Severity::Warning,
                    format!(
                        "{what} selects nodes by the deprecated label {key} ({}): {}",
                        places(&mine),
                        legacy.history
                    ),
                    format!(
                        "select {instead} instead, which the same components set on every node"
                    ),
                )
                .with_objects(object()),
            );
            continue;
        }
        let carried = nodes.map(|ns| {
            ns.iter()
                .filter(|n| {
                    n.metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(key))
                })
                .count()
        });
        let needs: Vec<&LabelUse> = mine
            .iter()
            .copied()
            .filter(|u| u.usage == Usage::Needs)
            .collect();
        let avoids: Vec<&LabelUse> = mine
            .iter()
            .copied()
            .filter(|u| u.usage == Usage::Avoids && !matches!(u.place, Place::Preferred(_)))
            .collect();
        let preferred_needs: Vec<&LabelUse> = needs
            .iter()
            .copied()
            .filter(|u| matches!(u.place, Place::Preferred(_)))
            .collect();
        if placement_requires(spec, key) {
            let (severity, consequence) = match carried {
                Some(n) if n > 0 => (
                    Severity::Warning,
                    if n == 1 {
                        "1 node of this cluster still carries it, but on a cluster set up today no node matches"
                            .to_owned()
                    } else {
                        format!(
                            "{n} nodes of this cluster still carry it, but on a cluster set up today no node \
                             matches"
                        )
                    },
                ),
                _ => (
                    Severity::Error,
                    "no node of a cluster set up today matches, so the CCM stays Pending forever"
                        .to_owned(),
                ),
            };
            findings.push(
                Finding::new(
                    CheckId::RemovedNodeLabel,
                    severity,
                    format!(
                        "{what} can only run on nodes labelled {key} ({}), a label Kubernetes no longer sets ({}): \
                         {consequence}",
                        places(&needs),
                        legacy.history
                    ),
                    format!(
                        "select {instead} instead (nodeSelector {{{instead}: \"\"}}), or add a required node \
                         affinity term on {instead} as an alternative so that old and new clusters both match"
                    ),
                )
                .with_objects(object()),
            );
        } else if !preferred_needs.is_empty() {
            findings.push(
                Finding::new(
                    CheckId::RemovedNodeLabel,
                    Severity::Warning,
                    format!(
                        "{what} prefers nodes labelled {key} ({}), a label Kubernetes no longer sets ({}): the \
                         preference never applies on a cluster set up today",
                        places(&preferred_needs),
                        legacy.history
                    ),
                    format!("prefer {instead} instead, or as well"),
                )
                .with_objects(object()),
            );
        }
        if !avoids.is_empty() {
            findings.push(
                Finding::new(
                    CheckId::RemovedNodeLabel,
                    Severity::Warning,
                    format!(
                        "{what} keeps off nodes labelled {key} ({}), a label Kubernetes no longer sets ({}): on a \
                         cluster set up today the rule keeps it off no node",
                        places(&avoids),
                        legacy.history
                    ),
                    format!("avoid {instead} instead (operator DoesNotExist), or as well"),
                )
                .with_objects(object()),
            );
        }
    }
    findings
}

#[cfg(test)]
#[path = "node_labels_tests.rs"]
mod tests;
