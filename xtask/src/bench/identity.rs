//! Who the CCMs act as. Runs at explicit limits use the admin user, as earlier recorded runs did.
//! Runs at each CCM's shipped defaults ([`LimitMode::Shipped`]) use a ServiceAccount token with the
//! RBAC each CCM ships, as in a cluster: the admin user is in `system:masters`, which API Priority
//! and Fairness exempts from queuing and rejection, so it would flatter a client without its own
//! limit.
//!
//! - Rust: `deploy/serviceaccount.yaml` and `deploy/rbac.yaml`, applied as committed.
//! - Go: the `cloud-controller-manager` ServiceAccount bound to the ClusterRole that the
//!   Kubernetes documentation gives for a cloud controller manager ([`go_cluster_role`]); the Go
//!   reference ships no manifests of its own.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};

use super::support::{Cluster, Implementation, LimitMode};
use crate::paths;

/// The namespace of the CCMs' ServiceAccount (as in `deploy/`).
pub const NAMESPACE: &str = "kube-system";
/// The CCMs' ServiceAccount (as in `deploy/`).
pub const ACCOUNT: &str = "cloud-controller-manager";
/// The field manager of the objects the benchmarks apply.
const FIELD_MANAGER: &str = "xtask-bench";

/// The kubeconfig the CCM of `implementation` runs with in a run of `mode`: the admin kubeconfig,
/// or (for [`LimitMode::Shipped`]) one with a token of the `kube-system/cloud-controller-manager`
/// ServiceAccount, after applying the RBAC that CCM ships. Written into `dir`.
///
/// # Errors
/// If the RBAC cannot be applied or the token cannot be issued.
pub async fn kubeconfig_for(
    cluster: &Cluster,
    implementation: Implementation,
    mode: LimitMode,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    if mode != LimitMode::Shipped {
        return Ok(cluster.kubeconfig.clone());
    }
    match implementation {
        Implementation::Rust => {
            for file in ["serviceaccount.yaml", "rbac.yaml"] {
                apply_file(
                    &cluster.client,
                    &paths::workspace_root().join("deploy").join(file),
                )
                .await?;
            }
        }
        Implementation::Go => {
            for object in go_rbac() {
                apply(&cluster.client, object).await?;
            }
        }
    }
    let path = dir.join(format!(
        "{}-serviceaccount.kubeconfig",
        implementation.label().to_lowercase()
    ));
    cluster
        .env
        .write_service_account_kubeconfig(NAMESPACE, ACCOUNT, &path)
        .await
        .with_context(|| {
            format!(
                "writing a ServiceAccount kubeconfig for the {} CCM",
                implementation.label()
            )
        })?;
    Ok(path)
}

/// Applies every object of a multi-document YAML file (server-side apply).
///
/// # Errors
/// If the file cannot be read or parsed, or the API server rejects an object.
pub async fn apply_file(client: &kube::Client, path: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", path.display()))?;
    for document in documents.into_iter().filter(|d| !d.is_null()) {
        apply(client, document)
            .await
            .with_context(|| format!("applying {}", path.display()))?;
    }
    Ok(())
}

/// Applies one object given as JSON (server-side apply, forced).
///
/// # Errors
/// If the object has no apiVersion, kind or name, or the API server rejects it.
pub async fn apply(client: &kube::Client, object: serde_json::Value) -> anyhow::Result<()> {
    let (gvk, namespace, name) = identify(&object)?;
    let resource = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = match &namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .with_context(|| format!("applying {} {name}", gvk.kind))?;
    Ok(())
}

/// The group/version/kind, namespace and name of a manifest.
fn identify(
    object: &serde_json::Value,
) -> anyhow::Result<(GroupVersionKind, Option<String>, String)> {
    let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
    let (Some(api_version), Some(kind), Some(name)) =
        (text("/apiVersion"), text("/kind"), text("/metadata/name"))
    else {
        bail!("a manifest needs apiVersion, kind and metadata.name: {object}");
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok((
        GroupVersionKind::gvk(group, version, kind),
        text("/metadata/namespace").map(str::to_owned),
        name.to_owned(),
    ))
}

/// The ClusterRole the Kubernetes documentation ("Cloud Controller Manager Administration")
/// gives a cloud controller manager, which is what a Go CCM is usually deployed with.
pub fn go_cluster_role() -> serde_json::Value {
    let rule = |group: &str, resources: &[&str], verbs: &[&str]| serde_json::json!({ "apiGroups": [group], "resources": resources, "verbs": verbs });
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": { "name": "bench:go-cloud-controller-manager" },
        "rules": [
            rule("", &["events"], &["create", "patch", "update"]),
            rule("", &["nodes"], &["*"]),
            rule("", &["nodes/status"], &["patch"]),
            rule("", &["services"], &["list", "patch", "update", "watch"]),
            rule("", &["services/status"], &["list", "patch", "update", "watch"]),
            rule("", &["serviceaccounts"], &["create"]),
            rule("", &["persistentvolumes"], &["get", "list", "update", "watch"]),
            rule("", &["endpoints"], &["create", "get", "list", "watch", "update"]),
            rule("coordination.k8s.io", &["leases"], &["get", "create", "update"]),
        ],
    })
}

/// The ServiceAccount, [`go_cluster_role`] and its binding.
fn go_rbac() -> Vec<serde_json::Value> {
    vec![
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": { "name": ACCOUNT, "namespace": NAMESPACE },
        }),
        go_cluster_role(),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": { "name": "bench:go-cloud-controller-manager" },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "bench:go-cloud-controller-manager",
            },
            "subjects": [{ "kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE }],
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_are_identified_by_group_version_kind_and_name() {
        let (gvk, namespace, name) = identify(&serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": { "name": "b", "namespace": "kube-system" },
        }))
        .expect("identified");
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("rbac.authorization.k8s.io", "v1", "RoleBinding")
        );
        assert_eq!(namespace.as_deref(), Some("kube-system"));
        assert_eq!(name, "b");
        assert_eq!(ApiResource::from_gvk(&gvk).plural, "rolebindings");

        let (gvk, namespace, _) = identify(&serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "sa" },
        }))
        .expect("core group");
        assert_eq!((gvk.group.as_str(), gvk.version.as_str()), ("", "v1"));
        assert_eq!(namespace, None);

        let err = identify(&serde_json::json!({ "kind": "ConfigMap" })).expect_err("no name");
        assert!(
            err.to_string()
                .contains("apiVersion, kind and metadata.name"),
            "{err}"
        );
    }

    #[test]
    fn the_go_role_lets_the_go_node_controller_update_nodes() {
        let role = go_cluster_role();
        let rules = role["rules"].as_array().expect("rules");
        assert!(
            rules
                .iter()
                .any(|r| r["resources"][0] == "nodes" && r["verbs"][0] == "*")
        );
        let binding = &go_rbac()[2];
        assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
        assert_eq!(binding["subjects"][0]["name"], ACCOUNT);
    }

    #[test]
    fn the_committed_rust_rbac_parses_into_named_objects() {
        for file in ["serviceaccount.yaml", "rbac.yaml"] {
            let path = paths::workspace_root().join("deploy").join(file);
            let text = std::fs::read_to_string(&path).expect("committed manifest");
            let documents: Vec<serde_json::Value> =
                serde_saphyr::from_multiple(&text).expect("valid YAML");
            assert!(!documents.is_empty(), "{file}");
            for document in documents.iter().filter(|d| !d.is_null()) {
                identify(document).unwrap_or_else(|e| panic!("{file}: {e}"));
            }
        }
    }
}
