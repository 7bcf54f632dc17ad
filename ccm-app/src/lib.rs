//! # ccm-app
//!
//! The runtime of a cloud controller manager: the Rust counterpart of Go's `k8s.io/cloud-provider/app`. A vendor
//! writes a provider (the traits of `ccm-core`), registers its factory, and hands the registry to the builder; the
//! runtime does the rest.
//!
//! ## A vendor's `main`
//!
//! ```no_run
//! use std::process::ExitCode;
//! use std::sync::Arc;
//!
//! use ccm_core::provider::CloudProvider;
//! use ccm_core::registry::ProviderSettings;
//! use ccm_core::{BoxError, ProviderRegistry};
//!
//! /// The vendor's own flags, next to the runtime's (`--acme-region`).
//! #[derive(Debug, Clone, clap::Args)]
//! struct AcmeArgs {
//!     /// The region the cluster runs in.
//!     #[arg(long = "acme-region", default_value = "eu-1")]
//!     region: String,
//! }
//!
//! struct AcmeCloud {
//!     region: String,
//! }
//!
//! impl CloudProvider for AcmeCloud {
//!     fn provider_name(&self) -> &str {
//!         "acme"
//!     }
//!     // instances_v2(), load_balancer(), routes(): what the cloud offers
//! }
//!
//! async fn acme(settings: ProviderSettings) -> Result<Arc<dyn CloudProvider>, BoxError> {
//!     let region = settings.vendor_args::<AcmeArgs>().map(|a| a.region.clone()).unwrap_or_default();
//!     Ok(Arc::new(AcmeCloud { region }))
//! }
//!
//! #[tokio::main]
//! async fn main() -> ExitCode {
//!     let registry = ProviderRegistry::new();
//!     if let Err(err) = registry.register("acme", acme) {
//!         eprintln!("acme-ccm: {err}");
//!         return ExitCode::FAILURE;
//!     }
//!     ccm_app::CloudControllerManager::builder(registry)
//!         .with_default_controllers()
//!         .with_default_provider("acme")
//!         .with_vendor_args::<AcmeArgs>()
//!         .with_command_name("acme-ccm")
//!         .with_version(env!("CARGO_PKG_VERSION"))
//!         .run_from_args()
//!         .await
//! }
//! ```
//!
//! What a vendor uses, all on [`CcmBuilder`] (from [`CloudControllerManager::builder`]):
//!
//! - the four standard controllers ([`CcmBuilder::with_default_controllers`]) and its own
//!   ([`CcmBuilder::register_controller`], [`CcmBuilder::register_controller_with`]), selected with `--controllers`
//!   under Go's rules;
//! - its own flags and config-file section, handed to the async provider factory ([`CcmBuilder::with_vendor_args`],
//!   [`CcmBuilder::with_vendor_config`]), and its defaults for the runtime's settings ([`CcmBuilder::with_defaults`],
//!   [`CcmBuilder::with_default_provider`]);
//! - admission webhooks on their own HTTPS port ([`CcmBuilder::register_webhook`], [`webhook`]), health checks on
//!   `/healthz`, `/livez` and `/readyz` ([`CcmBuilder::with_health_check`]), and the provider's reload hook, called
//!   when `--cloud-config` changes (no restart);
//! - embedding and tests: [`CcmBuilder::parse_args`], [`CcmBuilder::start`] and the [`RunningCcm`] it returns
//!   (status, admin address, metrics), [`CcmBuilder::with_client`];
//! - the manifests of a deployment ([`deploy`]) and the JSON schema of the config file ([`config_schema_json`]).
//!
//! ## What the runtime does
//!
//! - flags with the Go reference's names and defaults, and a YAML config file (`--config`), precedence
//!   defaults < file < flags ([`options`]);
//! - Kubernetes clients with a client-side QPS/burst token bucket per controller, none by default when the API
//!   server runs API Priority and Fairness, and 429 answers retried after their `Retry-After`;
//! - the provider created in every replica, behind one cloud-call budget and an instance cache; with
//!   `--leader-elect`, `initialize` and the controllers only in the leader, over one set of shared informers;
//! - an HTTPS admin server (`/healthz`, `/livez`, `/readyz`, `/metrics`, `/configz`) with Go's delegated
//!   authentication and authorization (TokenReview, client certificates, request-header proxies,
//!   SubjectAccessReview);
//! - graceful shutdown on SIGTERM/SIGINT (controllers finish in-flight work, the Lease is released, exit 0) and
//!   exit 1 on lost leadership; structured logs.
//!
//! See `docs/runtime.md` for the flags table, the config file, the endpoints and the differences from Go,
//! `docs/vendor-guide.md` for writing a provider, and `docs/deployment.md` for the manifests.
//!
//! ## Cargo features
//!
//! | feature | default | what it compiles in |
//! |---|---|---|
//! | `rustls-tls` | on | the TLS stack of the Kubernetes client: kube's `rustls-tls` with `ring`. The one place of the SDK that selects kube's TLS backend; the other crates (the doctor included) follow it. Without it, enable a kube TLS feature (e.g. `kube/openssl-tls`) in the binary, or the client reaches plain-HTTP API servers only. |
//! | `doctor` | on | the `<command> doctor` subcommand ([`CcmBuilder::run_from`]) and the bootstrap self-check controller `node-bootstrap-selfcheck` (one of the default controllers), both from `ccm-doctor`. |
//!
//! The admin server's HTTPS (`tokio-rustls`) does not depend on either feature.

mod admin;
mod app;
mod auth;
mod client;
mod config_file;
mod controllers;
mod defaults;
pub mod deploy;
mod health;
mod logging;
pub mod options;
mod ratelimit;
mod reload;
mod retry;
mod service_accounts;
mod serving;
mod tls;
pub mod webhook;

// The vendor's path first: the builder, what it returns, the options; then the errors.
pub use app::{CcmBuilder, CcmStatus, CloudControllerManager, RunningCcm};
pub use config_file::config_schema_json;
pub use options::{CcmOptions, LogFormat, Settings};

pub use admin::AdminError;
pub use app::{RunError, StartupError};
pub use auth::AuthError;
pub use client::ClientError;
pub use config_file::ConfigFileError;
pub use controllers::CatalogError;
pub use tls::TlsError;

pub use app::VENDOR_HELP_HEADING;

#[cfg(test)]
mod properties_tests;
