//! The doctor against a real kube-apiserver: each broken situation is built for real and must produce its
//! finding with the right severity; a healthy setup must produce none.
//!
//! There is no scheduler, kubelet or controller manager in the test control plane: Pending pods get the
//! `PodScheduled` condition a scheduler would write by a status patch, node readiness is patched like a kubelet
//! would, and node ages come from the creation time with `--uninitialized-threshold 0s`. Each test works in its
//! own namespace and labels its nodes with a unique value selected by `--node-selector`.

use ccm_core::names::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS;
use ccm_core::names::{lease, taints};
use ccm_doctor::cluster::DEFAULT_WORKLOAD_NAME;
use ccm_doctor::{CheckId, DoctorArgs, DoctorError, Report, Severity, execute};
use ccm_testenv::TestEnv;
use clap::Parser;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NODE_LABEL: &str = "ccm-doctor-test";

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    doctor: DoctorArgs,
}

/// One test's world: a namespace, a node label value, and helpers to build objects.
struct World {
    env: &'static TestEnv,
    client: kube::Client,
    ns: String,
    label: String,
}

impl World {
    async fn new(prefix: &str) -> World {
        let env = TestEnv::shared().await;
        let client = env.client();
        let ns = env.namespace(prefix).await;
        // Pods need the namespace's default ServiceAccount (no controller manager creates it here).
        let sa: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
        Api::<ServiceAccount>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &sa)
            .await
            .unwrap();
        let label = env.unique_name("n");
        World {
            env,
            client,
            ns,
            label,
        }
    }

    /// The doctor's flags for this world, then `extra`.
    fn args(&self, extra: &[&str]) -> DoctorArgs {
        let kubeconfig = self.env.kubeconfig_path().display().to_string();
        let selector = format!("{NODE_LABEL}={}", self.label);
        let mut argv: Vec<&str> = vec![
            "doctor",
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            &self.ns,
            "--node-selector",
            &selector,
            "--cni-namespace",
            &self.ns,
            "--lease-namespace",
            &self.ns,
        ];
        if !extra.contains(&"--uninitialized-threshold") {
            argv.extend(["--uninitialized-threshold", "0s"]);
        }
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().doctor
    }

    async fn doctor(&self, extra: &[&str]) -> Report {
        execute(&self.args(extra)).await.unwrap()
    }

    fn node_name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.label)
    }

    /// A node as a kubelet registers it: with `--cloud-provider=external` it carries the uninitialized taint;
    /// `initialized` nodes have a providerID instead.
    async fn node(
        &self,
        suffix: &str,
        uninitialized: bool,
        provider_id: bool,
        ready: Option<bool>,
    ) -> String {
        self.node_as(suffix, uninitialized, provider_id, ready, false)
            .await
    }

    /// A control-plane node as kubeadm leaves it: labelled `node-role.kubernetes.io/control-plane` and
    /// `node.kubernetes.io/exclude-from-external-load-balancers`, tainted `node-role.kubernetes.io/control-plane`
    /// (NoSchedule).
    async fn control_plane_node(
        &self,
        suffix: &str,
        uninitialized: bool,
        provider_id: bool,
        ready: Option<bool>,
    ) -> String {
        self.node_as(suffix, uninitialized, provider_id, ready, true)
            .await
    }

    async fn node_as(
        &self,
        suffix: &str,
        uninitialized: bool,
        provider_id: bool,
        ready: Option<bool>,
        control_plane: bool,
    ) -> String {
        let name = self.node_name(suffix);
        let mut node_taints = Vec::new();
        let mut labels = json!({NODE_LABEL: self.label});
        if control_plane {
            labels[taints::CONTROL_PLANE] = json!("");
            labels[EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS] = json!("");
            node_taints.push(json!({"key": taints::CONTROL_PLANE, "effect": "NoSchedule"}));
        }
        if uninitialized {
            node_taints.push(
                json!({"key": taints::UNINITIALIZED, "value": "true", "effect": "NoSchedule"}),
            );
        }
        let mut spec = json!({});
        if !node_taints.is_empty() {
            spec["taints"] = json!(node_taints);
        }
        if provider_id {
            spec["providerID"] = json!(format!("fake://{name}"));
        }
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }))
        .unwrap();
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes.create(&PostParams::default(), &node).await.unwrap();
        if ready == Some(true) {
            // The API server's admission adds the not-ready taint to new nodes; the node lifecycle controller
            // (absent here) removes it once the kubelet reports Ready.
            let ours = spec.get("taints").cloned().unwrap_or(Value::Null);
            nodes
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"taints": ours}})),
                )
                .await
                .unwrap();
        }
        if let Some(ready) = ready {
            let (status, reason, message) = if ready {
                ("True", "KubeletReady", "kubelet is posting ready status")
            } else {
                (
                    "False",
                    "KubeletNotReady",
                    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady \
                     message:Network plugin returns error: cni plugin not initialized",
                )
            };
            let now = Timestamp::now().to_string();
            nodes
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"conditions": [{
                        "type": "Ready", "status": status, "reason": reason, "message": message,
                        "lastHeartbeatTime": now, "lastTransitionTime": now,
                    }]}})),
                )
                .await
                .unwrap();
        }
        name
    }

    async fn create_deployment(&self, value: Value) {
        let d: Deployment = serde_json::from_value(value).unwrap();
        Api::<Deployment>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &d)
            .await
            .unwrap();
    }

    async fn create_daemon_set(&self, value: Value) {
        let d: DaemonSet = serde_json::from_value(value).unwrap();
        Api::<DaemonSet>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &d)
            .await
            .unwrap();
    }

    async fn pod(&self, name: &str, labels: Value, node: Option<&str>) {
        let mut spec = json!({"containers": [{"name": "c", "image": "example.invalid/c:1"}]});
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }

    async fn pod_status(&self, name: &str, status: Value) {
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .unwrap();
    }

    /// What a scheduler writes on a pod it cannot place.
    async fn unschedulable(&self, name: &str, message: &str) {
        self.pod_status(
            name,
            json!({"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                "lastTransitionTime": Timestamp::now().to_string(),
            }]}),
        )
        .await;
    }

    async fn lease(&self, name: &str, renewed_ago_secs: i64, duration_secs: i32) {
        let renewed = MicroTime(Timestamp::now() - SignedDuration::from_secs(renewed_ago_secs));
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("ccm-0_0f8e".to_owned()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(renewed.clone()),
                renew_time: Some(renewed),
                ..Default::default()
            }),
        };
        Api::<Lease>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &lease)
            .await
            .unwrap();
    }

    async fn cleanup(&self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("{NODE_LABEL}={}", self.label)),
            )
            .await
            .unwrap();
    }
}

/// A CCM Deployment following every recommendation of the chicken-and-egg blog post.
fn good_deployment(name: &str, replicas: i32, args: &[&str]) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"k8s-app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {
                "metadata": {"labels": {"k8s-app": name}},
                "spec": {
                    "hostNetwork": true,
                    "dnsPolicy": "Default",
                    "nodeSelector": {taints::CONTROL_PLANE: ""},
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": {"k8s-app": name}},
                        "topologyKey": "kubernetes.io/hostname",
                    }]}},
                    "tolerations": [
                        {"key": taints::UNINITIALIZED, "value": "true", "effect": "NoSchedule"},
                        {"key": taints::NOT_READY, "operator": "Exists", "effect": "NoSchedule"},
                        {"key": taints::NOT_READY, "operator": "Exists", "effect": "NoExecute"},
                        {"key": taints::UNREACHABLE, "operator": "Exists", "effect": "NoExecute"},
                        {"key": taints::CONTROL_PLANE, "operator": "Exists", "effect": "NoSchedule"},
                        {"key": taints::MASTER, "operator": "Exists", "effect": "NoSchedule"},
                    ],
                    "containers": [{"name": "ccm", "image": "example.invalid/ccm:1", "args": args}],
                },
            },
        },
    })
}

/// A CCM Deployment that follows none of them.
fn bare_deployment(name: &str, replicas: i32, args: &[&str]) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"k8s-app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {
                "metadata": {"labels": {"k8s-app": name}},
                "spec": {"containers": [{"name": "ccm", "image": "example.invalid/ccm:1", "args": args}]},
            },
        },
    })
}

fn findings(report: &Report) -> Vec<(CheckId, Severity)> {
    report
        .findings()
        .iter()
        .map(|f| (f.check, f.severity))
        .collect()
}

fn has(report: &Report, check: CheckId, severity: Severity) -> bool {
    report
        .findings()
        .iter()
        .any(|f| f.check == check && f.severity == severity)
}

fn finding(report: &Report, check: CheckId) -> &ccm_doctor::Finding {
    report
        .findings()
        .iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no {check} in:\n{}", report.render_text()))
}

#[tokio::test]
async fn a_healthy_cluster_reports_nothing() {
    let w = World::new("doctor-healthy").await;
    w.control_plane_node("cp", false, true, Some(true)).await;
    w.node("worker", false, true, Some(true)).await;
    w.create_deployment(good_deployment(
        DEFAULT_WORKLOAD_NAME,
        2,
        &["--cloud-provider=fake"],
    ))
    .await;
    w.lease(lease::NAME, 2, 15).await;

    let report = w.doctor(&[]).await;
    assert_eq!(findings(&report), vec![], "{}", report.render_text());
    assert_eq!(report.exit_code(), 0);
    assert!(report.render_text().contains("no problems found"));
    assert!(
        report.target().starts_with("cluster https://127.0.0.1:"),
        "{}",
        report.target()
    );

    // The same through JSON.
    let args = w.args(&["--output", "json"]);
    let json: Value = serde_json::from_str(&args.render(&execute(&args).await.unwrap())).unwrap();
    assert_eq!(json["status"], "healthy");
    assert_eq!(json["exitCode"], 0);
    assert_eq!(json["findings"], json!([]));
    w.cleanup().await;
}

#[tokio::test]
async fn the_generated_deployment_is_healthy_in_a_cluster() {
    let w = World::new("doctor-deploy").await;
    w.control_plane_node("cp", false, true, Some(true)).await;
    w.node("worker", false, true, Some(true)).await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/deployment.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut deployment = docs
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("deploy/deployment.yaml holds a Deployment");
    deployment["metadata"]["namespace"] = json!(w.ns);
    w.create_deployment(deployment).await;

    // Found by its name (the default), with its Lease named by its own --leader-elect-resource-name.
    let report = w.doctor(&[]).await;
    assert_eq!(
        findings(&report),
        vec![(CheckId::LeaseMissing, Severity::Error)],
        "{}",
        report.render_text()
    );
    w.lease(lease::NAME, 1, 15).await;
    let report = w.doctor(&[]).await;
    assert_eq!(findings(&report), vec![], "{}", report.render_text());
    assert_eq!(report.exit_code(), 0);
    w.cleanup().await;
}

#[tokio::test]
async fn uninitialized_nodes_and_nodes_without_provider_id() {
    let w = World::new("doctor-nodes").await;
    w.create_deployment(good_deployment(DEFAULT_WORKLOAD_NAME, 1, &[]))
        .await;
    w.lease(lease::NAME, 1, 15).await;
    let a = w.node("a", true, false, Some(true)).await;
    let b = w.node("b", true, false, None).await;
    let bare = w.node("bare", false, false, Some(true)).await;
    w.control_plane_node("ok", false, true, Some(true)).await;

    let report = w.doctor(&[]).await;
    let mut expected = vec![
        (CheckId::NodeUninitializedTooLong, Severity::Error),
        (CheckId::NodeWithoutProviderId, Severity::Warning),
        (CheckId::CniNotFound, Severity::Warning),
    ];
    assert_eq!(findings(&report), expected, "{}", report.render_text());
    assert_eq!(report.exit_code(), 2);
    let mut waiting: Vec<&str> = finding(&report, CheckId::NodeUninitializedTooLong)
        .objects
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    waiting.sort_unstable();
    let mut both = vec![a.as_str(), b.as_str()];
    both.sort_unstable();
    assert_eq!(waiting, both);
    assert_eq!(
        finding(&report, CheckId::NodeWithoutProviderId).objects[0].name,
        bare
    );
    // Only b is not ready (a reported Ready=True): the CNI question is about b only.
    assert_eq!(finding(&report, CheckId::CniNotFound).objects[0].name, b);

    // With a generous threshold the waiting nodes are only informational.
    let report = w.doctor(&["--uninitialized-threshold", "1h"]).await;
    expected = vec![
        (CheckId::NodeWithoutProviderId, Severity::Warning),
        (CheckId::NodeWaitingForInitialization, Severity::Info),
    ];
    assert_eq!(findings(&report), expected, "{}", report.render_text());
    assert_eq!(report.exit_code(), 1);
    w.cleanup().await;
}

#[tokio::test]
async fn pending_ccm_pods_name_the_untolerated_taint() {
    let w = World::new("doctor-pending").await;
    w.control_plane_node("n", true, false, Some(true)).await;
    w.create_deployment(good_deployment(DEFAULT_WORKLOAD_NAME, 1, &[]))
        .await;
    w.lease(lease::NAME, 1, 15).await;
    let labels = json!({"k8s-app": DEFAULT_WORKLOAD_NAME});
    w.pod("ccm-old-format", labels.clone(), None).await;
    w.unschedulable(
        "ccm-old-format",
        "0/3 nodes are available: 3 node(s) had untolerated taint {node.cloudprovider.kubernetes.io/uninitialized: \
         true}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
    )
    .await;
    w.pod("ccm-new-format", labels.clone(), None).await;
    w.unschedulable(
        "ccm-new-format",
        "0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: 0/1 nodes are available: 1 \
         Preemption is not helpful for scheduling.",
    )
    .await;
    w.pod("ccm-selector", labels, None).await;
    w.unschedulable(
        "ccm-selector",
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
    )
    .await;

    let report = w.doctor(&[]).await;
    let pod_findings: Vec<_> = report
        .findings()
        .iter()
        .filter(|f| {
            matches!(
                f.check,
                CheckId::CcmPodUntoleratedTaint | CheckId::CcmPodUnschedulable
            )
        })
        .collect();
    assert_eq!(pod_findings.len(), 3, "{}", report.render_text());
    for f in &pod_findings {
        assert_eq!(f.severity, Severity::Error);
    }
    let by_pod = |name: &str| {
        pod_findings
            .iter()
            .find(|f| f.objects[0].name == name)
            .unwrap_or_else(|| panic!("no finding for {name}"))
    };
    let old = by_pod("ccm-old-format");
    assert_eq!(old.check, CheckId::CcmPodUntoleratedTaint);
    assert!(
        old.message.ends_with(taints::UNINITIALIZED),
        "{}",
        old.message
    );
    assert!(old.message.contains("reported by the scheduler"));
    // The new scheduler message names no taint: they are read from the nodes in scope.
    let new = by_pod("ccm-new-format");
    assert_eq!(new.check, CheckId::CcmPodUntoleratedTaint);
    assert!(
        new.message.contains("read from the nodes"),
        "{}",
        new.message
    );
    assert!(
        new.message.ends_with(taints::UNINITIALIZED),
        "{}",
        new.message
    );
    assert_eq!(by_pod("ccm-selector").check, CheckId::CcmPodUnschedulable);
    assert_eq!(report.exit_code(), 2);
    w.cleanup().await;
}

#[tokio::test]
async fn a_workload_against_the_recommendations() {
    let w = World::new("doctor-workload").await;
    w.node("n", false, true, Some(true)).await;
    w.control_plane_node("cp", false, true, Some(true)).await;
    w.create_deployment(bare_deployment(
        DEFAULT_WORKLOAD_NAME,
        3,
        &["--leader-elect=false"],
    ))
    .await;

    let report = w.doctor(&[]).await;
    assert_eq!(
        findings(&report),
        vec![
            (CheckId::MissingUninitializedToleration, Severity::Error),
            (CheckId::MissingNotReadyToleration, Severity::Error),
            (CheckId::LeaderElectionDisabled, Severity::Error),
            (CheckId::MissingUnreachableToleration, Severity::Warning),
            (CheckId::MissingControlPlaneToleration, Severity::Warning),
            (CheckId::NoHostNetwork, Severity::Warning),
            (CheckId::NoControlPlanePlacement, Severity::Warning),
            (CheckId::NoAntiAffinity, Severity::Warning),
        ],
        "{}",
        report.render_text()
    );
    for f in report.findings() {
        assert_eq!(
            f.objects[0].to_string(),
            format!("Deployment {}/{DEFAULT_WORKLOAD_NAME}", w.ns)
        );
    }

    // A DaemonSet found by name (not by the default name or label), leader election off.
    let ds_name = "acme-cloud-controller-manager";
    w.create_daemon_set(json!({
        "metadata": {"name": ds_name},
        "spec": {
            "selector": {"matchLabels": {"app": ds_name}},
            "template": {
                "metadata": {"labels": {"app": ds_name}},
                "spec": {
                    "hostNetwork": true,
                    "nodeSelector": {taints::CONTROL_PLANE: ""},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "ccm", "image": "example.invalid/ccm:1",
                                    "args": ["--leader-elect=false"]}],
                },
            },
        },
    }))
    .await;
    let report = w.doctor(&["--workload", ds_name]).await;
    // Its status is empty (no DaemonSet controller here): the pod count is unknown, so several may run.
    assert_eq!(
        findings(&report),
        vec![(CheckId::LeaderElectionDisabled, Severity::Error)],
        "{}",
        report.render_text()
    );
    assert_eq!(report.findings()[0].objects[0].kind, "DaemonSet");

    // Found by label selector: both.
    let report = w
        .doctor(&["--workload-selector", "k8s-app", "--workload", ds_name])
        .await;
    let kinds: std::collections::BTreeSet<String> = report
        .findings()
        .iter()
        .map(|f| f.objects[0].kind.clone())
        .collect();
    assert_eq!(
        kinds,
        ["DaemonSet".to_owned(), "Deployment".to_owned()].into()
    );
    w.cleanup().await;
}

#[tokio::test]
async fn the_cni_ccm_deadlock() {
    let w = World::new("doctor-deadlock").await;
    let stuck = w
        .control_plane_node("stuck", true, false, Some(false))
        .await;
    w.create_deployment(good_deployment(DEFAULT_WORKLOAD_NAME, 1, &[]))
        .await;
    w.lease(lease::NAME, 1, 15).await;
    // Calico's DaemonSet, found by its well-known name; its pod on the node waits for the network.
    w.create_daemon_set(json!({
        "metadata": {"name": "calico-node"},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "calico-node"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "calico-node"}},
                "spec": {"hostNetwork": true, "tolerations": [{"operator": "Exists"}],
                         "containers": [{"name": "calico-node", "image": "example.invalid/calico:1"}]},
            },
        },
    }))
    .await;
    w.pod(
        "calico-node-x1",
        json!({"k8s-app": "calico-node"}),
        Some(&stuck),
    )
    .await;

    let report = w.doctor(&[]).await;
    assert_eq!(
        findings(&report),
        vec![
            (CheckId::NodeUninitializedTooLong, Severity::Error),
            (CheckId::CniCcmDeadlock, Severity::Error),
        ],
        "{}",
        report.render_text()
    );
    let deadlock = finding(&report, CheckId::CniCcmDeadlock);
    let objects: Vec<String> = deadlock
        .objects
        .iter()
        .map(|o| format!("{} {}", o.kind, o.name))
        .collect();
    assert_eq!(
        objects,
        vec![format!("Node {stuck}"), "Pod calico-node-x1".to_owned()]
    );
    assert!(
        deadlock.message.contains("calico-node"),
        "{}",
        deadlock.message
    );

    // A custom CNI found by --cni-selector: none of its pods exists.
    let report = w.doctor(&["--cni-selector", "app=my-cni"]).await;
    let not_found = finding(&report, CheckId::CniNotFound);
    assert_eq!(not_found.severity, Severity::Warning);
    assert!(
        not_found.message.contains("app=my-cni"),
        "{}",
        not_found.message
    );

    // Once the CNI pod runs, the node waits for something else: no deadlock.
    w.pod_status(
        "calico-node-x1",
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
    )
    .await;
    let report = w.doctor(&[]).await;
    assert_eq!(
        findings(&report),
        vec![(CheckId::NodeUninitializedTooLong, Severity::Error)],
        "{}",
        report.render_text()
    );
    w.cleanup().await;
}

#[tokio::test]
async fn the_leader_lease() {
    let w = World::new("doctor-lease").await;
    w.control_plane_node("n", false, true, Some(true)).await;
    w.create_deployment(good_deployment(DEFAULT_WORKLOAD_NAME, 2, &[]))
        .await;

    // Leader election is on (the default) but there is no Lease.
    let report = w.doctor(&[]).await;
    assert_eq!(
        findings(&report),
        vec![(CheckId::LeaseMissing, Severity::Error)]
    );
    assert_eq!(
        finding(&report, CheckId::LeaseMissing).objects[0].to_string(),
        format!("Lease {}/{}", w.ns, lease::NAME)
    );

    // A Lease last renewed a minute ago with a 15 s duration: nobody leads.
    w.lease(lease::NAME, 60, 15).await;
    let report = w.doctor(&[]).await;
    assert_eq!(
        findings(&report),
        vec![(CheckId::LeaseNotRenewed, Severity::Error)]
    );
    let detail = finding(&report, CheckId::LeaseNotRenewed).objects[0]
        .detail
        .clone()
        .unwrap();
    assert!(
        detail.starts_with("held by ccm-0_0f8e, last renewed 1m"),
        "{detail}"
    );

    // A fresh Lease elsewhere, named by the CCM's own flags: found without --lease-name.
    w.lease("acme-lock", 1, 15).await;
    let flags = [
        "--leader-elect-resource-name=acme-lock".to_owned(),
        format!("--leader-elect-resource-namespace={}", w.ns),
    ];
    let flag_refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    w.create_deployment(good_deployment("acme-ccm", 2, &flag_refs))
        .await;
    let report = w.doctor(&["--workload", "acme-ccm"]).await;
    assert_eq!(findings(&report), vec![], "{}", report.render_text());
    // An explicit --lease-name wins over the CCM's flags.
    let report = w
        .doctor(&["--workload", "acme-ccm", "--lease-name", lease::NAME])
        .await;
    assert_eq!(
        findings(&report),
        vec![(CheckId::LeaseNotRenewed, Severity::Error)]
    );
    w.cleanup().await;
}

/// Issue 15's negative control for placement, in live mode: two control-plane nodes labelled and tainted as
/// kubeadm does and three workers. The repository's deploy/ Deployment as shipped fits; a real vendor's DaemonSet
/// on the legacy master label fits none of them (exit status 2); a required node affinity using every operator
/// is explained term by term, and stops being a finding once one node satisfies one term.
#[tokio::test]
async fn a_placement_no_node_satisfies() {
    let w = World::new("doctor-placement").await;
    w.control_plane_node("cp-1", false, true, Some(true)).await;
    w.control_plane_node("cp-2", false, true, Some(true)).await;
    for i in 1..=3 {
        w.node(&format!("worker-{i}"), false, true, Some(true))
            .await;
    }
    // A Lease that stays fresh for the whole test.
    w.lease(lease::NAME, 1, 3600).await;

    // deploy/ as shipped: nothing to report.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("../deploy/deployment.yaml")).unwrap();
    let mut deployment = serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("deploy/deployment.yaml holds a Deployment");
    deployment["metadata"]["namespace"] = json!(w.ns);
    w.create_deployment(deployment).await;
    let report = w.doctor(&[]).await;
    assert_eq!(findings(&report), vec![], "{}", report.render_text());

    // A vendor's published DaemonSet, placed by node-role.kubernetes.io/master.
    let text = std::fs::read_to_string(root.join("tests/fixtures/vendors/aws.yaml")).unwrap();
    let mut daemon_set: Value = serde_saphyr::from_str(&text).unwrap();
    daemon_set["metadata"]["namespace"] = json!(w.ns);
    w.create_daemon_set(daemon_set).await;
    let args = w.args(&["--workload", "aws-cloud-controller-manager"]);
    let report = execute(&args).await.unwrap();
    assert_eq!(
        findings(&report),
        vec![
            (CheckId::MissingNotReadyToleration, Severity::Error),
            (CheckId::MissingControlPlaneToleration, Severity::Error),
            (CheckId::RemovedNodeLabel, Severity::Error),
            (CheckId::NoNodeFitsPlacement, Severity::Error),
        ],
        "{}",
        report.render_text()
    );
    let placement = finding(&report, CheckId::NoNodeFitsPlacement);
    assert_eq!(
        placement.message,
        "DaemonSet aws-cloud-controller-manager can run on none of the 5 nodes: no node satisfies its node \
         selection (nodeSelector node-role.kubernetes.io/master=\"\" rules out 5 of 5), so the scheduler can \
         place none of its pods: a CCM pod that is not running stays Pending, and the nodes it should initialize \
         wait for it"
    );
    assert!(
        placement.fix.starts_with(
            "select node-role.kubernetes.io/control-plane instead of node-role.kubernetes.io/master"
        ),
        "{}",
        placement.fix
    );
    assert_eq!(report.exit_code(), 2);
    assert_eq!(
        ccm_doctor::run(args).await,
        std::process::ExitCode::from(ccm_doctor::EXIT_ERRORS)
    );

    // A required node affinity with every operator; each term rules out every node.
    let name = "affinity-ccm";
    let mut d = good_deployment(name, 1, &["--leader-elect=false"]);
    let pod = &mut d["spec"]["template"]["spec"];
    pod.as_object_mut().unwrap().remove("nodeSelector");
    pod["affinity"]["nodeAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": taints::CONTROL_PLANE, "operator": "Exists"},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            ]},
            {"matchExpressions": [{"key": NODE_LABEL, "operator": "NotIn", "values": [w.label]}]},
            {"matchExpressions": [
                {"key": "example.com/generation", "operator": "Gt", "values": ["3"]},
                {"key": "example.com/generation", "operator": "Lt", "values": ["9"]},
            ]},
            {"matchExpressions": [
                {"key": NODE_LABEL, "operator": "DoesNotExist"},
            ]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["no-such-node"]}]},
        ],
    }});
    w.create_deployment(d).await;
    let report = w.doctor(&["--workload", name]).await;
    assert_eq!(
        findings(&report),
        vec![(CheckId::NoNodeFitsPlacement, Severity::Error)],
        "{}",
        report.render_text()
    );
    let message = &report.findings()[0].message;
    for expected in [
        "required node affinity term 1 (node-role.kubernetes.io/control-plane Exists, \
         node.kubernetes.io/instance-type In (m5.large)) rules out 5 of 5"
            .to_owned(),
        format!(
            "required node affinity term 2 ({NODE_LABEL} NotIn ({})) rules out 5 of 5",
            w.label
        ),
        "required node affinity term 3 (example.com/generation Gt 3, example.com/generation Lt 9) rules out 5 of 5"
            .to_owned(),
        format!("required node affinity term 4 ({NODE_LABEL} DoesNotExist) rules out 5 of 5"),
        "required node affinity term 5 (field metadata.name In (no-such-node)) rules out 5 of 5".to_owned(),
        "the required node affinity terms are alternatives".to_owned(),
    ] {
        assert!(message.contains(&expected), "{expected}\nin\n{message}");
    }

    // One worker gets a generation in range: term 3 holds there, and the worker is untainted.
    let worker = w.node_name("worker-2");
    Api::<Node>::all(w.client.clone())
        .patch(
            &worker,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"example.com/generation": "4"}}})),
        )
        .await
        .unwrap();
    let report = w.doctor(&["--workload", name]).await;
    assert_eq!(findings(&report), vec![], "{}", report.render_text());
    w.cleanup().await;
}

#[tokio::test]
async fn no_ccm_at_all() {
    let w = World::new("doctor-empty").await;
    w.node("n", false, true, Some(true)).await;
    let report = w.doctor(&[]).await;
    assert_eq!(
        findings(&report),
        vec![(CheckId::CcmWorkloadNotFound, Severity::Warning)]
    );
    let f = &report.findings()[0];
    assert!(
        f.message.contains(&format!(
            "named cloud-controller-manager or labelled k8s-app=cloud-controller-manager in namespace {}",
            w.ns
        )),
        "{}",
        f.message
    );
    assert_eq!(report.exit_code(), 1);
    w.cleanup().await;
}

#[tokio::test]
async fn an_unreachable_cluster_is_a_clear_error() {
    // A port that nothing listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
             insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  \
             context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let args = Cli::try_parse_from([
        "doctor",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--timeout",
        "20s",
    ])
    .unwrap()
    .doctor;
    let err = execute(&args).await.unwrap_err();
    assert!(matches!(err, DoctorError::Api { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "failed to list nodes on https://127.0.0.1:{port}: "
        )),
        "{text}"
    );
    assert!(text.to_lowercase().contains("connection refused"), "{text}");
    assert!(text.ends_with("(check that the cluster is reachable: the server URL, the network and TLS settings of the kubeconfig)"), "{text}");

    // An unknown context is a kubeconfig error.
    let args = Cli::try_parse_from([
        "doctor",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--context",
        "nope",
    ])
    .unwrap()
    .doctor;
    let err = execute(&args).await.unwrap_err();
    assert!(matches!(err, DoctorError::Kubeconfig { .. }), "{err:?}");
}

#[tokio::test]
async fn a_user_without_rights_gets_a_clear_error() {
    let env = TestEnv::shared().await;
    let client = env.client_for_user(&env.unique_name("nobody"), &[]);
    let options = ccm_doctor::DoctorOptions::default();
    let err = ccm_doctor::diagnose_cluster(client, "https://test", &options)
        .await
        .unwrap_err();
    let DoctorError::Api { action, hint, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(action, "list nodes");
    assert!(hint.contains("needs to list nodes"), "{hint}");
    let text = err.to_string();
    assert!(
        text.starts_with("failed to list nodes on https://test: "),
        "{text}"
    );
    assert!(text.contains("forbidden"), "{text}");
}

#[tokio::test]
async fn the_admin_kubeconfig_of_the_test_cluster_works_with_defaults() {
    // Sanity check of the plumbing with no scoping flags other than the namespace: the doctor reads the whole
    // (shared) cluster without failing.
    let env = TestEnv::shared().await;
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let args = Cli::try_parse_from([
        "doctor",
        "--kubeconfig",
        &kubeconfig,
        "--uninitialized-threshold",
        "1h",
    ])
    .unwrap()
    .doctor;
    let report = execute(&args).await.unwrap();
    assert!(report.target().starts_with("cluster https://127.0.0.1:"));
    let json: Value = serde_json::from_str(&report.render_json()).unwrap();
    assert_eq!(json["exitCode"], report.exit_code());
    // No CCM is deployed in kube-system of the test cluster.
    assert!(
        has(&report, CheckId::CcmWorkloadNotFound, Severity::Warning),
        "{}",
        report.render_text()
    );
}
