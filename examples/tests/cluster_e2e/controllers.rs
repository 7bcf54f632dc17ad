//! The SDK's controllers next to kube-controller-manager's: routes for the pod CIDRs its IPAM allocates, the
//! node lifecycle when a kubelet goes silent and its instance shuts down and disappears, and load-balancer
//! backends as nodes are labelled, go silent and are deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ccm_testenv::cluster::{EXCLUDE_FROM_LOAD_BALANCERS, NodeRole, stop_heartbeats};
use ccm_testenv::wait_for;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::support::{
    IN_PROCESS_CCM_USER, InProcessCcm, STEP, Scenario, condition, initialized, node, taint_keys,
    wait_nodes,
};

/// The longest a route may lag behind the node it serves becoming routable.
const ROUTE_LAG: Duration = Duration::from_secs(1);

#[tokio::test]
async fn every_pod_cidr_from_the_controller_manager_gets_its_route_within_a_second() {
    let nodes = [
        ("cp-1", NodeRole::ControlPlane),
        ("worker-1", NodeRole::Worker),
        ("worker-2", NodeRole::Worker),
        ("worker-3", NodeRole::Worker),
    ];
    let names: Vec<&str> = nodes.iter().map(|(n, _)| *n).collect();
    let scenario = Scenario::start(&nodes).await;
    let client = scenario.client();
    let ccm = InProcessCcm::start(&scenario, &names).await;

    // A node becomes routable when it has both its pod CIDR (kube-controller-manager) and its addresses (our
    // node controller); the route must follow within ROUTE_LAG.
    let api: Api<Node> = Api::all(client.clone());
    let mut routable: BTreeMap<String, (Instant, String)> = BTreeMap::new();
    let mut routed: BTreeMap<String, Instant> = BTreeMap::new();
    let deadline = Instant::now() + STEP;
    while routed.len() < names.len() {
        assert!(
            Instant::now() < deadline,
            "routes so far: {routed:?}, routable: {routable:?}"
        );
        for node in api
            .list(&ListParams::default())
            .await
            .expect("list nodes")
            .items
        {
            let name = node.metadata.name.clone().unwrap_or_default();
            let cidr = node.spec.as_ref().and_then(|s| s.pod_cidr.clone());
            let addressed = node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .is_some_and(|a| a.iter().any(|a| a.type_ == "InternalIP"));
            if let (Some(cidr), true) = (cidr, addressed) {
                routable
                    .entry(name)
                    .or_insert_with(|| (Instant::now(), cidr));
            }
        }
        for route in ccm.cloud.routes() {
            if routable
                .get(&route.target_node)
                .is_some_and(|(_, cidr)| *cidr == route.destination_cidr)
            {
                routed
                    .entry(route.target_node.clone())
                    .or_insert_with(Instant::now);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (name, at) in &routed {
        let (since, cidr) = &routable[name];
        let lag = at.saturating_duration_since(*since);
        eprintln!("route of {name} ({cidr}): {lag:?} after the node was routable");
        assert!(
            lag <= ROUTE_LAG,
            "the route of {name} ({cidr}) came {lag:?} after the node was routable"
        );
        assert!(cidr.starts_with("10.244."), "{cidr} is from --cluster-cidr");
    }
    wait_nodes(
        &client,
        "NetworkUnavailable=False on every node",
        names.len(),
        |node| condition(node, "NetworkUnavailable").is_some_and(|(status, _)| status == "False"),
    )
    .await;
    ccm.stop().await;
    scenario.cluster.stop().expect("stop the cluster");
}

/// A pod pinned to `node` that tolerates its unreachability for one second only.
fn pinned_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": {
            "nodeSelector": { "kubernetes.io/hostname": node },
            "tolerations": [{
                "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 1
            }],
            "containers": [{ "name": "app", "image": "example.invalid/app:1" }]
        }
    }))
    .expect("a pod")
}

#[tokio::test]
async fn a_silent_node_is_handled_by_the_controller_manager_and_a_gone_instance_by_us() {
    let nodes = [
        ("worker-1", NodeRole::Worker),
        ("worker-2", NodeRole::Worker),
    ];
    let names: Vec<&str> = nodes.iter().map(|(n, _)| *n).collect();
    let scenario = Scenario::start(&nodes).await;
    let client = scenario.client();
    let ccm = InProcessCcm::start(&scenario, &names).await;
    wait_nodes(&client, "the nodes initialized and Ready", 2, |node| {
        initialized(node) && condition(node, "Ready").is_some_and(|(s, _)| s == "True")
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pinned_pod("app", "worker-2"))
        .await
        .expect("create the pod");
    wait_for("the pod running on worker-2", STEP, || async {
        let pod = pods.get("app").await.ok()?;
        (pod.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));

    // The kubelet goes silent: kube-controller-manager marks the node unreachable and evicts the pod.
    let silent_at = Instant::now();
    stop_heartbeats(&client, "worker-2")
        .await
        .expect("stop the heartbeats");
    wait_for("worker-2 unreachable", STEP, || async {
        let node = node(&client, "worker-2").await?;
        (condition(&node, "Ready").is_some_and(|(s, _)| s == "Unknown")
            && taint_keys(&node).contains("node.kubernetes.io/unreachable"))
        .then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    let noticed = silent_at.elapsed();
    eprintln!(
        "kube-controller-manager marked worker-2 unreachable {noticed:?} after its heartbeats stopped"
    );
    wait_for("the pod evicted", STEP, || async {
        let pod = pods.get_opt("app").await.ok()?;
        pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));

    // The cloud reports the instance shut down: our lifecycle controller taints the node.
    assert!(ccm.cloud.set_shutdown("worker-2", true));
    wait_for("the shutdown taint", STEP, || async {
        let node = node(&client, "worker-2").await?;
        taint_keys(&node)
            .contains("node.cloudprovider.kubernetes.io/shutdown")
            .then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    // The instance is deleted: our lifecycle controller deletes the Node.
    assert!(ccm.cloud.remove_instance("worker-2"));
    wait_for("worker-2 deleted", STEP, || async {
        node(&client, "worker-2").await.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        node(&client, "worker-1")
            .await
            .is_some_and(|n| initialized(&n))
    );
    ccm.stop().await;

    let audit = scenario.audit();
    let pod_deleters: BTreeSet<String> = audit
        .iter()
        .filter(|e| e.verb == "delete")
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.resource == "pods"))
        .map(|e| e.user.username.clone())
        .collect();
    assert_eq!(
        pod_deleters,
        // kube-controller-manager's taint-eviction controller runs with the node controller's ServiceAccount
        BTreeSet::from(["system:serviceaccount:kube-system:node-controller".to_owned()]),
        "pods are evicted by kube-controller-manager only (unreachable after {noticed:?})"
    );
    assert!(
        audit.iter().any(|e| e.user.username == IN_PROCESS_CCM_USER
            && e.verb == "delete"
            && e.object_ref.as_ref().is_some_and(|o| o.resource == "nodes")),
        "the Node was deleted by the CCM"
    );
    scenario.cluster.stop().expect("stop the cluster");
}

async fn label(client: &kube::Client, node: &str, value: Option<&str>) {
    let patch =
        serde_json::json!({ "metadata": { "labels": { EXCLUDE_FROM_LOAD_BALANCERS: value } } });
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|err| panic!("labelling {node}: {err}"));
}

async fn wait_backends(ccm: &InProcessCcm, what: &str, expected: &[&str]) {
    let expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    wait_for(what, STEP, || async {
        let hosts = ccm.cloud.load_balancer("default/web")?.hosts;
        (hosts == expected).then_some(())
    })
    .await
    .unwrap_or_else(|err| {
        panic!(
            "{err}: backends {:?}",
            ccm.cloud.load_balancer("default/web").map(|lb| lb.hosts)
        )
    });
}

#[tokio::test]
async fn load_balancer_backends_follow_the_exclusion_label_not_readiness() {
    let nodes = [
        ("cp-1", NodeRole::ControlPlane),
        ("worker-1", NodeRole::Worker),
        ("worker-2", NodeRole::Worker),
    ];
    let names: Vec<&str> = nodes.iter().map(|(n, _)| *n).collect();
    let scenario = Scenario::start(&nodes).await;
    let client = scenario.client();
    let ccm = InProcessCcm::start(&scenario, &names).await;
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "web" },
        "spec": { "type": "LoadBalancer", "selector": { "app": "web" }, "ports": [{ "port": 80 }] }
    }))
    .expect("a Service");
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &service)
        .await
        .expect("create the Service");
    // kubeadm's label keeps the control-plane node out.
    wait_backends(&ccm, "the workers as backends", &["worker-1", "worker-2"]).await;
    label(&client, "worker-1", Some("true")).await;
    wait_backends(&ccm, "worker-1 excluded", &["worker-2"]).await;
    // The value `false` includes the node (Go honours it since 1.34).
    label(&client, "cp-1", Some("false")).await;
    wait_backends(
        &ccm,
        "cp-1 included by the value false",
        &["cp-1", "worker-2"],
    )
    .await;

    // A silent node stays a backend (readiness has not counted since Go 1.32; health checks handle it).
    stop_heartbeats(&client, "worker-2")
        .await
        .expect("stop the heartbeats");
    wait_for("worker-2 unreachable", STEP, || async {
        let node = node(&client, "worker-2").await?;
        condition(&node, "Ready")
            .is_some_and(|(s, _)| s == "Unknown")
            .then_some(())
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    // A later change makes the controller sync the set again: worker-2 is still in it.
    label(&client, "worker-1", None).await;
    wait_backends(
        &ccm,
        "worker-1 back, worker-2 kept",
        &["cp-1", "worker-1", "worker-2"],
    )
    .await;

    // A node whose instance is gone is deleted and leaves the load balancer.
    assert!(ccm.cloud.remove_instance("worker-2"));
    wait_backends(&ccm, "worker-2 gone", &["cp-1", "worker-1"]).await;
    ccm.stop().await;
    scenario.cluster.stop().expect("stop the cluster");
}
