//! # ccm-app
//!
//! The runtime of a cloud controller manager: the Rust counterpart of Go's `k8s.io/cloud-provider/app`. A vendor
//! registers its provider and calls the builder; the runtime does the rest:
//!
//! - flags with the Go reference's names and defaults, and a YAML config file (`--config`), precedence
//!   defaults < file < flags ([`options`], [`config_file`]);
//! - `--controllers` with the Go rules ([`controllers`]), the four standard controllers ([`defaults`]) and vendor
//!   controllers ([`CcmBuilder::register_controller`]);
//! - Kubernetes clients with a client-side QPS/burst token bucket per controller, none by default when the API
//!   server runs API Priority and Fairness, and 429 answers retried after their `Retry-After` ([`client`],
//!   [`ratelimit`], [`retry`]);
//! - the provider created in every replica; with `--leader-elect`, `initialize` and the controllers only in the
//!   leader, over one set of shared informers;
//! - an HTTPS admin server (`/healthz`, `/livez`, `/readyz`, `/metrics`, `/configz`) ([`admin`], [`health`],
//!   [`tls`]) with Go's delegated authentication and authorization (TokenReview, client certificates,
//!   request-header proxies, SubjectAccessReview) ([`auth`]);
//! - vendor extensions: the vendor's own flags and config-file section handed to its async provider factory
//!   ([`CcmBuilder::with_vendor_args`], [`CcmBuilder::with_vendor_config`]), vendor controllers, and reloading
//!   the provider's configuration without a restart ([`reload`]);
//! - admission webhooks a vendor registers, served on their own HTTPS port ([`webhook`], [`serving`]);
//! - graceful shutdown on SIGTERM/SIGINT (controllers finish in-flight work, the Lease is released, exit 0) and
//!   exit 1 on lost leadership; structured logs ([`logging`]).
//!
//! ```no_run
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     let registry = ccm_core::ProviderRegistry::new();
//!     // AcmeCloud::register(&registry).expect("register");
//!     ccm_app::CloudControllerManager::builder(registry)
//!         .with_default_controllers()
//!         .run_from_args()
//!         .await
//! }
//! ```
//!
//! See `docs/runtime.md` for the flags table, the config file, the endpoints and the differences from Go, and
//! `docs/deployment.md` for the manifests ([`deploy`]).
//!
//! ## Cargo features
//!
//! | feature | default | what it compiles in |
//! |---|---|---|
//! | `rustls-tls` | on | the TLS stack of the Kubernetes client: kube's `rustls-tls` with `ring`. The one place of the SDK that selects kube's TLS backend; the other crates (the doctor included) follow it. Without it, enable a kube TLS feature (e.g. `kube/openssl-tls`) in the binary, or the client reaches plain-HTTP API servers only. |
//! | `doctor` | on | the `<command> doctor` subcommand ([`CcmBuilder::run_from`]) and the bootstrap self-check controller `node-bootstrap-selfcheck` ([`defaults::default_controllers`]), both from `ccm-doctor`. |
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
mod fence;
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

pub use admin::AdminError;
pub use app::{
    APISERVER_WAIT, CcmBuilder, CcmStatus, CloudControllerManager, RunError, RunningCcm,
    StartupError, VENDOR_HELP_HEADING, client_name, scope_of,
};
pub use auth::AuthError;
pub use auth::decide::BadAllowPath;
pub use client::ClientError;
pub use config_file::{ConfigFileError, config_schema_json};
pub use controllers::CatalogError;
pub use options::{CcmOptions, LogFormat, Settings};
pub use tls::TlsError;

#[cfg(test)]
mod properties_tests;
