//! The cluster in a box on its own: a registered Node gets its pod CIDR from kube-controller-manager and is held
//! NotReady by kwok while uninitialized; a detached cluster is stopped, every process and the directory gone.

use std::time::Duration;

use ccm_testenv::cluster::{self, Cluster, ClusterOptions, NodeRole, UNINITIALIZED_TAINT};
use ccm_testenv::controlplane::{Binaries, LaunchOptions, Supervision};
use ccm_testenv::wait_for;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

fn ready(node: &Node) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test]
async fn a_detached_cluster_simulates_kubelets_and_stops_completely() {
    let parent = tempfile::tempdir().expect("a temporary directory");
    let dir = parent.path().join("cluster");
    let options = ClusterOptions::new(LaunchOptions::new(
        Binaries::find().expect("binaries (cargo xtask controlplane build)"),
        &dir,
        Supervision::Detached,
    ));
    let cluster = Cluster::launch(options).await.expect("the cluster starts");
    let client = cluster.client().expect("admin client");
    cluster::register_node(&client, "cp-1", NodeRole::ControlPlane)
        .await
        .expect("register");
    let nodes: Api<Node> = Api::all(client.clone());
    let cidr = wait_for(
        "a pod CIDR and Ready=False from the simulated kubelet",
        Duration::from_secs(60),
        || async {
            let node = nodes.get("cp-1").await.ok()?;
            let held =
                ready(&node) == Some(("False".to_owned(), "NetworkPluginNotReady".to_owned()));
            let cidr = node.spec.as_ref()?.pod_cidr.clone()?;
            held.then_some(cidr)
        },
    )
    .await
    .expect("kube-controller-manager and kwok at work");
    assert!(cidr.starts_with("10.244."), "{cidr}");

    // Initialized (the CCM's part, done by hand here): kwok turns the node Ready, the controller-manager lifts
    // the not-ready taint.
    // (get and replace, again on a conflict: kwok and the controller-manager write the Node too)
    wait_for("the taint removed", Duration::from_secs(30), || async {
        let mut node = nodes.get("cp-1").await.ok()?;
        if let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            taints.retain(|t| t.key != UNINITIALIZED_TAINT);
        }
        nodes
            .replace("cp-1", &Default::default(), &node)
            .await
            .ok()
            .map(|_| ())
    })
    .await
    .expect("remove the taint");
    wait_for(
        "Ready=True without the not-ready taint",
        Duration::from_secs(60),
        || async {
            let node = nodes.get("cp-1").await.ok()?;
            let untainted = !node
                .spec
                .as_ref()?
                .taints
                .as_ref()?
                .iter()
                .any(|t| t.key == "node.kubernetes.io/not-ready");
            (ready(&node)?.0 == "True" && untainted).then_some(())
        },
    )
    .await
    .expect("Ready");

    let env = cluster.detach().expect("detach");
    let components: cluster::ComponentPids = serde_json::from_str(
        &std::fs::read_to_string(dir.join(cluster::COMPONENTS_FILE)).expect("components file"),
    )
    .expect("parse");
    let mut pids: Vec<u32> = components.components.iter().map(|(_, pid)| *pid).collect();
    pids.extend([env.pids.etcd, env.pids.kube_apiserver]);
    assert_eq!(pids.len(), 5);
    cluster::stop_detached(&dir).expect("stop");
    assert!(!dir.exists(), "the directory is removed");
    for pid in pids {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| !stat.contains(") Z "));
        assert!(!alive, "process {pid} still runs");
    }
}
