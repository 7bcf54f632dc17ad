//! Nodes for tests that run a CCM against the test control plane without kwok: registered as a kubelet started
//! with `--cloud-provider=external` registers them, then reported Ready, and deleted by label. The one copy of
//! this harness for the runtime's, the examples' and the conformance tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use crate::cluster::UNINITIALIZED_TAINT;

/// A Node as a kubelet with `--cloud-provider=external` registers it (the
/// `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule` taint, no providerID), with the labels, pod
/// CIDR and addresses a test gives it.
///
/// ```
/// use ccm_testenv::nodes::TestNode;
///
/// let node = TestNode::new("n1").with_label("ccm-test", "t1").with_pod_cidr("10.244.1.0/24").into_node();
/// assert_eq!(node.spec.unwrap().pod_cidrs.unwrap(), ["10.244.1.0/24"]);
/// ```
#[derive(Debug, Clone)]
pub struct TestNode {
    node: Node,
    addresses: Vec<NodeAddress>,
}

impl TestNode {
    /// The Node `name`, tainted uninitialized, without labels.
    pub fn new(name: &str) -> Self {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: UNINITIALIZED_TAINT.to_owned(),
                    value: Some("true".to_owned()),
                    effect: "NoSchedule".to_owned(),
                    ..Taint::default()
                }]),
                ..NodeSpec::default()
            }),
            ..Node::default()
        };
        TestNode {
            node,
            addresses: Vec::new(),
        }
    }

    /// Adds the label `key=value`.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        self.node
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets `spec.podCIDR` and `spec.podCIDRs` to `cidr`.
    pub fn with_pod_cidr(mut self, cidr: &str) -> Self {
        let spec = self.node.spec.get_or_insert_with(NodeSpec::default);
        spec.pod_cidr = Some(cidr.to_owned());
        spec.pod_cidrs = Some(vec![cidr.to_owned()]);
        self
    }

    /// Adds an address the kubelet reports (`type_` such as `Hostname` or `InternalIP`) to the status
    /// [`create_ready`](Self::create_ready) writes.
    pub fn with_address(mut self, type_: &str, address: &str) -> Self {
        self.addresses.push(NodeAddress {
            type_: type_.to_owned(),
            address: address.to_owned(),
        });
        self
    }

    /// The Node as registered (without the status).
    pub fn into_node(self) -> Node {
        self.node
    }

    /// Creates the Node, then reports it Ready (reason `KubeletReady`) with the addresses given, as its kubelet
    /// would.
    ///
    /// # Errors
    /// The API error of the create or of the status patch.
    pub async fn create_ready(self, client: &kube::Client) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        let name = self.node.metadata.name.clone().unwrap_or_default();
        nodes.create(&PostParams::default(), &self.node).await?;
        let status = NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_owned(),
                status: "True".to_owned(),
                reason: Some("KubeletReady".to_owned()),
                ..NodeCondition::default()
            }]),
            addresses: (!self.addresses.is_empty()).then_some(self.addresses),
            ..NodeStatus::default()
        };
        nodes
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "status": status })),
            )
            .await?;
        Ok(())
    }
}

/// Deletes every Node matching `label_selector` (such as `ccm-test=t1`); errors are ignored (cleanup).
pub async fn delete_nodes(client: &kube::Client, label_selector: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let _ = nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(label_selector),
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_node_is_registered_like_a_kubelet_registers_it() {
        let node = TestNode::new("n1")
            .with_label("ccm-test", "t1")
            .with_label("kubernetes.io/hostname", "n1")
            .with_pod_cidr("10.244.1.0/24")
            .with_address("Hostname", "n1");
        assert_eq!(node.addresses.len(), 1);
        let node = node.into_node();
        let labels = node.metadata.labels.expect("labels");
        assert_eq!(labels["ccm-test"], "t1");
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        let spec = node.spec.expect("spec");
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.1.0/24"));
        let taints = spec.taints.expect("taints");
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key, UNINITIALIZED_TAINT);
        assert_eq!(taints[0].effect, "NoSchedule");
        assert!(spec.provider_id.is_none());
        assert!(node.status.is_none());
    }
}
