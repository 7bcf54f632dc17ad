//! The committed deployment manifests are current, and the real apiserver accepts them (server-side dry run).

mod support;

use ccm_testenv::TestEnv;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;

use support::workspace_root;

#[test]
fn committed_files_equal_the_generated_ones() {
    let stale = examples::stale_files(&workspace_root());
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `cargo xtask manifests` and commit the result"
    );
}

#[test]
fn the_doctor_finds_nothing_wrong_with_the_deployment() {
    let path = workspace_root().join("deploy").join("deployment.yaml");
    let report = ccm_doctor::manifest::lint_manifest_file(
        &path,
        &ccm_doctor::manifest::WorkloadFilter::default(),
    )
    .expect("lint");
    assert!(
        report.findings().is_empty(),
        "the doctor objects to deploy/deployment.yaml: {:#?}",
        report.findings()
    );
}

#[tokio::test]
async fn the_apiserver_accepts_every_manifest_in_a_dry_run() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let mut kinds = Vec::new();
    for file in [
        "serviceaccount.yaml",
        "rbac.yaml",
        "deployment.yaml",
        "cloud-config.yaml",
        "controller-rbac.yaml",
        "webhook/webhook.yaml",
    ] {
        let path = workspace_root().join("deploy").join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for doc in docs {
            support::dry_run_create(&client, &doc, &format!("deploy/{file}")).await;
            kinds.push(doc["kind"].as_str().expect("kind").to_owned());
        }
    }
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "Deployment",
            "ConfigMap",
            // controller-rbac.yaml: a ClusterRole and its binding per controller, then the token Role
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            // webhook/webhook.yaml
            "Service",
            "ValidatingWebhookConfiguration"
        ]
    );
    // nothing was created
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    assert!(
        deployments
            .get_opt("cloud-controller-manager")
            .await
            .expect("read")
            .is_none(),
        "a dry run creates nothing"
    );
}
