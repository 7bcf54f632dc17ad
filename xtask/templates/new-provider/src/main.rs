//! The `{{name}}` cloud controller manager: the SDK's reference runtime (flags, config file, leader election,
//! the standard controllers, metrics and health endpoints) running the `{{name}}` provider.
//!
//! ```text
//! cargo run -- --cloud-config=inventory.txt --kubeconfig=$KUBECONFIG
//! ```

use std::process::ExitCode;

use {{crate_ident}}::{PROVIDER, {{type_name}}Args, factory};

#[tokio::main]
async fn main() -> ExitCode {
    let registry = ccm_core::ProviderRegistry::new();
    if let Err(err) = registry.register(PROVIDER, factory) {
        eprintln!("{{name}}-ccm: cannot register the {{name}} provider: {err}");
        return ExitCode::FAILURE;
    }
    ccm_app::CloudControllerManager::builder(registry)
        .with_default_controllers()
        .with_default_provider(PROVIDER)
        .with_vendor_args::<{{type_name}}Args>()
        .with_command_name("{{name}}-ccm")
        .with_version(env!("CARGO_PKG_VERSION"))
        .run_from_args()
        .await
}
