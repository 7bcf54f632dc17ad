//! The skeleton every side-by-side benchmark (`bench nodes`, `bench lbs`) runs on: build the binaries, write the
//! inputs, run the matrix (a fresh control plane per run, one CCM per run), then print the tables. A benchmark
//! supplies what differs: its inputs, what it measures in a run and how it prints the results ([`Benchmark`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::bail;

use super::identity;
use super::support::{self, BenchBinaries, CcmProcess, CcmSpec, Cluster, CommonArgs, RunSpec};
use crate::process::{Interrupt, Interrupted};

/// One benchmark: the parts of a run that differ between benchmarks.
pub trait Benchmark {
    /// What one run measured.
    type Measured;

    /// The directory of its logs and generated files, under `<target dir>/bench`.
    const NAME: &'static str;
    /// The CCM's `--controllers`.
    const CONTROLLERS: &'static str;
    /// The CCM flag that sets the worker count of [`RunSpec::workers`] (`--concurrent-node-syncs`).
    const WORKERS_FLAG: &'static str;

    /// The options every benchmark takes.
    fn common(&self) -> &CommonArgs;

    /// The worker counts to run.
    fn workers(&self) -> &[u64];

    /// Writes the fake cloud's inventory for the Rust CCM into `out`; returns its path.
    ///
    /// # Errors
    /// If the file cannot be written.
    fn write_inventory(&self, out: &Path) -> anyhow::Result<PathBuf>;

    /// What a run does, printed before it starts (after `run i/n: `).
    fn describe_run(&self, spec: &RunSpec) -> String;

    /// What a run measured, printed after it succeeded.
    fn describe_result(&self, measured: &Self::Measured) -> String;

    /// Sets up the objects of one run on a fresh `cluster`, starts the CCM ([`Run::start_ccm`]) and measures.
    ///
    /// # Errors
    /// If the run fails (its row then says so), or [`Interrupted`] on Ctrl-C.
    async fn measure(
        &self,
        run: &Run<'_>,
        cluster: &Cluster,
        interrupt: &Interrupt,
    ) -> anyhow::Result<Self::Measured>;

    /// Prints the results (tables, details) below the `environment` line.
    fn report(&self, environment: &str, results: &[(RunSpec, anyhow::Result<Self::Measured>)]);
}

/// One run of the matrix: which CCM, with what, and where its files go.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// Which CCM, limits, worker count and round.
    pub spec: RunSpec,
    /// The options every benchmark takes.
    pub common: &'a CommonArgs,
    /// The binaries under test.
    pub binaries: &'a BenchBinaries,
    /// The Rust CCM's inventory.
    pub inventory: &'a Path,
    /// The benchmark's output directory.
    pub out: &'a Path,
}

impl Run<'_> {
    /// The command line of this run's CCM acting as the identity of its limit mode (a ServiceAccount with the
    /// shipped RBAC for `shipped`, else the admin), with `controllers` and `workers_flag`.
    ///
    /// # Errors
    /// If the identity cannot be set up or no port is free.
    pub async fn ccm_spec(
        &self,
        cluster: &Cluster,
        controllers: &str,
        workers_flag: &str,
    ) -> anyhow::Result<CcmSpec> {
        let kubeconfig =
            identity::kubeconfig_for(cluster, self.spec.implementation, self.spec.mode, self.out)
                .await?;
        Ok(CcmSpec {
            implementation: self.spec.implementation,
            controllers: controllers.to_owned(),
            kubeconfig,
            admin_kubeconfig: cluster.kubeconfig.clone(),
            inventory: Some(self.inventory.to_owned()),
            admin_port: support::free_port()?,
            limits: self.common.api_limits(self.spec.mode),
            extra: std::iter::once(format!("{workers_flag}={}", self.spec.workers))
                .chain(
                    self.common
                        .extra_args(self.spec.implementation)
                        .iter()
                        .cloned(),
                )
                .collect(),
            leader_elect: false,
        })
    }

    /// Starts the CCM of `ccm_spec`, its log in `<out>/<run label>.log`; returns it and when it started.
    ///
    /// # Errors
    /// If it cannot be started.
    pub fn start_ccm(&self, ccm_spec: &CcmSpec) -> anyhow::Result<(CcmProcess, Instant)> {
        let log = self.out.join(format!("{}.log", self.spec.label()));
        let started = Instant::now();
        let ccm = CcmProcess::start(self.binaries.of(self.spec.implementation), ccm_spec, &log)?;
        Ok((ccm, started))
    }
}

/// Runs `benchmark`: builds, writes its inputs, runs every run of the matrix on its own control plane, then
/// prints its report.
///
/// # Errors
/// Bad options, a failed build, a missing Go binary, or a failed run (after the report of the runs that worked
/// was printed); [`Interrupted`] on Ctrl-C.
pub async fn run<B: Benchmark>(benchmark: &B, interrupt: &Interrupt) -> anyhow::Result<()> {
    let common = benchmark.common();
    common.validate()?;
    let binaries = support::prepare(common, interrupt).await?;
    let out = support::output_dir(B::NAME)?;
    let inventory = benchmark.write_inventory(&out)?;
    let environment = support::environment_summary(&binaries, common).await;
    eprintln!("{environment}");

    let runs = support::run_matrix(common, benchmark.workers());
    let mut results: Vec<(RunSpec, anyhow::Result<B::Measured>)> = Vec::new();
    for (index, spec) in runs.iter().enumerate() {
        eprintln!(
            "\n== run {}/{}: {}",
            index + 1,
            runs.len(),
            benchmark.describe_run(spec)
        );
        let run = Run {
            spec: *spec,
            common,
            binaries: &binaries,
            inventory: &inventory,
            out: &out,
        };
        let result = run_once(benchmark, &run, interrupt).await;
        match &result {
            Err(err) if err.is::<Interrupted>() => return result.map(|_| ()),
            Err(err) => eprintln!("run failed: {err:#}"),
            Ok(measured) => eprintln!("{}", benchmark.describe_result(measured)),
        }
        results.push((*spec, result));
    }
    benchmark.report(&environment, &results);
    println!("\nCCM logs: {}", out.display());
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    if failed > 0 {
        bail!("{failed} of {} runs failed (see above)", results.len());
    }
    Ok(())
}

/// One run on a fresh control plane, stopped afterwards whatever happened.
async fn run_once<B: Benchmark>(
    benchmark: &B,
    run: &Run<'_>,
    interrupt: &Interrupt,
) -> anyhow::Result<B::Measured> {
    let cluster = Cluster::start(interrupt).await?;
    let measured = benchmark.measure(run, &cluster, interrupt).await;
    let stopped = cluster.stop();
    let measured = measured?;
    stopped?;
    Ok(measured)
}

/// The first line of `err`'s chain, for a table cell.
pub fn first_line(err: &anyhow::Error) -> String {
    format!("{err:#}")
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The start of a row of a results table: the CCM, the worker count and the limits of `spec`.
pub fn row_start(common: &CommonArgs, spec: &RunSpec) -> Vec<String> {
    vec![
        common.row_label(spec),
        spec.workers.to_string(),
        common.limits_label(spec.mode),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::support::{Implementation, LimitMode};

    #[test]
    fn a_failure_cell_shows_the_first_line_only() {
        let err = anyhow::anyhow!("timed out\nmore").context("run 3");
        assert_eq!(first_line(&err), "run 3: timed out");
    }

    #[test]
    fn rows_start_with_the_ccm_workers_and_limits() {
        let common = CommonArgs {
            implementations: vec![Implementation::Rust],
            limits: vec![LimitMode::Default],
            raised_qps: 1000.0,
            raised_burst: 2000,
            timeout_seconds: 10,
            quiet_seconds: 3,
            no_build: true,
            rust_ccm: None,
            repeat: 2,
            rust_args: vec!["--v=2".to_owned()],
            go_args: Vec::new(),
        };
        let spec = RunSpec {
            implementation: Implementation::Rust,
            mode: LimitMode::Default,
            workers: 10,
            round: 2,
        };
        assert_eq!(row_start(&common, &spec), ["Rust --v=2 #2", "10", "20/30"]);
    }
}
