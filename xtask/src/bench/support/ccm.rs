//! A CCM under test: its command line, its process (in a process group of its own, log to a file, stopped with
//! SIGTERM, killed by a watchdog if xtask dies) and its `/metrics` endpoint. Signals go to the whole group, so a
//! `--rust-ccm` wrapper that starts the CCM as its child (a profiler, a script that does not `exec`) is stopped
//! with everything it started.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::matrix::{ApiLimits, Implementation};
use super::procfs::ProcStats;
use crate::bench::prom::{self, Sample};
use crate::process;

/// How long a CCM may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

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
/// xtask) closes, then kills process `$1` and its process group if `/proc/$1/exe` is still `$2`
/// (never a reused pid).
const WATCHDOG_SCRIPT: &str = r#"trap '' INT HUP
while read -r _; do :; done
if [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$2" ]; then kill -s KILL "$1" 2>/dev/null; kill -s KILL -- "-$1" 2>/dev/null; fi"#;

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
            .process_group(0)
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

    /// Sends `signal` (a `kill -s` name: `STOP`, `CONT`, `TERM`, `KILL`) to its process group unless it has
    /// exited.
    ///
    /// # Errors
    /// If `kill` cannot be run or fails for a running process.
    pub async fn signal(&mut self, signal: &str) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        let status = tokio::process::Command::new("kill")
            .args(["-s", signal, "--", &format!("-{}", self.pid)])
            .status()
            .await
            .context("running kill")?;
        if !status.success() && self.child.try_wait()?.is_none() {
            bail!("kill -s {signal} -- -{} failed with {status}", self.pid);
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

    /// SIGTERM to its process group, then SIGKILL after a grace period; whatever else of the group is left
    /// once the CCM has exited is killed.
    ///
    /// # Errors
    /// If the process cannot be signalled or waited for.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let stopped = self.terminate().await;
        process::signal_group(self.pid, "KILL");
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.dismiss().await;
        }
        stopped
    }

    async fn terminate(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        if self.signal("TERM").await.is_ok()
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

#[cfg(test)]
mod tests {
    use super::super::matrix::DEFAULT_LIMITS;
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

    /// Whether process `pid` is gone (or a zombie waiting for its new parent to reap it).
    fn gone(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
    }

    #[tokio::test]
    async fn stop_ends_what_a_wrapper_started() {
        // A wrapper that starts the CCM as its child and does not forward SIGTERM (as a profiler's script may):
        // the child must not outlive the benchmark.
        let dir = std::env::temp_dir().join(format!("xtask-bench-group-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let wrapper = dir.join("wrapper.sh");
        std::fs::write(
            &wrapper,
            "#!/bin/sh\nsleep 600 &\necho $! > \"$(dirname \"$0\")/child.pid\"\nwait\n",
        )
        .expect("write the wrapper");
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        let process =
            CcmProcess::start(&wrapper, &spec(Implementation::Rust), &dir.join("ccm.log"))
                .expect("start the wrapper");
        let pid_file = dir.join("child.pid");
        let mut child = String::new();
        for _ in 0..100 {
            child = std::fs::read_to_string(&pid_file)
                .unwrap_or_default()
                .trim()
                .to_owned();
            if !child.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            !child.is_empty() && !gone(&child),
            "the wrapper's child runs"
        );
        process.stop().await.expect("stop");
        let mut ended = false;
        for _ in 0..100 {
            ended = gone(&child);
            if ended {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(ended, "the wrapper's child {child} was stopped with it");
        std::fs::remove_dir_all(&dir).expect("cleanup");
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
