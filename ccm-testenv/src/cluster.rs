//! A cluster in a box: the local control plane ([`crate::controlplane`]) plus kube-scheduler,
//! kube-controller-manager and kwok, which simulates the kubelets of the Nodes that tests register
//! ([`register_node`]).
//!
//! kube-scheduler and kube-controller-manager run with client certificates of their own
//! (`system:kube-scheduler`, `system:kube-controller-manager`), so the API server's bootstrap RBAC policy
//! decides what they may do, as in a kubeadm cluster. kube-controller-manager runs with
//! `--cloud-provider=external`, allocates pod CIDRs from `10.244.0.0/16` and uses one ServiceAccount per
//! controller (`--use-service-account-credentials`). kwok plays the kubelets (node status, Lease
//! heartbeats, pod phases) with the stages of `kwok-stages.yaml`: a Node stays `Ready=False` while it has
//! the uninitialized taint, as when the CNI waits for the cloud controller manager. No cloud controller
//! manager runs: that is what the tests (or `cargo xtask cluster up`) bring.
//!
//! ```no_run
//! use ccm_testenv::cluster::{Cluster, ClusterOptions, NodeRole, register_node};
//! use ccm_testenv::controlplane::{Binaries, LaunchOptions, Supervision};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join("my-cluster");
//! let options = ClusterOptions::new(LaunchOptions::new(Binaries::find()?, dir, Supervision::Watchdog));
//! let cluster = Cluster::launch(options).await?;
//! let client = cluster.client()?;
//! register_node(&client, "cp-1", NodeRole::ControlPlane).await?;
//! register_node(&client, "worker-1", NodeRole::Worker).await?;
//! cluster.stop()?;
//! # Ok(())
//! # }
//! ```

mod nodes;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use serde::{Deserialize, Serialize};

use crate::controlplane::{
    self, Binaries, ControlPlane, ControlPlaneError, LaunchOptions, SERVICE_CLUSTER_IP_RANGE,
};
use crate::envfile::EnvFile;
use crate::kubeconfig::{self, KubeconfigSpec};
use crate::pki::CertificateAuthority;

pub use nodes::{
    CONTROL_PLANE_ROLE, EXCLUDE_FROM_LOAD_BALANCERS, KWOK_LABEL, KWOK_LABEL_VALUE, NodeRole,
    UNINITIALIZED_TAINT, fake_inventory, kubelet_node, register_node, resume_heartbeats,
    stop_heartbeats,
};

/// The pod network kube-controller-manager allocates node pod CIDRs from (`--cluster-cidr`).
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";

/// The size of each node's pod CIDR (`--node-cidr-mask-size`).
pub const NODE_CIDR_MASK_SIZE: u8 = 24;

/// The kwok stages (YAML) the cluster runs kwok with.
pub const KWOK_STAGES: &str = include_str!("cluster/kwok-stages.yaml");

/// The controllers kube-controller-manager runs (`--controllers`): what a cluster needs for Deployments,
/// DaemonSets, Jobs, ServiceAccounts and their tokens, garbage collection, namespaces, EndpointSlices, node
/// IPAM, node lifecycle and taint-based eviction. The volume, certificate and autoscaling controllers are
/// left out: kwok runs no volumes and the cluster signs no certificates.
pub const CONTROLLERS: &[&str] = &[
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
    "statefulset-controller",
    "job-controller",
    "disruption-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "pod-garbage-collector-controller",
    "ttl-controller",
    "node-ipam-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
];

/// The user kube-scheduler authenticates as (bound to `system:kube-scheduler` by the bootstrap policy).
pub const SCHEDULER_USER: &str = "system:kube-scheduler";

/// The user kube-controller-manager authenticates as (bound to `system:kube-controller-manager` by the
/// bootstrap policy).
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";

/// The user kwok authenticates as. kwok stands in for every kubelet at once, which the Node authorizer
/// cannot express, so it is in `system:masters`.
pub const KWOK_USER: &str = "ccm-testenv-kwok";

/// File (in the cluster's directory) recording the component process ids of a detached cluster.
pub const COMPONENTS_FILE: &str = "cluster.json";

const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Failures launching or stopping a cluster in a box.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The control plane failed (binaries, start-up, I/O).
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    /// A component binary is missing.
    #[error(
        "cluster binaries not found (looked for {missing}): run `{}` first, or set {} to a directory \
         holding kube-scheduler, kube-controller-manager and kwok next to etcd and kube-apiserver",
        controlplane::BUILD_COMMAND,
        controlplane::BIN_DIR_ENV_VAR
    )]
    BinariesMissing {
        /// The paths that do not exist.
        missing: String,
    },
    /// A component exited while the cluster started.
    #[error("{component} exited during start-up with {status}; last lines of {log}:\n{tail}")]
    ComponentExited {
        /// `kube-scheduler`, `kube-controller-manager` or `kwok`.
        component: &'static str,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// The components were not ready in time.
    #[error("the cluster was not ready after {timeout:?}: {waiting_for}; see the logs in {logs}")]
    NotReady {
        /// How long it was given.
        timeout: Duration,
        /// What was still missing.
        waiting_for: String,
        /// The log directory.
        logs: PathBuf,
    },
    /// The components file of a detached cluster cannot be read or written.
    #[error("cannot {action} {path}: {message}")]
    ComponentsFile {
        /// `read`, `parse` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Paths of the component binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterBinaries {
    /// The kube-scheduler binary.
    pub kube_scheduler: PathBuf,
    /// The kube-controller-manager binary.
    pub kube_controller_manager: PathBuf,
    /// The kwok binary.
    pub kwok: PathBuf,
}

impl ClusterBinaries {
    /// The binaries named `kube-scheduler`, `kube-controller-manager` and `kwok` in `dir` (existence is not
    /// checked).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            kube_scheduler: dir.join("kube-scheduler"),
            kube_controller_manager: dir.join("kube-controller-manager"),
            kwok: dir.join("kwok"),
        }
    }

    /// The component binaries in the directory of the control-plane binaries (where
    /// `cargo xtask controlplane build` puts all of them).
    pub fn next_to(control_plane: &Binaries) -> Self {
        Self::in_dir(control_plane.etcd.parent().unwrap_or(Path::new(".")))
    }

    /// Checks that all three exist.
    ///
    /// # Errors
    /// [`ClusterError::BinariesMissing`] listing the missing ones.
    pub fn verify(&self) -> Result<(), ClusterError> {
        let missing: Vec<String> = [
            &self.kube_scheduler,
            &self.kube_controller_manager,
            &self.kwok,
        ]
        .into_iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ClusterError::BinariesMissing {
                missing: missing.join(", "),
            })
        }
    }
}

/// How fast kubelets heartbeat and kube-controller-manager notices silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTimings {
    /// The node Lease duration kwok uses (`--node-lease-duration-seconds`; kwok renews at a quarter of it,
    /// like the kubelet).
    pub lease_duration_seconds: u32,
    /// kube-controller-manager's `--node-monitor-period`.
    pub monitor_period: Duration,
    /// kube-controller-manager's `--node-monitor-grace-period`: silence after which a node is unreachable.
    pub monitor_grace_period: Duration,
}

impl NodeTimings {
    /// The defaults of the kubelet and kube-controller-manager 1.36: 40 s leases, a 5 s monitor period, a
    /// 50 s grace period.
    pub const GO_DEFAULTS: NodeTimings = NodeTimings {
        lease_duration_seconds: 40,
        monitor_period: Duration::from_secs(5),
        monitor_grace_period: Duration::from_secs(50),
    };

    /// Timings for tests: 4 s leases (renewed every second), a 1 s monitor period, unreachable after 8 s.
    pub const FAST: NodeTimings = NodeTimings {
        lease_duration_seconds: 4,
        monitor_period: Duration::from_secs(1),
        monitor_grace_period: Duration::from_secs(8),
    };
}

/// How to launch a cluster in a box.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The control plane (etcd + kube-apiserver) underneath.
    pub control_plane: LaunchOptions,
    /// The component binaries.
    pub binaries: ClusterBinaries,
    /// Heartbeat and node-monitoring timings.
    pub timings: NodeTimings,
    /// How long the components may take to become ready.
    pub ready_timeout: Duration,
}

impl ClusterOptions {
    /// Options with the component binaries next to the control-plane binaries, [`NodeTimings::FAST`] and a
    /// 90 s ready timeout.
    pub fn new(control_plane: LaunchOptions) -> Self {
        Self {
            binaries: ClusterBinaries::next_to(&control_plane.binaries),
            control_plane,
            timings: NodeTimings::FAST,
            ready_timeout: Duration::from_secs(90),
        }
    }

    /// The same options with other timings.
    pub fn with_timings(mut self, timings: NodeTimings) -> Self {
        self.timings = timings;
        self
    }
}

/// Files of the cluster in the control plane's directory.
fn kubeconfig_file(dir: &Path, component: &str) -> PathBuf {
    dir.join(format!("{component}.kubeconfig"))
}

fn kwok_config_file(dir: &Path) -> PathBuf {
    dir.join("kwok.yaml")
}

fn log_file(dir: &Path, component: &str) -> PathBuf {
    dir.join("logs").join(format!("{component}.log"))
}

fn go_duration(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

/// kube-scheduler's arguments: its own kubeconfig, no serving port, leader election (its Lease
/// `kube-system/kube-scheduler` tells that it runs).
pub fn scheduler_args(dir: &Path) -> Vec<String> {
    vec![
        format!(
            "--kubeconfig={}",
            kubeconfig_file(dir, "kube-scheduler").display()
        ),
        "--secure-port=0".into(),
        "--leader-elect=true".into(),
    ]
}

/// kube-controller-manager's arguments: its own kubeconfig, no serving port, leader election,
/// `--cloud-provider=external`, pod CIDRs from [`CLUSTER_CIDR`], one ServiceAccount per controller, the
/// service-account key and CA of the control plane, [`CONTROLLERS`] and the node `timings`.
pub fn controller_manager_args(dir: &Path, timings: &NodeTimings) -> Vec<String> {
    let pki = |name: &str| dir.join("pki").join(name).display().to_string();
    vec![
        format!(
            "--kubeconfig={}",
            kubeconfig_file(dir, "kube-controller-manager").display()
        ),
        "--secure-port=0".into(),
        "--leader-elect=true".into(),
        "--cloud-provider=external".into(),
        "--allocate-node-cidrs=true".into(),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        format!("--node-cidr-mask-size={NODE_CIDR_MASK_SIZE}"),
        format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        "--use-service-account-credentials=true".into(),
        format!("--service-account-private-key-file={}", pki("sa.key")),
        format!("--root-ca-file={}", pki("ca.crt")),
        format!("--controllers={}", CONTROLLERS.join(",")),
        format!(
            "--node-monitor-period={}",
            go_duration(timings.monitor_period)
        ),
        format!(
            "--node-monitor-grace-period={}",
            go_duration(timings.monitor_grace_period)
        ),
    ]
}

/// kwok's arguments: its kubeconfig, the stages file, the Nodes labelled [`KWOK_LABEL`]`=fake`, Lease
/// heartbeats of `timings`, its health server on `port`.
pub fn kwok_args(dir: &Path, timings: &NodeTimings, port: u16) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig_file(dir, "kwok").display()),
        format!("--config={}", kwok_config_file(dir).display()),
        "--manage-all-nodes=false".into(),
        format!("--manage-nodes-with-label-selector={KWOK_LABEL}={KWOK_LABEL_VALUE}"),
        format!(
            "--node-lease-duration-seconds={}",
            timings.lease_duration_seconds
        ),
        format!("--server-address=127.0.0.1:{port}"),
    ]
}

/// Process ids of the components of a detached cluster ([`COMPONENTS_FILE`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentPids {
    /// Component name and process id, in start order.
    pub components: Vec<(String, u32)>,
}

#[derive(Debug)]
struct Component {
    name: &'static str,
    child: Child,
}

/// A running cluster in a box, started by [`Cluster::launch`].
///
/// Dropping it (or calling [`Cluster::stop`]) stops the components and then the control plane, unless
/// [`Cluster::detach`] was called.
#[derive(Debug)]
pub struct Cluster {
    components: Vec<Component>,
    control_plane: Option<ControlPlane>,
    armed: bool,
}

impl Cluster {
    /// Launches the control plane, writes the components' kubeconfigs (client certificates signed by the
    /// control plane's CA) and kwok's stages, starts kwok, kube-scheduler and kube-controller-manager, and
    /// waits until the scheduler and the controller-manager hold their leader Leases and the `default`
    /// ServiceAccount exists (the controller-manager's controllers run).
    ///
    /// # Errors
    /// [`ClusterError`] if a binary is missing, the control plane does not start, a component exits or is
    /// not ready in time (the error names its log).
    pub async fn launch(options: ClusterOptions) -> Result<Self, ClusterError> {
        options.binaries.verify()?;
        let control_plane = ControlPlane::launch(options.control_plane.clone()).await?;
        let mut cluster = Cluster {
            components: Vec::new(),
            control_plane: Some(control_plane),
            armed: true,
        };
        cluster.start_components(&options).await?;
        Ok(cluster)
    }

    async fn start_components(&mut self, options: &ClusterOptions) -> Result<(), ClusterError> {
        let env = self.env().clone();
        let dir = env.dir.clone();
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map_err(controlplane::io_err(format!("read {}", path.display())))
        };
        let ca_pem = read(&env.ca_cert)?;
        let ca = CertificateAuthority::from_pem(&ca_pem, &read(&env.ca_key)?)
            .map_err(ControlPlaneError::from)?;
        for (component, user, groups) in [
            ("kube-scheduler", SCHEDULER_USER, &[][..]),
            ("kube-controller-manager", CONTROLLER_MANAGER_USER, &[]),
            ("kwok", KWOK_USER, &["system:masters"]),
        ] {
            let certified = ca
                .issue_client(user, groups)
                .map_err(ControlPlaneError::from)?;
            let yaml = kubeconfig::render(&KubeconfigSpec {
                name: component,
                server: &env.server,
                ca_pem: &ca_pem,
                client_cert_pem: &certified.cert_pem,
                client_key_pem: &certified.key_pem,
            });
            controlplane::write_file(&kubeconfig_file(&dir, component), &yaml, true)?;
        }
        controlplane::write_file(&kwok_config_file(&dir), KWOK_STAGES, false)?;

        let kwok_port = crate::ports::pick_free_ports(1)
            .map_err(controlplane::io_err("pick a free port for kwok"))?[0];
        let binaries = &options.binaries;
        let timings = &options.timings;
        self.spawn("kwok", &binaries.kwok, &kwok_args(&dir, timings, kwok_port))?;
        self.spawn(
            "kube-scheduler",
            &binaries.kube_scheduler,
            &scheduler_args(&dir),
        )?;
        self.spawn(
            "kube-controller-manager",
            &binaries.kube_controller_manager,
            &controller_manager_args(&dir, timings),
        )?;
        self.wait_ready(options.ready_timeout).await
    }

    fn spawn(
        &mut self,
        name: &'static str,
        binary: &Path,
        args: &[String],
    ) -> Result<(), ClusterError> {
        let dir = self.env().dir.clone();
        let child = controlplane::spawn_server(binary, args, &log_file(&dir, name))?;
        let control_plane = self
            .control_plane
            .as_mut()
            .expect("a running cluster has a control plane");
        if let Err(err) = control_plane.supervise(&child) {
            controlplane::kill_and_reap(child);
            return Err(err.into());
        }
        self.components.push(Component { name, child });
        Ok(())
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), ClusterError> {
        let client = self.client()?;
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            let mut missing = Vec::new();
            for name in ["kube-scheduler", "kube-controller-manager"] {
                let held = leases
                    .get_opt(name)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|lease| {
                        lease
                            .spec
                            .and_then(|s| s.holder_identity)
                            .is_some_and(|h| !h.is_empty())
                    });
                if !held {
                    missing.push(format!("the leader Lease kube-system/{name}"));
                }
            }
            if !matches!(accounts.get_opt("default").await, Ok(Some(_))) {
                missing.push("the ServiceAccount default/default".to_owned());
            }
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ClusterError::NotReady {
                    timeout,
                    waiting_for: missing.join(", "),
                    logs: self.env().dir.join("logs"),
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Fails if a component has exited.
    ///
    /// # Errors
    /// [`ClusterError::ComponentExited`] with the end of its log.
    pub fn check_alive(&mut self) -> Result<(), ClusterError> {
        let dir = self.env().dir.clone();
        for component in &mut self.components {
            if let Some(status) = component
                .child
                .try_wait()
                .map_err(controlplane::io_err("check a component process"))?
            {
                let log = log_file(&dir, component.name);
                return Err(ClusterError::ComponentExited {
                    component: component.name,
                    status,
                    tail: controlplane::log_tail(&log),
                    log,
                });
            }
        }
        Ok(())
    }

    /// The control plane underneath.
    pub fn control_plane(&self) -> &ControlPlane {
        self.control_plane
            .as_ref()
            .expect("a running cluster has a control plane")
    }

    /// The env file of the control plane (server URL, admin kubeconfig, CA, ...).
    pub fn env(&self) -> &EnvFile {
        self.control_plane().env()
    }

    /// The admin kubeconfig (group `system:masters`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.env().kubeconfig
    }

    /// The log file of a component (`kube-scheduler`, `kube-controller-manager`, `kwok`) or server (`etcd`,
    /// `kube-apiserver`).
    pub fn log_path(&self, component: &str) -> PathBuf {
        log_file(&self.env().dir, component)
    }

    /// A cluster-admin client, bound to the calling tokio runtime.
    ///
    /// # Errors
    /// If the key material cannot be read or the client cannot be built.
    pub fn client(&self) -> Result<kube::Client, ClusterError> {
        let env = self.env();
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map_err(controlplane::io_err(format!("read {}", path.display())))
        };
        let config = controlplane::client_config(
            &env.server,
            &read(&env.ca_cert)?,
            &read(&env.admin_cert)?,
            &read(&env.admin_key)?,
        )?;
        Ok(kube::Client::try_from(config).map_err(ControlPlaneError::Client)?)
    }

    /// Lets the cluster outlive this value and this process (with [`controlplane::Supervision::Detached`]):
    /// writes [`COMPONENTS_FILE`] and returns the env file. Stop it with [`stop_detached`].
    ///
    /// # Errors
    /// [`ClusterError::ComponentsFile`] if the components file cannot be written (nothing is detached then).
    pub fn detach(mut self) -> Result<EnvFile, ClusterError> {
        let pids = ComponentPids {
            components: self
                .components
                .iter()
                .map(|c| (c.name.to_owned(), c.child.id()))
                .collect(),
        };
        let path = self.env().dir.join(COMPONENTS_FILE);
        let text =
            serde_json::to_string_pretty(&pids).map_err(|e| ClusterError::ComponentsFile {
                action: "write",
                path: path.clone(),
                message: e.to_string(),
            })?;
        std::fs::write(&path, text).map_err(|e| ClusterError::ComponentsFile {
            action: "write",
            path: path.clone(),
            message: e.to_string(),
        })?;
        self.armed = false;
        self.components.clear();
        let control_plane = self
            .control_plane
            .take()
            .expect("a running cluster has a control plane");
        Ok(control_plane.detach())
    }

    /// Stops the components, then the control plane, and removes the directory.
    ///
    /// # Errors
    /// If the directory cannot be removed.
    pub fn stop(mut self) -> Result<(), ClusterError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), ClusterError> {
        if !self.armed {
            return Ok(());
        }
        self.armed = false;
        // The controllers first, so that none of them acts on a dying API server.
        for component in self.components.drain(..).rev() {
            let pid = component.child.id();
            controlplane::kill_and_reap(component.child);
            if let Some(control_plane) = self.control_plane.as_mut() {
                control_plane.release(pid);
            }
        }
        match self.control_plane.take() {
            Some(control_plane) => Ok(control_plane.stop()?),
            None => Ok(()),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(err) = self.shutdown() {
            tracing::warn!(error = %err, "failed to clean up the cluster");
        }
    }
}

/// Stops a cluster detached by [`Cluster::detach`]: kills the components named in [`COMPONENTS_FILE`] (only
/// processes whose arguments point into `dir`), then the control plane ([`controlplane::stop_detached`]).
///
/// ```no_run
/// ccm_testenv::cluster::stop_detached(std::path::Path::new("target/cluster/run"))?;
/// # Ok::<(), ccm_testenv::cluster::ClusterError>(())
/// ```
///
/// # Errors
/// [`ClusterError`] if the directory holds no cluster or cannot be removed.
pub fn stop_detached(dir: &Path) -> Result<(), ClusterError> {
    let path = dir.join(COMPONENTS_FILE);
    if path.exists() {
        let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::ComponentsFile {
            action: "read",
            path: path.clone(),
            message: e.to_string(),
        })?;
        let pids: ComponentPids =
            serde_json::from_str(&text).map_err(|e| ClusterError::ComponentsFile {
                action: "parse",
                path: path.clone(),
                message: e.to_string(),
            })?;
        for (name, pid) in pids.components.iter().rev() {
            if controlplane::process_belongs_to(*pid, dir) {
                let status = std::process::Command::new("sh")
                    .args(["-c", "kill -KILL \"$1\"", "sh", &pid.to_string()])
                    .status()
                    .map_err(controlplane::io_err(format!("kill {name} ({pid})")))?;
                if !status.success() {
                    tracing::debug!(pid, name, "process exited before it could be killed");
                }
                controlplane::wait_gone(*pid);
            }
        }
    }
    Ok(controlplane::stop_detached(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_sit_next_to_the_control_plane() {
        let binaries = ClusterBinaries::next_to(&Binaries::in_dir(Path::new("/opt/bin")));
        assert_eq!(binaries.kwok, Path::new("/opt/bin/kwok"));
        assert_eq!(
            binaries.kube_controller_manager,
            Path::new("/opt/bin/kube-controller-manager")
        );
        let err = ClusterBinaries::in_dir(Path::new("/nonexistent"))
            .verify()
            .expect_err("missing");
        let text = err.to_string();
        assert!(text.contains("/nonexistent/kube-scheduler"), "{text}");
        assert!(text.contains("cargo xtask controlplane build"), "{text}");
    }

    #[test]
    fn controller_manager_runs_as_kubeadm_configures_it_for_an_external_cloud() {
        let args = controller_manager_args(Path::new("/c"), &NodeTimings::FAST);
        for expected in [
            "--kubeconfig=/c/kube-controller-manager.kubeconfig",
            "--cloud-provider=external",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--node-cidr-mask-size=24",
            "--use-service-account-credentials=true",
            "--service-account-private-key-file=/c/pki/sa.key",
            "--root-ca-file=/c/pki/ca.crt",
            "--node-monitor-period=1000ms",
            "--node-monitor-grace-period=8000ms",
        ] {
            assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
        }
        let controllers = args
            .iter()
            .find_map(|a| a.strip_prefix("--controllers="))
            .expect("--controllers");
        for needed in [
            "node-ipam-controller",
            "node-lifecycle-controller",
            "taint-eviction-controller",
            "serviceaccount-token-controller",
        ] {
            assert!(controllers.split(',').any(|c| c == needed), "{needed}");
        }
        let go = controller_manager_args(Path::new("/c"), &NodeTimings::GO_DEFAULTS);
        assert!(go.contains(&"--node-monitor-grace-period=50000ms".to_owned()));
    }

    #[test]
    fn scheduler_and_kwok_arguments() {
        let args = scheduler_args(Path::new("/c"));
        assert_eq!(args[0], "--kubeconfig=/c/kube-scheduler.kubeconfig");
        let kwok = kwok_args(Path::new("/c"), &NodeTimings::FAST, 4321);
        for expected in [
            "--config=/c/kwok.yaml",
            "--manage-all-nodes=false",
            "--manage-nodes-with-label-selector=kwok.x-k8s.io/node=fake",
            "--node-lease-duration-seconds=4",
            "--server-address=127.0.0.1:4321",
        ] {
            assert!(kwok.iter().any(|a| a == expected), "{expected} in {kwok:?}");
        }
    }

    #[test]
    fn the_stages_hold_nodes_until_the_cloud_initialized_them() {
        let names: Vec<&str> = KWOK_STAGES
            .lines()
            .filter_map(|l| l.trim().strip_prefix("name: "))
            .collect();
        assert_eq!(
            names,
            [
                "ccm-node-waits-for-cloud",
                "ccm-node-ready",
                "ccm-node-heartbeat",
                "ccm-pod-running",
                "ccm-pod-delete"
            ]
        );
        assert!(KWOK_STAGES.contains(UNINITIALIZED_TAINT));
        // Addresses belong to the CCM: no stage writes them.
        assert!(!KWOK_STAGES.contains("addresses:"));
    }

    #[test]
    fn component_pids_round_trip() {
        let pids = ComponentPids {
            components: vec![("kwok".into(), 1), ("kube-scheduler".into(), 2)],
        };
        let text = serde_json::to_string(&pids).expect("serialize");
        assert_eq!(
            serde_json::from_str::<ComponentPids>(&text).expect("parse"),
            pids
        );
    }
}
