//! Property tests of the doctor's parsers: manifests (`manifest::lint_manifest`) and label selectors
//! (`selector::LabelSelector`); and of its node placement (`placement`, `node_labels`): node affinity against
//! the label selector semantics, terms as conjunctions and alternatives, and the verdicts' invariants. Each property runs `ccm_testenv::properties::DEFAULT_CASES` generated cases (or
//! `PROPTEST_CASES`); see docs/architecture.md, "Property tests".

use std::collections::BTreeMap;

use ccm_core::names::taints;
use ccm_doctor::manifest::{WorkloadFilter, lint_manifest, parse_workloads};
use ccm_doctor::node_labels::{check_node_labels, placement_requires};
use ccm_doctor::placement::{
    check_placement, evaluate, requirement_matches, selects_node, term_matches,
};
use ccm_doctor::selector::{LabelSelector, Requirement};
use ccm_doctor::workload::{Replicas, Workload, WorkloadKind};
use ccm_doctor::{CheckId, Severity};
use ccm_testenv::properties::config;
use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, NodeSpec, PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------------------
// Manifests
// ---------------------------------------------------------------------------------------------------------

/// YAML-looking text with a workload's keys, several documents and values of every type.
fn manifest_like() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("apiVersion: apps/v1"),
        Just("apiVersion: v1"),
        Just("kind: Deployment"),
        Just("kind: DaemonSet"),
        Just("kind: List"),
        Just("items:"),
        Just("- kind: Deployment"),
        Just("metadata: {name: ccm}"),
        Just("spec:"),
        Just("template:"),
        Just("containers: [{name: c, image: i}]"),
        Just("tolerations: [{operator: Exists}]"),
        Just("replicas: two"),
        Just("---"),
        Just("- x"),
        Just("{"),
        Just(""),
    ];
    let line = (0usize..4, key).prop_map(|(indent, k)| format!("{}{k}", "  ".repeat(indent)));
    prop::collection::vec(line, 0..10).prop_map(|lines| lines.join("\n"))
}

/// A CCM workload as a manifest document, with the settings the checks look at drawn from small pools.
fn workload() -> impl Strategy<Value = Value> {
    (
        any::<bool>(),
        "[a-z][a-z0-9-]{0,10}",
        prop::option::of(0i32..4),
        prop::collection::vec(
            prop_oneof![
                Just(json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"})),
                Just(json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"})),
                Just(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})),
                Just(json!({"operator": "Exists"})),
            ],
            0..4,
        ),
        prop::option::of(prop_oneof![
            Just(json!({"node-role.kubernetes.io/control-plane": ""})),
            Just(json!({"kubernetes.io/os": "linux"})),
        ]),
        prop::collection::vec(
            prop_oneof![
                Just("--leader-elect=true"),
                Just("--leader-elect=false"),
                Just("--cloud-provider=fake"),
                Just("--v=2"),
            ],
            0..3,
        ),
        any::<bool>(),
        prop::option::of(prop_oneof![Just("system-cluster-critical"), Just("low")]),
    )
        .prop_map(|(deployment, name, replicas, tolerations, node_selector, args, host_network, priority)| {
            let mut pod = json!({
                "containers": [{"name": "ccm", "image": "example/ccm:v1", "args": args}],
                "tolerations": tolerations,
                "hostNetwork": host_network,
            });
            if let Some(selector) = node_selector {
                pod["nodeSelector"] = selector;
            }
            if let Some(priority) = priority {
                pod["priorityClassName"] = json!(priority);
            }
            let mut spec = json!({
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
            });
            if deployment && let Some(replicas) = replicas {
                spec["replicas"] = json!(replicas);
            }
            json!({
                "apiVersion": "apps/v1",
                "kind": if deployment { "Deployment" } else { "DaemonSet" },
                "metadata": {"name": name, "namespace": "kube-system", "labels": {"app": name}},
                "spec": spec,
            })
        })
}

/// Documents as a multi-document YAML stream (JSON documents are YAML).
fn stream(docs: &[Value]) -> String {
    docs.iter().map(|d| format!("---\n{d}\n")).collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_manifest_text_lints_or_fails_with_its_origin(text in prop_oneof![any::<String>(), manifest_like()]) {
        match lint_manifest(&text, "ccm.yaml", &WorkloadFilter::default()) {
            Ok(report) => prop_assert!(report.exit_code() <= 2),
            Err(err) => {
                let message = err.to_string();
                prop_assert!(message.contains("ccm.yaml"), "{}", message);
            }
        }
    }

    #[test]
    fn any_bytes_as_manifest_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = lint_manifest(&String::from_utf8_lossy(&bytes), "ccm.yaml", &WorkloadFilter::default());
    }

    #[test]
    fn findings_are_deterministic_and_independent_of_packaging(docs in prop::collection::vec(workload(), 1..3)) {
        let text = stream(&docs);
        let report = lint_manifest(&text, "ccm.yaml", &WorkloadFilter::default()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // The same workloads in a `kind: List` give the same report, byte for byte.
        let list = json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string();
        let listed = lint_manifest(&list, "ccm.yaml", &WorkloadFilter::default()).unwrap();
        prop_assert_eq!(listed.render_json(), report.render_json());
        prop_assert_eq!(listed.render_text(), report.render_text());
    }

    #[test]
    fn filters_select_exactly_the_named_workload(docs in prop::collection::vec(workload(), 1..3), pick in any::<prop::sample::Index>()) {
        let workloads = parse_workloads(&stream(&docs), "ccm.yaml").map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(workloads.len(), docs.len());
        let chosen = &workloads[pick.index(workloads.len())];
        let by_name = WorkloadFilter { name: Some(chosen.name.clone()), selector: None };
        let selector: LabelSelector = format!("app={}", chosen.name).parse().unwrap();
        let by_label = WorkloadFilter { name: None, selector: Some(selector) };
        let missing = WorkloadFilter { name: Some("no-such-workload-name-here".into()), selector: None };
        for workload in &workloads {
            // Each workload is labelled app=<its name>: both filters pick the same ones.
            prop_assert_eq!(by_name.matches(workload), workload.name == chosen.name);
            prop_assert_eq!(by_label.matches(workload), by_name.matches(workload));
            prop_assert!(!missing.matches(workload));
            prop_assert!(WorkloadFilter::default().matches(workload));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------------------------------------

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("app".to_owned()),
        Just("tier".to_owned()),
        "[a-z0-9]([a-z0-9./_-]{0,10}[a-z0-9])?"
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        "[A-Za-z0-9._-]{0,8}"
    ]
}

fn requirement() -> impl Strategy<Value = Requirement> {
    prop_oneof![
        key().prop_map(Requirement::Exists),
        key().prop_map(Requirement::DoesNotExist),
        (key(), value()).prop_map(|(k, v)| Requirement::Equals(k, v)),
        (key(), value()).prop_map(|(k, v)| Requirement::NotEquals(k, v)),
        (key(), prop::collection::vec(value(), 1..4)).prop_map(|(k, vs)| Requirement::In(k, vs)),
        (key(), prop::collection::vec(value(), 1..4)).prop_map(|(k, vs)| Requirement::NotIn(k, vs)),
    ]
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop_oneof![Just("app".to_owned()), Just("tier".to_owned()), key()],
        value(),
        0..4,
    )
}

/// The opposite requirement.
fn negation(requirement: &Requirement) -> Requirement {
    match requirement.clone() {
        Requirement::Exists(k) => Requirement::DoesNotExist(k),
        Requirement::DoesNotExist(k) => Requirement::Exists(k),
        Requirement::Equals(k, v) => Requirement::NotEquals(k, v),
        Requirement::NotEquals(k, v) => Requirement::Equals(k, v),
        Requirement::In(k, vs) => Requirement::NotIn(k, vs),
        Requirement::NotIn(k, vs) => Requirement::In(k, vs),
    }
}

fn selector_of(requirements: Vec<Requirement>) -> LabelSelector {
    let text = requirements
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    text.parse().expect("written requirements parse")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn selector_parsing_never_panics(text in prop_oneof![any::<String>(), "[a-z!=(), ]{0,20}"]) {
        if let Ok(selector) = text.parse::<LabelSelector>() {
            // Whatever parsed is written back as a selector meaning the same.
            let again: LabelSelector = selector.to_string().parse().map_err(|e: ccm_doctor::selector::SelectorError| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(again, selector);
        }
    }

    #[test]
    fn written_selectors_parse_back(requirements in prop::collection::vec(requirement(), 0..4)) {
        let text = requirements.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        let selector: LabelSelector = text.parse().map_err(|e: ccm_doctor::selector::SelectorError| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(selector.requirements(), requirements.as_slice());
        prop_assert_eq!(selector.to_string(), text);
    }

    #[test]
    fn selector_matching_is_a_conjunction_of_kubernetes_requirements(requirements in prop::collection::vec(requirement(), 0..4), labels in labels()) {
        let selector = selector_of(requirements.clone());
        let each: Vec<bool> = requirements.iter().map(|r| selector_of(vec![r.clone()]).matches(&labels)).collect();
        prop_assert_eq!(selector.matches(&labels), each.iter().all(|b| *b));
        for (requirement, matched) in requirements.iter().zip(&each) {
            // Each requirement and its negation split every label set in two.
            prop_assert_ne!(selector_of(vec![negation(requirement)]).matches(&labels), *matched);
            // Kubernetes semantics of each operator.
            let expected = match requirement {
                Requirement::Exists(k) => labels.contains_key(k),
                Requirement::DoesNotExist(k) => !labels.contains_key(k),
                Requirement::Equals(k, v) => labels.get(k) == Some(v),
                Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
                Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
                Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|l| vs.contains(l)),
            };
            prop_assert_eq!(*matched, expected);
        }
        prop_assert_eq!(selector.matches_opt(None), selector.matches(&BTreeMap::new()));
    }
}

// ---------------------------------------------------------------------------------------------------------
// Node placement
// ---------------------------------------------------------------------------------------------------------

/// Label keys: the legacy and current role labels, and a few plain ones.
fn node_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(taints::MASTER.to_owned()),
        Just(taints::CONTROL_PLANE.to_owned()),
        Just("zone".to_owned()),
        Just("gen".to_owned()),
    ]
}

/// Label values, integers among them (for Gt and Lt).
fn node_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("a".to_owned()),
        (-3i64..4).prop_map(|i| i.to_string()),
    ]
}

fn node_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(node_key(), node_value(), 0..4)
}

fn node_req(op: &str, values: Vec<String>, key: String) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key,
        operator: op.to_owned(),
        values: (!values.is_empty()).then_some(values),
    }
}

/// A valid node-affinity requirement with every operator.
fn node_requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    let values = || prop::collection::vec(node_value(), 1..3);
    prop_oneof![
        (node_key(), values()).prop_map(|(k, vs)| node_req("In", vs, k)),
        (node_key(), values()).prop_map(|(k, vs)| node_req("NotIn", vs, k)),
        node_key().prop_map(|k| node_req("Exists", vec![], k)),
        node_key().prop_map(|k| node_req("DoesNotExist", vec![], k)),
        (node_key(), -3i64..4).prop_map(|(k, v)| node_req("Gt", vec![v.to_string()], k)),
        (node_key(), -3i64..4).prop_map(|(k, v)| node_req("Lt", vec![v.to_string()], k)),
    ]
}

fn node_term() -> impl Strategy<Value = NodeSelectorTerm> {
    prop::collection::vec(node_requirement(), 0..3).prop_map(|reqs| NodeSelectorTerm {
        match_expressions: Some(reqs),
        match_fields: None,
    })
}

fn taint_keys() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            Just(taints::CONTROL_PLANE.to_owned()),
            Just(taints::UNINITIALIZED.to_owned()),
            Just("dedicated".to_owned()),
        ],
        0..3,
    )
}

fn a_node(index: usize, labels: BTreeMap<String, String>, taint_keys: Vec<String>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(format!("n{index}")),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(
                taint_keys
                    .into_iter()
                    .map(|key| Taint {
                        key,
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

fn nodes() -> impl Strategy<Value = Vec<Node>> {
    prop::collection::vec((node_labels(), taint_keys()), 0..5).prop_map(|ns| {
        ns.into_iter()
            .enumerate()
            .map(|(i, (labels, taints))| a_node(i, labels, taints))
            .collect()
    })
}

fn pod_spec(
    selector: BTreeMap<String, String>,
    terms: Option<Vec<NodeSelectorTerm>>,
    tolerated: Vec<String>,
) -> PodSpec {
    PodSpec {
        node_selector: (!selector.is_empty()).then_some(selector),
        affinity: terms.map(|node_selector_terms| Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        tolerations: Some(
            tolerated
                .into_iter()
                .map(|key| Toleration {
                    key: Some(key),
                    operator: Some("Exists".into()),
                    ..Default::default()
                })
                .collect(),
        ),
        containers: vec![Container {
            name: "ccm".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn a_workload(spec: PodSpec) -> Workload {
    Workload {
        kind: WorkloadKind::Deployment,
        namespace: Some("kube-system".into()),
        name: "ccm".into(),
        labels: BTreeMap::new(),
        selector: None,
        replicas: Replicas::Fixed(1),
        pod_spec: spec,
    }
}

fn placement_spec() -> impl Strategy<Value = PodSpec> {
    (
        prop::collection::btree_map(node_key(), node_value(), 0..2),
        prop::option::of(prop::collection::vec(node_term(), 0..3)),
        taint_keys(),
    )
        .prop_map(|(selector, terms, tolerated)| pod_spec(selector, terms, tolerated))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn node_affinity_agrees_with_label_selectors(requirement in node_requirement(), labels in node_labels()) {
        let matched = requirement_matches(&requirement, &labels).map_err(TestCaseError::fail)?;
        let key = requirement.key.clone();
        let values = requirement.values.clone().unwrap_or_default();
        // The operators label selectors share mean the same in both.
        let selector = match requirement.operator.as_str() {
            "In" => Some(Requirement::In(key.clone(), values.clone())),
            "NotIn" => Some(Requirement::NotIn(key.clone(), values.clone())),
            "Exists" => Some(Requirement::Exists(key.clone())),
            "DoesNotExist" => Some(Requirement::DoesNotExist(key.clone())),
            _ => None,
        };
        if let Some(selector) = selector {
            prop_assert_eq!(matched, selector_of(vec![selector]).matches(&labels));
        } else {
            // Gt and Lt: integer comparison; a missing or non-integer label never matches.
            let bound: i64 = values[0].parse().unwrap();
            let expected = labels.get(&key).and_then(|v| v.parse::<i64>().ok()).is_some_and(|have| {
                if requirement.operator == "Gt" { have > bound } else { have < bound }
            });
            prop_assert_eq!(matched, expected);
        }
    }

    #[test]
    fn a_term_is_the_conjunction_of_its_requirements(term in node_term(), labels in node_labels()) {
        let node = a_node(0, labels.clone(), vec![]);
        let requirements = term.match_expressions.clone().unwrap_or_default();
        let each: Vec<bool> = requirements.iter().map(|r| requirement_matches(r, &labels).unwrap()).collect();
        // An empty term matches nothing.
        let expected = !each.is_empty() && each.iter().all(|b| *b);
        prop_assert_eq!(term_matches(&term, &node), Ok(expected));
    }

    #[test]
    fn required_terms_are_alternatives_and_the_node_selector_a_conjunction(
        selector in prop::collection::btree_map(node_key(), node_value(), 0..3),
        terms in prop::option::of(prop::collection::vec(node_term(), 0..3)),
        labels in node_labels(),
    ) {
        let node = a_node(0, labels.clone(), vec![]);
        let spec = pod_spec(selector.clone(), terms.clone(), vec![]);
        let by_selector = selector.iter().all(|(k, v)| labels.get(k) == Some(v));
        let by_affinity = terms.as_ref().is_none_or(|ts| ts.iter().any(|t| term_matches(t, &node) == Ok(true)));
        prop_assert_eq!(selects_node(&spec, &node), by_selector && by_affinity);
        // Adding an alternative term never loses a node.
        if let Some(mut more) = terms {
            let before = selects_node(&spec, &node);
            more.push(NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "zone".into(), operator: "Exists".into(), values: None,
                }]),
                match_fields: None,
            });
            prop_assert!(!before || selects_node(&pod_spec(selector, Some(more), vec![]), &node));
        }
    }

    #[test]
    fn placement_verdicts_are_consistent(spec in placement_spec(), nodes in nodes()) {
        let placement = evaluate(&spec, WorkloadKind::Deployment, &nodes);
        prop_assert_eq!(placement.nodes, nodes.len());
        prop_assert!(placement.selected.len() <= nodes.len());
        prop_assert!(placement.fitting.iter().all(|n| placement.selected.contains(n)));
        for rule in &placement.rules {
            prop_assert!(rule.ruled_out <= nodes.len());
        }
        // A node that no rule rules out is selected.
        let selected_by_rules = nodes.iter().filter(|n| selects_node(&spec, n)).count();
        prop_assert_eq!(selected_by_rules, placement.selected.len());
        let findings = check_placement(&a_workload(spec.clone()), &nodes);
        let expected = !nodes.is_empty() && placement.fitting.is_empty();
        prop_assert_eq!(findings.len(), usize::from(expected));
        for f in &findings {
            prop_assert_eq!((f.check, f.severity), (CheckId::NoNodeFitsPlacement, Severity::Error));
            prop_assert!(!f.fix.is_empty());
        }
        // The legacy-label check in lint mode: an error exactly when every pod needs the master label.
        let lint = check_node_labels(&a_workload(spec.clone()), None);
        let removed_error = lint.iter().any(|f| f.check == CheckId::RemovedNodeLabel && f.severity == Severity::Error);
        prop_assert_eq!(removed_error, placement_requires(&spec, taints::MASTER));
        // And a workload that needs it fits no node that lacks it.
        if placement_requires(&spec, taints::MASTER) {
            for name in &placement.selected {
                let node = nodes.iter().find(|n| n.metadata.name.as_ref() == Some(name)).unwrap();
                prop_assert!(node.metadata.labels.as_ref().unwrap().contains_key(taints::MASTER));
            }
        }
    }
}
