//! What a benchmark runs: the CCMs under test, the API limits, the options every benchmark takes and the
//! matrix of runs they make.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};

/// The Kubernetes API limits both CCMs use by default (`--kube-api-qps`, `--kube-api-burst`).
pub const DEFAULT_LIMITS: ApiLimits = ApiLimits {
    qps: 20.0,
    burst: 30,
};

/// The CCM under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Implementation {
    /// The SDK's reference CCM (`examples --example reference-ccm`, release build) on the fake
    /// provider with a generated inventory.
    Rust,
    /// The Go reference: `k8s.io/cloud-provider` with its fake cloud
    /// (`cargo xtask controlplane build --go-ccm`).
    Go,
}

impl Implementation {
    /// The name used in tables.
    pub fn label(self) -> &'static str {
        match self {
            Implementation::Rust => "Rust",
            Implementation::Go => "Go",
        }
    }
}

/// Which Kubernetes API client limits a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LimitMode {
    /// No `--kube-api-*` flags: each CCM as shipped (Go: 20/30; the SDK: Auto, no client-side
    /// limit when the API server has API Priority and Fairness), authenticated as a ServiceAccount
    /// with the RBAC it ships (see `identity.rs`).
    Shipped,
    /// `--kube-api-qps 20 --kube-api-burst 30` passed explicitly (Go's default values); admin user.
    #[value(name = "explicit", alias = "default")]
    Default,
    /// `--raised-qps` / `--raised-burst`; admin user.
    Raised,
}

/// A client-side Kubernetes API rate limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApiLimits {
    /// `--kube-api-qps`.
    pub qps: f64,
    /// `--kube-api-burst`.
    pub burst: u32,
}

impl std::fmt::Display for ApiLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.qps, self.burst)
    }
}

/// Options both benchmarks take.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// The CCMs to run, comma-separated: rust, go.
    #[arg(long = "impl", value_enum, value_delimiter = ',', default_values_t = [Implementation::Rust, Implementation::Go])]
    pub implementations: Vec<Implementation>,
    /// The API client limits to run with, comma-separated: shipped (no limit flags, each CCM's own
    /// default, as a ServiceAccount), explicit (--kube-api-qps 20 --kube-api-burst 30, Go's
    /// default values; alias: default) and raised (--raised-qps/--raised-burst).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [LimitMode::Shipped, LimitMode::Default, LimitMode::Raised])]
    pub limits: Vec<LimitMode>,
    /// --kube-api-qps of the "raised" runs.
    #[arg(long, default_value_t = 1000.0)]
    pub raised_qps: f64,
    /// --kube-api-burst of the "raised" runs.
    #[arg(long, default_value_t = 2000)]
    pub raised_burst: u32,
    /// The longest any single wait of a run may take, in seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout_seconds: u64,
    /// How long the API writes must stay unchanged before a run's counts are read, in seconds.
    #[arg(long, default_value_t = 3)]
    pub quiet_seconds: u64,
    /// Use the binaries already built instead of building (control plane, reference-ccm).
    #[arg(long)]
    pub no_build: bool,
    /// Run this reference-ccm binary instead of building `examples --example reference-ccm`
    /// (e.g. one built from a clean checkout of a commit).
    #[arg(long, value_name = "PATH")]
    pub rust_ccm: Option<PathBuf>,
    /// Run the whole matrix this many times (rounds, one after the other), to see the spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// One more flag for the Rust CCM in every run (repeatable), e.g.
    /// `--rust-arg=--cloud-api-qps=0`; the table names it.
    #[arg(long = "rust-arg", value_name = "FLAG", allow_hyphen_values = true)]
    pub rust_args: Vec<String>,
    /// One more flag for the Go CCM in every run (repeatable); the table names it.
    #[arg(long = "go-arg", value_name = "FLAG", allow_hyphen_values = true)]
    pub go_args: Vec<String>,
}

impl CommonArgs {
    /// Checks the values; clap checks the syntax.
    ///
    /// # Errors
    /// Says which option is wrong.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.implementations.is_empty() {
            bail!("--impl needs at least one of rust, go");
        }
        if self.limits.is_empty() {
            bail!("--limits needs at least one of shipped, explicit, raised");
        }
        if !(self.raised_qps.is_finite() && self.raised_qps > 0.0) {
            bail!("--raised-qps must be a positive number");
        }
        if self.raised_burst == 0 {
            bail!("--raised-burst must be greater than 0");
        }
        if self.timeout_seconds == 0 {
            bail!("--timeout-seconds must be greater than 0");
        }
        Ok(())
    }

    /// The limits of `mode`; `None`: no flags (each CCM's shipped default).
    pub fn api_limits(&self, mode: LimitMode) -> Option<ApiLimits> {
        match mode {
            LimitMode::Shipped => None,
            LimitMode::Default => Some(DEFAULT_LIMITS),
            LimitMode::Raised => Some(ApiLimits {
                qps: self.raised_qps,
                burst: self.raised_burst,
            }),
        }
    }

    /// How tables name the limits of `mode`: `20/30`, or `shipped (SA)`.
    pub fn limits_label(&self, mode: LimitMode) -> String {
        self.api_limits(mode)
            .map_or_else(|| "shipped (SA)".to_owned(), |limits| limits.to_string())
    }

    /// The extra flags given for `implementation`.
    pub fn extra_args(&self, implementation: Implementation) -> &[String] {
        match implementation {
            Implementation::Rust => &self.rust_args,
            Implementation::Go => &self.go_args,
        }
    }

    /// The CCM's name in tables: `Rust`, or `Rust --cloud-api-qps=0` with extra flags.
    pub fn ccm_label(&self, implementation: Implementation) -> String {
        std::iter::once(implementation.label().to_owned())
            .chain(self.extra_args(implementation).iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The name of `spec`'s row: [`CommonArgs::ccm_label`], plus `#<round>` when the matrix is
    /// repeated.
    pub fn row_label(&self, spec: &RunSpec) -> String {
        let label = self.ccm_label(spec.implementation);
        if self.repeat > 1 {
            format!("{label} #{}", spec.round)
        } else {
            label
        }
    }

    /// The longest a single wait may take.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds)
    }

    /// How long writes must stay unchanged to count as finished.
    pub fn quiet(&self) -> Duration {
        Duration::from_secs(self.quiet_seconds)
    }
}

/// One run of a benchmark's matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpec {
    /// Which CCM.
    pub implementation: Implementation,
    /// Which API limits.
    pub mode: LimitMode,
    /// The controller's worker count (`--concurrent-node-syncs` / `--concurrent-service-syncs`).
    pub workers: u64,
    /// Which repetition (1-based).
    pub round: u32,
}

impl RunSpec {
    /// A file-name-safe name, e.g. `go-raised-w10-r2`.
    pub fn label(&self) -> String {
        let mode = match self.mode {
            LimitMode::Shipped => "shipped",
            LimitMode::Default => "explicit",
            LimitMode::Raised => "raised",
        };
        format!(
            "{}-{mode}-w{}-r{}",
            self.implementation.label().to_lowercase(),
            self.workers,
            self.round
        )
    }
}

/// Every run, in order: rounds, then limits, then worker counts, then CCMs (so the CCMs of one
/// configuration run back to back and see about the same machine load).
pub fn run_matrix(common: &CommonArgs, workers: &[u64]) -> Vec<RunSpec> {
    let mut runs = Vec::new();
    for round in 1..=common.repeat.max(1) {
        for &mode in &common.limits {
            for &workers in workers {
                for &implementation in &common.implementations {
                    runs.push(RunSpec {
                        implementation,
                        mode,
                        workers,
                        round,
                    });
                }
            }
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_labelled_by_mode() {
        let c = common();
        assert_eq!(c.limits_label(LimitMode::Shipped), "shipped (SA)");
        assert_eq!(c.limits_label(LimitMode::Default), "20/30");
        assert_eq!(c.limits_label(LimitMode::Raised), "1000/2000");
        assert_eq!(DEFAULT_LIMITS.to_string(), "20/30");
    }

    fn common() -> CommonArgs {
        CommonArgs {
            implementations: vec![Implementation::Rust],
            limits: vec![LimitMode::Default],
            raised_qps: 1000.0,
            raised_burst: 2000,
            timeout_seconds: 10,
            quiet_seconds: 3,
            no_build: true,
            rust_ccm: None,
            repeat: 1,
            rust_args: Vec::new(),
            go_args: Vec::new(),
        }
    }

    #[test]
    fn common_options_are_checked() {
        assert!(common().validate().is_ok());
        let mut c = common();
        c.implementations.clear();
        assert!(
            c.validate()
                .expect_err("no impl")
                .to_string()
                .contains("--impl")
        );
        let mut c = common();
        c.raised_qps = 0.0;
        assert!(c.validate().is_err());
        let mut c = common();
        c.raised_qps = f64::NAN;
        assert!(c.validate().is_err());
        let mut c = common();
        c.raised_burst = 0;
        assert!(c.validate().is_err());
        let mut c = common();
        c.timeout_seconds = 0;
        assert!(c.validate().is_err());
        let mut c = common();
        c.limits.clear();
        assert!(c.validate().is_err());
        let c = common();
        assert_eq!(c.api_limits(LimitMode::Default), Some(DEFAULT_LIMITS));
        assert_eq!(c.api_limits(LimitMode::Shipped), None);
        assert_eq!(
            c.api_limits(LimitMode::Raised),
            Some(ApiLimits {
                qps: 1000.0,
                burst: 2000
            })
        );
    }

    #[test]
    fn the_matrix_runs_both_ccms_of_a_configuration_back_to_back() {
        let mut c = common();
        c.implementations = vec![Implementation::Rust, Implementation::Go];
        c.limits = vec![LimitMode::Default, LimitMode::Raised];
        c.repeat = 2;
        let runs = run_matrix(&c, &[1, 10]);
        assert_eq!(runs.len(), 16);
        let labels: Vec<String> = runs.iter().take(5).map(RunSpec::label).collect();
        assert_eq!(
            labels,
            [
                "rust-explicit-w1-r1",
                "go-explicit-w1-r1",
                "rust-explicit-w10-r1",
                "go-explicit-w10-r1",
                "rust-raised-w1-r1"
            ]
        );
        assert_eq!(runs[8].label(), "rust-explicit-w1-r2");
        let distinct: std::collections::HashSet<String> = runs.iter().map(RunSpec::label).collect();
        assert_eq!(distinct.len(), 16, "every run has its own log file");
    }

    #[test]
    fn extra_flags_go_to_their_ccm_and_into_the_label() {
        let mut c = common();
        c.rust_args = vec!["--cloud-api-qps=0".to_owned()];
        assert_eq!(c.extra_args(Implementation::Rust), ["--cloud-api-qps=0"]);
        assert!(c.extra_args(Implementation::Go).is_empty());
        assert_eq!(c.ccm_label(Implementation::Rust), "Rust --cloud-api-qps=0");
        assert_eq!(c.ccm_label(Implementation::Go), "Go");
        let spec = RunSpec {
            implementation: Implementation::Go,
            mode: LimitMode::Default,
            workers: 1,
            round: 2,
        };
        assert_eq!(c.row_label(&spec), "Go");
        c.repeat = 3;
        assert_eq!(c.row_label(&spec), "Go #2");
    }
}
