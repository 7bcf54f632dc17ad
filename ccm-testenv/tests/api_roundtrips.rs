//! Round trips against the real kube-apiserver that the CCM controllers depend on: tainted Nodes
//! and their status addresses, LoadBalancer Service status, Leases with optimistic concurrency,
//! and RBAC for users, groups and service accounts.

use std::time::Duration;

use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::json;

const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const RBAC_TIMEOUT: Duration = Duration::from_secs(30);

fn from_json<T: DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("test object matches the API type")
}

fn status_code<T: std::fmt::Debug>(result: &Result<T, kube::Error>) -> Option<u16> {
    match result {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

async fn delete_node(nodes: &Api<Node>, name: &str) {
    // Best effort: a leftover node does not affect other tests (unique names).
    let _ = nodes.delete(name, &DeleteParams::default()).await;
}

#[tokio::test]
async fn node_with_uninitialized_taint_round_trips() {
    let env = TestEnv::shared().await;
    let nodes: Api<Node> = Api::all(env.client());
    let name = env.unique_name("tainted-node");
    let node: Node = from_json(json!({
        "metadata": { "name": name, "labels": { "ccm-testenv/test": "taint" } },
        "spec": {
            "taints": [{ "key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule" }]
        }
    }));
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    assert_eq!(created.metadata.name.as_deref(), Some(name.as_str()));

    let read = nodes.get(&name).await.expect("get node");
    let taints = read.spec.and_then(|s| s.taints).unwrap_or_default();
    let ours = taints
        .iter()
        .find(|t| t.key == UNINITIALIZED_TAINT)
        .expect("uninitialized taint kept");
    assert_eq!(ours.value.as_deref(), Some("true"));
    assert_eq!(ours.effect, "NoSchedule");
    assert_eq!(read.metadata.uid, created.metadata.uid);
    delete_node(&nodes, &name).await;
}

#[tokio::test]
async fn node_addresses_are_patched_through_the_status_subresource() {
    let env = TestEnv::shared().await;
    let nodes: Api<Node> = Api::all(env.client());
    let name = env.unique_name("address-node");
    let node: Node = from_json(json!({
        "metadata": { "name": name },
        "spec": {
            "taints": [{ "key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule" }]
        }
    }));
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");

    let patch = json!({
        "status": {
            "addresses": [
                { "type": "InternalIP", "address": "10.0.0.7" },
                { "type": "ExternalIP", "address": "203.0.113.7" },
                { "type": "Hostname", "address": name },
            ]
        }
    });
    let patched = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("patch node status");
    let addresses = |node: &Node| {
        node.status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .map(|list| {
                list.iter()
                    .map(|a| (a.type_.clone(), a.address.clone()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let expected = vec![
        ("InternalIP".to_owned(), "10.0.0.7".to_owned()),
        ("ExternalIP".to_owned(), "203.0.113.7".to_owned()),
        ("Hostname".to_owned(), name.clone()),
    ];
    assert_eq!(addresses(&patched), expected);
    let read = nodes.get_status(&name).await.expect("get node status");
    assert_eq!(addresses(&read), expected);

    // The status subresource ignores spec changes: the taint is still there.
    let spec_patch = json!({ "spec": { "taints": [] }, "status": { "addresses": [] } });
    let after = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&spec_patch))
        .await
        .expect("patch status with spec");
    let taints = after.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(taints.iter().any(|t| t.key == UNINITIALIZED_TAINT));
    delete_node(&nodes, &name).await;
}

#[tokio::test]
async fn load_balancer_service_status_is_patched() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("lb").await;
    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    let service: Service = from_json(json!({
        "metadata": { "name": "web" },
        "spec": {
            "type": "LoadBalancer",
            "selector": { "app": "web" },
            "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" }]
        }
    }));
    let created = services
        .create(&PostParams::default(), &service)
        .await
        .expect("create service");
    let spec = created.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    // The API server allocates the cluster IP from --service-cluster-ip-range 10.96.0.0/12 and a
    // node port for a LoadBalancer service.
    let cluster_ip: std::net::Ipv4Addr = spec
        .cluster_ip
        .expect("cluster IP")
        .parse()
        .expect("IPv4 cluster IP");
    assert_eq!(cluster_ip.octets()[0], 10);
    assert_eq!(cluster_ip.octets()[1] & 0xf0, 96);
    let ports = spec.ports.unwrap_or_default();
    assert!(ports[0].node_port.is_some_and(|p| p > 0));

    let patch = json!({
        "status": { "loadBalancer": { "ingress": [
            { "ip": "203.0.113.10", "ipMode": "VIP" },
            { "hostname": "lb.example.test" }
        ] } }
    });
    services
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch service status");
    let read = services.get_status("web").await.expect("get status");
    let ingress = read
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .unwrap_or_default();
    assert_eq!(ingress.len(), 2);
    assert_eq!(ingress[0].ip.as_deref(), Some("203.0.113.10"));
    assert_eq!(ingress[0].ip_mode.as_deref(), Some("VIP"));
    assert_eq!(ingress[1].hostname.as_deref(), Some("lb.example.test"));

    // An invalid address is rejected by validation.
    let bad = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "<nil>" }] } } });
    let result = services
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&bad))
        .await;
    assert_eq!(status_code(&result), Some(422), "{result:?}");
}

#[tokio::test]
async fn lease_updates_use_optimistic_concurrency() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("lease").await;
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);
    let lease: Lease = from_json(json!({
        "metadata": { "name": "cloud-controller-manager" },
        "spec": {
            "holderIdentity": "candidate-a",
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-01-01T00:00:00.000000Z",
            "renewTime": "2026-01-01T00:00:00.000000Z",
            "leaseTransitions": 0
        }
    }));
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let stale = created.clone();

    let mut renewed = created.clone();
    let spec = renewed.spec.as_mut().expect("spec");
    spec.holder_identity = Some("candidate-b".into());
    spec.lease_transitions = Some(1);
    let updated = leases
        .replace("cloud-controller-manager", &PostParams::default(), &renewed)
        .await
        .expect("update with the current resourceVersion");
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let read = leases.get("cloud-controller-manager").await.expect("get");
    let spec = read.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("candidate-b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.lease_duration_seconds, Some(15));

    // A competing writer still holding the old resourceVersion loses.
    let mut competing = stale;
    competing.spec.as_mut().expect("spec").holder_identity = Some("candidate-c".into());
    let result = leases
        .replace(
            "cloud-controller-manager",
            &PostParams::default(),
            &competing,
        )
        .await;
    assert_eq!(status_code(&result), Some(409), "{result:?}");
    let read = leases.get("cloud-controller-manager").await.expect("get");
    assert_eq!(
        read.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("candidate-b")
    );
}

#[tokio::test]
async fn rbac_denies_a_user_until_a_role_binding_allows_it() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("rbac-user").await;
    let user = env.unique_name("alice");
    let pods: Api<Pod> = Api::namespaced(env.client_for_user(&user, &[]), &ns);
    let denied = pods.list(&ListParams::default()).await;
    assert_eq!(status_code(&denied), Some(403), "{denied:?}");

    let admin = env.client();
    let role: Role = from_json(json!({
        "metadata": { "name": "pod-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] }]
    }));
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    let binding: RoleBinding = from_json(json!({
        "metadata": { "name": "pod-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }]
    }));
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create role binding");

    wait_for(
        "the role binding to allow listing pods",
        RBAC_TIMEOUT,
        || async { pods.list(&ListParams::default()).await.ok() },
    )
    .await
    .expect("allowed after binding");
    // The role allows reading only.
    let pod: Pod = from_json(json!({
        "metadata": { "name": "p" },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] }
    }));
    let create = pods.create(&PostParams::default(), &pod).await;
    assert_eq!(status_code(&create), Some(403), "{create:?}");
}

#[tokio::test]
async fn rbac_cluster_role_bound_to_a_group_allows_its_members() {
    let env = TestEnv::shared().await;
    let group = env.unique_name("node-watchers");
    let member = env.client_for_user(&env.unique_name("bob"), &["other-group", &group]);
    let outsider = env.client_for_user(&env.unique_name("carol"), &["other-group"]);
    let member_nodes: Api<Node> = Api::all(member);
    let outsider_nodes: Api<Node> = Api::all(outsider);
    let denied = member_nodes.list(&ListParams::default().limit(1)).await;
    assert_eq!(status_code(&denied), Some(403), "{denied:?}");

    let admin = env.client();
    let role_name = env.unique_name("node-reader");
    let role: ClusterRole = from_json(json!({
        "metadata": { "name": role_name },
        "rules": [{ "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"] }]
    }));
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("create cluster role");
    let binding: ClusterRoleBinding = from_json(json!({
        "metadata": { "name": role_name },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name
        },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group }]
    }));
    let bindings: Api<ClusterRoleBinding> = Api::all(admin);
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create cluster role binding");

    wait_for(
        "the group binding to allow listing nodes",
        RBAC_TIMEOUT,
        || async {
            member_nodes
                .list(&ListParams::default().limit(1))
                .await
                .ok()
        },
    )
    .await
    .expect("member allowed");
    let still_denied = outsider_nodes.list(&ListParams::default().limit(1)).await;
    assert_eq!(status_code(&still_denied), Some(403), "{still_denied:?}");

    let _ = bindings.delete(&role_name, &DeleteParams::default()).await;
    let _ = roles.delete(&role_name, &DeleteParams::default()).await;
}

#[tokio::test]
async fn service_account_tokens_authenticate_and_are_authorized_by_rbac() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("rbac-sa").await;
    let client = env.client_for_service_account(&ns, "robot").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client, &ns);
    let denied = config_maps.list(&ListParams::default()).await;
    assert_eq!(status_code(&denied), Some(403), "{denied:?}");

    let admin = env.client();
    let role: Role = from_json(json!({
        "metadata": { "name": "cm-writer" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "create"] }]
    }));
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    let binding: RoleBinding = from_json(json!({
        "metadata": { "name": "cm-writer" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-writer" },
        "subjects": [{ "kind": "ServiceAccount", "name": "robot", "namespace": ns }]
    }));
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create role binding");

    wait_for(
        "the binding to allow listing config maps",
        RBAC_TIMEOUT,
        || async { config_maps.list(&ListParams::default()).await.ok() },
    )
    .await
    .expect("allowed after binding");
    let config_map: ConfigMap = from_json(json!({
        "metadata": { "name": "written-by-robot" },
        "data": { "k": "v" }
    }));
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .expect("service account creates a config map");

    // Asking twice reuses the existing account.
    let again = env.client_for_service_account(&ns, "robot").await;
    let get = Api::<ConfigMap>::namespaced(again, &ns)
        .get("written-by-robot")
        .await;
    assert_eq!(status_code(&get), Some(403), "get is not granted: {get:?}");
}

#[tokio::test]
async fn namespaces_are_unique_and_labelled() {
    let env = TestEnv::shared().await;
    let a = env.namespace("ns-helper").await;
    let b = env.namespace("ns-helper").await;
    assert_ne!(a, b);
    let namespaces: Api<Namespace> = Api::all(env.client());
    let read = namespaces.get(&a).await.expect("namespace exists");
    let labels = read.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get(ccm_testenv::NAMESPACE_LABEL).map(String::as_str),
        Some("true")
    );
}

#[tokio::test]
async fn the_admin_kubeconfig_file_works_with_kube() {
    let env = TestEnv::shared().await;
    let kubeconfig =
        kube::config::Kubeconfig::read_from(env.kubeconfig_path()).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config from kubeconfig");
    assert_eq!(config.cluster_url, *env.server_url());
    let client = kube::Client::try_from(config).expect("client");
    let info = client.apiserver_version().await.expect("version");
    assert_eq!(info.major, "1");
    assert_eq!(info.minor, "36");
    assert_eq!(info.git_version, "v1.36.2");
}

#[tokio::test]
async fn a_test_node_is_created_ready_with_its_addresses_and_deleted_by_label() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let name = env.unique_name("test-node");
    let label = env.unique_name("harness");
    ccm_testenv::nodes::TestNode::new(&name)
        .with_label("ccm-testenv/harness", &label)
        .with_pod_cidr("10.244.7.0/24")
        .with_address("Hostname", &name)
        .create_ready(&client)
        .await
        .expect("created and reported Ready");
    let node = nodes.get(&name).await.expect("the node exists");
    let spec = node.spec.expect("spec");
    assert_eq!(
        spec.pod_cidrs.as_deref(),
        Some(&["10.244.7.0/24".to_owned()][..])
    );
    assert!(
        spec.taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == UNINITIALIZED_TAINT)
    );
    let status = node.status.expect("status");
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(ready.status, "True");
    let addresses = status.addresses.unwrap_or_default();
    assert_eq!(addresses.len(), 1);
    assert_eq!(addresses[0].type_, "Hostname");
    assert_eq!(addresses[0].address, name);

    ccm_testenv::nodes::delete_nodes(&client, &format!("ccm-testenv/harness={label}")).await;
    wait_for(
        "the labelled node to be deleted",
        Duration::from_secs(30),
        || {
            let nodes = nodes.clone();
            let name = name.clone();
            async move {
                nodes
                    .get_opt(&name)
                    .await
                    .ok()
                    .flatten()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await
    .expect("deleted by label");
}
