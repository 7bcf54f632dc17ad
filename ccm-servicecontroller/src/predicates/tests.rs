//! Table tests ported from the Go reference (`controllers/service/controller_test.go`), plus the SDK's extras.

use super::*;
use k8s_openapi::api::core::v1::{
    ClientIPConfig, NodeCondition, NodeSpec, NodeStatus, ServiceSpec, SessionAffinityConfig, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Go's `wantsLoadBalancer`: `type: LoadBalancer` without a `loadBalancerClass`.
fn wants_load_balancer(service: &Service) -> bool {
    ServiceSelector::default().wants_load_balancer(service)
}

/// Go's `needsUpdate` (class-less Services, Go field list).
fn needs_update(old: &Service, new: &Service) -> bool {
    update_reason(&ServiceSelector::default(), false, old, new).is_some()
}

impl NodeSet {
    /// How many nodes.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The node names, sorted.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The providerID recorded for `name`.
    pub(crate) fn provider_id(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

fn svc(name: &str, ty: &str) -> Service {
    let mut s = Service {
        spec: Some(ServiceSpec {
            type_: Some(ty.into()),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    s.metadata.name = Some(name.into());
    s.metadata.namespace = Some("default".into());
    s.metadata.uid = Some(format!("uid-{name}"));
    s
}

fn lb() -> Service {
    svc("external-balancer", LOAD_BALANCER_TYPE)
}

fn spec(s: &mut Service) -> &mut ServiceSpec {
    s.spec.get_or_insert_with(Default::default)
}

fn with_finalizer(mut s: Service) -> Service {
    s.metadata.finalizers = Some(vec![names::finalizers::LOAD_BALANCER_CLEANUP.into()]);
    s
}

fn deleting(mut s: Service) -> Service {
    s.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    s
}

fn port(protocol: &str, p: i32) -> ServicePort {
    ServicePort {
        name: Some(format!("port-{p}")),
        port: p,
        protocol: Some(protocol.into()),
        target_port: Some(IntOrString::Int(p)),
        ..Default::default()
    }
}

#[test]
fn wants_load_balancer_table() {
    let mut with_class = lb();
    spec(&mut with_class).load_balancer_class = Some("other".into());
    let cases = [
        ("ClusterIP", svc("a", "ClusterIP"), false),
        ("NodePort", svc("a", "NodePort"), false),
        ("ExternalName", svc("a", "ExternalName"), false),
        ("LoadBalancer", lb(), true),
        ("loadBalancerClass set", with_class.clone(), false),
        ("no spec", Service::default(), false),
    ];
    for (desc, s, want) in cases {
        assert_eq!(wants_load_balancer(&s), want, "{desc}");
    }
    let claim = ServiceSelector {
        class_less: true,
        class: Some("other".into()),
    };
    assert!(claim.wants_load_balancer(&with_class));
    assert!(claim.wants_load_balancer(&lb()));
    let only_class = ServiceSelector {
        class_less: false,
        class: Some("other".into()),
    };
    assert!(only_class.wants_load_balancer(&with_class));
    assert!(!only_class.wants_load_balancer(&lb()));
    let mut foreign = lb();
    spec(&mut foreign).load_balancer_class = Some("third".into());
    assert!(!claim.wants_load_balancer(&foreign));
}

#[test]
fn needs_cleanup_table() {
    // Go: TestNeedsCleanup
    let cases = [
        ("service without finalizer", Service::default(), false),
        (
            "service with finalizer without timestamp without LB",
            with_finalizer(svc("a", "NodePort")),
            true,
        ),
        (
            "service with finalizer without timestamp with LB",
            with_finalizer(lb()),
            false,
        ),
        (
            "service with finalizer with timestamp",
            deleting(with_finalizer(Service::default())),
            true,
        ),
        ("deleting without finalizer", deleting(lb()), false),
        (
            "finalizer, LoadBalancer, deleting",
            deleting(with_finalizer(lb())),
            true,
        ),
    ];
    for (desc, s, want) in cases {
        assert_eq!(needs_cleanup(&s), want, "{desc}");
    }
}

#[test]
fn sync_branch_table() {
    // Go: TestSyncLoadBalancerIfNeeded (which branch each case takes)
    let sel = ServiceSelector::default();
    let mut udp = lb();
    spec(&mut udp).ports = Some(vec![port("UDP", 53)]);
    let mut sctp = lb();
    spec(&mut sctp).ports = Some(vec![port("SCTP", 9)]);
    let mut class = lb();
    spec(&mut class).load_balancer_class = Some("custom".into());
    let cases = [
        ("service doesn't want LB", svc("a", "ClusterIP"), true),
        ("udp service that wants LB", udp, false),
        ("tcp service that wants LB", lb(), false),
        ("sctp service that wants LB", sctp, false),
        ("service specifies loadBalancerClass", class.clone(), true),
        (
            "service with finalizer that no longer wants LB",
            with_finalizer(svc("a", "ClusterIP")),
            true,
        ),
        (
            "service that needs cleanup",
            deleting(with_finalizer(lb())),
            true,
        ),
        (
            "service with finalizer that wants LB",
            with_finalizer(lb()),
            false,
        ),
    ];
    for (desc, s, delete) in cases {
        assert_eq!(wants_deletion(&sel, &s), delete, "{desc}");
    }
    // A foreign class is never enqueued on add, so it is never touched (no calls, no patches).
    assert!(!should_enqueue_added(&sel, &class));
    assert!(should_enqueue_added(&sel, &lb()));
    assert!(should_enqueue_added(
        &sel,
        &with_finalizer(svc("a", "ClusterIP"))
    ));
    assert!(!should_enqueue_added(&sel, &svc("a", "ClusterIP")));
}

#[test]
fn needs_update_go_table() {
    // Go: TestNeedsUpdate
    type Case = (&'static str, Box<dyn Fn() -> (Service, Service)>, bool);
    let cases: Vec<Case> = vec![
        (
            "If the service type is changed from LoadBalancer to ClusterIP",
            Box::new(|| {
                let old = lb();
                let mut new = lb();
                spec(&mut new).type_ = Some("ClusterIP".into());
                (old, new)
            }),
            true,
        ),
        (
            "If the Ports are different",
            Box::new(|| {
                let mut old = lb();
                let mut new = lb();
                spec(&mut old).ports = Some(
                    [8000, 9000, 10000]
                        .map(|p| ServicePort {
                            port: p,
                            ..Default::default()
                        })
                        .to_vec(),
                );
                spec(&mut new).ports = Some(
                    [8001, 9001, 10001]
                        .map(|p| ServicePort {
                            port: p,
                            ..Default::default()
                        })
                        .to_vec(),
                );
                (old, new)
            }),
            true,
        ),
        (
            "If external ip counts are different",
            Box::new(|| {
                let mut old = lb();
                let mut new = lb();
                spec(&mut old).external_ips = Some(vec!["old.IP.1".into()]);
                spec(&mut new).external_ips = Some(vec!["new.IP.1".into(), "new.IP.2".into()]);
                (old, new)
            }),
            true,
        ),
        (
            "If external ips are different",
            Box::new(|| {
                let mut old = lb();
                let mut new = lb();
                spec(&mut old).external_ips = Some(vec!["old.IP.1".into(), "old.IP.2".into()]);
                spec(&mut new).external_ips = Some(vec!["new.IP.1".into(), "new.IP.2".into()]);
                (old, new)
            }),
            true,
        ),
        (
            "If UID is different",
            Box::new(|| {
                let mut old = lb();
                let mut new = lb();
                old.metadata.uid = Some("UID old".into());
                new.metadata.uid = Some("UID new".into());
                (old, new)
            }),
            true,
        ),
        (
            "If ExternalTrafficPolicy is different",
            Box::new(|| {
                let old = lb();
                let mut new = lb();
                spec(&mut new).external_traffic_policy = Some("Local".into());
                (old, new)
            }),
            true,
        ),
        (
            "If HealthCheckNodePort is different",
            Box::new(|| {
                let old = lb();
                let mut new = lb();
                spec(&mut new).health_check_node_port = Some(30123);
                (old, new)
            }),
            true,
        ),
        (
            "If TargetGroup is different 1",
            Box::new(|| {
                let mut old = lb();
                spec(&mut old).ports = Some(vec![port("TCP", 20)]);
                let mut new = old.clone();
                spec(&mut new).ports = Some(vec![port("TCP", 20), port("TCP", 21)]);
                (old, new)
            }),
            true,
        ),
        (
            "If TargetGroup is different 2",
            Box::new(|| {
                let mut old = lb();
                spec(&mut old).ports = Some(vec![port("TCP", 22)]);
                let mut new = old.clone();
                spec(&mut new).ports.as_mut().unwrap()[0].target_port =
                    Some(IntOrString::String("dns".into()));
                (old, new)
            }),
            true,
        ),
        (
            "If appProtocol is the same",
            Box::new(|| (lb(), lb())),
            false,
        ),
        (
            "If service IPFamilies from single stack to dual stack",
            Box::new(|| {
                let mut old = lb();
                spec(&mut old).ip_families = Some(vec!["IPv4".into()]);
                let mut new = old.clone();
                spec(&mut new).ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
                (old, new)
            }),
            true,
        ),
        (
            "If service IPFamilies from dual stack to single stack",
            Box::new(|| {
                let mut old = lb();
                spec(&mut old).ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
                let mut new = old.clone();
                spec(&mut new).ip_families = Some(vec!["IPv4".into()]);
                (old, new)
            }),
            true,
        ),
        (
            "If service IPFamilies not change",
            Box::new(|| {
                let mut old = lb();
                spec(&mut old).ip_families = Some(vec!["IPv4".into()]);
                (old.clone(), old)
            }),
            false,
        ),
        (
            "If appProtocol is set when previously unset",
            Box::new(|| {
                let old = lb();
                let mut new = lb();
                spec(&mut new).ports.as_mut().unwrap()[0].app_protocol = Some("http".into());
                (old, new)
            }),
            true,
        ),
        (
            "If appProtocol is set to a different value",
            Box::new(|| {
                let mut old = lb();
                spec(&mut old).ports.as_mut().unwrap()[0].app_protocol = Some("http".into());
                let mut new = old.clone();
                spec(&mut new).ports.as_mut().unwrap()[0].app_protocol = Some("tcp".into());
                (old, new)
            }),
            true,
        ),
    ];
    for (desc, make, want) in cases {
        let (old, new) = make();
        assert_eq!(needs_update(&old, &new), want, "{desc}");
    }
}

#[test]
fn update_reasons_cover_every_go_field() {
    let sel = ServiceSelector::default();
    let base = lb();
    type Tweak = Box<dyn Fn(&mut Service)>;
    let cases: Vec<(UpdateReason, Tweak)> = vec![
        (
            UpdateReason::LoadBalancerSourceRanges,
            Box::new(|s| spec(s).load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()])),
        ),
        (
            UpdateReason::Ports,
            Box::new(|s| spec(s).ports.as_mut().unwrap()[0].name = Some("web".into())),
        ),
        (
            UpdateReason::Ports,
            Box::new(|s| spec(s).ports.as_mut().unwrap()[0].protocol = Some("UDP".into())),
        ),
        (
            UpdateReason::Ports,
            Box::new(|s| spec(s).ports.as_mut().unwrap()[0].node_port = Some(31000)),
        ),
        (
            UpdateReason::SessionAffinity,
            Box::new(|s| spec(s).session_affinity = Some("ClientIP".into())),
        ),
        (
            UpdateReason::SessionAffinityConfig,
            Box::new(|s| {
                spec(s).session_affinity_config = Some(SessionAffinityConfig {
                    client_ip: Some(ClientIPConfig {
                        timeout_seconds: Some(60),
                    }),
                })
            }),
        ),
        (
            UpdateReason::LoadBalancerIp,
            Box::new(|s| spec(s).load_balancer_ip = Some("203.0.113.9".into())),
        ),
        (
            UpdateReason::ExternalIps,
            Box::new(|s| spec(s).external_ips = Some(vec!["198.51.100.1".into()])),
        ),
        (
            UpdateReason::Annotations,
            Box::new(|s| {
                s.metadata.annotations = Some([("a".to_string(), "b".to_string())].into())
            }),
        ),
        (
            UpdateReason::Uid,
            Box::new(|s| s.metadata.uid = Some("other".into())),
        ),
        (
            UpdateReason::ExternalTrafficPolicy,
            Box::new(|s| spec(s).external_traffic_policy = Some("Local".into())),
        ),
        (
            UpdateReason::HealthCheckNodePort,
            Box::new(|s| spec(s).health_check_node_port = Some(32000)),
        ),
        (
            UpdateReason::IpFamilies,
            Box::new(|s| spec(s).ip_families = Some(vec!["IPv6".into()])),
        ),
    ];
    for (want, tweak) in cases {
        let mut new = base.clone();
        tweak(&mut new);
        assert_eq!(update_reason(&sel, false, &base, &new), Some(want));
        assert_eq!(update_reason(&sel, true, &base, &new), Some(want));
    }
}

#[test]
fn fields_go_ignores() {
    let sel = ServiceSelector::default();
    let base = lb();
    type Tweak = Box<dyn Fn(&mut Service)>;
    let ignored: Vec<(&str, Tweak)> = vec![
        (
            "labels",
            Box::new(|s| s.metadata.labels = Some([("a".to_string(), "b".to_string())].into())),
        ),
        (
            "allocateLoadBalancerNodePorts",
            Box::new(|s| spec(s).allocate_load_balancer_node_ports = Some(false)),
        ),
        (
            "internalTrafficPolicy",
            Box::new(|s| spec(s).internal_traffic_policy = Some("Local".into())),
        ),
        (
            "resourceVersion",
            Box::new(|s| s.metadata.resource_version = Some("42".into())),
        ),
        (
            "finalizers",
            Box::new(|s| s.metadata.finalizers = Some(vec!["x".into()])),
        ),
        ("status", Box::new(|s| s.status = Some(Default::default()))),
        (
            "source ranges: absent vs empty",
            Box::new(|s| spec(s).load_balancer_source_ranges = Some(vec![])),
        ),
        (
            "annotations: absent vs empty",
            Box::new(|s| s.metadata.annotations = Some(Default::default())),
        ),
        (
            "port targetPort: absent vs 0",
            Box::new(|s| {
                spec(s).ports.as_mut().unwrap()[0].target_port = Some(IntOrString::Int(0))
            }),
        ),
    ];
    for (desc, tweak) in ignored {
        let mut new = base.clone();
        tweak(&mut new);
        assert_eq!(update_reason(&sel, false, &base, &new), None, "{desc}");
    }
    // Neither side wants a load balancer: never an update.
    let mut a = svc("a", "ClusterIP");
    let mut b = a.clone();
    spec(&mut b).ports = Some(vec![port("TCP", 1)]);
    assert_eq!(update_reason(&sel, true, &a, &b), None);
    // Source ranges only count when the new Service wants a load balancer: covered by WantsLoadBalancer.
    spec(&mut a).type_ = Some(LOAD_BALANCER_TYPE.into());
    assert_eq!(
        update_reason(&sel, false, &a, &b),
        Some(UpdateReason::WantsLoadBalancer)
    );
}

#[test]
fn extended_fields() {
    let sel = ServiceSelector::default();
    let mut old = lb();
    spec(&mut old).ip_families = Some(vec!["IPv4".into()]);
    let mut new = old.clone();
    spec(&mut new).ip_families = Some(vec!["IPv6".into()]);
    assert_eq!(
        update_reason(&sel, false, &old, &new),
        None,
        "Go: count only"
    );
    assert_eq!(
        update_reason(&sel, true, &old, &new),
        Some(UpdateReason::IpFamilies)
    );
    let mut new = old.clone();
    spec(&mut new).allocate_load_balancer_node_ports = Some(false);
    assert_eq!(update_reason(&sel, false, &old, &new), None);
    assert_eq!(
        update_reason(&sel, true, &old, &new),
        Some(UpdateReason::AllocateLoadBalancerNodePorts)
    );
}

#[test]
fn enqueue_on_update_includes_cleanup() {
    let sel = ServiceSelector::default();
    let old = with_finalizer(lb());
    let new = deleting(old.clone());
    // needsUpdate is false (nothing compared changed), needsCleanup is true.
    assert!(!needs_update(&old, &new));
    assert!(should_enqueue_updated(&sel, false, &old, &new));
    assert!(!should_enqueue_updated(&sel, false, &lb(), &lb()));
}

// ---- nodes ----

fn node(name: &str) -> Node {
    let mut n = Node {
        spec: Some(NodeSpec {
            provider_id: Some(format!("fake://{name}")),
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
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n
}

fn label(mut n: Node, k: &str, v: &str) -> Node {
    n.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(k.into(), v.into());
    n
}

fn taint(mut n: Node, key: &str) -> Node {
    n.spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new)
        .push(Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    n
}

fn ready(mut n: Node, status: Option<&str>) -> Node {
    let st = n.status.get_or_insert_with(Default::default);
    let conds = st.conditions.get_or_insert_with(Vec::new);
    conds.retain(|c| c.type_ != "Ready");
    if let Some(status) = status {
        conds.push(NodeCondition {
            type_: "Ready".into(),
            status: status.into(),
            ..Default::default()
        });
    }
    n
}

fn condition(mut n: Node, ty: &str, status: &str) -> Node {
    n.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(NodeCondition {
            type_: ty.into(),
            status: status.into(),
            ..Default::default()
        });
    n
}

fn provider(mut n: Node, id: &str) -> Node {
    n.spec.get_or_insert_with(Default::default).provider_id = Some(id.into());
    n
}

fn deleted(mut n: Node) -> Node {
    n.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    n
}

const EXCLUDE: &str = names::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS;
const CA: &str = names::taints::TO_BE_DELETED_BY_CLUSTER_AUTOSCALER;

#[test]
fn exclusion_label_parsing() {
    for (value, included) in [
        ("", false),
        ("true", false),
        ("True", false),
        ("TRUE", false),
        ("t", false),
        ("1", false),
        ("false", true),
        ("False", true),
        ("FALSE", true),
        ("f", true),
        ("F", true),
        ("0", true),
        ("yes", false),
        ("no", false),
        (" false", false),
    ] {
        assert_eq!(
            node_included(&label(node("n"), EXCLUDE, value)),
            included,
            "{value:?}"
        );
    }
    assert!(node_included(&node("n")));
    assert!(node_included(&label(node("n"), "other", "true")));
}

#[test]
fn stable_set_predicates() {
    let cases = [
        ("plain", node("n"), true),
        ("not ready", ready(node("n"), Some("False")), true),
        ("ready unknown", ready(node("n"), None), true),
        ("no providerID", provider(node("n"), ""), true),
        (
            "control plane",
            label(node("n"), "node-role.kubernetes.io/control-plane", ""),
            true,
        ),
        ("other taint", taint(node("n"), "other"), true),
        ("excluded", label(node("n"), EXCLUDE, "true"), false),
        ("autoscaler taint", taint(node("n"), CA), false),
        ("being deleted", deleted(node("n")), false),
    ];
    for (desc, n, want) in cases {
        assert_eq!(in_stable_node_set(&n), want, "{desc}");
    }
}

#[test]
fn should_sync_updated_node_individual_go_table() {
    // Go: Test_shouldSyncUpdatedNode_individualPredicates; the last column is the SDK filter.
    let n = || node("n");
    let cases = [
        ("nothing changed", n(), n(), false, false),
        ("excluded F->T", n(), label(n(), EXCLUDE, ""), true, true),
        (
            "excluded changed T->F",
            label(n(), EXCLUDE, ""),
            n(),
            true,
            true,
        ),
        (
            "excluded changed T->T",
            label(n(), EXCLUDE, ""),
            label(n(), EXCLUDE, ""),
            false,
            false,
        ),
        ("other taint F->T", n(), taint(n(), "other"), false, false),
        ("other taint T->F", taint(n(), "other"), n(), false, false),
        (
            "other label changed F->T",
            n(),
            label(n(), "other", ""),
            false,
            false,
        ),
        (
            "other label changed T->F",
            label(n(), "other", ""),
            n(),
            false,
            false,
        ),
        (
            "readiness changed F->F",
            ready(n(), Some("False")),
            ready(n(), Some("False")),
            false,
            false,
        ),
        (
            "readiness changed F->unset",
            ready(n(), Some("False")),
            ready(n(), None),
            false,
            false,
        ),
        (
            "readiness changed unset->F",
            ready(n(), None),
            ready(n(), Some("False")),
            false,
            false,
        ),
        (
            "readiness changed unset->unset",
            ready(n(), None),
            ready(n(), None),
            false,
            false,
        ),
        (
            "ready F, other condition changed F->T",
            condition(ready(n(), Some("False")), "DiskPressure", "False"),
            condition(ready(n(), Some("False")), "DiskPressure", "True"),
            false,
            false,
        ),
        (
            "ready F, other condition changed T->F",
            condition(ready(n(), Some("False")), "DiskPressure", "True"),
            condition(ready(n(), Some("False")), "DiskPressure", "False"),
            false,
            false,
        ),
        (
            "ready T, other condition changed F->T",
            condition(n(), "Other", "False"),
            condition(n(), "Other", "True"),
            false,
            false,
        ),
        (
            "ready T, other condition changed T->F",
            condition(n(), "Other", "True"),
            condition(n(), "Other", "False"),
            false,
            false,
        ),
        ("deletionTimestamp F -> T", n(), deleted(n()), false, true),
        ("providerID set F -> T", provider(n(), ""), n(), true, true),
        ("providerID set T-> F", n(), provider(n(), ""), true, true),
        (
            "providerID change",
            n(),
            provider(n(), "fake://n-2"),
            true,
            true,
        ),
        // The SDK difference: the cluster-autoscaler taint moves the node out of the stable set.
        ("autoscaler taint F->T", n(), taint(n(), CA), false, true),
        ("autoscaler taint T->F", taint(n(), CA), n(), false, true),
    ];
    for (desc, old, new, go, sdk) in cases {
        assert_eq!(should_sync_updated_node(&old, &new), go, "go: {desc}");
        assert_eq!(
            node_update_affects_load_balancers(&old, &new),
            sdk,
            "sdk: {desc}"
        );
    }
}

#[test]
fn should_sync_updated_node_compounded_go_table() {
    // Go: Test_shouldSyncUpdatedNode_compoundedPredicates; the last column is the SDK filter.
    let n = || node("n");
    let ex = |x: Node| label(x, EXCLUDE, "");
    let ca = |x: Node| taint(x, CA);
    let nr = |x: Node| ready(x, Some("False"));
    let np = |x: Node| provider(x, "");
    let cases = [
        ("tainted T, excluded F->T", ca(n()), ex(ca(n())), true, true),
        ("tainted T, excluded T->F", ex(ca(n())), ca(n()), true, true),
        (
            "tainted T, providerID set F->T",
            np(ca(n())),
            ca(n()),
            true,
            true,
        ),
        (
            "tainted T, providerID set T->F",
            ca(n()),
            np(ca(n())),
            true,
            true,
        ),
        (
            "tainted T, providerID change",
            ca(n()),
            provider(ca(n()), "fake://other"),
            true,
            true,
        ),
        ("tainted T, ready F->T", nr(ca(n())), ca(n()), false, false),
        ("tainted T, ready T->F", ca(n()), nr(ca(n())), false, false),
        (
            "excluded T, tainted F->T",
            ex(n()),
            ca(ex(n())),
            false,
            false,
        ),
        (
            "excluded T, tainted T->F",
            ca(ex(n())),
            ex(n()),
            false,
            false,
        ),
        ("excluded T, ready F->T", nr(ex(n())), ex(n()), false, false),
        ("excluded T, ready T->F", ex(n()), nr(ex(n())), false, false),
        (
            "excluded T, providerID set F->T",
            np(ex(n())),
            ex(n()),
            true,
            true,
        ),
        (
            "excluded T, providerID set T->F",
            ex(n()),
            np(ex(n())),
            true,
            true,
        ),
        (
            "excluded T, providerID change",
            ex(n()),
            provider(ex(n()), "fake://other"),
            true,
            true,
        ),
        ("ready F, tainted F->T", nr(n()), ca(nr(n())), false, true),
        ("ready F, tainted T->F", ca(nr(n())), nr(n()), false, true),
        ("ready F, excluded F->T", nr(n()), ex(nr(n())), true, true),
        ("ready F, excluded T->F", ex(nr(n())), nr(n()), true, true),
        (
            "ready F, providerID set F->T",
            np(nr(n())),
            nr(n()),
            true,
            true,
        ),
        (
            "ready F, providerID set T->F",
            nr(n()),
            np(nr(n())),
            true,
            true,
        ),
        (
            "ready F, providerID change",
            nr(n()),
            provider(nr(n()), "fake://other"),
            true,
            true,
        ),
        (
            "providerID unset, excluded F->T",
            np(n()),
            ex(np(n())),
            true,
            true,
        ),
        (
            "providerID unset, excluded T->F",
            ex(np(n())),
            np(n()),
            true,
            true,
        ),
        (
            "providerID unset, ready T->F",
            np(n()),
            nr(np(n())),
            false,
            false,
        ),
        (
            "providerID unset, ready F->T",
            nr(np(n())),
            np(n()),
            false,
            false,
        ),
        (
            "providerID unset, tainted T->F",
            ca(np(n())),
            np(n()),
            false,
            true,
        ),
        (
            "providerID unset, tainted F->T",
            np(n()),
            ca(np(n())),
            false,
            true,
        ),
    ];
    for (desc, old, new, go, sdk) in cases {
        assert_eq!(should_sync_updated_node(&old, &new), go, "go: {desc}");
        assert_eq!(
            node_update_affects_load_balancers(&old, &new),
            sdk,
            "sdk: {desc}"
        );
    }
}

fn set(nodes: &[Node]) -> NodeSet {
    NodeSet::from_nodes(nodes)
}

#[test]
fn nodes_sufficiently_equal_go_table() {
    // Go: TestNodesNotEqual
    let n1 = provider(node("node1"), "");
    let n2 = provider(node("node2"), "");
    let n3 = provider(node("node3"), "");
    let n1p = provider(node("node1"), "cumulus/1");
    let n2p = provider(node("node2"), "cumulus/2");
    let cases = [
        (
            "Nodes with updated providerID",
            vec![n1.clone(), n2.clone()],
            vec![n1p.clone(), n2p.clone()],
            false,
        ),
        (
            "Nodes unchanged",
            vec![n1p.clone(), n2.clone()],
            vec![n1p.clone(), n2.clone()],
            true,
        ),
        (
            "Change node with empty providerID",
            vec![n1p.clone(), n2.clone()],
            vec![n1p.clone(), n3.clone()],
            false,
        ),
        (
            "order does not matter",
            vec![n2.clone(), n1p.clone()],
            vec![n1p.clone(), n2.clone()],
            true,
        ),
        (
            "one more",
            vec![n1.clone()],
            vec![n1.clone(), n2.clone()],
            false,
        ),
        (
            "one less",
            vec![n1.clone(), n2.clone()],
            vec![n1.clone()],
            false,
        ),
        (
            "readiness is not compared",
            vec![n1.clone()],
            vec![ready(n1.clone(), Some("False"))],
            true,
        ),
    ];
    for (desc, old, new, equal) in cases {
        assert_eq!(
            nodes_sufficiently_equal(Some(&set(&old)), &set(&new)),
            equal,
            "{desc}"
        );
    }
    assert!(nodes_sufficiently_equal(None, &NodeSet::default()));
    assert!(!nodes_sufficiently_equal(None, &set(&[n1])));
}

#[test]
fn node_changes_stable_set_go_table() {
    // Go: TestNodeChangesForStableNodeSetEnabled — which changes make a load balancer's set differ.
    let n1 = node("node1");
    let n2 = node("node2");
    let n3 = node("node3");
    let arcs = |v: &[Node]| v.iter().cloned().map(Arc::new).collect::<Vec<_>>();
    let stable_set = |v: &[Node]| {
        let nodes = arcs(v);
        NodeSet::from_nodes(stable_nodes(&nodes).iter().map(|n| n.as_ref()))
    };
    let cases = [
        (
            "No node changes",
            vec![n1.clone(), n2.clone(), n3.clone()],
            vec![n1.clone(), n2.clone(), n3.clone()],
            None,
        ),
        (
            "1 new node gets added",
            vec![n1.clone(), n2.clone()],
            vec![n1.clone(), n2.clone(), n3.clone()],
            Some(vec!["node1", "node2", "node3"]),
        ),
        (
            "1 node goes NotReady",
            vec![n1.clone(), n2.clone(), n3.clone()],
            vec![n1.clone(), ready(n2.clone(), Some("False")), n3.clone()],
            None,
        ),
        (
            "1 node gets Tainted",
            vec![n1.clone(), n2.clone(), n3.clone()],
            vec![n1.clone(), taint(n2.clone(), CA), n3.clone()],
            Some(vec!["node1", "node3"]),
        ),
        (
            "1 node goes Ready",
            vec![n1.clone(), ready(n2.clone(), Some("False")), n3.clone()],
            vec![n1.clone(), n2.clone(), n3.clone()],
            None,
        ),
        (
            "1 node get excluded",
            vec![n1.clone(), n2.clone(), n3.clone()],
            vec![n1.clone(), label(n2.clone(), EXCLUDE, ""), n3.clone()],
            Some(vec!["node1", "node3"]),
        ),
        (
            "1 old node gets deleted",
            vec![n1.clone(), n2.clone(), n3.clone()],
            vec![n1.clone(), n2.clone()],
            Some(vec!["node1", "node2"]),
        ),
        (
            "1 node marked for deletion",
            vec![n1.clone(), n2.clone(), n3.clone()],
            vec![n1.clone(), deleted(n2.clone()), n3.clone()],
            Some(vec!["node1", "node3"]),
        ),
        (
            "1 spurious node update",
            vec![n1.clone(), n2.clone(), n3.clone()],
            vec![n1.clone(), taint(n2.clone(), "Other"), n3.clone()],
            None,
        ),
    ];
    for (desc, before, after, update) in cases {
        let old = stable_set(&before);
        let new = stable_set(&after);
        let equal = nodes_sufficiently_equal(Some(&old), &new);
        match update {
            None => assert!(equal, "{desc}: no update expected"),
            Some(hosts) => {
                assert!(!equal, "{desc}: update expected");
                assert_eq!(new.names().collect::<Vec<_>>(), hosts, "{desc}");
            }
        }
    }
}

#[test]
fn stable_nodes_sorted_and_filtered() {
    let nodes: Vec<Arc<Node>> = [
        node("c"),
        label(node("b"), EXCLUDE, "true"),
        node("a"),
        taint(node("d"), CA),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let got: Vec<String> = stable_nodes(&nodes)
        .iter()
        .map(|n| node_name(n).to_owned())
        .collect();
    assert_eq!(got, vec!["a", "c"]);
    let s = NodeSet::from_nodes(stable_nodes(&nodes).iter().map(|n| n.as_ref()));
    assert_eq!(s.provider_id("a"), Some("fake://a"));
    assert_eq!(s.len(), 2);
}

#[test]
fn loggable_names() {
    let few = ["b", "a"];
    assert_eq!(loggable_node_names(few), vec!["a", "b"]);
    let many: Vec<String> = (0..25).map(|i| format!("node-{i:02}")).collect();
    let out = loggable_node_names(many.iter().map(String::as_str));
    assert_eq!(out.len(), 21);
    assert_eq!(out[0], "node-00");
    assert_eq!(out[19], "node-19");
    assert_eq!(out[20], "<5 more>");
    let exactly: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
    assert_eq!(
        loggable_node_names(exactly.iter().map(String::as_str)).len(),
        20
    );
    assert_eq!(go_list(&["a".into(), "b".into()]), "[a b]");
    assert_eq!(go_list(&[]), "[]");
}
