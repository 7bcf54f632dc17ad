//! The Acme cloud controller manager: a provider written from scratch on the SDK's public API (`acme.rs`, on the
//! in-memory stand-in of Acme's SDK in `api.rs`), run by the reference runtime with the standard controllers and
//! Acme's own flag `--acme-region`. Its conformance tests are `examples/tests/conformance_acme.rs` (wiring in
//! `suite.rs`); `docs/vendor-guide.md` walks through it.
//!
//! ```text
//! cargo run -p examples --example custom-provider -- \
//!     --cloud-config=examples/acme-inventory.yaml --acme-region=acme-1 --kubeconfig=$KUBECONFIG
//! ```

mod acme;
mod api;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let registry = ccm_core::ProviderRegistry::new();
    if let Err(err) = registry.register(acme::PROVIDER, acme::factory) {
        eprintln!("acme-ccm: cannot register the acme provider: {err}");
        return ExitCode::FAILURE;
    }
    ccm_app::CloudControllerManager::builder(registry)
        .with_default_controllers()
        .with_default_provider(acme::PROVIDER)
        .with_vendor_args::<acme::AcmeArgs>()
        .with_command_name("acme-ccm")
        .run_from_args()
        .await
}
