//! The route controller against a real kube-apiserver and the fake cloud.
//!
//! Every test labels its Nodes with a unique `ccm-test` value and scopes its informers to that label, runs its own
//! `FakeCloud` (cluster `kubernetes`), and deletes its Nodes at the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ccm_core::names;
use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_core::{CloudProvider, Route};
use ccm_provider_fake::{Capability, FakeCloud, Fault, InjectedError, Operation};
use ccm_routecontroller::{Config, Error, RouteController, RouteSyncMode, descriptor};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);
const CLUSTER_CIDRS: &str = "10.244.0.0/16,fd00:10:244::/56";
const LABEL: &str = "ccm-test";

/// A running route controller with its own fake cloud and informers.
struct Harness {
    client: kube::Client,
    label: String,
    fake: FakeCloud,
    registry: SharedRegistry,
    token: CancellationToken,
    nodes: Api<Node>,
}

impl Harness {
    fn config() -> Config {
        Config::default()
            .with_cluster_cidr(CLUSTER_CIDRS)
            .with_route_reconciliation_period(Duration::from_millis(300))
            .with_max_retry_backoff(Duration::from_secs(1))
            .with_sync_mode(RouteSyncMode::EventDriven {
                resync: Duration::from_secs(600),
            })
    }

    /// Start a controller; `prepare` may seed the fake cloud first (it gets the node name prefix).
    async fn start(config: Config, prepare: impl FnOnce(&FakeCloud, &str)) -> Harness {
        let env = TestEnv::shared().await;
        let client = env.client();
        let label = env.unique_name("routes");
        let fake = FakeCloud::new();
        prepare(&fake, &label);
        let informers = SharedInformers::new(
            client.clone(),
            &InformerScope::all().with_node_selector(format!("{LABEL}={label}")),
        );
        let registry = SharedRegistry::new();
        let ctx = ControllerContext::new(
            client.clone(),
            Arc::new(fake.clone()),
            informers.clone(),
            registry.clone(),
            "kubernetes",
        );
        let controller = RouteController::new(&ctx, config).expect("valid route controller");
        let token = CancellationToken::new();
        tokio::spawn(informers.run(token.clone()));
        let run_token = token.clone();
        tokio::spawn(async move {
            Box::new(controller)
                .run(run_token)
                .await
                .expect("route controller runs");
        });
        Harness {
            nodes: Api::all(client.clone()),
            client,
            label,
            fake,
            registry,
            token,
        }
    }

    fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.label)
    }

    /// Create a kubelet-like Node with these pod CIDRs and extra conditions; returns its UID.
    async fn create_node(
        &self,
        suffix: &str,
        pod_cidrs: &[&str],
        ip: &str,
        extra_conditions: Vec<NodeCondition>,
    ) -> String {
        let name = self.name(suffix);
        let mut node = Node::default();
        node.metadata.name = Some(name.clone());
        node.metadata.labels = Some(BTreeMap::from([
            (LABEL.to_owned(), self.label.clone()),
            (names::labels::HOSTNAME.to_owned(), name.clone()),
        ]));
        node.spec = Some(NodeSpec {
            pod_cidr: pod_cidrs.first().map(|c| c.to_string()),
            pod_cidrs: (!pod_cidrs.is_empty())
                .then(|| pod_cidrs.iter().map(|c| c.to_string()).collect()),
            taints: Some(vec![Taint {
                key: names::taints::UNINITIALIZED.into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let mut conditions = vec![ready_condition()];
        conditions.extend(extra_conditions);
        node.status = Some(NodeStatus {
            conditions: Some(conditions),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip.into(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.clone(),
                },
            ]),
            ..Default::default()
        });
        let created = self
            .nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        created.metadata.uid.expect("a UID")
    }

    async fn network_condition(&self, suffix: &str) -> Option<NodeCondition> {
        condition(
            &self.nodes,
            &self.name(suffix),
            names::conditions::NETWORK_UNAVAILABLE,
        )
        .await
    }

    /// Wait for the node's NetworkUnavailable condition to have this status and reason.
    async fn wait_condition(&self, suffix: &str, status: &str, reason: &str) -> NodeCondition {
        wait_for(
            &format!("{suffix}: NetworkUnavailable={status}/{reason}"),
            TIMEOUT,
            || async {
                self.network_condition(suffix)
                    .await
                    .filter(|c| c.status == status && c.reason.as_deref() == Some(reason))
            },
        )
        .await
        .unwrap()
    }

    /// Wait until the fake cloud's routes are exactly `expected` (target suffix, CIDR), returning them.
    async fn wait_routes(&self, expected: &[(&str, &str)]) -> Vec<Route> {
        let mut want: Vec<(String, String)> = expected
            .iter()
            .map(|(target, cidr)| {
                let target = if target.is_empty() {
                    String::new()
                } else if target.starts_with('=') {
                    target.trim_start_matches('=').to_owned()
                } else {
                    self.name(target)
                };
                (target, cidr.to_string())
            })
            .collect();
        want.sort();
        wait_for(&format!("routes {want:?}"), TIMEOUT, || async {
            let routes = self.fake.routes();
            let mut have: Vec<(String, String)> = routes
                .iter()
                .map(|r| (r.target_node.clone(), r.destination_cidr.clone()))
                .collect();
            have.sort();
            (have == want).then_some(routes)
        })
        .await
        .unwrap()
    }

    async fn cleanup(self) {
        self.token.cancel();
        let _ = self
            .nodes
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("{LABEL}={}", self.label)),
            )
            .await;
    }
}

fn ready_condition() -> NodeCondition {
    let t = Time(Timestamp::from_second(1_700_000_000).unwrap());
    NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("KubeletReady".into()),
        message: Some("kubelet is posting ready status".into()),
        last_heartbeat_time: Some(t.clone()),
        last_transition_time: Some(t),
    }
}

async fn condition(nodes: &Api<Node>, name: &str, type_: &str) -> Option<NodeCondition> {
    nodes
        .get_opt(name)
        .await
        .ok()
        .flatten()?
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == type_)
}

fn metric(registry: &SharedRegistry, line_prefix: &str) -> Option<u64> {
    registry
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(line_prefix)?.trim().parse().ok())
}

#[tokio::test]
async fn nodes_with_pod_cidrs_get_routes_and_route_created() {
    let h = Harness::start(Harness::config(), |_, _| {}).await;
    let calico = NodeCondition {
        type_: names::conditions::NETWORK_UNAVAILABLE.into(),
        status: "False".into(),
        reason: Some("CalicoIsUp".into()),
        message: Some("Calico is running on this node".into()),
        ..Default::default()
    };
    let uid_a = h
        .create_node(
            "a",
            &["10.244.1.0/24", "fd00:10:244:1::/64"],
            "10.0.0.1",
            vec![],
        )
        .await;
    let uid_b = h
        .create_node("b", &["10.244.2.0/24"], "10.0.0.2", vec![calico])
        .await;
    h.create_node("c", &[], "10.0.0.3", vec![]).await;

    let routes = h
        .wait_routes(&[
            ("a", "10.244.1.0/24"),
            ("a", "fd00:10:244:1::/64"),
            ("b", "10.244.2.0/24"),
        ])
        .await;
    // The node UID is the name hint; the node's addresses travel with the route.
    for route in &routes {
        let uid = if route.target_node == h.name("a") {
            &uid_a
        } else {
            &uid_b
        };
        assert!(
            route.name.contains(uid.as_str()),
            "{} lacks {uid}",
            route.name
        );
        assert_eq!(route.target_node_addresses.len(), 2);
    }

    let a = h.wait_condition("a", "False", "RouteCreated").await;
    assert_eq!(
        a.message.as_deref(),
        Some("RouteController created a route")
    );
    assert!(a.last_heartbeat_time.is_some() && a.last_transition_time.is_some());
    // The CNI's condition with the same status but another reason is taken over (Go 1.36).
    h.wait_condition("b", "False", "RouteCreated").await;
    // No pod CIDRs and no routes: left alone.
    assert!(h.network_condition("c").await.is_none());
    // The kubelet's condition is untouched by the status patch.
    for suffix in ["a", "b", "c"] {
        assert_eq!(
            condition(&h.nodes, &h.name(suffix), "Ready").await,
            Some(ready_condition()),
            "{suffix}"
        );
    }
    assert!(metric(&h.registry, "route_controller_route_sync_total ").unwrap() >= 1);
    h.cleanup().await;
}

#[tokio::test]
async fn deleted_node_loses_its_route() {
    let h = Harness::start(Harness::config(), |_, _| {}).await;
    h.create_node("keep", &["10.244.10.0/24"], "10.0.1.1", vec![])
        .await;
    h.create_node("gone", &["10.244.11.0/24"], "10.0.1.2", vec![])
        .await;
    h.wait_routes(&[("keep", "10.244.10.0/24"), ("gone", "10.244.11.0/24")])
        .await;
    h.nodes
        .delete(&h.name("gone"), &DeleteParams::default())
        .await
        .unwrap();
    h.wait_routes(&[("keep", "10.244.10.0/24")]).await;
    assert!(h.fake.call_count(Operation::DeleteRoute) >= 1);
    h.cleanup().await;
}

#[tokio::test]
async fn stale_routes_in_range_are_deleted_and_foreign_ones_kept() {
    let h = Harness::start(Harness::config(), |fake, _| {
        fake.insert_route(Route::new("ghost-node", "10.244.99.0/24"));
        fake.insert_route(Route::new("ghost-node", "fd00:10:244:99::/64"));
        fake.insert_route(Route::new("", "10.244.98.0/24").with_blackhole(true));
        fake.insert_route(Route::new("vpn-gateway", "192.168.0.0/24"));
        fake.insert_route(Route::new("", "172.16.0.0/24").with_blackhole(true));
    })
    .await;
    h.create_node("n", &["10.244.20.0/24"], "10.0.2.1", vec![])
        .await;
    h.wait_routes(&[
        ("n", "10.244.20.0/24"),
        ("=vpn-gateway", "192.168.0.0/24"),
        ("", "172.16.0.0/24"),
    ])
    .await;
    h.wait_condition("n", "False", "RouteCreated").await;
    let mut deleted = h.fake.call_targets(Operation::DeleteRoute);
    deleted.sort();
    deleted.dedup();
    assert_eq!(
        deleted,
        vec!["10.244.98.0/24", "10.244.99.0/24", "fd00:10:244:99::/64"]
    );
    h.cleanup().await;
}

#[tokio::test]
async fn blackhole_of_a_node_cidr_is_replaced_in_one_pass() {
    let h = Harness::start(Harness::config(), |_, _| {}).await;
    let name = h.name("hole");
    h.fake
        .insert_route(Route::new(name.clone(), "10.244.30.0/24").with_blackhole(true));
    h.create_node("hole", &["10.244.30.0/24"], "10.0.3.1", vec![])
        .await;
    h.wait_condition("hole", "False", "RouteCreated").await;
    let routes = h.fake.routes();
    assert_eq!(routes.len(), 1);
    assert!(!routes[0].blackhole, "{routes:?}");
    assert_eq!(routes[0].target_node, name);
    h.cleanup().await;
}

#[tokio::test]
async fn changed_node_addresses_replace_the_route_deletes_first() {
    let h = Harness::start(Harness::config(), |fake, label| {
        let old = vec![NodeAddress {
            type_: "InternalIP".into(),
            address: "10.9.9.9".into(),
        }];
        fake.insert_route(
            Route::new(format!("{label}-m"), "10.244.35.0/24").with_node_addresses(old),
        );
    })
    .await;
    h.create_node("m", &["10.244.35.0/24"], "10.0.3.5", vec![])
        .await;
    let routes = wait_for("the route to carry the new addresses", TIMEOUT, || async {
        let routes = h.fake.routes();
        routes
            .iter()
            .any(|r| {
                r.target_node_addresses
                    .iter()
                    .any(|a| a.address == "10.0.3.5")
            })
            .then_some(routes)
    })
    .await
    .unwrap();
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].target_node, h.name("m"));
    // The old route went first: the fake would keep it if the create came before the delete.
    let ops: Vec<Operation> = h
        .fake
        .call_ops()
        .into_iter()
        .filter(|op| matches!(op, Operation::DeleteRoute | Operation::CreateRoute))
        .collect();
    assert_eq!(ops, vec![Operation::DeleteRoute, Operation::CreateRoute]);
    h.wait_condition("m", "False", "RouteCreated").await;
    h.cleanup().await;
}

#[tokio::test]
async fn create_failures_warn_and_recover_after_the_fault_clears() {
    let h = Harness::start(Harness::config(), |fake, _| {
        fake.inject(
            Operation::CreateRoute,
            Fault::always(InjectedError::Other("route table is full".into())),
        );
    })
    .await;
    let uid = h
        .create_node("f", &["10.244.40.0/24"], "10.0.4.1", vec![])
        .await;
    let name = h.name("f");
    let cond = h.wait_condition("f", "True", "NoRouteCreated").await;
    assert_eq!(
        cond.message.as_deref(),
        Some("RouteController failed to create a route")
    );

    let events: Api<Event> = Api::namespaced(h.client.clone(), "default");
    let event = wait_for("a FailedToCreateRoute event", TIMEOUT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.involved_object.name.as_deref() == Some(name.as_str())
                    && e.reason.as_deref() == Some(names::events::FAILED_TO_CREATE_ROUTE)
            })
    })
    .await
    .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some(names::components::ROUTE_CONTROLLER)
    );
    assert_eq!(
        event.reporting_component.as_deref(),
        Some(names::components::ROUTE_CONTROLLER)
    );
    let regarding = event.involved_object;
    assert_eq!(regarding.kind.as_deref(), Some("Node"));
    assert_eq!(regarding.uid.as_deref(), Some(uid.as_str()));
    let note = event.message.unwrap_or_default();
    assert!(
        note.contains("10.244.40.0/24") && note.contains("route table is full"),
        "{note}"
    );
    assert!(h.fake.routes().is_empty());

    // The failed pass is retried with backoff; once the cloud recovers, so does the node.
    let attempts = h.fake.call_count(Operation::CreateRoute);
    h.fake.clear_faults();
    h.wait_routes(&[("f", "10.244.40.0/24")]).await;
    let recovered = h.wait_condition("f", "False", "RouteCreated").await;
    assert!(h.fake.call_count(Operation::CreateRoute) > attempts);
    assert_eq!(
        recovered.message.as_deref(),
        Some("RouteController created a route")
    );
    h.cleanup().await;
}

#[tokio::test]
async fn event_driven_mode_lists_nothing_while_nothing_changes() {
    let h = Harness::start(Harness::config(), |_, _| {}).await;
    h.create_node("idle", &["10.244.50.0/24"], "10.0.5.1", vec![])
        .await;
    h.wait_routes(&[("idle", "10.244.50.0/24")]).await;
    h.wait_condition("idle", "False", "RouteCreated").await;
    // A Node event seen while that pass was running may still be pending: it runs at most one period (300 ms)
    // after the pass started. Let it finish before the observation window.
    wait_for("the controller to go quiet", TIMEOUT, || async {
        let before = h.fake.call_count(Operation::ListRoutes);
        tokio::time::sleep(Duration::from_secs(1)).await;
        (h.fake.call_count(Operation::ListRoutes) == before).then_some(())
    })
    .await
    .unwrap();

    // Ten periods in which the Node changes only in ways that cannot affect routes (kubelet heartbeats, labels):
    // no cloud call at all.
    let lists = h.fake.call_count(Operation::ListRoutes);
    let calls = h.fake.calls().len();
    let name = h.name("idle");
    for i in 0..6 {
        let mut ready = ready_condition();
        ready.last_heartbeat_time = Some(Time(Timestamp::from_second(1_700_000_100 + i).unwrap()));
        let heartbeat = serde_json::json!({ "status": { "conditions": [ready] } });
        h.nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(heartbeat))
            .await
            .unwrap();
        let label = serde_json::json!({ "metadata": { "labels": { "heartbeat": i.to_string() } } });
        h.nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(label))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(h.fake.call_count(Operation::ListRoutes), lists);
    assert_eq!(h.fake.calls().len(), calls);
    assert_eq!(
        metric(&h.registry, "route_controller_route_sync_total "),
        Some(lists as u64)
    );

    // A Node change brings a pass.
    h.create_node("late", &["10.244.51.0/24"], "10.0.5.2", vec![])
        .await;
    h.wait_routes(&[("idle", "10.244.50.0/24"), ("late", "10.244.51.0/24")])
        .await;
    assert!(h.fake.call_count(Operation::ListRoutes) > lists);
    h.cleanup().await;
}

#[tokio::test]
async fn periodic_mode_lists_every_period() {
    let config = Harness::config().with_sync_mode(RouteSyncMode::Periodic);
    let h = Harness::start(config, |_, _| {}).await;
    h.create_node("p", &["10.244.60.0/24"], "10.0.6.1", vec![])
        .await;
    h.wait_condition("p", "False", "RouteCreated").await;

    let lists = h.fake.call_count(Operation::ListRoutes);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let more = h.fake.call_count(Operation::ListRoutes) - lists;
    // Ten periods of 300 ms: about ten lists (at least five, for a slow machine).
    assert!((5..=11).contains(&more), "{more} ListRoutes calls in 3s");
    assert_eq!(h.fake.call_count(Operation::CreateRoute), 1);
    h.cleanup().await;
}

#[tokio::test]
async fn descriptor_init_follows_settings_and_capabilities() {
    let env = TestEnv::shared().await;
    let fake = FakeCloud::new();
    let ctx = ControllerContext::new(
        env.client(),
        Arc::new(fake.clone()) as Arc<dyn CloudProvider>,
        SharedInformers::new(env.client(), &InformerScope::all()),
        SharedRegistry::new(),
        "kubernetes",
    );
    let d = descriptor(Config::default().with_cluster_cidr("10.244.0.0/16"));
    assert_eq!(d.name, "node-route-controller");
    assert_eq!(d.aliases, vec!["route".to_string()]);
    assert!(!d.disabled_by_default);
    assert!((d.init)(&ctx).unwrap().is_some());

    let off = descriptor(
        Config::default()
            .with_cluster_cidr("10.244.0.0/16")
            .with_configure_cloud_routes(false),
    );
    assert!((off.init)(&ctx).unwrap().is_none());

    // A missing cluster CIDR is a startup error, unless routes are off.
    let err = (descriptor(Config::default()).init)(&ctx)
        .err()
        .expect("an error");
    assert!(err.to_string().contains("--cluster-cidr"), "{err}");
    let bad =
        (descriptor(Config::default().with_cluster_cidr("10.0.0.0/8,10.1.0.0/16")).init)(&ctx)
            .err()
            .expect("an error");
    assert!(bad.to_string().contains("same IP family"), "{bad}");
    assert!(
        (descriptor(Config::default().with_configure_cloud_routes(false)).init)(&ctx)
            .unwrap()
            .is_none()
    );

    // A provider without routes: not started, even with a bad CIDR (as in Go).
    fake.set_capability(Capability::Routes, false);
    assert!(
        (descriptor(Config::default()).init)(&ctx)
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        RouteController::new(&ctx, Config::default().with_cluster_cidr("10.244.0.0/16")),
        Err(Error::RoutesNotSupported { .. })
    ));
}

#[tokio::test]
async fn reconcile_reports_what_it_did() {
    let env = TestEnv::shared().await;
    let label = env.unique_name("routes");
    let fake = FakeCloud::new();
    fake.insert_route(Route::new("ghost", "10.244.70.0/24"));
    let informers = SharedInformers::new(
        env.client(),
        &InformerScope::all().with_node_selector(format!("{LABEL}={label}")),
    );
    let ctx = ControllerContext::new(
        env.client(),
        Arc::new(fake.clone()),
        informers.clone(),
        SharedRegistry::new(),
        "kubernetes",
    );
    let controller = RouteController::new(&ctx, Harness::config()).unwrap();
    let token = CancellationToken::new();
    tokio::spawn(informers.clone().run(token.clone()));
    informers.nodes().wait_synced().await;

    let report = controller.reconcile().await.unwrap();
    assert_eq!(report.routes_listed, 1);
    assert_eq!(report.deleted, 1);
    assert!(report.is_complete());
    assert!(fake.routes().is_empty());

    fake.inject(
        Operation::ListRoutes,
        Fault::once(InjectedError::Other("api down".into())),
    );
    let err = controller.reconcile().await.unwrap_err();
    assert!(matches!(err, Error::ListRoutes { .. }), "{err}");
    assert!(err.to_string().contains("api down"), "{err}");
    assert_eq!(controller.metrics().syncs(), 2);
    token.cancel();
}
