//! The CCM runs its whole scenario under exactly the generated least-privilege RBAC (ServiceAccount token,
//! RBAC enforced by the real apiserver) without a single forbidden (403) request; its secure port, with the same
//! token as delegated-auth kubeconfig, reads the cluster's client CAs and makes TokenReviews and
//! SubjectAccessReviews.

mod support;

use std::sync::{Arc, Mutex};

use ccm_app::CcmStatus;
use ccm_app::deploy::{
    ManifestOptions, authentication_reader_binding, cluster_role, cluster_role_binding, lease_role,
    lease_role_binding,
};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio_util::sync::CancellationToken;

use support::*;

#[tokio::test]
async fn the_full_scenario_runs_under_the_generated_cluster_role_without_forbidden_requests() {
    let env = TestEnv::shared().await;
    let admin = env.client();
    let ns = env.namespace("rbac").await;
    let label = env.unique_name("rbac");
    let role_name = format!("system:{}", env.unique_name("ccm-rbac"));
    let manifests =
        ManifestOptions::new("example.invalid/ccm:test").with_names("ccm", &ns, &ns, &role_name);

    // The ServiceAccount, then exactly the generated RBAC objects.
    let sa_client = env.client_for_service_account(&ns, "ccm").await;
    let post = PostParams::default();
    Api::<ClusterRole>::all(admin.clone())
        .create(&post, &cluster_role(&manifests))
        .await
        .expect("create the ClusterRole");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&post, &cluster_role_binding(&manifests))
        .await
        .expect("create the ClusterRoleBinding");
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&post, &lease_role(&manifests))
        .await
        .expect("create the Role");
    Api::<RoleBinding>::namespaced(admin.clone(), &ns)
        .create(&post, &lease_role_binding(&manifests))
        .await
        .expect("create the RoleBinding");
    // The secure port's RoleBinding lives in kube-system, shared by every run: replace a leftover one.
    let readers = Api::<RoleBinding>::namespaced(admin.clone(), "kube-system");
    let reader = authentication_reader_binding(&manifests);
    let reader_name = reader.metadata.name.clone().expect("a name");
    let _ = readers.delete(&reader_name, &DeleteParams::default()).await;
    wait_for("the old RoleBinding to go", TIMEOUT, || async {
        readers
            .get_opt(&reader_name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .expect("no leftover RoleBinding");
    readers
        .create(&post, &reader)
        .await
        .expect("create the authentication-reader RoleBinding");
    // RBAC objects reach the authorizer through its cache: wait until it knows them.
    wait_for("the RBAC rules to take effect", TIMEOUT, || async {
        (allowed(&sa_client, "list", "nodes", "", None).await
            && allowed(&sa_client, "create", "leases", &ns, None).await)
            .then_some(())
    })
    .await
    .expect("RBAC in effect");
    assert!(
        !allowed(&sa_client, "list", "secrets", &ns, None).await,
        "least privilege: no secrets"
    );
    // The candidates' watch: list and watch the one Lease by field selector (authorized against resourceNames),
    // and no other.
    let lease = manifests.lease_name.as_str();
    for verb in ["list", "watch"] {
        assert!(
            allowed(&sa_client, verb, "leases", &ns, Some(lease)).await,
            "{verb} the Lease"
        );
        assert!(
            !allowed(&sa_client, verb, "leases", &ns, None).await,
            "least privilege: {verb} only the one Lease"
        );
    }
    let leases: Api<Lease> = Api::namespaced(sa_client.clone(), &ns);
    leases
        .list(&ListParams::default().fields(&format!("metadata.name={lease}")))
        .await
        .expect("list the Lease by its name");
    assert!(
        leases.list(&ListParams::default()).await.is_err(),
        "no list of every Lease"
    );

    let forbidden: Arc<Mutex<Vec<String>>> = Arc::default();
    let client = counting_forbidden(sa_client, forbidden.clone());
    let node_names: Vec<String> = (0..2).map(|i| format!("{label}-n{i}")).collect();
    let (cloud, registry) = fake_cloud(&node_names);
    let builder = ccm(registry, client.clone());
    // the secure port authenticates with the same ServiceAccount (a 403 reading the ConfigMap stops the start)
    let token = service_account_token(env, &ns, "ccm").await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = token_kubeconfig(env, dir.path(), &token);
    let mut args: Vec<String> = flags(&label, &ns, "ccm")
        .into_iter()
        .filter(|a| a != ALLOW_ADMIN_PATHS)
        .collect();
    args.push("--node-monitor-period=1s".to_owned());
    args.push(format!(
        "--authentication-kubeconfig={}",
        kubeconfig.display()
    ));
    args.push(format!(
        "--authorization-kubeconfig={}",
        kubeconfig.display()
    ));
    let options = builder.parse_args(args).expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    wait_status(&running, CcmStatus::Running).await;

    // a TokenReview (else 401) and a SubjectAccessReview (else 500) under the generated rights: the account
    // itself may not read /metrics, so 403 naming it
    let addr = running.admin_addr().expect("serving");
    let cert = running.admin_certificate_pem().expect("cert").to_owned();
    let bearer = format!("Bearer {token}");
    let headers = [("Authorization", bearer.as_str())];
    let (status, body) = https_get_as(
        addr,
        &cert,
        "/metrics",
        Credentials {
            headers: &headers,
            ..Credentials::default()
        },
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!(
            "forbidden: User \\\"system:serviceaccount:{ns}:ccm\\\" cannot get path \\\"/metrics\\\""
        )),
        "{body}"
    );

    run_controller_scenario(&admin, &ns, &label, &node_names, &cloud, TIMEOUT).await;

    shutdown.cancel();
    running
        .wait()
        .await
        .expect("clean shutdown (lease released)");
    let forbidden = forbidden.lock().unwrap().clone();
    assert!(
        forbidden.is_empty(),
        "forbidden requests under the generated RBAC: {forbidden:#?}"
    );

    delete_nodes(&admin, &label).await;
    let _ = readers.delete(&reader_name, &DeleteParams::default()).await;
    let _ = Api::<ClusterRoleBinding>::all(admin.clone())
        .delete(&role_name, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRole>::all(admin.clone())
        .delete(&role_name, &DeleteParams::default())
        .await;
}
