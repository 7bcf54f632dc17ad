//! Launching and stopping a local control plane: one etcd member and one kube-apiserver on free
//! loopback ports, with TLS, RBAC and client certificates made by [`crate::pki`].
//!
//! The binaries are the ones `cargo xtask controlplane build` puts in
//! `<target dir>/controlplane/bin`. `cargo xtask controlplane start` and `cargo xtask test` use
//! this module, and [`TestEnv::shared`](crate::TestEnv::shared) uses it to start a private
//! control plane when no `CCM_TESTENV` is set.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::audit;
use crate::envfile::{self, EnvFile, EnvFileError, Pids};
use crate::kubeconfig::{self, KubeconfigSpec};
use crate::pki::{self, CertificateAuthority, PkiError};

/// Environment variable naming the directory holding the `etcd` and `kube-apiserver` binaries;
/// overrides the search in [`Binaries::find`].
pub const BIN_DIR_ENV_VAR: &str = "CCM_CONTROLPLANE_BIN";

/// Command that builds the binaries, quoted in error messages.
pub const BUILD_COMMAND: &str = "cargo xtask controlplane build";

/// User name of the admin client certificate (group `system:masters`).
pub const ADMIN_USER: &str = "ccm-testenv-admin";

/// Common name of the client certificate allowed to assert identities through request headers.
pub const FRONT_PROXY_USER: &str = "front-proxy-client";

/// Header carrying the user name in request-header authentication.
pub const REMOTE_USER_HEADER: &str = "X-Remote-User";

/// Header carrying one group in request-header authentication (repeated per group).
pub const REMOTE_GROUP_HEADER: &str = "X-Remote-Group";

/// Service-account token issuer configured on the API server.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Service cluster IP range configured on the API server.
pub const SERVICE_CLUSTER_IP_RANGE: &str = "10.96.0.0/12";

const LAUNCH_ATTEMPTS: usize = 3;
const POLL_INTERVAL: Duration = Duration::from_millis(100);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Failures launching, locating or stopping a control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// The binaries are not where they were looked for.
    #[error(
        "control-plane binaries not found (looked for {missing}): run `{BUILD_COMMAND}` first, or \
         set {BIN_DIR_ENV_VAR} to a directory holding etcd and kube-apiserver"
    )]
    BinariesMissing {
        /// The paths that do not exist.
        missing: String,
    },
    /// The directory for a new control plane is not empty.
    #[error(
        "directory {0} is not empty: stop the control plane using it (`cargo xtask controlplane \
         stop --dir {0}`) or choose another directory"
    )]
    DirectoryNotEmpty(PathBuf),
    /// A file-system or process operation failed.
    #[error("failed to {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Key material could not be generated.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// The env file could not be read or written.
    #[error(transparent)]
    EnvFile(#[from] EnvFileError),
    /// A server process exited while starting.
    #[error("{server} exited during start-up with {status}; last lines of {log}:\n{tail}")]
    ServerExited {
        /// `etcd` or `kube-apiserver`.
        server: &'static str,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// A server did not become ready in time.
    #[error("{server} was not ready after {timeout:?}; last lines of {log}:\n{tail}")]
    NotReady {
        /// `etcd` or `kube-apiserver`.
        server: &'static str,
        /// How long it was given.
        timeout: Duration,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// A client for the API server could not be built.
    #[error("failed to build a client for the API server: {0}")]
    Client(#[source] kube::Error),
    /// No env file exists in the directory given to stop.
    #[error("no control plane found in {0} (it has no env.json)")]
    NotRunning(PathBuf),
}

pub(crate) fn io_err(
    action: impl Into<String>,
) -> impl FnOnce(std::io::Error) -> ControlPlaneError {
    let action = action.into();
    move |source| ControlPlaneError::Io { action, source }
}

/// Paths of the server binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// The etcd binary.
    pub etcd: PathBuf,
    /// The kube-apiserver binary.
    pub kube_apiserver: PathBuf,
}

impl Binaries {
    /// The binaries named `etcd` and `kube-apiserver` in `dir` (existence is not checked).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
        }
    }

    /// Finds the binaries built by `cargo xtask controlplane build`.
    ///
    /// Looks in `$CCM_CONTROLPLANE_BIN` if set; otherwise in `controlplane/bin` below each
    /// ancestor directory of the running executable (test binaries and xtask live in the target
    /// directory), then below `$CARGO_TARGET_DIR`, then below the workspace's `target`.
    ///
    /// # Errors
    /// [`ControlPlaneError::BinariesMissing`] naming where they were looked for.
    pub fn find() -> Result<Self, ControlPlaneError> {
        if let Some(dir) = std::env::var_os(BIN_DIR_ENV_VAR) {
            let binaries = Self::in_dir(Path::new(&dir));
            binaries.verify()?;
            return Ok(binaries);
        }
        let candidates = Self::candidate_dirs();
        for dir in &candidates {
            let binaries = Self::in_dir(dir);
            if binaries.verify().is_ok() {
                return Ok(binaries);
            }
        }
        Err(ControlPlaneError::BinariesMissing {
            missing: candidates
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    fn candidate_dirs() -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Ok(exe) = std::env::current_exe() {
            for ancestor in exe.ancestors().skip(1) {
                let dir = ancestor.join("controlplane").join("bin");
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
        if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
            dirs.push(Path::new(&target).join("controlplane").join("bin"));
        }
        let workspace_target = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("controlplane")
            .join("bin");
        dirs.push(workspace_target);
        dirs
    }

    /// Checks that both binaries exist.
    ///
    /// # Errors
    /// [`ControlPlaneError::BinariesMissing`] listing the missing ones.
    pub fn verify(&self) -> Result<(), ControlPlaneError> {
        let missing: Vec<String> = [&self.etcd, &self.kube_apiserver]
            .into_iter()
            .filter(|p| !p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ControlPlaneError::BinariesMissing {
                missing: missing.join(", "),
            })
        }
    }
}

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

/// Files of a control plane's directory.
#[derive(Debug, Clone)]
struct Layout {
    dir: PathBuf,
}

impl Layout {
    fn pki(&self, name: &str) -> PathBuf {
        self.dir.join("pki").join(name)
    }
    fn etcd_data(&self) -> PathBuf {
        self.dir.join("etcd-data")
    }
    fn log(&self, server: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{server}.log"))
    }
    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }
    fn env_file(&self) -> PathBuf {
        self.dir.join(envfile::FILE_NAME)
    }
    fn audit_policy(&self) -> PathBuf {
        self.dir.join(audit::POLICY_FILE)
    }
    fn audit_log(&self) -> PathBuf {
        self.dir.join("logs").join(audit::LOG_FILE)
    }
}

/// The kube-apiserver arguments for the given ports and files (without extra arguments).
pub fn apiserver_args(dir: &Path, etcd_url: &str, secure_port: u16) -> Vec<String> {
    let layout = Layout {
        dir: dir.to_owned(),
    };
    let path = |name: &str| layout.pki(name).display().to_string();
    vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={secure_port}"),
        format!("--cert-dir={}", layout.dir.join("pki").display()),
        format!("--tls-cert-file={}", path("apiserver.crt")),
        format!("--tls-private-key-file={}", path("apiserver.key")),
        format!("--client-ca-file={}", path("ca.crt")),
        format!("--requestheader-client-ca-file={}", path("ca.crt")),
        format!("--requestheader-allowed-names={FRONT_PROXY_USER}"),
        format!("--requestheader-username-headers={REMOTE_USER_HEADER}"),
        format!("--requestheader-group-headers={REMOTE_GROUP_HEADER}"),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
        format!("--service-account-key-file={}", path("sa.pub")),
        format!("--service-account-signing-key-file={}", path("sa.key")),
        format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        "--authorization-mode=RBAC".into(),
        "--endpoint-reconciler-type=none".into(),
    ]
}

/// The etcd arguments for the given ports and data directory.
pub fn etcd_args(data_dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    vec![
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-url=http://127.0.0.1:{client_port}"),
        format!("--listen-peer-url=http://127.0.0.1:{peer_port}"),
        "--name=ccm-testenv".into(),
        "--log-level=warn".into(),
        "--unsafe-no-fsync".into(),
    ]
}

/// The script of the watchdog process. It reads lines from its stdin: `pid N` adds a process
/// to kill, `forget N` removes one (the owner reaped it), `done` ends it quietly (the owner
/// stopped everything); it acknowledges each line on stdout. At end of input, or on SIGTERM,
/// it kills the recorded processes, waits for them to die and removes the directory `$1`.
/// It runs in its own process group and ignores interrupts and hang-ups: those are for the owner,
/// whose exit closes the pipe.
const WATCHDOG_SCRIPT: &str = r#"
dir=$1
pids=
cleanup() {
    for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
    for pid in $pids; do
        n=0
        while [ "$n" -lt 100 ] && [ -e "/proc/$pid" ] && ! grep -q ') Z ' "/proc/$pid/stat" 2>/dev/null; do
            sleep 0.1
            n=$((n + 1))
        done
    done
    rm -rf -- "$dir"
}
trap '' INT HUP QUIT
trap 'cleanup; exit 0' TERM
while IFS= read -r line; do
    case $line in
        "pid "*) pids="$pids ${line#pid }" ;;
        "forget "*)
            kept=
            for pid in $pids; do [ "$pid" = "${line#forget }" ] || kept="$kept $pid"; done
            pids=$kept ;;
        done) exit 0 ;;
    esac
    echo "ok $line"
done
cleanup
"#;

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

fn prepare_dir(dir: &Path) -> Result<(), ControlPlaneError> {
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

pub(crate) fn spawn_watchdog(
    dir: &Path,
    stdout: Stdio,
) -> Result<(Child, ChildStdin), ControlPlaneError> {
    use std::os::unix::process::CommandExt as _;
    let mut child = Command::new("sh")
        // Own process group: killing the test run's group (Ctrl-C, a CI timeout) must not take
        // the watchdog down with the test process before it has cleaned up.
        .process_group(0)
        .arg("-c")
        .arg(WATCHDOG_SCRIPT)
        .arg("ccm-testenv-watchdog")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .map_err(io_err("start the watchdog process (sh)"))?;
    let stdin = child.stdin.take().ok_or_else(|| {
        io_err("open the watchdog's stdin")(std::io::ErrorKind::BrokenPipe.into())
    })?;
    Ok((child, stdin))
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

/// Key material written to `<dir>/pki`.
struct WrittenPki {
    ca: CertificateAuthority,
    admin: pki::CertifiedKey,
}

fn write_pki(layout: &Layout) -> Result<WrittenPki, ControlPlaneError> {
    let ca = CertificateAuthority::generate()?;
    let serving = ca.issue_serving(
        "kube-apiserver",
        &[
            "127.0.0.1",
            "localhost",
            "10.96.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )?;
    let admin = ca.issue_client(ADMIN_USER, &["system:masters"])?;
    let front_proxy = ca.issue_client(FRONT_PROXY_USER, &[])?;
    let service_account_key = pki::generate_signing_key()?;

    write_file(&layout.pki("ca.crt"), ca.cert_pem(), false)?;
    write_file(&layout.pki("ca.key"), ca.key_pem(), true)?;
    write_file(&layout.pki("apiserver.crt"), &serving.cert_pem, false)?;
    write_file(&layout.pki("apiserver.key"), &serving.key_pem, true)?;
    write_file(&layout.pki("admin.crt"), &admin.cert_pem, false)?;
    write_file(&layout.pki("admin.key"), &admin.key_pem, true)?;
    write_file(
        &layout.pki("front-proxy-client.crt"),
        &front_proxy.cert_pem,
        false,
    )?;
    write_file(
        &layout.pki("front-proxy-client.key"),
        &front_proxy.key_pem,
        true,
    )?;
    write_file(
        &layout.pki("sa.key"),
        &service_account_key.private_key_pem,
        true,
    )?;
    write_file(
        &layout.pki("sa.pub"),
        &service_account_key.public_key_pem,
        false,
    )?;
    Ok(WrittenPki { ca, admin })
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

async fn etcd_healthy(port: u16) -> bool {
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(2), probe).await {
        Ok(Ok(response)) => etcd_health_ok(&response),
        _ => false,
    }
}

/// Whether an HTTP response of etcd's `/health` endpoint reports a healthy member.
fn etcd_health_ok(response: &str) -> bool {
    response.starts_with("HTTP/1.")
        && response.contains(" 200 ")
        && response.replace(' ', "").contains(r#""health":"true""#)
}

async fn apiserver_ready(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    match tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await {
        Ok(Ok(body)) => body.trim() == "ok",
        _ => false,
    }
}

fn is_port_conflict(err: &ControlPlaneError) -> bool {
    match err {
        ControlPlaneError::ServerExited { tail, .. } | ControlPlaneError::NotReady { tail, .. } => {
            tail.contains("address already in use")
        }
        _ => false,
    }
}

/// The last 30 lines of a log file (or a note that it cannot be read).
pub(crate) fn log_tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        }
        Err(err) => format!("(cannot read {}: {err})", path.display()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiserver_flags_cover_the_required_settings() {
        let args = apiserver_args(Path::new("/cp"), "http://127.0.0.1:1", 2);
        for expected in [
            "--etcd-servers=http://127.0.0.1:1",
            "--secure-port=2",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--authorization-mode=RBAC",
            "--endpoint-reconciler-type=none",
            "--service-cluster-ip-range=10.96.0.0/12",
            "--tls-cert-file=/cp/pki/apiserver.crt",
            "--tls-private-key-file=/cp/pki/apiserver.key",
            "--client-ca-file=/cp/pki/ca.crt",
            "--service-account-key-file=/cp/pki/sa.pub",
            "--service-account-signing-key-file=/cp/pki/sa.key",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--requestheader-allowed-names=front-proxy-client",
        ] {
            assert!(args.iter().any(|a| a == expected), "missing {expected}");
        }
    }

    #[test]
    fn etcd_flags_use_the_given_ports() {
        let args = etcd_args(Path::new("/cp/etcd-data"), 5, 6);
        assert!(args.contains(&"--listen-client-url=http://127.0.0.1:5".to_owned()));
        assert!(args.contains(&"--listen-peer-url=http://127.0.0.1:6".to_owned()));
        assert!(args.contains(&"--data-dir=/cp/etcd-data".to_owned()));
    }

    #[test]
    fn etcd_health_parsing() {
        assert!(etcd_health_ok(
            "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"health\":\"true\",\"reason\":\"\"}"
        ));
        assert!(!etcd_health_ok(
            "HTTP/1.0 503 Service Unavailable\r\n\r\n{\"health\":\"false\"}"
        ));
        assert!(!etcd_health_ok(
            "HTTP/1.0 200 OK\r\n\r\n{\"health\":\"false\"}"
        ));
        assert!(!etcd_health_ok(""));
    }

    #[test]
    fn port_conflicts_are_recognised() {
        let exited = |tail: &str| ControlPlaneError::NotReady {
            server: "etcd",
            timeout: Duration::from_secs(1),
            log: PathBuf::from("x"),
            tail: tail.to_owned(),
        };
        assert!(is_port_conflict(&exited(
            "listen tcp 127.0.0.1:1: bind: address already in use"
        )));
        assert!(!is_port_conflict(&exited("some other failure")));
        assert!(!is_port_conflict(&ControlPlaneError::NotRunning(
            PathBuf::from("x")
        )));
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.log");
        let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).expect("write");
        let tail = log_tail(&path);
        assert!(tail.starts_with("line 11\n"));
        assert!(tail.ends_with("line 40"));
        assert!(log_tail(&dir.path().join("missing")).contains("cannot read"));
    }

    #[test]
    fn prepare_dir_refuses_non_empty_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fresh = dir.path().join("fresh");
        prepare_dir(&fresh).expect("fresh dir");
        assert!(fresh.join("pki").is_dir());
        assert!(matches!(
            prepare_dir(&fresh),
            Err(ControlPlaneError::DirectoryNotEmpty(_))
        ));
    }

    #[test]
    fn missing_binaries_are_reported_with_the_build_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Binaries::in_dir(dir.path()).verify().expect_err("missing");
        let message = err.to_string();
        assert!(message.contains(BUILD_COMMAND), "{message}");
        assert!(message.contains("kube-apiserver"), "{message}");
    }

    #[test]
    fn stop_detached_without_env_file_is_not_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            stop_detached(dir.path()),
            Err(ControlPlaneError::NotRunning(_))
        ));
    }

    #[test]
    fn process_ownership_check_reads_the_command_line() {
        let me = std::process::id();
        let exe_dir = std::env::current_exe().expect("exe");
        let exe_dir = exe_dir.parent().expect("parent");
        // The test binary's own command line contains its path, which lies inside exe_dir.
        assert!(process_belongs_to(me, exe_dir));
        assert!(!process_belongs_to(me, Path::new("/definitely/not/here")));
        assert!(!process_belongs_to(u32::MAX, exe_dir));
    }

    fn sleeper() -> Child {
        Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep")
    }

    /// A watchdog for `dir` that has acknowledged tracking `victim`.
    fn watchdog_tracking(dir: &Path, victim: &Child) -> (Child, ChildStdin) {
        use std::io::BufRead as _;
        let (mut watchdog, mut stdin) = spawn_watchdog(dir, Stdio::piped()).expect("watchdog");
        writeln!(stdin, "pid {}", victim.id()).expect("notify");
        stdin.flush().expect("flush");
        let mut stdout = std::io::BufReader::new(watchdog.stdout.take().expect("stdout"));
        let mut ack = String::new();
        stdout.read_line(&mut ack).expect("ack");
        assert_eq!(ack.trim(), format!("ok pid {}", victim.id()));
        // Keep the pipe open: the watchdog acknowledges later lines too.
        watchdog.stdout = Some(stdout.into_inner());
        (watchdog, stdin)
    }

    fn scratch_dir(base: &tempfile::TempDir) -> PathBuf {
        let dir = base.path().join("cp");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::write(dir.join("file"), "x").expect("write");
        dir
    }

    /// The watchdog kills the processes it was told about and removes the directory once its
    /// input closes (what happens when its owner exits or is killed).
    #[test]
    fn watchdog_cleans_up_when_its_owner_goes_away() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = scratch_dir(&base);
        let mut victim = sleeper();
        let (mut watchdog, stdin) = watchdog_tracking(&dir, &victim);
        drop(stdin);
        assert!(watchdog.wait().expect("watchdog exits").success());
        // Killed by SIGKILL, so no success status.
        assert!(!victim.wait().expect("victim").success());
        assert!(!dir.exists());
    }

    #[test]
    fn watchdog_told_done_leaves_everything_alone() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = scratch_dir(&base);
        let mut victim = sleeper();
        let (mut watchdog, mut stdin) = watchdog_tracking(&dir, &victim);
        writeln!(stdin, "done").expect("done");
        drop(stdin);
        assert!(watchdog.wait().expect("watchdog exits").success());
        assert!(
            victim.try_wait().expect("try_wait").is_none(),
            "victim still runs"
        );
        assert!(dir.exists());
        victim.kill().expect("kill");
        victim.wait().expect("reap");
    }

    #[test]
    fn watchdog_forgets_reaped_processes() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = scratch_dir(&base);
        let mut victim = sleeper();
        let (mut watchdog, mut stdin) = watchdog_tracking(&dir, &victim);
        writeln!(stdin, "forget {}", victim.id()).expect("forget");
        drop(stdin);
        assert!(watchdog.wait().expect("watchdog exits").success());
        assert!(
            victim.try_wait().expect("try_wait").is_none(),
            "victim still runs"
        );
        assert!(!dir.exists());
        victim.kill().expect("kill");
        victim.wait().expect("reap");
    }

    #[test]
    fn watchdog_cleans_up_on_sigterm() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = scratch_dir(&base);
        let mut victim = sleeper();
        let (mut watchdog, _stdin) = watchdog_tracking(&dir, &victim);
        let status = Command::new("sh")
            .args(["-c", "kill -TERM \"$1\"", "sh", &watchdog.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        assert!(watchdog.wait().expect("watchdog").success());
        assert!(!victim.wait().expect("victim").success());
        assert!(!dir.exists());
    }

    #[test]
    fn watchdog_ignores_interrupts() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = scratch_dir(&base);
        let mut victim = sleeper();
        let (mut watchdog, mut stdin) = watchdog_tracking(&dir, &victim);
        let status = Command::new("sh")
            .args(["-c", "kill -INT \"$1\"", "sh", &watchdog.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        // Still alive and listening: it acknowledges a new line.
        writeln!(stdin, "done").expect("done");
        drop(stdin);
        assert!(watchdog.wait().expect("watchdog").success());
        assert!(victim.try_wait().expect("try_wait").is_none());
        victim.kill().expect("kill");
        victim.wait().expect("reap");
    }
}
