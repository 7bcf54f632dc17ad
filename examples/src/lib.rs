//! Example cloud controller managers built with the SDK.
//!
//! - The **reference CCM** ([`reference_ccm`], example `reference-ccm`): a complete CCM on `ccm-provider-fake`,
//!   configured from an inventory file (`examples/inventory.yaml`):
//!
//!   ```text
//!   cargo run -p examples --example reference-ccm -- \
//!       --cloud-provider=fake --cloud-config=examples/inventory.yaml --kubeconfig=$KUBECONFIG
//!   ```
//! - The **demo** driver ([`demo`], example `demo`, run by `cargo xtask demo`): registers kubelet-like tainted
//!   Nodes and a LoadBalancer Service, waits for the CCM to initialize and provision them, and prints a table.
//! - The **generated files** ([`generated_files`], example `manifests`, run by `cargo xtask manifests`): the
//!   deployment manifests under `deploy/` and the config-file schema `docs/schema/ccm-config.schema.json`.
//! - A **vendor controller** on the controller kit ([`tagging`]): tags the fake cloud's instances; the model for a
//!   controller of your own. The reference CCM runs it with `--controllers=*,tagging`.
//! - An **admission webhook** ([`lb_type_webhook`]): rejects LoadBalancer Services asking for a load-balancer type
//!   the fake cloud does not have; the reference CCM serves it with `--webhooks=*`.
//! - **Vendor flags and config**: the reference CCM's own flag ([`FakeArgs`], `--fake-default-instance-type`) and
//!   config-file section ([`FakeConfig`], `fake:`), handed to its provider factory; and reload: a changed
//!   `--cloud-config` inventory is applied without a restart.

pub mod demo;
pub mod lb_type_webhook;
pub mod tagging;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ccm_app::deploy::{Manifest, ManifestOptions, object, render, yaml_documents};
use ccm_app::{CcmBuilder, CloudControllerManager};
use ccm_core::{BoxError, CloudProvider, ProviderRegistry, ProviderSettings, RegistryError};
use ccm_provider_fake::{FakeCloud, InstanceDefaults};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The sample inventory (the fake cloud of the reference CCM and of the demo).
pub const INVENTORY: &str = include_str!("../inventory.yaml");

/// The command name of the reference CCM.
pub const COMMAND_NAME: &str = "reference-ccm";

/// The container image named in the reference manifests (build and push your own).
pub const IMAGE: &str = "example.invalid/ccm-rs/reference-ccm:0.1.0";

/// The ConfigMap holding the inventory in the reference deployment.
pub const CLOUD_CONFIG_MAP: &str = "reference-ccm-cloud-config";

/// Where the inventory is mounted in the reference deployment.
pub const CLOUD_CONFIG_DIR: &str = "/etc/kubernetes/cloud-config";

/// How often the reference CCM's tagging controller checks a tagged instance again.
pub const TAGGING_RESYNC: Duration = Duration::from_secs(300);

/// The `--config` file section of the reference CCM's own settings.
pub const CONFIG_SECTION: &str = "fake";

/// The reference CCM's own flags: the model of a vendor's flags ([`CcmBuilder::with_vendor_args`]), listed in
/// `--help` under their own heading, each with an environment variable.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
#[command(next_help_heading = "Fake cloud (vendor flags)")]
pub struct FakeArgs {
    /// The instance type of the inventory's instances that name none (the Nodes' node.kubernetes.io/instance-type
    /// label). Default: none.
    #[arg(
        long = "fake-default-instance-type",
        env = "FAKE_DEFAULT_INSTANCE_TYPE",
        value_name = "TYPE"
    )]
    pub default_instance_type: Option<String>,
}

/// The reference CCM's section of the `--config` file (`fake:`): the model of a vendor's config section
/// ([`CcmBuilder::with_vendor_config`]). Unknown keys are errors naming the section.
///
/// ```yaml
/// cloudProvider: fake
/// fake:
///   instanceLabels:
///     team: infra
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FakeConfig {
    /// Labels added to the metadata of every inventory instance (so to every Node it initializes); an inventory
    /// label with the same key wins.
    #[serde(default)]
    pub instance_labels: BTreeMap<String, String>,
}

/// The fake provider's factory in the reference CCM: the inventory of `--cloud-config`, with the defaults of
/// [`FakeArgs`] and [`FakeConfig`] filled in; the cloud is shared with the tagging controller.
///
/// # Errors
///
/// The inventory's error if `--cloud-config` is not a valid inventory.
pub async fn fake_factory(settings: ProviderSettings) -> Result<Arc<dyn CloudProvider>, BoxError> {
    let cloud = FakeCloud::from_settings(&settings)?;
    cloud.set_instance_defaults(InstanceDefaults {
        instance_type: settings
            .vendor_args::<FakeArgs>()
            .and_then(|a| a.default_instance_type.clone()),
        labels: settings
            .vendor_config::<FakeConfig>()
            .map(|c| c.instance_labels.clone())
            .unwrap_or_default(),
    });
    settings.vendor.share(cloud.clone());
    Ok(Arc::new(cloud) as Arc<dyn CloudProvider>)
}

/// The reference CCM: the fake provider registered as `fake` ([`fake_factory`]), its vendor flags ([`FakeArgs`])
/// and config section ([`FakeConfig`]), the standard controllers (the four Go ones and the doctor's
/// `node-bootstrap-selfcheck`), the vendor controller [`tagging`] (off unless `--controllers=*,tagging`) and the
/// admission webhook [`lb_type_webhook`] (served with `--webhooks=*`);
/// `reference-ccm doctor [...]` runs the doctor. A changed `--cloud-config` is applied without a restart.
///
/// ```no_run
/// # async fn demo() -> Result<std::process::ExitCode, ccm_core::RegistryError> {
/// Ok(examples::reference_ccm()?.run_from_args().await)
/// # }
/// ```
///
/// # Errors
///
/// [`RegistryError`] if the fake provider cannot be registered (never with a fresh registry).
pub fn reference_ccm() -> Result<CcmBuilder, RegistryError> {
    let registry = ProviderRegistry::new();
    registry.register(ccm_provider_fake::PROVIDER_NAME, fake_factory)?;
    Ok(CloudControllerManager::builder(registry)
        .with_default_controllers()
        .with_vendor_args::<FakeArgs>()
        .with_vendor_config::<FakeConfig>(CONFIG_SECTION)
        .register_controller(tagging::descriptor_from_factory(TAGGING_RESYNC))
        .register_webhook(lb_type_webhook::descriptor())
        .with_command_name(COMMAND_NAME)
        .with_about(
            "The reference cloud controller manager of the ccm-rs SDK: the four standard controllers on the fake \
             cloud provider, whose cloud is described by an inventory file (--cloud-config, reloaded when it \
             changes), and the example vendor controller tagging-controller (--controllers=*,tagging).",
        ))
}

/// What the reference deployment manifests are generated from.
pub fn manifest_options() -> ManifestOptions {
    ManifestOptions::new(IMAGE)
        .with_args([
            "--cloud-provider=fake".to_owned(),
            format!("--cloud-config={CLOUD_CONFIG_DIR}/inventory.yaml"),
            "--cluster-cidr=10.244.0.0/16".to_owned(),
        ])
        .with_cloud_config(CLOUD_CONFIG_MAP, CLOUD_CONFIG_DIR)
        .with_webhook(lb_type_webhook::manifest())
}

/// The ConfigMap with the sample inventory.
pub fn cloud_config_map() -> ConfigMap {
    let options = manifest_options();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(CLOUD_CONFIG_MAP.to_owned()),
            namespace: Some(options.namespace),
            ..ObjectMeta::default()
        },
        data: Some([("inventory.yaml".to_owned(), INVENTORY.to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// A generated file: its path relative to the workspace root and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Relative path, `/`-separated.
    pub path: String,
    /// The content.
    pub content: String,
}

/// Every generated file: `deploy/*.yaml`, the chart's default cloud config and `docs/schema/ccm-config.schema.json`.
pub fn generated_files() -> Vec<GeneratedFile> {
    let mut manifests: Vec<Manifest> = render(&manifest_options());
    manifests.push(Manifest {
        file_name: "cloud-config.yaml".to_owned(),
        yaml: yaml_documents(&[object(&cloud_config_map())]),
    });
    let mut files: Vec<GeneratedFile> = manifests
        .into_iter()
        .map(|m| GeneratedFile {
            path: format!("deploy/{}", m.file_name),
            content: m.yaml,
        })
        .collect();
    // The Helm chart's default cloud config: the same inventory as the ConfigMap of deploy/cloud-config.yaml.
    files.push(GeneratedFile {
        path: "deploy/chart/files/cloud-config/inventory.yaml".to_owned(),
        content: INVENTORY.to_owned(),
    });
    files.push(GeneratedFile {
        path: "docs/schema/ccm-config.schema.json".to_owned(),
        content: ccm_app::config_schema_json(),
    });
    files
}

/// The generated files whose committed copy under `root` is missing or different.
pub fn stale_files(root: &Path) -> Vec<String> {
    generated_files()
        .into_iter()
        .filter(|f| {
            std::fs::read_to_string(root.join(&f.path)).ok().as_deref() != Some(f.content.as_str())
        })
        .map(|f| f.path)
        .collect()
}

/// Write every generated file under `root`; returns the paths that changed.
///
/// # Errors
///
/// The I/O error of the first file that cannot be written.
pub fn write_generated(root: &Path) -> std::io::Result<Vec<String>> {
    let mut changed = Vec::new();
    for file in generated_files() {
        let path = root.join(&file.path);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(file.content.as_str()) {
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, &file.content)?;
        changed.push(file.path);
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_inventory_is_valid() {
        let cloud = FakeCloud::from_inventory_str(INVENTORY, "examples/inventory.yaml").unwrap();
        assert_eq!(cloud.instances().len(), 3);
    }

    #[test]
    fn the_reference_ccm_knows_the_fake_provider_and_the_four_controllers() {
        let builder = reference_ccm().unwrap();
        let options = builder
            .parse_args([
                "reference-ccm",
                "--cloud-provider=fake",
                "--cloud-config=examples/inventory.yaml",
            ])
            .unwrap();
        let names: Vec<String> = builder
            .validate(&options)
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(
            names,
            [
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
                "node-route-controller",
                "node-bootstrap-selfcheck"
            ]
        );
    }

    #[test]
    fn the_reference_ccm_runs_the_tagging_controller_when_named() {
        let builder = reference_ccm().unwrap();
        let enabled = |controllers: &str| -> bool {
            let options = builder
                .parse_args(["reference-ccm", "--cloud-provider=fake", controllers])
                .unwrap();
            let plan = builder.validate(&options).unwrap();
            plan.iter().any(|d| d.name == tagging::NAME)
        };
        assert!(enabled("--controllers=*,tagging"));
        assert!(enabled("--controllers=tagging-controller"));
        assert!(!enabled("--controllers=*"));
        assert!(!enabled("--controllers=*,-tagging"));
    }
}
