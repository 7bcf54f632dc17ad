use std::collections::BTreeMap;

use super::*;
use crate::workload::{Replicas, WorkloadKind};
use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    PreferredSchedulingTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn req(key: &str, op: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: matches!(op, "In" | "NotIn").then(|| vec![String::new()]),
    }
}

fn term(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(reqs),
        match_fields: None,
    }
}

fn spec(
    selector: &[&str],
    required: Option<Vec<NodeSelectorTerm>>,
    preferred: Vec<NodeSelectorTerm>,
) -> PodSpec {
    PodSpec {
        node_selector: (!selector.is_empty()).then(|| {
            selector
                .iter()
                .map(|k| ((*k).to_owned(), String::new()))
                .collect()
        }),
        affinity: Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: required.map(
                    |node_selector_terms| NodeSelector {
                        node_selector_terms,
                    },
                ),
                preferred_during_scheduling_ignored_during_execution: Some(
                    preferred
                        .into_iter()
                        .map(|preference| PreferredSchedulingTerm {
                            weight: 1,
                            preference,
                        })
                        .collect(),
                ),
            }),
            ..Default::default()
        }),
        containers: vec![Container {
            name: "ccm".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn workload(spec: PodSpec) -> Workload {
    Workload {
        kind: WorkloadKind::DaemonSet,
        namespace: Some("kube-system".into()),
        name: "ccm".into(),
        labels: BTreeMap::new(),
        selector: None,
        replicas: Replicas::PerNode { desired: None },
        pod_spec: spec,
    }
}

fn ids(findings: &[Finding]) -> Vec<(CheckId, Severity)> {
    findings.iter().map(|f| (f.check, f.severity)).collect()
}

fn node_with(label: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("n".into()),
            labels: Some([(label.to_owned(), String::new())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn the_table() {
    let keys: Vec<&str> = LEGACY_NODE_LABELS.iter().map(|l| l.key).collect();
    assert_eq!(
        keys,
        vec![
            "node-role.kubernetes.io/master",
            "beta.kubernetes.io/os",
            "beta.kubernetes.io/arch",
            "failure-domain.beta.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/region",
            "beta.kubernetes.io/instance-type",
        ]
    );
    let replacements: Vec<&str> = LEGACY_NODE_LABELS.iter().map(|l| l.replacement).collect();
    assert_eq!(
        replacements,
        vec![
            "node-role.kubernetes.io/control-plane",
            "kubernetes.io/os",
            "kubernetes.io/arch",
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/region",
            "node.kubernetes.io/instance-type",
        ]
    );
    // Only the master label is gone; every entry names a Kubernetes version.
    for l in LEGACY_NODE_LABELS {
        assert_eq!(
            l.status == LabelStatus::NoLongerSet,
            l.key == taints::MASTER
        );
        assert!(l.history.contains("Kubernetes 1."), "{}", l.history);
        assert!(legacy_label(l.replacement).is_none());
    }
}

#[test]
fn label_uses_in_order() {
    let s = spec(
        &[taints::MASTER],
        Some(vec![term(vec![
            req("a", "In"),
            req("b", "NotIn"),
            req("c", "DoesNotExist"),
        ])]),
        vec![term(vec![req("d", "Gt"), req("e", "Exists")])],
    );
    let uses: Vec<(String, Usage, Place)> = label_uses(&s)
        .into_iter()
        .map(|u| (u.key, u.usage, u.place))
        .collect();
    assert_eq!(
        uses,
        vec![
            (taints::MASTER.to_owned(), Usage::Needs, Place::NodeSelector),
            ("a".to_owned(), Usage::Needs, Place::Required(0)),
            ("b".to_owned(), Usage::Avoids, Place::Required(0)),
            ("c".to_owned(), Usage::Avoids, Place::Required(0)),
            ("d".to_owned(), Usage::Needs, Place::Preferred(0)),
            ("e".to_owned(), Usage::Needs, Place::Preferred(0)),
        ]
    );
    assert!(label_uses(&PodSpec::default()).is_empty());
}

#[test]
fn when_the_master_label_is_required() {
    let m = taints::MASTER;
    let cp = taints::CONTROL_PLANE;
    assert!(placement_requires(&spec(&[m], None, vec![]), m));
    assert!(placement_requires(
        &spec(&[], Some(vec![term(vec![req(m, "Exists")])]), vec![]),
        m
    ));
    assert!(placement_requires(
        &spec(
            &[],
            Some(vec![
                term(vec![req(m, "In")]),
                term(vec![req(m, "Exists"), req(cp, "Exists")])
            ]),
            vec![]
        ),
        m
    ));
    // An alternative term without it.
    assert!(!placement_requires(
        &spec(
            &[],
            Some(vec![
                term(vec![req(m, "Exists")]),
                term(vec![req(cp, "Exists")])
            ]),
            vec![]
        ),
        m
    ));
    // Avoiding is not requiring; nor is preferring; nor an empty list of terms.
    assert!(!placement_requires(
        &spec(&[], Some(vec![term(vec![req(m, "DoesNotExist")])]), vec![]),
        m
    ));
    assert!(!placement_requires(
        &spec(&[], None, vec![term(vec![req(m, "Exists")])]),
        m
    ));
    assert!(!placement_requires(&spec(&[], Some(vec![]), vec![]), m));
}

#[test]
fn the_master_label_in_lint_mode() {
    let m = taints::MASTER;
    let findings = check_node_labels(&workload(spec(&[m], None, vec![])), None);
    assert_eq!(
        ids(&findings),
        vec![(CheckId::RemovedNodeLabel, Severity::Error)]
    );
    let f = &findings[0];
    assert_eq!(
        f.message,
        "DaemonSet ccm can only run on nodes labelled node-role.kubernetes.io/master (nodeSelector), a label \
         Kubernetes no longer sets (kubeadm stopped adding it to new control-plane nodes in Kubernetes 1.24 and \
         removes it on upgrade, kubernetes/kubernetes#107533): no node of a cluster set up today matches, so the \
         CCM stays Pending forever"
    );
    assert!(
        f.fix
            .starts_with("select node-role.kubernetes.io/control-plane instead"),
        "{}",
        f.fix
    );

    // The transitional pattern (either label) is fine.
    let both = spec(
        &[],
        Some(vec![
            term(vec![req(m, "Exists")]),
            term(vec![req(taints::CONTROL_PLANE, "Exists")]),
        ]),
        vec![],
    );
    assert!(check_node_labels(&workload(both), None).is_empty());

    // Preferring it and avoiding it are harmless but ineffective.
    let prefer = spec(&[], None, vec![term(vec![req(m, "Exists")])]);
    let findings = check_node_labels(&workload(prefer), None);
    assert_eq!(
        ids(&findings),
        vec![(CheckId::RemovedNodeLabel, Severity::Warning)]
    );
    assert!(
        findings[0].message.contains("the preference never applies"),
        "{}",
        findings[0].message
    );
    let avoid = spec(&[], Some(vec![term(vec![req(m, "DoesNotExist")])]), vec![]);
    let findings = check_node_labels(&workload(avoid), None);
    assert_eq!(
        ids(&findings),
        vec![(CheckId::RemovedNodeLabel, Severity::Warning)]
    );
    assert!(
        findings[0].message.contains("keeps it off no node"),
        "{}",
        findings[0].message
    );
    assert!(findings[0].fix.contains("DoesNotExist"));
    // A preferred avoidance says nothing.
    let prefer_avoid = spec(&[], None, vec![term(vec![req(m, "DoesNotExist")])]);
    assert!(check_node_labels(&workload(prefer_avoid), None).is_empty());
}

#[test]
fn the_master_label_in_live_mode() {
    let m = taints::MASTER;
    let w = workload(spec(&[m], None, vec![]));
    // No node carries it: an error, as in lint mode.
    let nodes = [node_with(taints::CONTROL_PLANE)];
    assert_eq!(
        ids(&check_node_labels(&w, Some(&nodes))),
        vec![(CheckId::RemovedNodeLabel, Severity::Error)]
    );
    assert_eq!(
        ids(&check_node_labels(&w, Some(&[]))),
        vec![(CheckId::RemovedNodeLabel, Severity::Error)]
    );
    // An old cluster whose nodes still carry it: a warning.
    let nodes = [node_with(m), node_with(taints::CONTROL_PLANE)];
    let findings = check_node_labels(&w, Some(&nodes));
    let two = [node_with(m), node_with(m)];
    assert!(
        check_node_labels(&w, Some(&two))[0]
            .message
            .contains("2 nodes of this cluster still carry it")
    );
    assert_eq!(
        ids(&findings),
        vec![(CheckId::RemovedNodeLabel, Severity::Warning)]
    );
    assert!(
        findings[0]
            .message
            .contains("1 node of this cluster still carries it"),
        "{}",
        findings[0].message
    );
}

#[test]
fn deprecated_beta_labels() {
    for legacy in LEGACY_NODE_LABELS
        .iter()
        .filter(|l| l.status == LabelStatus::Deprecated)
    {
        for s in [
            spec(&[legacy.key], None, vec![]),
            spec(&[], Some(vec![term(vec![req(legacy.key, "In")])]), vec![]),
            spec(&[], None, vec![term(vec![req(legacy.key, "NotIn")])]),
        ] {
            let findings = check_node_labels(&workload(s), None);
            assert_eq!(
                ids(&findings),
                vec![(CheckId::DeprecatedNodeLabel, Severity::Warning)]
            );
            assert!(findings[0].message.contains(legacy.key));
            assert!(findings[0].fix.contains(legacy.replacement));
        }
    }
    // Several uses of one label: one finding naming each place once.
    let s = spec(
        &[labels::OS_BETA],
        Some(vec![
            term(vec![req(labels::OS_BETA, "In")]),
            term(vec![req(labels::OS_BETA, "Exists")]),
        ]),
        vec![],
    );
    let findings = check_node_labels(&workload(s), None);
    assert_eq!(findings.len(), 1);
    assert!(
        findings[0].message.contains(
            "(nodeSelector, required node affinity term 1, required node affinity term 2)"
        ),
        "{}",
        findings[0].message
    );
    // GA labels are fine.
    let s = spec(&[labels::OS, taints::CONTROL_PLANE], None, vec![]);
    assert!(check_node_labels(&workload(s), None).is_empty());
}
