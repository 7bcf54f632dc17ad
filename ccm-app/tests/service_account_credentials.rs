//! `--use-service-account-credentials` against a real, audited API server: the CCM runs as its own ServiceAccount
//! under exactly the generated RBAC (`rbac.yaml` and `controller-rbac.yaml`, plus the API server's own
//! `system:controller:service-controller` / `route-controller`), creates each controller's ServiceAccount in
//! `kube-system`, and the audit log shows every controller write made as that controller's account, with no
//! forbidden (403) request from any identity.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_app::CcmStatus;
use ccm_app::deploy::{
    ManifestOptions, cluster_role, cluster_role_binding, controller_cluster_role_bindings,
    controller_cluster_roles, lease_role, lease_role_binding, token_requester_role,
    token_requester_role_binding,
};
use ccm_testenv::audit::{self, AuditEvent};
use ccm_testenv::controlplane::{Binaries, ControlPlane, LaunchOptions, Supervision};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use support::*;

/// The writes of `user` to `resource`/`subresource` that succeeded, as `verb`s.
fn writes<'a>(
    events: &'a [AuditEvent],
    user: &str,
    resource: &str,
    subresource: &str,
) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e.user.username == user && e.succeeded())
        .filter(|e| {
            e.object_ref
                .as_ref()
                .is_some_and(|o| o.resource == resource && o.subresource == subresource)
        })
        .map(|e| e.verb.as_str())
        .collect()
}

#[tokio::test]
async fn each_controller_writes_as_its_own_service_account_without_forbidden_requests() {
    let base = tempfile::tempdir().expect("tempdir");
    let launch = LaunchOptions::new(
        Binaries::find().expect("binaries (set CCM_CONTROLPLANE_BIN)"),
        base.path().join("cp"),
        Supervision::Watchdog,
    )
    .with_audit();
    let control_plane = ControlPlane::launch(launch).await.expect("launch");
    let log = control_plane.audit_log_path().expect("an audit log");
    let env = TestEnv::attach(&control_plane.env_file_path()).expect("attach");
    let admin = env.client();
    let ns = env.namespace("sacreds").await;
    let label = env.unique_name("sacreds");
    let manifests = ManifestOptions::new("example.invalid/ccm:test").with_names(
        "ccm",
        &ns,
        &ns,
        "system:cloud-controller-manager",
    );

    // The CCM's ServiceAccount, then exactly the generated RBAC.
    let sa_client = env.client_for_service_account(&ns, "ccm").await;
    let post = PostParams::default();
    let cluster_roles = Api::<ClusterRole>::all(admin.clone());
    let cluster_bindings = Api::<ClusterRoleBinding>::all(admin.clone());
    for role in
        std::iter::once(cluster_role(&manifests)).chain(controller_cluster_roles(&manifests))
    {
        cluster_roles
            .create(&post, &role)
            .await
            .expect("create a ClusterRole");
    }
    for binding in std::iter::once(cluster_role_binding(&manifests))
        .chain(controller_cluster_role_bindings(&manifests))
    {
        cluster_bindings
            .create(&post, &binding)
            .await
            .expect("create a ClusterRoleBinding");
    }
    for (role, binding) in [
        (lease_role(&manifests), lease_role_binding(&manifests)),
        (
            token_requester_role(&manifests),
            token_requester_role_binding(&manifests),
        ),
    ] {
        let namespace = role.metadata.namespace.clone().expect("a namespace");
        Api::<Role>::namespaced(admin.clone(), &namespace)
            .create(&post, &role)
            .await
            .expect("create a Role");
        Api::<RoleBinding>::namespaced(admin.clone(), &namespace)
            .create(&post, &binding)
            .await
            .expect("create a RoleBinding");
    }
    wait_for("the RBAC rules to take effect", TIMEOUT, || async {
        let name = Some("cloud-node-controller");
        (allowed(&sa_client, "list", "nodes", "", name).await
            && allowed(&sa_client, "create", "leases", &ns, name).await
            && allowed(
                &sa_client,
                "create",
                "serviceaccounts/token",
                "kube-system",
                name,
            )
            .await)
            .then_some(())
    })
    .await
    .expect("RBAC in effect");

    // Every identity's requests go through one 403 counter: the CCM's own client, and the connection without
    // credentials the controllers' ServiceAccount clients are sent over.
    let forbidden: Arc<Mutex<Vec<String>>> = Arc::default();
    let main = counting_forbidden(sa_client, forbidden.clone());
    // the connection without its credentials (as the runtime derives it from the flags' kubeconfig)
    let mut bare_config = env.config();
    bare_config.auth_info = kube::config::AuthInfo::default();
    let bare = kube::Client::try_from(bare_config).expect("a bare client");
    let connection = counting_forbidden(bare, forbidden.clone());

    let node_names: Vec<String> = (0..2).map(|i| format!("{label}-n{i}")).collect();
    let (cloud, registry) = fake_cloud(&node_names);
    let builder = ccm(registry, main).with_service_account_connection(connection);
    let mut args = flags(&label, &ns, "ccm");
    args.push("--node-monitor-period=1s".to_owned());
    args.push("--use-service-account-credentials".to_owned());
    let options = builder.parse_args(args).expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    wait_status(&running, CcmStatus::Running).await;

    run_controller_scenario(&admin, &ns, &label, &node_names, &cloud, TIMEOUT).await;

    shutdown.cancel();
    running
        .wait()
        .await
        .expect("clean shutdown (lease released)");
    let forbidden = forbidden.lock().unwrap().clone();
    assert!(forbidden.is_empty(), "forbidden requests: {forbidden:#?}");

    // The accounts exist, created by the CCM.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "kube-system");
    for account in [
        "cloud-node-controller",
        "cloud-node-lifecycle-controller",
        "service-controller",
        "route-controller",
    ] {
        assert!(
            accounts.get_opt(account).await.expect("read").is_some(),
            "{account}"
        );
    }

    // The audit log: who wrote what.
    let ccm_user = format!("system:serviceaccount:{ns}:ccm");
    let controller = |account: &str| format!("system:serviceaccount:kube-system:{account}");
    let events: Vec<AuditEvent> = wait_for("the audit events", Duration::from_secs(30), || {
        let log = log.clone();
        let lifecycle = controller("cloud-node-lifecycle-controller");
        async move {
            let events = audit::read_log(&log).ok()?;
            (!writes(&events, &lifecycle, "nodes", "").is_empty()).then_some(events)
        }
    })
    .await
    .expect("audit events");
    let node_controller = controller("cloud-node-controller");
    assert!(
        writes(&events, &node_controller, "nodes", "").contains(&"patch"),
        "the cloud node controller initializes Nodes as itself"
    );
    assert!(writes(&events, &node_controller, "nodes", "status").contains(&"patch"));
    assert!(
        writes(
            &events,
            &controller("cloud-node-lifecycle-controller"),
            "nodes",
            ""
        )
        .contains(&"delete")
    );
    assert!(
        writes(
            &events,
            &controller("service-controller"),
            "services",
            "status"
        )
        .contains(&"patch")
    );
    assert!(writes(&events, &controller("route-controller"), "nodes", "status").contains(&"patch"));
    // The CCM's own identity wrote no Node or Service; it created the accounts and their tokens.
    for (resource, subresource) in [
        ("nodes", ""),
        ("nodes", "status"),
        ("services", ""),
        ("services", "status"),
    ] {
        assert!(
            writes(&events, &ccm_user, resource, subresource).is_empty(),
            "the CCM's own identity wrote {resource}/{subresource}"
        );
    }
    assert!(writes(&events, &ccm_user, "serviceaccounts", "token").contains(&"create"));
    assert!(writes(&events, &ccm_user, "serviceaccounts", "").contains(&"create"));
    let denied: Vec<&AuditEvent> = events
        .iter()
        .filter(|e| {
            e.code() == Some(403)
                && (e.user.username == ccm_user || e.user.username.contains(":kube-system:"))
        })
        .collect();
    assert!(denied.is_empty(), "{denied:#?}");

    delete_nodes(&admin, &label).await;
    control_plane.stop().expect("stop the control plane");
}
