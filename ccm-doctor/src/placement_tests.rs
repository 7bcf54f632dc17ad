use super::*;
use crate::workload::Replicas;
use k8s_openapi::api::core::v1::{Affinity, Container, NodeAffinity, NodeSelector, NodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn req(key: &str, op: &str, vals: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!vals.is_empty()).then(|| vals.iter().map(|v| (*v).to_owned()).collect()),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn node(name: &str, pairs: &[(&str, &str)], node_taints: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels(pairs)),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(
                node_taints
                    .iter()
                    .map(|(k, e)| Taint {
                        key: (*k).into(),
                        effect: (*e).into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

fn term(expressions: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(expressions),
        match_fields: None,
    }
}

fn fields_term(fields: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(fields),
    }
}

fn spec_with(selector: &[(&str, &str)], terms: Option<Vec<NodeSelectorTerm>>) -> PodSpec {
    PodSpec {
        node_selector: (!selector.is_empty()).then(|| labels(selector)),
        affinity: terms.map(|node_selector_terms| Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        tolerations: Some(vec![Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]),
        containers: vec![Container {
            name: "ccm".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn workload(kind: WorkloadKind, spec: PodSpec) -> Workload {
    Workload {
        kind,
        namespace: Some("kube-system".into()),
        name: "ccm".into(),
        labels: BTreeMap::new(),
        selector: None,
        replicas: Replicas::Fixed(2),
        pod_spec: spec,
    }
}

#[test]
fn every_label_operator() {
    let l = labels(&[("zone", "a"), ("gen", "5"), ("bad", "x5")]);
    let m = |r: NodeSelectorRequirement| requirement_matches(&r, &l);
    assert_eq!(m(req("zone", "In", &["a", "b"])), Ok(true));
    assert_eq!(m(req("zone", "In", &["b"])), Ok(false));
    assert_eq!(m(req("missing", "In", &["a"])), Ok(false));
    assert_eq!(m(req("zone", "NotIn", &["b"])), Ok(true));
    assert_eq!(m(req("zone", "NotIn", &["a"])), Ok(false));
    // NotIn holds where the label is absent.
    assert_eq!(m(req("missing", "NotIn", &["a"])), Ok(true));
    assert_eq!(m(req("zone", "Exists", &[])), Ok(true));
    assert_eq!(m(req("missing", "Exists", &[])), Ok(false));
    assert_eq!(m(req("zone", "DoesNotExist", &[])), Ok(false));
    assert_eq!(m(req("missing", "DoesNotExist", &[])), Ok(true));
    // Gt and Lt compare integers; a missing or non-integer label fails.
    assert_eq!(m(req("gen", "Gt", &["4"])), Ok(true));
    assert_eq!(m(req("gen", "Gt", &["5"])), Ok(false));
    assert_eq!(m(req("gen", "Lt", &["6"])), Ok(true));
    assert_eq!(m(req("gen", "Lt", &["5"])), Ok(false));
    assert_eq!(m(req("gen", "Gt", &["-9223372036854775808"])), Ok(true));
    assert_eq!(m(req("missing", "Gt", &["1"])), Ok(false));
    assert_eq!(m(req("bad", "Lt", &["9"])), Ok(false));
    // The empty value is a value.
    let empty = labels(&[("node-role.kubernetes.io/control-plane", "")]);
    assert_eq!(
        requirement_matches(
            &req("node-role.kubernetes.io/control-plane", "In", &[""]),
            &empty
        ),
        Ok(true)
    );
}

#[test]
fn invalid_label_requirements() {
    let l = labels(&[("a", "1")]);
    let err = |r: NodeSelectorRequirement| requirement_matches(&r, &l).unwrap_err();
    assert!(err(req("a", "In", &[])).contains("at least one value"));
    assert!(err(req("a", "NotIn", &[])).contains("at least one value"));
    assert!(err(req("a", "Exists", &["1"])).contains("no values"));
    assert!(err(req("a", "DoesNotExist", &["1"])).contains("no values"));
    assert!(err(req("a", "Gt", &[])).contains("exactly one value"));
    assert!(err(req("a", "Lt", &["1", "2"])).contains("exactly one value"));
    assert!(err(req("a", "Gt", &["one"])).contains("must be an integer"));
    assert!(err(req("a", "Equals", &["1"])).contains("unknown operator"));
    assert!(err(req("a", "in", &["1"])).contains("unknown operator"));
}

#[test]
fn match_fields_on_the_node_name() {
    let f = |op: &str, vals: &[&str], name: &str| {
        field_requirement_matches(&req(METADATA_NAME_FIELD, op, vals), name)
    };
    assert_eq!(f("In", &["n1"], "n1"), Ok(true));
    assert_eq!(f("In", &["n1"], "n2"), Ok(false));
    assert_eq!(f("NotIn", &["n1"], "n2"), Ok(true));
    assert_eq!(f("NotIn", &["n1"], "n1"), Ok(false));
    assert!(
        f("Exists", &[], "n1")
            .unwrap_err()
            .contains("only In and NotIn")
    );
    assert!(
        f("In", &["a", "b"], "a")
            .unwrap_err()
            .contains("exactly one value")
    );
    assert!(
        f("NotIn", &[], "a")
            .unwrap_err()
            .contains("exactly one value")
    );
    // Another field reads as empty.
    assert_eq!(
        field_requirement_matches(&req("spec.unschedulable", "In", &["n1"]), "n1"),
        Ok(false)
    );
    assert_eq!(
        field_requirement_matches(&req("spec.unschedulable", "NotIn", &["n1"]), "n1"),
        Ok(true)
    );
}

#[test]
fn terms_and_their_requirements() {
    let n = node("n1", &[("zone", "a"), ("tier", "cp")], &[]);
    // Every requirement must hold.
    let both = term(vec![req("zone", "In", &["a"]), req("tier", "Exists", &[])]);
    assert_eq!(term_matches(&both, &n), Ok(true));
    let one_fails = term(vec![
        req("zone", "In", &["a"]),
        req("tier", "DoesNotExist", &[]),
    ]);
    assert_eq!(term_matches(&one_fails, &n), Ok(false));
    // Labels and fields together.
    let mut mixed = term(vec![req("zone", "In", &["a"])]);
    mixed.match_fields = Some(vec![req(METADATA_NAME_FIELD, "In", &["n1"])]);
    assert_eq!(term_matches(&mixed, &n), Ok(true));
    mixed.match_fields = Some(vec![req(METADATA_NAME_FIELD, "In", &["n2"])]);
    assert_eq!(term_matches(&mixed, &n), Ok(false));
    assert_eq!(
        term_matches(
            &fields_term(vec![req(METADATA_NAME_FIELD, "NotIn", &["n2"])]),
            &n
        ),
        Ok(true)
    );
    // An empty term matches nothing; so does an invalid one.
    assert_eq!(term_matches(&term(vec![]), &n), Ok(false));
    assert_eq!(term_matches(&NodeSelectorTerm::default(), &n), Ok(false));
    assert!(term_matches(&term(vec![req("zone", "Gt", &["x"])]), &n).is_err());
    // A node without a name has no fields to compare.
    let unnamed = node("", &[], &[]);
    assert_eq!(
        term_matches(
            &fields_term(vec![req(METADATA_NAME_FIELD, "In", &["n1"])]),
            &unnamed
        ),
        Ok(true)
    );
}

#[test]
fn node_selector_and_required_affinity() {
    let cp = node("cp", &[(taints::CONTROL_PLANE, "")], &[]);
    let worker = node("w", &[("zone", "a")], &[]);
    let spec = spec_with(&[(taints::CONTROL_PLANE, "")], None);
    assert!(selects_node(&spec, &cp));
    assert!(!selects_node(&spec, &worker));
    // The value must be equal, the empty string included.
    let spec = spec_with(&[(taints::CONTROL_PLANE, "true")], None);
    assert!(!selects_node(&spec, &cp));
    // Terms are alternatives.
    let spec = spec_with(
        &[],
        Some(vec![
            term(vec![req(taints::MASTER, "Exists", &[])]),
            term(vec![req(taints::CONTROL_PLANE, "Exists", &[])]),
        ]),
    );
    assert!(selects_node(&spec, &cp));
    assert!(!selects_node(&spec, &worker));
    // An invalid term is skipped, the others still count.
    let spec = spec_with(
        &[],
        Some(vec![
            term(vec![req("zone", "Gt", &["x"])]),
            term(vec![req("zone", "In", &["a"])]),
        ]),
    );
    assert!(selects_node(&spec, &worker));
    // Node selector and affinity must both hold.
    let spec = spec_with(
        &[("zone", "a")],
        Some(vec![term(vec![req(taints::CONTROL_PLANE, "Exists", &[])])]),
    );
    assert!(!selects_node(&spec, &cp));
    assert!(!selects_node(&spec, &worker));
    // A required affinity without terms matches nothing; no affinity matches everything.
    assert!(!selects_node(&spec_with(&[], Some(vec![])), &cp));
    assert!(selects_node(&spec_with(&[], None), &worker));
}

#[test]
fn tolerations_the_pods_get() {
    let bare = PodSpec::default();
    let deployment = effective_tolerations(&bare, WorkloadKind::Deployment);
    let has = |ts: &[Toleration], key: &str, effect: &str| {
        ts.iter()
            .any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect))
    };
    assert_eq!(deployment.len(), 2);
    assert!(has(&deployment, taints::NOT_READY, NO_EXECUTE));
    assert!(has(&deployment, taints::UNREACHABLE, NO_EXECUTE));
    let daemon = effective_tolerations(&bare, WorkloadKind::DaemonSet);
    for key in [
        taints::DISK_PRESSURE,
        taints::MEMORY_PRESSURE,
        taints::PID_PRESSURE,
        taints::UNSCHEDULABLE,
    ] {
        assert!(has(&daemon, key, NO_SCHEDULE), "{key}");
    }
    assert!(!has(&daemon, taints::NETWORK_UNAVAILABLE, NO_SCHEDULE));
    let host = PodSpec {
        host_network: Some(true),
        ..Default::default()
    };
    assert!(has(
        &effective_tolerations(&host, WorkloadKind::DaemonSet),
        taints::NETWORK_UNAVAILABLE,
        NO_SCHEDULE
    ));
    assert!(!has(
        &effective_tolerations(&host, WorkloadKind::Deployment),
        taints::NETWORK_UNAVAILABLE,
        NO_SCHEDULE
    ));
}

#[test]
fn taints_that_block() {
    let n = node(
        "n",
        &[],
        &[
            (taints::UNINITIALIZED, NO_SCHEDULE),
            (taints::NOT_READY, NO_EXECUTE),
            ("soft", "PreferNoSchedule"),
            (taints::UNINITIALIZED, NO_EXECUTE),
        ],
    );
    let none = effective_tolerations(&PodSpec::default(), WorkloadKind::Deployment);
    // PreferNoSchedule never blocks; not-ready NoExecute is tolerated by admission; keys once.
    assert_eq!(
        blocking_taints(&n, &none),
        vec![taints::UNINITIALIZED.to_owned()]
    );
    let all = [Toleration {
        operator: Some("Exists".into()),
        ..Default::default()
    }];
    assert!(blocking_taints(&n, &all).is_empty());
    // A cordoned node blocks unless unschedulable is tolerated (DaemonSets are).
    let mut cordoned = node("c", &[], &[]);
    cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
    assert_eq!(
        blocking_taints(&cordoned, &none),
        vec![taints::UNSCHEDULABLE.to_owned()]
    );
    let ds = effective_tolerations(&PodSpec::default(), WorkloadKind::DaemonSet);
    assert!(blocking_taints(&cordoned, &ds).is_empty());
    // A node without a spec has no taints.
    let mut bare = node("b", &[], &[]);
    bare.spec = None;
    assert!(blocking_taints(&bare, &none).is_empty());
}

#[test]
fn descriptions() {
    assert_eq!(
        describe_requirement(&req("a", "In", &["x", "y"])),
        "a In (x,y)"
    );
    assert_eq!(
        describe_requirement(&req("a", "NotIn", &["x"])),
        "a NotIn (x)"
    );
    assert_eq!(describe_requirement(&req("a", "Exists", &[])), "a Exists");
    assert_eq!(describe_requirement(&req("a", "Gt", &["3"])), "a Gt 3");
    let mut t = term(vec![req("a", "Exists", &[])]);
    t.match_fields = Some(vec![req(METADATA_NAME_FIELD, "In", &["n1"])]);
    assert_eq!(describe_term(&t), "a Exists, field metadata.name In (n1)");
    assert_eq!(describe_term(&NodeSelectorTerm::default()), "empty");
}

fn kubeadm_cluster() -> Vec<Node> {
    let cp = |name: &str| {
        node(
            name,
            &[(taints::CONTROL_PLANE, ""), ("kubernetes.io/os", "linux")],
            &[
                (taints::CONTROL_PLANE, NO_SCHEDULE),
                (taints::UNINITIALIZED, NO_SCHEDULE),
            ],
        )
    };
    let worker = |name: &str| {
        node(
            name,
            &[("kubernetes.io/os", "linux")],
            &[(taints::UNINITIALIZED, NO_SCHEDULE)],
        )
    };
    vec![
        cp("cp-1"),
        cp("cp-2"),
        worker("w-1"),
        worker("w-2"),
        worker("w-3"),
    ]
}

#[test]
fn the_legacy_master_selector_fits_no_current_node() {
    let nodes = kubeadm_cluster();
    let spec = spec_with(&[(taints::MASTER, "")], None);
    let placement = evaluate(&spec, WorkloadKind::DaemonSet, &nodes);
    assert_eq!(placement.nodes, 5);
    assert!(placement.selected.is_empty());
    assert_eq!(
        placement.rules,
        vec![RuleOutcome {
            rule: format!("nodeSelector {}=\"\"", taints::MASTER),
            keys: vec![taints::MASTER.to_owned()],
            ruled_out: 5,
            invalid: None,
        }]
    );
    let findings = check_placement(&workload(WorkloadKind::DaemonSet, spec), &nodes);
    assert_eq!(findings.len(), 1);
    let f = &findings[0];
    assert_eq!(
        (f.check, f.severity),
        (CheckId::NoNodeFitsPlacement, Severity::Error)
    );
    assert_eq!(
        f.message,
        format!(
            "DaemonSet ccm can run on none of the 5 nodes: no node satisfies its node selection (nodeSelector \
             node-role.kubernetes.io/master=\"\" rules out 5 of 5), {CONSEQUENCE}"
        )
    );
    assert!(
        f.fix.starts_with(
            "select node-role.kubernetes.io/control-plane instead of node-role.kubernetes.io/master (kubeadm"
        ),
        "{}",
        f.fix
    );
    assert_eq!(
        f.objects[0].to_string(),
        "DaemonSet kube-system/ccm (0 of 5 fit; 0 selected by its rules)"
    );

    // The control-plane selector fits both control-plane nodes.
    let good = spec_with(&[(taints::CONTROL_PLANE, "")], None);
    let placement = evaluate(&good, WorkloadKind::Deployment, &nodes);
    assert_eq!(
        placement.fitting,
        vec!["cp-1".to_owned(), "cp-2".to_owned()]
    );
    assert_eq!(placement.rules[0].ruled_out, 3);
    assert!(check_placement(&workload(WorkloadKind::Deployment, good), &nodes).is_empty());
}

#[test]
fn each_unmatched_term_is_counted() {
    let nodes = kubeadm_cluster();
    let spec = spec_with(
        &[],
        Some(vec![
            term(vec![req(taints::MASTER, "Exists", &[])]),
            term(vec![req("topology.kubernetes.io/zone", "In", &["eu-1a"])]),
            term(vec![
                req("kubernetes.io/os", "In", &["linux"]),
                req("gen", "Gt", &["x"]),
            ]),
        ]),
    );
    let findings = check_placement(&workload(WorkloadKind::Deployment, spec), &nodes);
    let msg = &findings[0].message;
    assert!(
        msg.contains(
            "required node affinity term 1 (node-role.kubernetes.io/master Exists) rules out 5 of 5"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("required node affinity term 2 (topology.kubernetes.io/zone In (eu-1a)) rules out 5 of 5"),
        "{msg}"
    );
    assert!(
        msg.contains(
            "required node affinity term 3 (kubernetes.io/os In (linux), gen Gt x) matches no node: gen Gt x: the \
             value must be an integer"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("the required node affinity terms are alternatives"),
        "{msg}"
    );
    // One term matching a node is enough.
    let spec = spec_with(
        &[],
        Some(vec![
            term(vec![req(taints::MASTER, "Exists", &[])]),
            term(vec![req(taints::CONTROL_PLANE, "Exists", &[])]),
        ]),
    );
    assert!(check_placement(&workload(WorkloadKind::Deployment, spec), &nodes).is_empty());
    // No terms at all.
    let spec = spec_with(&[], Some(vec![]));
    let findings = check_placement(&workload(WorkloadKind::Deployment, spec), &nodes);
    assert!(
        findings[0].message.contains(
            "required node affinity without terms matches no node: a required node affinity needs at least one term"
        ),
        "{}",
        findings[0].message
    );
}

#[test]
fn taints_count_after_the_node_selection() {
    let nodes = kubeadm_cluster();
    // Selects the control-plane nodes but tolerates only the uninitialized taint.
    let mut spec = spec_with(&[(taints::CONTROL_PLANE, "")], None);
    spec.tolerations = Some(vec![Toleration {
        key: Some(taints::UNINITIALIZED.into()),
        operator: Some("Exists".into()),
        ..Default::default()
    }]);
    let placement = evaluate(&spec, WorkloadKind::Deployment, &nodes);
    assert_eq!(placement.selected.len(), 2);
    assert!(placement.fitting.is_empty());
    assert_eq!(
        placement.blocking_taints,
        BTreeMap::from([(taints::CONTROL_PLANE.to_owned(), 2)])
    );
    let findings = check_placement(&workload(WorkloadKind::Deployment, spec), &nodes);
    let f = &findings[0];
    assert!(
        f.message.contains(
            "the nodes its node selection accepts carry taints it does not tolerate \
             (node-role.kubernetes.io/control-plane on 2 nodes); the node selection leaves 2 of 5: nodeSelector \
             node-role.kubernetes.io/control-plane=\"\" rules out 3 of 5"
        ),
        "{}",
        f.message
    );
    assert!(
        f.fix.ends_with("tolerate the taints of the nodes it should run on (node-role.kubernetes.io/control-plane)"),
        "{}",
        f.fix
    );
    // No node selection, only taints: nothing but the taints in the message and the fix.
    let mut spec = spec_with(&[], None);
    spec.tolerations = None;
    let findings = check_placement(&workload(WorkloadKind::Deployment, spec), &nodes);
    assert!(
        findings[0].message.ends_with(&format!(
            "carry taints it does not tolerate (node-role.kubernetes.io/control-plane on 2 nodes, \
                 node.cloudprovider.kubernetes.io/uninitialized on 5 nodes), {CONSEQUENCE}"
        )),
        "{}",
        findings[0].message
    );
    assert!(!findings[0].fix.contains("compare the nodeSelector"));
}

#[test]
fn no_nodes_no_verdict() {
    let spec = spec_with(&[(taints::MASTER, "")], None);
    assert!(check_placement(&workload(WorkloadKind::Deployment, spec.clone()), &[]).is_empty());
    let one = [node("only", &[(taints::MASTER, "")], &[])];
    assert!(check_placement(&workload(WorkloadKind::Deployment, spec), &one).is_empty());
}
