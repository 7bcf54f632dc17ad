//! The binaries a benchmark runs (built unless `--no-build`), where its files go, and the line describing the
//! machine and the versions printed above its tables.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::matrix::{CommonArgs, Implementation};
use super::procfs::{load_average, status_kib};
use crate::controlplane::{self, BuildArgs};
use crate::gobuild::GO_CCM;
use crate::paths;
use crate::process::{self, Interrupt};

/// The binaries the benchmarks run.
#[derive(Debug, Clone)]
pub struct BenchBinaries {
    /// `target/release/examples/reference-ccm`.
    pub rust_ccm: PathBuf,
    /// `target/controlplane/bin/fake-cloud-controller-manager`.
    pub go_ccm: PathBuf,
}

impl BenchBinaries {
    /// Fails unless the binary of `implementation` exists; the message says how to get it.
    ///
    /// # Errors
    /// When the file is missing.
    pub fn check(&self, implementation: Implementation) -> anyhow::Result<()> {
        let path = self.of(implementation);
        if path.is_file() {
            return Ok(());
        }
        match implementation {
            Implementation::Go => bail!(
                "the Go reference CCM is missing ({}): run `cargo xtask controlplane build \
                 --go-ccm`, or leave it out with --impl rust",
                path.display()
            ),
            Implementation::Rust => bail!(
                "the Rust reference CCM is missing ({}): check --rust-ccm, run without \
                 --no-build, or run `cargo build --release -p examples --example reference-ccm`",
                path.display()
            ),
        }
    }

    /// The binary of `implementation`.
    pub fn of(&self, implementation: Implementation) -> &Path {
        match implementation {
            Implementation::Rust => &self.rust_ccm,
            Implementation::Go => &self.go_ccm,
        }
    }
}

/// Builds what the runs need (unless `--no-build`) and checks that the binaries exist.
///
/// # Errors
/// If a build fails or a binary is missing (the message says what to run).
pub async fn prepare(common: &CommonArgs, interrupt: &Interrupt) -> anyhow::Result<BenchBinaries> {
    let binaries = BenchBinaries {
        rust_ccm: common.rust_ccm.as_deref().map_or_else(
            || {
                paths::target_dir()
                    .join("release")
                    .join("examples")
                    .join("reference-ccm")
            },
            paths::absolute,
        ),
        go_ccm: paths::controlplane_bin_dir().join(GO_CCM.name),
    };
    let wants = |i| common.implementations.contains(&i);
    if wants(Implementation::Go) {
        binaries.check(Implementation::Go)?;
    }
    if !common.no_build {
        controlplane::build(&BuildArgs::default(), interrupt).await?;
        if wants(Implementation::Rust) && common.rust_ccm.is_none() {
            let mut build = process::cargo();
            build.args([
                "build",
                "--release",
                "-p",
                "examples",
                "--example",
                "reference-ccm",
            ]);
            process::run(build, interrupt, "").await?;
        }
    }
    controlplane::binaries()?;
    if wants(Implementation::Rust) {
        binaries.check(Implementation::Rust)?;
    }
    Ok(binaries)
}

/// The directory for a benchmark's logs and generated files: `<target>/bench/<name>`.
///
/// # Errors
/// If it cannot be created.
pub fn output_dir(name: &str) -> anyhow::Result<PathBuf> {
    let dir = paths::target_dir().join("bench").join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// A line describing the machine and the versions, printed above the tables.
pub async fn environment_summary(binaries: &BenchBinaries, common: &CommonArgs) -> String {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| status_kib(&text, "MemTotal"))
        .map_or_else(
            || "unknown memory".to_owned(),
            |kib| format!("{:.1} GiB", kib as f64 / 1024.0 / 1024.0),
        );
    let load = load_average().map_or_else(|| "unknown".to_owned(), |l| format!("{l:.2}"));
    let mut lines = vec![format!(
        "machine: {cores} cores, {memory}, load average {load} at start"
    )];
    let mut versions = Vec::new();
    if let Some(v) = first_line_of(Path::new("rustc"), &["--version"]).await {
        versions.push(v);
    }
    if common.implementations.contains(&Implementation::Go) {
        if let Some(v) = first_line_of(Path::new("go"), &["version"]).await {
            versions.push(v);
        }
        if let Some(v) = first_line_of(&binaries.go_ccm, &["--version"]).await {
            versions.push(format!("Go CCM: {v} (k8s.io/cloud-provider)"));
        }
    }
    if common.implementations.contains(&Implementation::Rust)
        && let Some(v) = first_line_of(&binaries.rust_ccm, &["--version"]).await
    {
        versions.push(format!("Rust CCM: {v}"));
    }
    versions.push(format!(
        "kube-apiserver {}",
        crate::gobuild::KUBERNETES_VERSION
    ));
    lines.push(format!("versions: {}", versions.join("; ")));
    lines.join("\n")
}

async fn first_line_of(program: &Path, args: &[&str]) -> Option<String> {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .next()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binaries_say_how_to_get_them() {
        let binaries = BenchBinaries {
            rust_ccm: PathBuf::from("/nonexistent/reference-ccm"),
            go_ccm: PathBuf::from("/nonexistent/fake-cloud-controller-manager"),
        };
        let go = binaries.check(Implementation::Go).expect_err("missing");
        assert!(
            go.to_string()
                .contains("run `cargo xtask controlplane build --go-ccm`"),
            "{go}"
        );
        let rust = binaries.check(Implementation::Rust).expect_err("missing");
        assert!(rust.to_string().contains("--rust-ccm"), "{rust}");
        let present = BenchBinaries {
            rust_ccm: std::env::current_exe().expect("test binary"),
            go_ccm: std::env::current_exe().expect("test binary"),
        };
        assert!(present.check(Implementation::Rust).is_ok());
        assert!(present.check(Implementation::Go).is_ok());
    }
}
