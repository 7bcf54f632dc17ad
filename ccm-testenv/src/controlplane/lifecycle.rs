//! Launching, restarting, detaching and stopping a control plane, and the processes it runs.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::audit;
use crate::envfile::{self, EnvFile, Pids};
use crate::kubeconfig::{self, KubeconfigSpec};
use crate::pki;

use super::*;

/// What happens to the servers when the launching process ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervision {
    /// A watchdog (`sh`) reading a pipe from this process kills the servers and removes the
    /// directory as soon as this process exits for any reason, including being killed. Use for
    /// test processes and `cargo xtask test`.
    Watchdog,
    /// The servers outlive this process once [`ControlPlane::detach`] is called; stop them with
    /// [`stop_detached`]. Use for `cargo xtask controlplane start`.
    Detached,
}

/// How to launch a control plane.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// The server binaries.
    pub binaries: Binaries,
    /// Directory for certificates, etcd data, logs, the kubeconfig and the env file. Created if
    /// missing; must be empty otherwise. Removed when the control plane stops.
    pub dir: PathBuf,
    /// See [`Supervision`].
    pub supervision: Supervision,
    /// How long each server may take to become ready.
    pub ready_timeout: Duration,
    /// Extra kube-apiserver arguments, appended after the built-in ones (later flags win).
    pub extra_apiserver_args: Vec<String>,
    /// Start kube-apiserver with audit logging ([`crate::audit`]): the policy is written to
    /// `<dir>/audit-policy.yaml`, the log to `<dir>/logs/audit.log`
    /// ([`ControlPlane::audit_log_path`]).
    pub audit: bool,
}

impl LaunchOptions {
    /// Options with a 60 s ready timeout and no extra arguments.
    pub fn new(binaries: Binaries, dir: impl Into<PathBuf>, supervision: Supervision) -> Self {
        Self {
            binaries,
            dir: dir.into(),
            supervision,
            ready_timeout: Duration::from_secs(60),
            extra_apiserver_args: Vec::new(),
            audit: false,
        }
    }

    /// The same options with audit logging on (see [`LaunchOptions::audit`]).
    pub fn with_audit(mut self) -> Self {
        self.audit = true;
        self
    }
}

/// A running control plane started by [`ControlPlane::launch`].
///
/// Dropping it (or calling [`ControlPlane::stop`]) kills the servers and removes the directory,
/// unless [`ControlPlane::detach`] was called.
///
/// ```no_run
/// use ccm_testenv::controlplane::{Binaries, ControlPlane, LaunchOptions, Supervision};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = std::env::temp_dir().join("my-control-plane");
/// let options = LaunchOptions::new(Binaries::find()?, dir, Supervision::Watchdog);
/// let control_plane = ControlPlane::launch(options).await?;
/// println!("export KUBECONFIG={}", control_plane.env().kubeconfig.display());
/// control_plane.stop()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ControlPlane {
    env: Option<EnvFile>,
    layout: Layout,
    etcd: Option<Child>,
    apiserver: Option<Child>,
    watchdog: Option<(Child, ChildStdin)>,
    armed: bool,
    audit: bool,
    /// The kube-apiserver binary, its arguments and the ready timeout, for restarts.
    apiserver_command: Option<(PathBuf, Vec<String>, Duration)>,
    restarts: u32,
}

impl ControlPlane {
    /// Generates certificates, starts etcd and kube-apiserver on free loopback ports, waits until
    /// etcd is healthy and the API server's `/readyz` succeeds, then writes the admin kubeconfig
    /// and the env file into the directory.
    ///
    /// If a server cannot bind its port (another process took it), the launch is retried with
    /// new ports, up to three times.
    ///
    /// # Errors
    /// [`ControlPlaneError`] if the binaries are missing, the directory is not empty, a server
    /// exits or is not ready in time (the error quotes the end of its log).
    pub async fn launch(options: LaunchOptions) -> Result<Self, ControlPlaneError> {
        options.binaries.verify()?;
        let layout = Layout {
            dir: options.dir.clone(),
        };
        prepare_dir(&layout.dir)?;
        let mut control_plane = ControlPlane {
            env: None,
            layout: layout.clone(),
            etcd: None,
            apiserver: None,
            watchdog: None,
            armed: true,
            audit: false,
            apiserver_command: None,
            restarts: 0,
        };
        if options.supervision == Supervision::Watchdog {
            control_plane.watchdog = Some(spawn_watchdog(&layout.dir, Stdio::null())?);
        }
        let started = Instant::now();
        let pki = write_pki(&layout)?;

        let mut attempt = 1;
        loop {
            match control_plane.try_start(&options, &pki).await {
                Ok(()) => break,
                Err(err) if attempt < LAUNCH_ATTEMPTS && is_port_conflict(&err) => {
                    tracing::warn!(attempt, error = %err, "port taken while starting, retrying");
                    control_plane.kill_servers();
                    let _ = std::fs::remove_dir_all(layout.etcd_data());
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
        tracing::info!(
            dir = %layout.dir.display(),
            server = %control_plane.env().server,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "control plane ready"
        );
        Ok(control_plane)
    }

    async fn try_start(
        &mut self,
        options: &LaunchOptions,
        pki: &WrittenPki,
    ) -> Result<(), ControlPlaneError> {
        let layout = self.layout.clone();
        let ports = crate::ports::pick_free_ports(3).map_err(io_err("pick free ports"))?;
        let (etcd_port, peer_port, apiserver_port) = (ports[0], ports[1], ports[2]);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let server = format!("https://127.0.0.1:{apiserver_port}");

        let etcd = spawn_server(
            &options.binaries.etcd,
            &etcd_args(&layout.etcd_data(), etcd_port, peer_port),
            &layout.log("etcd"),
        )?;
        self.track(&etcd)?;
        let etcd_pid = etcd.id();
        self.etcd = Some(etcd);
        self.wait_ready("etcd", options.ready_timeout, || etcd_healthy(etcd_port))
            .await?;

        let mut args = apiserver_args(&layout.dir, &etcd_url, apiserver_port);
        if options.audit {
            write_file(&layout.audit_policy(), audit::POLICY, false)?;
            args.extend(audit::apiserver_args(
                &layout.audit_policy(),
                &layout.audit_log(),
            ));
            self.audit = true;
        }
        args.extend(options.extra_apiserver_args.iter().cloned());
        self.apiserver_command = Some((
            options.binaries.kube_apiserver.clone(),
            args.clone(),
            options.ready_timeout,
        ));
        let apiserver = spawn_server(
            &options.binaries.kube_apiserver,
            &args,
            &layout.log("kube-apiserver"),
        )?;
        self.track(&apiserver)?;
        let apiserver_pid = apiserver.id();
        self.apiserver = Some(apiserver);

        let admin_config = client_config(
            &server,
            pki.ca.cert_pem(),
            &pki.admin.cert_pem,
            &pki.admin.key_pem,
        )?;
        let client = kube::Client::try_from(admin_config).map_err(ControlPlaneError::Client)?;
        self.wait_ready("kube-apiserver", options.ready_timeout, || {
            apiserver_ready(&client)
        })
        .await?;

        let kubeconfig = kubeconfig::render(&KubeconfigSpec {
            name: "ccm-testenv",
            server: &server,
            ca_pem: pki.ca.cert_pem(),
            client_cert_pem: &pki.admin.cert_pem,
            client_key_pem: &pki.admin.key_pem,
        });
        write_file(&layout.kubeconfig(), &kubeconfig, true)?;
        let env = EnvFile {
            format: envfile::FORMAT_VERSION,
            dir: layout.dir.clone(),
            server,
            etcd_url,
            kubeconfig: layout.kubeconfig(),
            ca_cert: layout.pki("ca.crt"),
            ca_key: layout.pki("ca.key"),
            admin_cert: layout.pki("admin.crt"),
            admin_key: layout.pki("admin.key"),
            front_proxy_cert: layout.pki("front-proxy-client.crt"),
            front_proxy_key: layout.pki("front-proxy-client.key"),
            pids: Pids {
                etcd: etcd_pid,
                kube_apiserver: apiserver_pid,
            },
        };
        env.write(&layout.env_file())?;
        self.env = Some(env);
        Ok(())
    }

    /// Hands a process started next to the servers (a cluster component) to the watchdog, so that it
    /// dies with the servers when this process exits unexpectedly.
    pub(crate) fn supervise(&mut self, child: &Child) -> Result<(), ControlPlaneError> {
        self.track(child)
    }

    /// Tells the watchdog that process `pid` was reaped and must not be killed any more.
    pub(crate) fn release(&mut self, pid: u32) {
        if let Err(err) = self.tell_watchdog(&format!("forget {pid}")) {
            tracing::debug!(error = %err, "watchdog gone");
        }
    }

    /// Tells the watchdog (if any) about a new server process.
    fn track(&mut self, child: &Child) -> Result<(), ControlPlaneError> {
        self.tell_watchdog(&format!("pid {}", child.id()))
    }

    fn tell_watchdog(&mut self, line: &str) -> Result<(), ControlPlaneError> {
        if let Some((_, stdin)) = &mut self.watchdog {
            writeln!(stdin, "{line}")
                .and_then(|()| stdin.flush())
                .map_err(io_err("notify the watchdog process"))?;
        }
        Ok(())
    }

    async fn wait_ready<F, Fut>(
        &mut self,
        server: &'static str,
        timeout: Duration,
        mut check: F,
    ) -> Result<(), ControlPlaneError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let deadline = Instant::now() + timeout;
        let log = self.layout.log(server);
        loop {
            let child = match server {
                "etcd" => self.etcd.as_mut(),
                _ => self.apiserver.as_mut(),
            };
            if let Some(child) = child
                && let Some(status) = child.try_wait().map_err(io_err("check a server process"))?
            {
                return Err(ControlPlaneError::ServerExited {
                    server,
                    status,
                    tail: log_tail(&log),
                    log,
                });
            }
            if check().await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ControlPlaneError::NotReady {
                    server,
                    timeout,
                    tail: log_tail(&log),
                    log,
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// The env file contents of this control plane.
    ///
    /// # Panics
    /// Never for a value returned by [`ControlPlane::launch`] (the env is set before it returns).
    pub fn env(&self) -> &EnvFile {
        self.env
            .as_ref()
            .expect("a launched control plane always has an env file")
    }

    /// Kills kube-apiserver with SIGKILL and starts it again with the same arguments (same port,
    /// same etcd, same audit log), then waits for `/readyz`. etcd keeps running. The new
    /// process's log is `<dir>/logs/kube-apiserver.restart-<n>.log`; the env file gets its pid.
    ///
    /// # Errors
    /// [`ControlPlaneError`] if it cannot be started or is not ready in time.
    pub async fn restart_apiserver(&mut self) -> Result<(), ControlPlaneError> {
        let (binary, args, timeout) = self
            .apiserver_command
            .clone()
            .ok_or_else(|| io_err("restart kube-apiserver")(std::io::ErrorKind::NotFound.into()))?;
        if let Some(child) = self.apiserver.take() {
            let pid = child.id();
            kill_and_reap(child);
            self.tell_watchdog(&format!("forget {pid}"))?;
        }
        self.restarts += 1;
        let log = self
            .layout
            .dir
            .join("logs")
            .join(format!("kube-apiserver.restart-{}.log", self.restarts));
        let apiserver = spawn_server(&binary, &args, &log)?;
        self.track(&apiserver)?;
        let pid = apiserver.id();
        self.apiserver = Some(apiserver);
        let mut env = self.env().clone();
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(io_err(format!("read {}", path.display())))
        };
        let config = client_config(
            &env.server,
            &read(&env.ca_cert)?,
            &read(&env.admin_cert)?,
            &read(&env.admin_key)?,
        )?;
        let client = kube::Client::try_from(config).map_err(ControlPlaneError::Client)?;
        self.wait_ready("kube-apiserver", timeout, || apiserver_ready(&client))
            .await?;
        env.pids.kube_apiserver = pid;
        env.write(&self.layout.env_file())?;
        self.env = Some(env);
        Ok(())
    }

    /// Path of the audit log (`<dir>/logs/audit.log`) if the control plane was launched with
    /// [`LaunchOptions::audit`]; read it with [`audit::read_log`].
    pub fn audit_log_path(&self) -> Option<PathBuf> {
        self.audit.then(|| self.layout.audit_log())
    }

    /// Path of the env file (`<dir>/env.json`).
    pub fn env_file_path(&self) -> PathBuf {
        self.layout.env_file()
    }

    /// Lets the servers outlive this value and this process. Returns the env file contents;
    /// stop the servers later with [`stop_detached`].
    ///
    /// Only meaningful with [`Supervision::Detached`]: with a watchdog the servers still stop
    /// when this process exits.
    pub fn detach(mut self) -> EnvFile {
        self.armed = false;
        // Closing the pipe would trigger a watchdog, so keep it open for the process lifetime.
        if let Some(watchdog) = self.watchdog.take() {
            std::mem::forget(watchdog);
        }
        self.env().clone()
    }

    /// Kills the servers, waits for them to exit and removes the directory.
    ///
    /// # Errors
    /// [`ControlPlaneError::Io`] if the directory cannot be removed.
    pub fn stop(mut self) -> Result<(), ControlPlaneError> {
        self.shutdown()
    }

    fn kill_servers(&mut self) {
        for child in [self.apiserver.take(), self.etcd.take()]
            .into_iter()
            .flatten()
        {
            let pid = child.id();
            kill_and_reap(child);
            // The id may be reused from now on: the watchdog must not kill it any more.
            if let Err(err) = self.tell_watchdog(&format!("forget {pid}")) {
                tracing::debug!(error = %err, "watchdog gone");
            }
        }
    }

    fn shutdown(&mut self) -> Result<(), ControlPlaneError> {
        if !self.armed {
            return Ok(());
        }
        self.armed = false;
        self.kill_servers();
        let removed = remove_dir(&self.layout.dir);
        if let Some((mut child, mut stdin)) = self.watchdog.take() {
            // Everything is stopped: release the watchdog without it doing anything.
            let _ = writeln!(stdin, "done").and_then(|()| stdin.flush());
            drop(stdin);
            let _ = child.wait();
        }
        removed
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Err(err) = self.shutdown() {
            tracing::warn!(error = %err, "failed to clean up the control plane");
        }
    }
}

pub(crate) fn kill_and_reap(mut child: Child) {
    if let Err(err) = child.kill() {
        tracing::debug!(pid = child.id(), error = %err, "kill failed (already exited?)");
    }
    if let Err(err) = child.wait() {
        tracing::warn!(pid = child.id(), error = %err, "failed to wait for a server process");
    }
}

pub(crate) fn remove_dir(dir: &Path) -> Result<(), ControlPlaneError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(io_err(format!("remove {}", dir.display()))(err)),
    }
}

pub(super) fn prepare_dir(dir: &Path) -> Result<(), ControlPlaneError> {
    std::fs::create_dir_all(dir).map_err(io_err(format!("create {}", dir.display())))?;
    let mut entries =
        std::fs::read_dir(dir).map_err(io_err(format!("read directory {}", dir.display())))?;
    if entries.next().is_some() {
        return Err(ControlPlaneError::DirectoryNotEmpty(dir.to_owned()));
    }
    for sub in ["pki", "logs", "etcd-data"] {
        let path = dir.join(sub);
        std::fs::create_dir(&path).map_err(io_err(format!("create {}", path.display())))?;
    }
    Ok(())
}

pub(crate) fn spawn_server(
    binary: &Path,
    args: &[String],
    log: &Path,
) -> Result<Child, ControlPlaneError> {
    use std::os::unix::process::CommandExt as _;
    let out = File::create(log).map_err(io_err(format!("create {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(io_err(format!("open {}", log.display())))?;
    tracing::debug!(binary = %binary.display(), ?args, "starting server");
    Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Own process group: a Ctrl-C meant for the test run does not kill the servers behind
        // the cleanup's back; the owner or the watchdog stops them.
        .process_group(0)
        .spawn()
        .map_err(io_err(format!("start {}", binary.display())))
}

pub(crate) fn write_file(
    path: &Path,
    contents: &str,
    private: bool,
) -> Result<(), ControlPlaneError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, contents).map_err(io_err(format!("write {}", path.display())))?;
    if private {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err(
            format!("restrict permissions of {}", path.display()),
        ))?;
    }
    Ok(())
}

/// A `kube::Config` for `server` trusting `ca_pem` and authenticating with a client certificate.
pub(crate) fn client_config(
    server: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<kube::Config, ControlPlaneError> {
    use base64::Engine as _;
    let uri: http::Uri = server.parse().map_err(|e: http::uri::InvalidUri| {
        io_err(format!("parse server URL {server:?}"))(std::io::Error::other(e))
    })?;
    let mut config = kube::Config::new(uri);
    config.root_cert = Some(pki::pem_certificates_to_der(ca_pem)?);
    let b64 = base64::engine::general_purpose::STANDARD;
    config.auth_info.client_certificate_data = Some(b64.encode(cert_pem));
    config.auth_info.client_key_data = Some(b64.encode(key_pem).into());
    Ok(config)
}

/// Stops a control plane started with [`Supervision::Detached`]: kills the processes named in
/// `<dir>/env.json` (only if they still run with arguments inside `dir`, so a reused process id
/// is never hit), waits for them to exit and removes the directory.
///
/// ```no_run
/// ccm_testenv::controlplane::stop_detached(std::path::Path::new("target/controlplane/run"))?;
/// # Ok::<(), ccm_testenv::controlplane::ControlPlaneError>(())
/// ```
///
/// # Errors
/// [`ControlPlaneError::NotRunning`] if the directory has no env file; I/O errors.
pub fn stop_detached(dir: &Path) -> Result<(), ControlPlaneError> {
    let env_path = dir.join(envfile::FILE_NAME);
    if !env_path.exists() {
        return Err(ControlPlaneError::NotRunning(dir.to_owned()));
    }
    let env = EnvFile::read(&env_path)?;
    for pid in [env.pids.kube_apiserver, env.pids.etcd] {
        if process_belongs_to(pid, &env.dir) {
            let status = Command::new("sh")
                .args(["-c", "kill -KILL \"$1\"", "sh", &pid.to_string()])
                .status()
                .map_err(io_err(format!("kill process {pid}")))?;
            if !status.success() {
                tracing::debug!(pid, "process exited before it could be killed");
            }
            wait_gone(pid);
        }
    }
    remove_dir(dir)
}

/// Whether process `pid` is alive and has an argument mentioning `dir`.
pub(crate) fn process_belongs_to(pid: u32, dir: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = dir.display().to_string();
    cmdline
        .split(|b| *b == 0)
        .any(|arg| String::from_utf8_lossy(arg).contains(&needle))
}

/// Waits until process `pid` is gone or a zombie, for at most [`STOP_TIMEOUT`].
pub(crate) fn wait_gone(pid: u32) {
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) if !stat.contains(") Z ") => std::thread::sleep(POLL_INTERVAL),
            _ => return,
        }
    }
    tracing::warn!(pid, "process still running after SIGKILL");
}
