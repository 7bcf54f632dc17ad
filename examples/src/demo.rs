//! The demo driver: plays the kubelets and a user against a cluster where the reference CCM runs.
//!
//! It registers Nodes the way a kubelet started with `--cloud-provider=external` does (tainted
//! `node.cloudprovider.kubernetes.io/uninitialized`, Ready, only a Hostname address) and a `type: LoadBalancer`
//! Service, waits until the CCM has initialized every Node (taint removed, providerID, addresses, zone, region,
//! instance type) and provisioned the load balancer (ingress IP), prints what it sees, then deletes the Service
//! (the CCM deletes the load balancer and removes its finalizer) and the Nodes.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ccm_core::names;
use k8s_openapi::api::core::v1::{
    Namespace, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service, ServicePort,
    ServiceSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

/// The label put on every demo object.
pub const DEMO_LABEL: &str = "ccm-demo";

/// What the demo creates.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Node names (instances of the inventory).
    pub nodes: Vec<String>,
    /// The namespace of the Service.
    pub namespace: String,
    /// The Service name.
    pub service: String,
    /// How long to wait for the CCM.
    pub timeout: Duration,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            nodes: vec![
                "demo-node-1".into(),
                "demo-node-2".into(),
                "demo-node-3".into(),
            ],
            namespace: "ccm-demo".into(),
            service: "web".into(),
            timeout: Duration::from_secs(60),
        }
    }
}

/// A Node as a kubelet with `--cloud-provider=external` registers it (status is written separately).
pub fn kubelet_node(name: &str, index: usize) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                [
                    (names::labels::HOSTNAME.to_owned(), name.to_owned()),
                    ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                    (DEMO_LABEL.to_owned(), "true".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(format!("10.244.{}.0/24", index + 1)),
            pod_cidrs: Some(vec![format!("10.244.{}.0/24", index + 1)]),
            taints: Some(vec![Taint {
                key: names::taints::UNINITIALIZED.to_owned(),
                value: Some("true".to_owned()),
                effect: "NoSchedule".to_owned(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        }),
        ..Node::default()
    }
}

/// The status a kubelet reports: Ready, and only its host name as address.
pub fn kubelet_status(name: &str) -> NodeStatus {
    NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: names::conditions::READY.to_owned(),
            status: "True".to_owned(),
            reason: Some("KubeletReady".to_owned()),
            message: Some("kubelet is posting ready status".to_owned()),
            ..NodeCondition::default()
        }]),
        addresses: Some(vec![NodeAddress {
            type_: "Hostname".to_owned(),
            address: name.to_owned(),
        }]),
        ..NodeStatus::default()
    }
}

/// A `type: LoadBalancer` Service on port 80.
pub fn load_balancer_service(namespace: &str, name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some([(DEMO_LABEL.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            selector: Some([("app".to_owned(), name.to_owned())].into()),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                port: 80,
                target_port: Some(IntOrString::Int(8080)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// One row of the node table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// Node name.
    pub name: String,
    /// `spec.providerID`.
    pub provider_id: String,
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// `topology.kubernetes.io/zone`.
    pub zone: String,
    /// `topology.kubernetes.io/region`.
    pub region: String,
    /// The addresses, `TYPE=address` joined by spaces.
    pub addresses: String,
    /// Whether the uninitialized taint is still there.
    pub tainted: bool,
    /// The `NetworkUnavailable` condition status, `-` if absent.
    pub network_unavailable: String,
}

impl NodeRow {
    /// The row of `node`.
    pub fn of(node: &Node) -> Self {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let label = |k: &str| labels.get(k).cloned().unwrap_or_else(|| "-".to_owned());
        let status = node.status.clone().unwrap_or_default();
        NodeRow {
            name: node.metadata.name.clone().unwrap_or_default(),
            provider_id: node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_else(|| "-".to_owned()),
            instance_type: label(names::labels::INSTANCE_TYPE),
            zone: label(names::labels::TOPOLOGY_ZONE),
            region: label(names::labels::TOPOLOGY_REGION),
            addresses: status
                .addresses
                .unwrap_or_default()
                .iter()
                .map(|a| format!("{}={}", a.type_, a.address))
                .collect::<Vec<_>>()
                .join(" "),
            tainted: ccm_core::helpers::node_has_taint(node, names::taints::UNINITIALIZED),
            network_unavailable: status
                .conditions
                .unwrap_or_default()
                .iter()
                .find(|c| c.type_ == names::conditions::NETWORK_UNAVAILABLE)
                .map_or_else(|| "-".to_owned(), |c| c.status.clone()),
        }
    }

    /// Initialized: untainted with a providerID.
    pub fn initialized(&self) -> bool {
        !self.tainted && self.provider_id != "-"
    }
}

/// Render rows as an aligned table with a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// The node table.
pub fn node_table(rows: &[NodeRow]) -> String {
    table(
        &[
            "NODE",
            "PROVIDER-ID",
            "INSTANCE-TYPE",
            "ZONE",
            "REGION",
            "TAINTED",
            "NETWORK-UNAVAILABLE",
            "ADDRESSES",
        ],
        &rows
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.provider_id.clone(),
                    r.instance_type.clone(),
                    r.zone.clone(),
                    r.region.clone(),
                    if r.tainted { "yes" } else { "no" }.to_owned(),
                    r.network_unavailable.clone(),
                    r.addresses.clone(),
                ]
            })
            .collect::<Vec<_>>(),
    )
}

/// The load-balancer ingress addresses of a Service.
pub fn ingress(service: &Service) -> Vec<String> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|ingress| {
            ingress
                .iter()
                .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
                .collect()
        })
        .unwrap_or_default()
}

async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!(
                "timed out after {timeout:?} waiting for {what}; is the CCM running? (see its log)"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Run the demo against `client`, writing progress and the tables to `out`.
///
/// # Errors
///
/// If an object cannot be created or the CCM does not act within the timeout.
pub async fn run(
    client: kube::Client,
    options: &DemoOptions,
    out: &mut String,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let nodes: Api<Node> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(options.namespace.clone());
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => return Err(err).context("creating the demo namespace"),
    }
    for (i, name) in options.nodes.iter().enumerate() {
        nodes
            .create(&PostParams::default(), &kubelet_node(name, i))
            .await
            .with_context(|| {
                format!("registering node {name} (does it exist already? use a fresh cluster)")
            })?;
        let status = serde_json::json!({ "status": kubelet_status(name) });
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .with_context(|| format!("reporting the status of node {name}"))?;
    }
    let _ = writeln!(
        out,
        "registered {} nodes tainted {}:NoSchedule, as kubelets with --cloud-provider=external do",
        options.nodes.len(),
        names::taints::UNINITIALIZED
    );
    let services: Api<Service> = Api::namespaced(client.clone(), &options.namespace);
    services
        .create(
            &PostParams::default(),
            &load_balancer_service(&options.namespace, &options.service),
        )
        .await
        .context("creating the LoadBalancer Service")?;
    let _ = writeln!(
        out,
        "created Service {}/{} of type LoadBalancer",
        options.namespace, options.service
    );

    let selector = ListParams::default().labels(&format!("{DEMO_LABEL}=true"));
    let rows = poll("the CCM to initialize the nodes", options.timeout, || {
        let nodes = nodes.clone();
        let selector = selector.clone();
        async move {
            let list = nodes.list(&selector).await.context("listing nodes")?;
            let rows: Vec<NodeRow> = list.items.iter().map(NodeRow::of).collect();
            Ok(
                (rows.len() == options.nodes.len() && rows.iter().all(NodeRow::initialized))
                    .then_some(rows),
            )
        }
    })
    .await?;
    let _ = writeln!(
        out,
        "\nnodes initialized by the CCM after {:.1} s:\n",
        started.elapsed().as_secs_f64()
    );
    out.push_str(&node_table(&rows));

    let service_name = options.service.clone();
    let addresses = poll(
        "the CCM to provision the load balancer",
        options.timeout,
        || {
            let services = services.clone();
            let name = service_name.clone();
            async move {
                let service = services.get(&name).await.context("reading the Service")?;
                let addresses = ingress(&service);
                Ok((!addresses.is_empty()).then_some(addresses))
            }
        },
    )
    .await?;
    let _ = writeln!(
        out,
        "\nload balancer provisioned after {:.1} s:\n",
        started.elapsed().as_secs_f64()
    );
    out.push_str(&table(
        &["SERVICE", "TYPE", "EXTERNAL-IP", "PORTS"],
        &[vec![
            format!("{}/{}", options.namespace, options.service),
            "LoadBalancer".to_owned(),
            addresses.join(","),
            "80/TCP".to_owned(),
        ]],
    ));

    // Deleting the Service: the CCM deletes the load balancer, then removes its finalizer.
    services
        .delete(&options.service, &DeleteParams::default())
        .await
        .context("deleting the Service")?;
    poll(
        "the CCM to delete the load balancer",
        options.timeout,
        || {
            let services = services.clone();
            let name = service_name.clone();
            async move {
                match services
                    .get_opt(&name)
                    .await
                    .context("reading the Service")?
                {
                    None => Ok(Some(())),
                    Some(_) => Ok(None),
                }
            }
        },
    )
    .await?;
    let _ = writeln!(
        out,
        "\ndeleted the Service: the CCM deleted its load balancer and removed the {} finalizer",
        names::finalizers::LOAD_BALANCER_CLEANUP
    );
    nodes
        .delete_collection(&DeleteParams::default(), &selector)
        .await
        .context("deleting the demo nodes")?;
    let _ = namespaces
        .delete(&options.namespace, &DeleteParams::default())
        .await;
    let _ = writeln!(
        out,
        "deleted the demo nodes ({:.1} s in total)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_aligned() {
        let text = table(
            &["A", "LONGER"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
        );
        assert_eq!(text, "A    LONGER\nxyz  1\nq    22\n");
    }

    #[test]
    fn node_rows() {
        let mut node = kubelet_node("n1", 0);
        let row = NodeRow::of(&node);
        assert!(row.tainted);
        assert!(!row.initialized());
        assert_eq!(row.provider_id, "-");
        node.spec.as_mut().unwrap().taints = None;
        node.spec.as_mut().unwrap().provider_id = Some("fake://n1".into());
        node.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(names::labels::TOPOLOGY_ZONE.into(), "zone-a".into());
        node.status = Some(kubelet_status("n1"));
        let row = NodeRow::of(&node);
        assert!(row.initialized());
        assert_eq!(row.zone, "zone-a");
        assert_eq!(row.addresses, "Hostname=n1");
        let text = node_table(&[row]);
        assert!(text.starts_with("NODE  PROVIDER-ID"), "{text}");
        assert!(text.contains("fake://n1"), "{text}");
    }

    #[test]
    fn kubelet_objects() {
        let node = kubelet_node("n", 2);
        assert_eq!(
            node.spec.as_ref().unwrap().pod_cidr.as_deref(),
            Some("10.244.3.0/24")
        );
        let service = load_balancer_service("ns", "web");
        assert_eq!(service.spec.unwrap().type_.as_deref(), Some("LoadBalancer"));
        assert!(ingress(&Service::default()).is_empty());
    }
}
