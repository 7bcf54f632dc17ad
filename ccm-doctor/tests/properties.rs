//! Property tests of the doctor's parsers: manifests (`manifest::lint_manifest`) and label selectors
//! (`selector::LabelSelector`). Each property runs `ccm_testenv::properties::DEFAULT_CASES` generated cases (or
//! `PROPTEST_CASES`); see docs/architecture.md, "Property tests".

use std::collections::BTreeMap;

use ccm_doctor::manifest::{WorkloadFilter, lint_manifest, parse_workloads};
use ccm_doctor::selector::{LabelSelector, Requirement};
use ccm_testenv::properties::config;
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
