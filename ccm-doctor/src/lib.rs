//! # ccm-doctor
//!
//! Diagnoses the cloud controller manager's "chicken and egg" problem: every node of a new cluster carries the
//! `node.cloudprovider.kubernetes.io/uninitialized` taint until the CCM removes it, so a CCM (or a CNI it
//! depends on) that does not tolerate it never starts, and the cluster never becomes usable.
//!
//! Three tools share one set of checks:
//!
//! - **the doctor** ([`run`], [`execute`], [`diagnose_cluster`], [`run_with_client`]): reads a live cluster
//!   into a [`Snapshot`] and reports [`Finding`]s (nodes waiting too long, CCM pods blocked by taints, the CCM
//!   workload against the recommendations, a CCM no node can run ([`placement`]), node labels Kubernetes no
//!   longer sets ([`node_labels`]), the CNI/CCM deadlock, nodes without a providerID, a stale or missing leader
//!   Lease) with a severity, the objects involved and the fix;
//! - **lint mode** ([`manifest::lint_manifest`]): the workload and node-label checks on a YAML manifest, without a
//!   cluster;
//! - **the self-check** ([`selfcheck::descriptor`]): a controller inside the running CCM that exports gauges
//!   on the nodes waiting for initialization and warns about those waiting too long.
//!
//! The analysis ([`analyze`]) is a pure function of the snapshot; only [`cluster::gather`] does I/O.
//!
//! Embedding the command in a CLI:
//!
//! ```no_run
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! enum Command {
//!     /// Diagnose why nodes stay uninitialized.
//!     Doctor(ccm_doctor::DoctorArgs),
//! }
//!
//! # async fn demo() -> std::process::ExitCode {
//! match Command::parse() {
//!     Command::Doctor(args) => ccm_doctor::run(args).await,
//! }
//! # }
//! ```
//!
//! See `docs/doctor.md` for every check, the output formats, the exit codes and the self-check's metrics.
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

pub mod analysis;
pub mod cli;
pub mod cluster;
pub mod finding;
pub mod inspect;
pub mod manifest;
pub mod node_labels;
pub mod placement;
pub mod report;
pub mod selector;
pub mod selfcheck;
pub mod workload;

pub use analysis::{AnalysisConfig, Snapshot, analyze};
pub use cli::{DoctorArgs, OutputFormat, SUBCOMMAND, execute, run, run_from};
pub use cluster::{DoctorError, DoctorOptions, connect, diagnose_cluster, run_with_client};
pub use finding::{CheckId, Finding, ObjectRef, Severity};
pub use report::{EXIT_DOCTOR_FAILED, EXIT_ERRORS, EXIT_HEALTHY, EXIT_WARNINGS, Report, Summary};
pub use workload::{Workload, WorkloadKind, check_workload};
