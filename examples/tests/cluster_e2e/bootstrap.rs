//! The bootstrap of the deployment story: every node uninitialized and NotReady (the CNI waits for the CCM),
//! deploy/ applied unchanged, the scheduler placing both replicas on different control-plane nodes, and the
//! reference CCM, run on the host as those pods would run it, initializing every node under the RBAC of
//! deploy/ without a single forbidden request. And the negative control: without the uninitialized toleration
//! the replicas stay Pending, the scheduler reports untolerated taints on every node, and the doctor names the
//! taint and exits 2.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use ccm_testenv::cluster::{NodeRole, UNINITIALIZED_TAINT};
use ccm_testenv::wait_for;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::support::{
    CCM_ACCOUNT, STEP, Scenario, apply, condition, deploy_install, initialized, reference_ccm,
    taint_keys, wait_nodes,
};

const NODES: [(&str, NodeRole); 5] = [
    ("cp-1", NodeRole::ControlPlane),
    ("cp-2", NodeRole::ControlPlane),
    ("worker-1", NodeRole::Worker),
    ("worker-2", NodeRole::Worker),
    ("worker-3", NodeRole::Worker),
];

const CCM_PODS: &str = "app.kubernetes.io/name=cloud-controller-manager";

/// Every node registered, held NotReady by the simulated CNI, with a pod CIDR from kube-controller-manager.
async fn nodes_wait_for_the_cloud(client: &kube::Client) {
    wait_nodes(
        client,
        "the nodes to be held NotReady with pod CIDRs",
        NODES.len(),
        |node| {
            condition(node, "Ready")
                == Some(("False".to_owned(), "NetworkPluginNotReady".to_owned()))
                && taint_keys(node).contains(UNINITIALIZED_TAINT)
                && node
                    .spec
                    .as_ref()
                    .and_then(|s| s.pod_cidr.as_ref())
                    .is_some()
        },
    )
    .await;
}

#[tokio::test]
async fn deploy_bootstraps_a_cluster_whose_nodes_wait_for_the_cloud() {
    let scenario = Scenario::start(&NODES).await;
    let client = scenario.client();
    nodes_wait_for_the_cloud(&client).await;

    for doc in deploy_install() {
        apply(&client, &doc).await;
    }
    // The scheduler binds both replicas to different control-plane nodes; kwok runs them.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let placed = wait_for(
        "both replicas running on the control plane",
        STEP,
        || async {
            let list = pods
                .list(&ListParams::default().labels(CCM_PODS))
                .await
                .ok()?;
            let running: Vec<(String, String)> = list
                .items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .filter_map(|p| {
                    Some((
                        p.metadata.name.clone()?,
                        p.spec.as_ref()?.node_name.clone()?,
                    ))
                })
                .collect();
            (running.len() == 2).then_some(running)
        },
    )
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    let hosts: BTreeSet<&str> = placed.iter().map(|(_, node)| node.as_str()).collect();
    assert_eq!(hosts, BTreeSet::from(["cp-1", "cp-2"]), "{placed:?}");

    // The operator describes the cloud in the ConfigMap of deploy/ (the instances of this cluster).
    let names: Vec<&str> = NODES.iter().map(|(name, _)| *name).collect();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let inventory = ccm_testenv::cluster::fake_inventory(&names);
    config_maps
        .patch(
            "reference-ccm-cloud-config",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "data": { "inventory.yaml": inventory } })),
        )
        .await
        .expect("configure the cloud");

    // What the pod would see: its container's args, the ConfigMap mounted at its mount path, the
    // ServiceAccount's token as its in-cluster credentials, its own name in POD_NAME.
    let deployment = Api::<Deployment>::namespaced(client.clone(), "kube-system")
        .get("cloud-controller-manager")
        .await
        .expect("the Deployment");
    let container = deployment
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers[0].clone())
        .expect("a container");
    let mount = container
        .volume_mounts
        .as_ref()
        .and_then(|m| m.iter().find(|m| m.name == "cloud-config"))
        .map(|m| m.mount_path.clone())
        .expect("the cloud-config mount");
    let mounted = scenario.dir.path().join("cloud-config");
    std::fs::create_dir_all(&mounted).expect("mount directory");
    let data = config_maps
        .get("reference-ccm-cloud-config")
        .await
        .expect("the ConfigMap")
        .data
        .unwrap_or_default();
    for (file, text) in &data {
        std::fs::write(mounted.join(file), text).expect("write the mounted file");
    }
    let kubeconfig = scenario.dir.path().join("in-cluster.kubeconfig");
    scenario
        .env()
        .write_service_account_kubeconfig("kube-system", "cloud-controller-manager", &kubeconfig)
        .await
        .expect("a token of the deployed ServiceAccount");
    let port = ccm_testenv::ports::pick_free_ports(1).expect("a free port")[0];
    let mut args: Vec<String> = container
        .args
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|arg| {
            if arg.starts_with("--secure-port=") {
                // host networking on a host shared with other tests: the same server on a free port
                format!("--secure-port={port}")
            } else {
                arg.replace(&mount, &mounted.display().to_string())
            }
        })
        .collect();
    for flag in [
        "kubeconfig",
        "authentication-kubeconfig",
        "authorization-kubeconfig",
    ] {
        args.push(format!("--{flag}={}", kubeconfig.display()));
    }
    let log_path = scenario.dir.path().join("reference-ccm.log");
    let log = std::fs::File::create(&log_path).expect("the CCM log");
    let mut ccm = tokio::process::Command::new(reference_ccm())
        .args(&args)
        .env("POD_NAME", &placed[0].0)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start the reference CCM");

    wait_nodes(
        &client,
        "every node initialized, Ready and untainted",
        NODES.len(),
        |node| {
            let taints = taint_keys(node);
            initialized(node)
                && condition(node, "Ready").is_some_and(|(status, _)| status == "True")
                && !taints.contains("node.kubernetes.io/not-ready")
        },
    )
    .await;
    assert!(
        ccm.try_wait().expect("CCM status").is_none(),
        "the reference CCM exited; its log: {}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
    let _ = ccm.start_kill();
    let _ = ccm.wait().await;

    let by_ccm: Vec<_> = scenario
        .audit()
        .into_iter()
        .filter(|event| event.user.username == CCM_ACCOUNT)
        .collect();
    assert!(
        by_ccm
            .iter()
            .any(|e| e.verb == "patch" || e.verb == "update"),
        "the CCM's writes are in the audit log"
    );
    let forbidden: Vec<String> = by_ccm
        .iter()
        .filter(|e| e.code() == Some(403))
        .map(|e| format!("{} {:?}", e.verb, e.object_ref))
        .collect();
    assert!(
        forbidden.is_empty(),
        "forbidden requests of the CCM: {forbidden:#?}"
    );
    scenario.cluster.stop().expect("stop the cluster");
}

#[tokio::test]
async fn without_the_uninitialized_toleration_the_ccm_never_schedules() {
    let scenario = Scenario::start(&NODES).await;
    let client = scenario.client();
    nodes_wait_for_the_cloud(&client).await;

    for mut doc in deploy_install() {
        if doc["kind"] == "Deployment" {
            let tolerations = doc["spec"]["template"]["spec"]["tolerations"]
                .as_array_mut()
                .expect("tolerations");
            let before = tolerations.len();
            tolerations.retain(|t| t["key"] != UNINITIALIZED_TAINT);
            assert_eq!(tolerations.len(), before - 1);
        }
        apply(&client, &doc).await;
    }
    let events: Api<Event> = Api::namespaced(client.clone(), "kube-system");
    // kube-scheduler 1.36 counts the nodes with an untolerated taint without naming it (it logs the taint at
    // -v=4 only); the doctor names it.
    let message = wait_for(
        "FailedScheduling for the untolerated taint",
        STEP,
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|event| {
                let about_ccm = event
                    .involved_object
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("cloud-controller-manager-"));
                let message = event.message.unwrap_or_default();
                (about_ccm
                    && event.reason.as_deref() == Some("FailedScheduling")
                    && message.contains("5 node(s) had untolerated taint(s)"))
                .then_some(message)
            })
        },
    )
    .await;
    let message = match message {
        Ok(message) => message,
        Err(err) => {
            let seen: Vec<String> = events
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .map(|e| {
                    format!(
                        "{:?} {:?}: {:?}",
                        e.involved_object.name, e.reason, e.message
                    )
                })
                .collect();
            panic!("{err}; events: {seen:#?}")
        }
    };
    assert!(message.starts_with("0/5 nodes are available"), "{message}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let list = pods
        .list(&ListParams::default().labels(CCM_PODS))
        .await
        .expect("list the pods");
    assert!(!list.items.is_empty());
    for pod in &list.items {
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending")
        );
        assert!(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none()
        );
    }

    // The doctor's live mode sees the same thing and says so with exit status 2.
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(reference_ccm())
            .arg("doctor")
            .arg(format!(
                "--kubeconfig={}",
                scenario.cluster.kubeconfig_path().display()
            ))
            .env_remove("KUBECONFIG")
            .output(),
    )
    .await
    .expect("the doctor finishes")
    .expect("run the doctor");
    let report = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains(UNINITIALIZED_TAINT), "{report}");
    scenario.cluster.stop().expect("stop the cluster");
}
