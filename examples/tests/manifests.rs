//! The committed deployment manifests are current, and the real apiserver accepts them (server-side dry run).

use std::path::{Path, PathBuf};

use ccm_testenv::TestEnv;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the examples crate is in the workspace")
        .to_path_buf()
}

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

fn typed<K: DeserializeOwned>(doc: &serde_json::Value) -> K {
    serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{}: {e}", doc["kind"]))
}

#[tokio::test]
async fn the_apiserver_accepts_every_manifest_in_a_dry_run() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let dry_run = PostParams {
        dry_run: true,
        field_manager: Some("ccm-manifests-test".to_owned()),
    };
    let mut kinds = Vec::new();
    for file in [
        "serviceaccount.yaml",
        "rbac.yaml",
        "deployment.yaml",
        "cloud-config.yaml",
        "controller-rbac.yaml",
    ] {
        let path = workspace_root().join("deploy").join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for doc in docs {
            let kind = doc["kind"].as_str().expect("kind").to_owned();
            let namespace = doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let result = match kind.as_str() {
                "ServiceAccount" => Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
                    .create(&dry_run, &typed(&doc))
                    .await
                    .map(|_| ()),
                "ClusterRole" => Api::<ClusterRole>::all(client.clone())
                    .create(&dry_run, &typed(&doc))
                    .await
                    .map(|_| ()),
                "ClusterRoleBinding" => Api::<ClusterRoleBinding>::all(client.clone())
                    .create(&dry_run, &typed(&doc))
                    .await
                    .map(|_| ()),
                "Role" => Api::<Role>::namespaced(client.clone(), &namespace)
                    .create(&dry_run, &typed(&doc))
                    .await
                    .map(|_| ()),
                "RoleBinding" => Api::<RoleBinding>::namespaced(client.clone(), &namespace)
                    .create(&dry_run, &typed(&doc))
                    .await
                    .map(|_| ()),
                "Deployment" => Api::<Deployment>::namespaced(client.clone(), &namespace)
                    .create(&dry_run, &typed(&doc))
                    .await
                    .map(|_| ()),
                "ConfigMap" => Api::<ConfigMap>::namespaced(client.clone(), &namespace)
                    .create(&dry_run, &typed(&doc))
                    .await
                    .map(|_| ()),
                other => panic!("unexpected kind {other} in {file}"),
            };
            match result {
                Ok(()) => {}
                // Another test run's dry run never persists, but a real install of the manifests might exist.
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(err) => panic!("the apiserver rejected {kind} from deploy/{file}: {err}"),
            }
            kinds.push(kind);
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
            "RoleBinding"
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
