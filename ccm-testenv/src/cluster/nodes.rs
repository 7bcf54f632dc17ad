//! Nodes of the cluster in a box: registered the way kubelets started with `--cloud-provider=external`
//! register them, and simulated by kwok ([`KWOK_LABEL`]).

use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// The label that puts a Node under kwok's management (kwok runs with
/// `--manage-nodes-with-label-selector=kwok.x-k8s.io/node=fake`). kwok simulates the kubelet of every Node
/// carrying it: status, Lease renewals, the pods bound to it. Remove it ([`stop_heartbeats`]) and the node
/// goes silent, as when its kubelet dies.
pub const KWOK_LABEL: &str = "kwok.x-k8s.io/node";

/// The value of [`KWOK_LABEL`].
pub const KWOK_LABEL_VALUE: &str = "fake";

/// The taint a kubelet with `--cloud-provider=external` registers its Node with; the cloud controller
/// manager removes it once it has initialized the node.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// The label and taint key kubeadm puts on control-plane nodes.
pub const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";

/// The label kubeadm also puts on control-plane nodes, keeping them out of load balancers.
pub const EXCLUDE_FROM_LOAD_BALANCERS: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// The kind of machine a simulated Node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    /// A control-plane node as kubeadm sets it up: label `node-role.kubernetes.io/control-plane=""`, taint
    /// `node-role.kubernetes.io/control-plane:NoSchedule` and label
    /// `node.kubernetes.io/exclude-from-external-load-balancers=""`.
    ControlPlane,
    /// A worker node: only what the kubelet sets.
    Worker,
}

/// The Node a kubelet started with `--cloud-provider=external` registers (before kwok reports its status):
/// the labels the kubelet sets (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`), the
/// `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule` taint, no providerID and no addresses
/// (the CCM sets those), plus what kubeadm adds for `role`, plus [`KWOK_LABEL`] so that kwok simulates it.
///
/// ```
/// use ccm_testenv::cluster::{NodeRole, kubelet_node};
///
/// let node = kubelet_node("cp-1", NodeRole::ControlPlane);
/// let taints = node.spec.unwrap().taints.unwrap();
/// assert_eq!(taints.len(), 2);
/// ```
pub fn kubelet_node(name: &str, role: NodeRole) -> Node {
    let mut labels: std::collections::BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        (KWOK_LABEL, KWOK_LABEL_VALUE),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut taints = vec![Taint {
        key: UNINITIALIZED_TAINT.to_owned(),
        value: Some("true".to_owned()),
        effect: "NoSchedule".to_owned(),
        time_added: None,
    }];
    if role == NodeRole::ControlPlane {
        labels.insert(CONTROL_PLANE_ROLE.to_owned(), String::new());
        labels.insert(EXCLUDE_FROM_LOAD_BALANCERS.to_owned(), String::new());
        taints.push(Taint {
            key: CONTROL_PLANE_ROLE.to_owned(),
            value: None,
            effect: "NoSchedule".to_owned(),
            time_added: None,
        });
    }
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(taints),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

/// Registers a Node as its kubelet would ([`kubelet_node`]); kwok takes it over from there.
///
/// # Errors
/// The API error if the Node cannot be created.
pub async fn register_node(
    client: &kube::Client,
    name: &str,
    role: NodeRole,
) -> Result<Node, kube::Error> {
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &kubelet_node(name, role))
        .await
}

/// Stops the simulated kubelet of Node `name`: removes [`KWOK_LABEL`], so kwok no longer renews its Lease,
/// reports its status or runs its pods. kube-controller-manager marks the node unreachable after its
/// `--node-monitor-grace-period`.
///
/// # Errors
/// The API error if the Node cannot be patched.
pub async fn stop_heartbeats(client: &kube::Client, name: &str) -> Result<(), kube::Error> {
    set_kwok_label(client, name, None).await
}

/// Starts the simulated kubelet of Node `name` again (puts [`KWOK_LABEL`] back).
///
/// # Errors
/// The API error if the Node cannot be patched.
pub async fn resume_heartbeats(client: &kube::Client, name: &str) -> Result<(), kube::Error> {
    set_kwok_label(client, name, Some(KWOK_LABEL_VALUE)).await
}

async fn set_kwok_label(
    client: &kube::Client,
    name: &str,
    value: Option<&str>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({ "metadata": { "labels": { KWOK_LABEL: value } } });
    Api::<Node>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// An inventory of `ccm-provider-fake` (the reference CCM's `--cloud-config`, format in
/// `docs/fake-provider.md`) with one instance per node name: providerID `fake://<name>`, instance type
/// `fake.large`, zones `zone-a`/`zone-b` alternating in region `region-1`, InternalIP `10.0.<i / 250>.<i % 250
/// + 2>` and the Hostname address; load-balancer IPs from `203.0.113.0/24`; cluster `kubernetes`.
///
/// ```
/// let yaml = ccm_testenv::cluster::fake_inventory(&["cp-1", "worker-1"]);
/// assert!(yaml.contains("name: cp-1"));
/// assert!(yaml.contains("address: 10.0.0.3"));
/// ```
pub fn fake_inventory<S: AsRef<str>>(node_names: &[S]) -> String {
    let mut yaml = String::from(
        "# A fake cloud with one instance per node of the cluster in a box (ccm-testenv).\n\
         providerName: fake\nloadBalancerIPPool: 203.0.113.0/24\nclusters: [kubernetes]\n",
    );
    if node_names.is_empty() {
        yaml.push_str("instances: []\n");
        return yaml;
    }
    yaml.push_str("instances:\n");
    for (i, name) in node_names.iter().enumerate() {
        let name = name.as_ref();
        let zone = if i % 2 == 0 { "zone-a" } else { "zone-b" };
        yaml.push_str(&format!(
            "  - name: {name}\n    instanceType: fake.large\n    zone: {zone}\n    region: region-1\n    \
             addresses:\n      - {{type: InternalIP, address: 10.0.{}.{}}}\n      - {{type: Hostname, address: \
             {name}}}\n",
            i / 250,
            i % 250 + 2
        ));
    }
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint_keys(node: &Node) -> Vec<(String, String)> {
        node.spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.key, t.effect))
            .collect()
    }

    #[test]
    fn workers_carry_only_what_the_kubelet_sets() {
        let node = kubelet_node("w-1", NodeRole::Worker);
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["kubernetes.io/hostname"], "w-1");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels[KWOK_LABEL], KWOK_LABEL_VALUE);
        assert!(!labels.contains_key(CONTROL_PLANE_ROLE));
        assert!(!labels.contains_key(EXCLUDE_FROM_LOAD_BALANCERS));
        assert_eq!(
            taint_keys(&node),
            [(UNINITIALIZED_TAINT.to_owned(), "NoSchedule".to_owned())]
        );
        let spec = node.spec.unwrap_or_default();
        assert!(spec.provider_id.is_none() && spec.pod_cidr.is_none());
        assert!(node.status.is_none(), "kwok reports the status");
    }

    #[test]
    fn inventories_name_every_node_once() {
        let names: Vec<String> = (0..300).map(|i| format!("n-{i}")).collect();
        let yaml = fake_inventory(&names);
        assert_eq!(yaml.matches("  - name: ").count(), 300);
        assert!(yaml.contains("address: 10.0.1.2}"), "the 251st node");
        assert!(yaml.contains("zone: zone-b"));
        assert!(fake_inventory::<&str>(&[]).ends_with("instances: []\n"));
    }

    #[test]
    fn control_plane_nodes_look_like_kubeadm_made_them() {
        let node = kubelet_node("cp-1", NodeRole::ControlPlane);
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[CONTROL_PLANE_ROLE], "");
        assert_eq!(labels[EXCLUDE_FROM_LOAD_BALANCERS], "");
        assert_eq!(
            taint_keys(&node),
            [
                (UNINITIALIZED_TAINT.to_owned(), "NoSchedule".to_owned()),
                (CONTROL_PLANE_ROLE.to_owned(), "NoSchedule".to_owned())
            ]
        );
    }
}
