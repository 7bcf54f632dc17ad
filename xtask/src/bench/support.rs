//! What both benchmarks share: the CCMs under test and their command lines, a fresh control plane
//! per run, process statistics from `/proc`, metrics from the API server and the CCMs, watching
//! objects converge, and the printed table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ccm_testenv::TestEnv;
use ccm_testenv::controlplane::{ControlPlane, Supervision};
use clap::{Args, ValueEnum};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use tokio::sync::watch;

use super::prom::{self, RequestCounts, Sample};
use crate::controlplane::{self, BuildArgs};
use crate::gobuild::GO_CCM;
use crate::paths;
use crate::process::{self, Interrupt, Interrupted};

/// The Kubernetes API limits both CCMs use by default (`--kube-api-qps`, `--kube-api-burst`).
pub const DEFAULT_LIMITS: ApiLimits = ApiLimits {
    qps: 20.0,
    burst: 30,
};

/// How long a CCM may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How often waits report progress on stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

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

/// What to start: one CCM with one set of controllers.
#[derive(Debug, Clone)]
pub struct CcmSpec {
    /// Which CCM.
    pub implementation: Implementation,
    /// `--controllers`, e.g. `cloud-node` or `service`.
    pub controllers: String,
    /// The kubeconfig the CCM acts with (`identity::kubeconfig_for`).
    pub kubeconfig: PathBuf,
    /// The admin kubeconfig, for the Go CCM's delegated authentication and authorization of its
    /// `/metrics` readers (not for its controllers).
    pub admin_kubeconfig: PathBuf,
    /// The fake cloud's inventory (Rust only; Go's fake derives everything from node names).
    pub inventory: Option<PathBuf>,
    /// Port of the CCM's HTTPS endpoints (`/metrics`), on 127.0.0.1.
    pub admin_port: u16,
    /// `--kube-api-qps` / `--kube-api-burst`; `None`: not passed.
    pub limits: Option<ApiLimits>,
    /// More flags, e.g. `--concurrent-node-syncs=10`.
    pub extra: Vec<String>,
    /// Run with leader election (`--leader-elect=true`, timings in [`CcmSpec::extra`]); the
    /// benchmarks run without it (no Lease traffic to separate from the controllers' own).
    pub leader_elect: bool,
}

impl CcmSpec {
    /// The command line (without the program). Both CCMs serve `/metrics` on 127.0.0.1.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--cloud-provider=fake".to_owned(),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--controllers={}", self.controllers),
            format!("--leader-elect={}", self.leader_elect),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={}", self.admin_port),
        ];
        if let Some(limits) = self.limits {
            args.push(format!("--kube-api-qps={}", limits.qps));
            args.push(format!("--kube-api-burst={}", limits.burst));
        }
        // Both secure ports do delegated authentication; its reviews use the admin kubeconfig (not
        // the controllers' identity), and /metrics is opened to anonymous readers on loopback so
        // that it can be read without a token.
        let admin = self.admin_kubeconfig.display();
        args.push(format!("--authentication-kubeconfig={admin}"));
        args.push(format!("--authorization-kubeconfig={admin}"));
        args.push("--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned());
        if self.implementation == Implementation::Rust
            && let Some(inventory) = &self.inventory
        {
            args.push(format!("--cloud-config={}", inventory.display()));
        }
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// A CCM process under test, its log going to a file. Killed when dropped, and by a [`Watchdog`]
/// if xtask itself is killed.
#[derive(Debug)]
pub struct CcmProcess {
    child: tokio::process::Child,
    pid: u32,
    log: PathBuf,
    /// The CCM's `/metrics` endpoint.
    metrics: MetricsEndpoint,
    /// Kills the CCM if xtask dies; dismissed by [`CcmProcess::stop`].
    watchdog: Option<Watchdog>,
}

/// What the watchdog runs: it ignores Ctrl-C and hang-ups, waits until its stdin (a pipe held by
/// xtask) closes, then kills process `$1` if `/proc/$1/exe` is still `$2` (never a reused pid).
const WATCHDOG_SCRIPT: &str = r#"trap '' INT HUP
while read -r _; do :; done
if [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$2" ]; then kill -KILL "$1" 2>/dev/null; fi"#;

/// A small `sh` that kills a child process once xtask is gone: xtask holds the write end of the
/// watchdog's stdin, and the kernel closes it when xtask exits for any reason, SIGKILL included.
/// Dropping the value kills the watchdog itself (an orderly stop needs no watchdog).
#[derive(Debug)]
pub struct Watchdog {
    process: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
}

impl Watchdog {
    /// Watches process `pid` (its executable is read from `/proc` now).
    ///
    /// # Errors
    /// If the executable cannot be read or `sh` cannot be started.
    pub fn watch(pid: u32) -> anyhow::Result<Self> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .with_context(|| format!("reading the executable of process {pid}"))?;
        let mut process = tokio::process::Command::new("sh")
            .args(["-c", WATCHDOG_SCRIPT, "sh", &pid.to_string()])
            .arg(&exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting the watchdog shell")?;
        let stdin = process.stdin.take();
        Ok(Watchdog { process, stdin })
    }

    /// Stops the watchdog without letting it act (kills the shell, then closes the pipe).
    pub async fn dismiss(mut self) {
        let _ = self.process.kill().await;
        drop(self.stdin.take());
    }

    /// Closes the pipe as xtask's death would: the watchdog then kills the watched process.
    #[cfg(test)]
    fn trigger(&mut self) {
        self.stdin = None;
    }
}

impl CcmProcess {
    /// Starts `program` with `spec`'s command line, stdout and stderr to `log`.
    ///
    /// # Errors
    /// If the log file cannot be created or the program cannot be started.
    pub fn start(program: &Path, spec: &CcmSpec, log: &Path) -> anyhow::Result<Self> {
        let file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err_file = file
            .try_clone()
            .context("duplicating the log file handle")?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(spec.args())
            .stdin(Stdio::null())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err_file))
            .kill_on_drop(true);
        let shown = process::display_command(&command);
        eprintln!("+ {shown} > {}", log.display());
        let child = command
            .spawn()
            .with_context(|| format!("starting `{shown}`"))?;
        let pid = child
            .id()
            .with_context(|| format!("`{shown}` exited before its process id was read"))?;
        let watchdog = Watchdog::watch(pid)
            .map_err(|err| eprintln!("warning: the CCM runs without a watchdog: {err:#}"))
            .ok();
        Ok(CcmProcess {
            child,
            pid,
            log: log.to_owned(),
            metrics: MetricsEndpoint::loopback(spec.admin_port)?,
            watchdog,
        })
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Sends `signal` (a `kill -s` name: `STOP`, `CONT`, `TERM`, `KILL`) unless it has exited.
    ///
    /// # Errors
    /// If `kill` cannot be run or fails for a running process.
    pub async fn signal(&mut self, signal: &str) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        let status = tokio::process::Command::new("kill")
            .args(["-s", signal, &self.pid.to_string()])
            .status()
            .await
            .context("running kill")?;
        if !status.success() && self.child.try_wait()?.is_none() {
            bail!("kill -s {signal} {} failed with {status}", self.pid);
        }
        Ok(())
    }

    /// The exit status once the process has exited.
    ///
    /// # Errors
    /// If the process cannot be checked.
    pub fn exit_status(&mut self) -> anyhow::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait().context("checking the CCM process")
    }

    /// Fails if the process has exited (it must run until the benchmark stops it).
    ///
    /// # Errors
    /// Says how it exited and shows the end of its log.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait().context("checking the CCM process")? {
            bail!(
                "the CCM exited during the run with {status}; the end of its log ({}):\n{}",
                self.log.display(),
                log_tail(&self.log, 15)
            );
        }
        Ok(())
    }

    /// Peak and current memory and CPU time so far, from `/proc`.
    pub fn stats(&self) -> ProcStats {
        ProcStats::read(self.pid)
    }

    /// The CCM's metrics.
    ///
    /// # Errors
    /// If `/metrics` cannot be read or parsed.
    pub async fn metrics(&self) -> anyhow::Result<Vec<Sample>> {
        self.metrics.scrape().await
    }

    /// SIGTERM, then SIGKILL after a grace period.
    ///
    /// # Errors
    /// If the process cannot be signalled or waited for.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let stopped = self.terminate().await;
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.dismiss().await;
        }
        stopped
    }

    async fn terminate(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        let sent = tokio::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .await
            .context("running kill")?;
        if sent.success()
            && tokio::time::timeout(STOP_GRACE, self.child.wait())
                .await
                .is_ok()
        {
            return Ok(());
        }
        self.child.kill().await.context("killing the CCM")?;
        Ok(())
    }
}

/// The last `lines` lines of a log file (or why it cannot be read).
pub fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("(cannot read it: {err})"),
    }
}

/// A process's memory and CPU figures from `/proc/<pid>/status` and `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcStats {
    /// Peak resident set size (`VmHWM`), in KiB.
    pub peak_rss_kib: Option<u64>,
    /// User + system CPU time, in seconds.
    pub cpu_seconds: Option<f64>,
}

impl ProcStats {
    /// Reads the figures of process `pid`; unreadable parts are `None`.
    pub fn read(pid: u32) -> Self {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        ProcStats {
            peak_rss_kib: status.as_deref().and_then(|s| status_kib(s, "VmHWM")),
            cpu_seconds: stat
                .as_deref()
                .and_then(cpu_ticks)
                .map(|ticks| ticks as f64 / clock_ticks_per_second()),
        }
    }
}

/// A `kB` field of `/proc/<pid>/status`, e.g. `VmHWM:    93424 kB`.
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let mut parts = rest.split_whitespace();
        let value = parts.next()?.parse().ok()?;
        (parts.next() == Some("kB")).then_some(value)
    })
}

/// `utime + stime` (clock ticks) from `/proc/<pid>/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // After the name come field 3 (state) ... field 14 (utime) and field 15 (stime).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `getconf CLK_TCK`, 100 (Linux's value on every common architecture) if it cannot be read.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse::<f64>().ok())
            .filter(|ticks| *ticks > 0.0)
            .unwrap_or(100.0)
    })
}

/// An HTTPS `/metrics` endpoint with a self-signed certificate on loopback (a CCM's).
#[derive(Clone)]
pub struct MetricsEndpoint {
    client: kube::Client,
    url: String,
}

impl std::fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsEndpoint")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl MetricsEndpoint {
    /// `https://127.0.0.1:<port>/metrics`, without certificate verification (the CCMs serve
    /// a self-signed certificate; nothing leaves the machine).
    ///
    /// # Errors
    /// If the client cannot be built.
    pub fn loopback(port: u16) -> anyhow::Result<Self> {
        let url = format!("https://127.0.0.1:{port}");
        let mut config = kube::Config::new(url.parse().context("a loopback URL")?);
        config.accept_invalid_certs = true;
        config.read_timeout = Some(Duration::from_secs(30));
        let client = kube::Client::try_from(config).context("building the metrics client")?;
        Ok(MetricsEndpoint { client, url })
    }

    /// Reads and parses the metrics.
    ///
    /// # Errors
    /// If the request fails or the answer is not Prometheus text.
    pub async fn scrape(&self) -> anyhow::Result<Vec<Sample>> {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .context("building the /metrics request")?;
        let text = self
            .client
            .request_text(request)
            .await
            .with_context(|| format!("reading {}/metrics", self.url))?;
        prom::parse(&text).with_context(|| format!("parsing {}/metrics", self.url))
    }
}

/// A fresh control plane for one run, with an admin client. Stopped when dropped.
pub struct Cluster {
    control_plane: ControlPlane,
    /// The control plane's test environment (clients and tokens for other identities).
    pub env: TestEnv,
    /// Cluster-admin client.
    pub client: kube::Client,
    /// The admin kubeconfig file (for the CCM).
    pub kubeconfig: PathBuf,
}

impl Cluster {
    /// Launches a new control plane under `<target>/controlplane/bench-<pid>-<n>`.
    ///
    /// # Errors
    /// If it does not start or no client can be built.
    pub async fn start(interrupt: &Interrupt) -> anyhow::Result<Self> {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let dir = paths::target_dir()
            .join("controlplane")
            .join(format!("bench-{}-{run}", std::process::id()));
        let control_plane = controlplane::launch(&dir, Supervision::Watchdog, interrupt).await?;
        let env = TestEnv::attach(&control_plane.env_file_path())
            .context("reading the control plane's env file")?;
        let client = env.try_client().context("building the admin client")?;
        let kubeconfig = env.kubeconfig_path().to_owned();
        Ok(Cluster {
            control_plane,
            env,
            client,
            kubeconfig,
        })
    }

    /// The API server's metrics.
    ///
    /// # Errors
    /// If `/metrics` cannot be read or parsed.
    pub async fn apiserver_samples(&self) -> anyhow::Result<Vec<Sample>> {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .context("building the /metrics request")?;
        let text = self
            .client
            .request_text(request)
            .await
            .context("reading the API server's /metrics")?;
        prom::parse(&text).context("parsing the API server's /metrics")
    }

    /// The API server's request counters.
    ///
    /// # Errors
    /// If `/metrics` cannot be read or parsed.
    pub async fn request_counts(&self) -> anyhow::Result<RequestCounts> {
        Ok(RequestCounts::from_samples(
            &self.apiserver_samples().await?,
        ))
    }

    /// Waits until the CCM's writes have stopped: the API server's count of writes to the CCM's
    /// resources stays the same for `quiet` (checked every second), at most `limit`. Returns the
    /// writes since `before` and whether they settled (false: still changing at `limit`).
    ///
    /// # Errors
    /// If the metrics cannot be read, the CCM exits, or on Ctrl-C.
    pub async fn settled_requests(
        &self,
        before: &RequestCounts,
        ccm: &mut CcmProcess,
        quiet: Duration,
        limit: Duration,
        interrupt: &Interrupt,
    ) -> anyhow::Result<(RequestCounts, bool)> {
        let started = Instant::now();
        let mut last = self.request_counts().await?.since(before).ccm_requests();
        let mut unchanged_since = Instant::now();
        loop {
            if unchanged_since.elapsed() >= quiet {
                return Ok((last, true));
            }
            if started.elapsed() >= limit {
                return Ok((last, false));
            }
            pause(Duration::from_secs(1), interrupt).await?;
            ccm.check_running()?;
            let now = self.request_counts().await?.since(before).ccm_requests();
            if now.writes() != last.writes() {
                unchanged_since = Instant::now();
            }
            last = now;
        }
    }

    /// Stops the control plane and removes its directory.
    ///
    /// # Errors
    /// If a server cannot be stopped.
    pub fn stop(self) -> anyhow::Result<()> {
        self.control_plane
            .stop()
            .context("stopping the benchmark's control plane")
    }
}

/// Sleeps, unless Ctrl-C comes first.
///
/// # Errors
/// [`Interrupted`] on Ctrl-C.
pub async fn pause(duration: Duration, interrupt: &Interrupt) -> anyhow::Result<()> {
    tokio::select! {
        () = tokio::time::sleep(duration) => Ok(()),
        () = interrupt.interrupted() => Err(Interrupted.into()),
    }
}

/// Objects seen by a watch and how many of them are "done".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Objects that exist.
    pub seen: usize,
    /// Of those, how many satisfy the tracker's predicate.
    pub done: usize,
}

/// Keeps a count of objects (from a watch) and of those satisfying a predicate.
pub struct Tracker {
    progress: watch::Receiver<Progress>,
    task: tokio::task::JoinHandle<()>,
}

impl Tracker {
    /// Starts watching `api`.
    pub fn start<K>(api: kube::Api<K>, is_done: fn(&K) -> bool) -> Self
    where
        K: kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let (sender, progress) = watch::channel(Progress::default());
        let task = tokio::spawn(async move {
            let mut live: HashMap<String, bool> = HashMap::new();
            let mut buffer: Option<HashMap<String, bool>> = None;
            let mut events =
                std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            loop {
                let event = match events.try_next().await {
                    Ok(Some(event)) => event,
                    Ok(None) => return,
                    Err(err) => {
                        tracing::warn!(error = %err, "benchmark watch failed; retrying");
                        continue;
                    }
                };
                let name = |obj: &K| obj.meta().name.clone().unwrap_or_default();
                match event {
                    watcher::Event::Init => buffer = Some(HashMap::new()),
                    watcher::Event::InitApply(obj) => {
                        buffer
                            .get_or_insert_with(HashMap::new)
                            .insert(name(&obj), is_done(&obj));
                    }
                    watcher::Event::InitDone => {
                        live = buffer.take().unwrap_or_default();
                    }
                    watcher::Event::Apply(obj) => {
                        live.insert(name(&obj), is_done(&obj));
                    }
                    watcher::Event::Delete(obj) => {
                        live.remove(&name(&obj));
                    }
                }
                let progress = Progress {
                    seen: live.len(),
                    done: live.values().filter(|done| **done).count(),
                };
                sender.send_if_modified(|current| {
                    let changed = *current != progress;
                    *current = progress;
                    changed
                });
            }
        });
        Tracker { progress, task }
    }

    /// The latest counts.
    pub fn progress(&self) -> Progress {
        *self.progress.borrow()
    }

    /// Waits until `goal` holds; returns when it first held. Reports progress on stderr, and
    /// watches the CCM (if any) and the deadline.
    ///
    /// # Errors
    /// On timeout (with the counts reached), if the CCM exits, or on Ctrl-C.
    pub async fn wait_until(
        &mut self,
        what: &str,
        goal: impl Fn(Progress) -> bool,
        timeout: Duration,
        mut ccm: Option<&mut CcmProcess>,
        interrupt: &Interrupt,
    ) -> anyhow::Result<Instant> {
        let started = Instant::now();
        let mut reported = started;
        loop {
            let progress = *self.progress.borrow_and_update();
            if goal(progress) {
                return Ok(Instant::now());
            }
            if started.elapsed() >= timeout {
                bail!(
                    "timed out after {} waiting for {what}: {} of {} done",
                    process::seconds(timeout),
                    progress.done,
                    progress.seen
                );
            }
            if reported.elapsed() >= PROGRESS_EVERY {
                eprintln!(
                    "  {:>6}: {what}: {} of {} done",
                    process::seconds(started.elapsed()),
                    progress.done,
                    progress.seen
                );
                reported = Instant::now();
            }
            tokio::select! {
                changed = self.progress.changed() => {
                    if changed.is_err() {
                        bail!("the watch for {what} ended");
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(500)) => {
                    if let Some(ccm) = ccm.as_deref_mut() {
                        ccm.check_running()?;
                    }
                }
                () = interrupt.interrupted() => return Err(Interrupted.into()),
            }
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Creates `objects` with `concurrency` requests in flight.
///
/// # Errors
/// The first failed create (naming the object).
pub async fn create_all<K>(
    api: &kube::Api<K>,
    objects: Vec<K>,
    concurrency: usize,
    interrupt: &Interrupt,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let creates = futures::stream::iter(objects)
        .map(|object| async move {
            let name = object.meta().name.clone().unwrap_or_default();
            api.create(&kube::api::PostParams::default(), &object)
                .await
                .map(|_| ())
                .with_context(|| format!("creating {name}"))
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>();
    tokio::select! {
        created = creates => created.map(|_| ()),
        () = interrupt.interrupted() => Err(Interrupted.into()),
    }
}

/// Free loopback port for a CCM's endpoints.
///
/// # Errors
/// If no port can be reserved.
pub fn free_port() -> anyhow::Result<u16> {
    ccm_testenv::ports::pick_free_ports(1)
        .context("picking a free port")?
        .first()
        .copied()
        .context("no free port was returned")
}

/// The 1-minute load average (`/proc/loadavg`), a hint of how busy the shared machine was.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| parse_load_average(&text))
}

/// The first field of `/proc/loadavg`.
pub fn parse_load_average(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
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

/// A Markdown table, padded so it also reads well in a terminal.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are dropped.
    pub fn push(&mut self, mut row: Vec<String>) {
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// The table as Markdown.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|row| row[i].chars().count())
                    .chain([self.headers[i].chars().count(), 3])
                    .max()
                    .unwrap_or(3)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            format!("| {} |", padded.join(" | "))
        };
        let mut out = vec![line(&self.headers)];
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        out.push(line(&rule));
        out.extend(self.rows.iter().map(|row| line(row)));
        out.join("\n")
    }
}

/// Seconds with two decimals, e.g. `12.35`.
pub fn secs(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64())
}

/// `value / per` with two decimals, or `n/a`.
pub fn ratio(value: Option<f64>, per: usize) -> String {
    match value {
        Some(value) if per > 0 => format!("{:.2}", value / per as f64),
        _ => "n/a".to_owned(),
    }
}

/// Peak RSS in MiB, or `n/a`.
pub fn mib(stats: &ProcStats) -> String {
    stats.peak_rss_kib.map_or_else(
        || "n/a".to_owned(),
        |kib| format!("{:.0}", kib as f64 / 1024.0),
    )
}

/// CPU seconds, or `n/a`.
pub fn cpu(stats: &ProcStats) -> String {
    stats
        .cpu_seconds
        .map_or_else(|| "n/a".to_owned(), |s| format!("{s:.1}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(implementation: Implementation) -> CcmSpec {
        CcmSpec {
            implementation,
            controllers: "cloud-node".to_owned(),
            kubeconfig: PathBuf::from("/cp/admin.kubeconfig"),
            admin_kubeconfig: PathBuf::from("/cp/admin.kubeconfig"),
            inventory: Some(PathBuf::from("/out/inventory.yaml")),
            admin_port: 4321,
            limits: Some(DEFAULT_LIMITS),
            extra: vec!["--concurrent-node-syncs=10".to_owned()],
            leader_elect: false,
        }
    }

    #[test]
    fn rust_command_line() {
        let args = spec(Implementation::Rust).args();
        for expected in [
            "--cloud-provider=fake",
            "--kubeconfig=/cp/admin.kubeconfig",
            "--controllers=cloud-node",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--secure-port=4321",
            "--kube-api-qps=20",
            "--kube-api-burst=30",
            "--cloud-config=/out/inventory.yaml",
            "--concurrent-node-syncs=10",
        ] {
            assert!(
                args.contains(&expected.to_owned()),
                "{expected} in {args:?}"
            );
        }
        assert!(args.contains(&"--authentication-kubeconfig=/cp/admin.kubeconfig".to_owned()));
        assert!(args.contains(
            &"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned()
        ));
    }

    #[test]
    fn go_command_line() {
        let mut go = spec(Implementation::Go);
        go.limits = Some(ApiLimits {
            qps: 1000.0,
            burst: 2000,
        });
        let args = go.args();
        for expected in [
            "--kube-api-qps=1000",
            "--kube-api-burst=2000",
            "--authentication-kubeconfig=/cp/admin.kubeconfig",
            "--authorization-kubeconfig=/cp/admin.kubeconfig",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--concurrent-node-syncs=10",
        ] {
            assert!(
                args.contains(&expected.to_owned()),
                "{expected} in {args:?}"
            );
        }
        assert!(
            !args.iter().any(|a| a.starts_with("--cloud-config")),
            "Go's fake takes no inventory"
        );
    }

    #[test]
    fn fractional_qps_is_passed_as_written() {
        let mut s = spec(Implementation::Rust);
        s.limits = Some(ApiLimits { qps: 7.5, burst: 3 });
        assert!(s.args().contains(&"--kube-api-qps=7.5".to_owned()));
        assert_eq!(DEFAULT_LIMITS.to_string(), "20/30");
    }

    #[test]
    fn shipped_runs_pass_no_limits_and_act_as_the_given_identity() {
        for implementation in [Implementation::Rust, Implementation::Go] {
            let mut s = spec(implementation);
            s.limits = None;
            s.kubeconfig = PathBuf::from("/out/rust-serviceaccount.kubeconfig");
            let args = s.args();
            assert!(
                !args.iter().any(|a| a.starts_with("--kube-api-")),
                "{args:?}"
            );
            assert!(args.contains(&"--kubeconfig=/out/rust-serviceaccount.kubeconfig".to_owned()));
            if implementation == Implementation::Go {
                assert!(
                    args.contains(&"--authentication-kubeconfig=/cp/admin.kubeconfig".to_owned()),
                    "only the delegation of /metrics readers uses the admin: {args:?}"
                );
            }
        }
        let c = common();
        assert_eq!(c.limits_label(LimitMode::Shipped), "shipped (SA)");
        assert_eq!(c.limits_label(LimitMode::Default), "20/30");
        assert_eq!(c.limits_label(LimitMode::Raised), "1000/2000");
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

    #[test]
    fn proc_status_fields() {
        let status = "Name:\tccm\nVmPeak:\t  900 kB\nVmHWM:\t   93424 kB\nVmRSS:\t   80000 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(93_424));
        assert_eq!(status_kib(status, "VmRSS"), Some(80_000));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(status_kib("VmHWM: 12 MB\n", "VmHWM"), None);
        assert_eq!(
            status_kib("MemTotal:       24584020 kB\n", "MemTotal"),
            Some(24_584_020)
        );
    }

    #[test]
    fn proc_stat_cpu_time_survives_odd_command_names() {
        let stat = "4242 (my (odd) ccm) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 8 0";
        assert_eq!(cpu_ticks(stat), Some(300));
        assert_eq!(cpu_ticks("4242 (ccm) S 1 2"), None);
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_process_stats_are_readable() {
        let stats = ProcStats::read(std::process::id());
        assert!(stats.peak_rss_kib.is_some_and(|kib| kib > 0));
        assert!(stats.cpu_seconds.is_some_and(|s| s >= 0.0));
    }

    #[test]
    fn load_average_is_the_first_field() {
        assert_eq!(
            parse_load_average("5.11 3.67 3.65 2/300 1234\n"),
            Some(5.11)
        );
        assert_eq!(parse_load_average(""), None);
    }

    #[test]
    fn tables_are_padded_markdown() {
        let mut table = Table::new(&["CCM", "time (s)"]);
        table.push(vec!["Rust".to_owned(), "1.50".to_owned()]);
        table.push(vec!["Go, longer".to_owned()]);
        assert_eq!(
            table.render(),
            "| CCM        | time (s) |\n\
             | ---------- | -------- |\n\
             | Rust       | 1.50     |\n\
             | Go, longer |          |"
        );
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(secs(Duration::from_millis(12_345)), "12.35");
        assert_eq!(ratio(Some(3000.0), 1000), "3.00");
        assert_eq!(ratio(None, 1000), "n/a");
        assert_eq!(ratio(Some(1.0), 0), "n/a");
        let stats = ProcStats {
            peak_rss_kib: Some(95_744),
            cpu_seconds: Some(12.34),
        };
        assert_eq!(mib(&stats), "94");
        assert_eq!(cpu(&stats), "12.3");
        assert_eq!(mib(&ProcStats::default()), "n/a");
        assert_eq!(cpu(&ProcStats::default()), "n/a");
    }

    async fn exits_within(child: &mut tokio::process::Child, limit: Duration) -> bool {
        tokio::time::timeout(limit, child.wait()).await.is_ok()
    }

    #[tokio::test]
    async fn the_watchdog_kills_the_child_when_xtask_goes_away() {
        let mut child = tokio::process::Command::new("sleep")
            .arg("600")
            .kill_on_drop(true)
            .spawn()
            .expect("sleep");
        let pid = child.id().expect("pid");
        let mut watchdog = Watchdog::watch(pid).expect("watchdog");
        assert!(
            !exits_within(&mut child, Duration::from_millis(300)).await,
            "the watchdog waits while the pipe is open"
        );
        watchdog.trigger();
        assert!(
            exits_within(&mut child, Duration::from_secs(10)).await,
            "killed once the pipe closed"
        );
        let status = child.try_wait().expect("status").expect("exited");
        assert!(!status.success());
        drop(watchdog);
    }

    #[tokio::test]
    async fn a_dismissed_watchdog_kills_nothing() {
        let mut child = tokio::process::Command::new("sleep")
            .arg("600")
            .kill_on_drop(true)
            .spawn()
            .expect("sleep");
        let pid = child.id().expect("pid");
        let watchdog = Watchdog::watch(pid).expect("watchdog");
        watchdog.dismiss().await;
        assert!(
            !exits_within(&mut child, Duration::from_millis(500)).await,
            "the child is still running"
        );
        child.kill().await.expect("cleanup");
    }

    #[test]
    fn log_tails() {
        let dir = std::env::temp_dir().join(format!("xtask-bench-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log = dir.join("ccm.log");
        std::fs::write(&log, "a\nb\nc\n").expect("write");
        assert_eq!(log_tail(&log, 2), "b\nc");
        assert_eq!(log_tail(&log, 10), "a\nb\nc");
        assert!(log_tail(&dir.join("none"), 2).contains("cannot read"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
