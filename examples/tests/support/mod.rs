//! Shared by the manifest and chart tests: the workspace root and server-side dry runs of manifest documents.

use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the examples crate is in the workspace")
        .to_path_buf()
}

fn typed<K: DeserializeOwned>(doc: &serde_json::Value) -> K {
    serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{}: {e}", doc["kind"]))
}

/// Creates one manifest document with `dryRun=All`: the apiserver validates and admits it, and stores nothing.
/// A 409 (an object of that name exists, e.g. a real install) counts as accepted. Panics on kinds the deploy
/// manifests do not have.
pub async fn dry_run_create(client: &kube::Client, doc: &serde_json::Value, origin: &str) {
    let dry_run = PostParams {
        dry_run: true,
        field_manager: Some("ccm-manifests-test".to_owned()),
    };
    let kind = doc["kind"].as_str().expect("kind");
    let namespace = doc["metadata"]["namespace"].as_str().unwrap_or_default();
    let client = client.clone();
    let result = match kind {
        "ServiceAccount" => Api::<ServiceAccount>::namespaced(client, namespace)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "ClusterRole" => Api::<ClusterRole>::all(client)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "ClusterRoleBinding" => Api::<ClusterRoleBinding>::all(client)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "Role" => Api::<Role>::namespaced(client, namespace)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "RoleBinding" => Api::<RoleBinding>::namespaced(client, namespace)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "Deployment" => Api::<Deployment>::namespaced(client, namespace)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "ConfigMap" => Api::<ConfigMap>::namespaced(client, namespace)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "Service" => Api::<Service>::namespaced(client, namespace)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        "ValidatingWebhookConfiguration" => Api::<ValidatingWebhookConfiguration>::all(client)
            .create(&dry_run, &typed(doc))
            .await
            .map(|_| ()),
        other => panic!("unexpected kind {other} in {origin}"),
    };
    match result {
        Ok(()) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => panic!("the apiserver rejected {kind} from {origin}: {err}"),
    }
}
