//! What a scenario runs against: a fresh control plane with audit logging, a fake-cloud inventory,
//! one kubeconfig per replica, and a workload (tainted Nodes registered one after the other and
//! one LoadBalancer Service) that keeps the leader writing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use ccm_testenv::TestEnv;
use ccm_testenv::audit::{self, AuditEvent};
use ccm_testenv::controlplane::{Binaries, ControlPlane, LaunchOptions, Supervision};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};

use super::proof::{LeaseName, Proof};
use super::replicas::Replica;
use crate::bench::lbs::{has_ingress, lb_service};
use crate::bench::nodes::{inventory_yaml, node_initialized, node_names, tainted_node};
use crate::bench::support::{Implementation, pause};
use crate::controlplane;
use crate::paths;
use crate::process::Interrupt;

/// The LoadBalancer Service every scenario creates (namespace `default`).
pub const SERVICE: &str = "chaos-web";

/// Microseconds since the Unix epoch on the wall clock (the API server's clock: same machine).
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A control plane with audit logging and the files of one scenario run.
pub struct World {
    control_plane: ControlPlane,
    env: TestEnv,
    /// Cluster-admin client (the workload's user, not a replica).
    pub client: kube::Client,
    /// Logs, kubeconfigs and the inventory of this run.
    pub dir: PathBuf,
    inventory: PathBuf,
    names: Vec<String>,
    audit_log: PathBuf,
}

impl World {
    /// Starts a control plane with audit logging for run `label`, with an inventory of `nodes`
    /// instances; files go to `<target>/chaos/<label>`.
    ///
    /// # Errors
    /// If the control plane does not start or a file cannot be written.
    pub async fn start(label: &str, nodes: usize, interrupt: &Interrupt) -> anyhow::Result<Self> {
        Self::start_with(label, nodes, |_| String::new(), interrupt).await
    }

    /// Like [`World::start`], with more inventory YAML appended: `extra` gets the run's directory
    /// and returns top-level keys (e.g. a fault profile and a state file in that directory).
    ///
    /// # Errors
    /// If the control plane does not start or a file cannot be written.
    pub async fn start_with(
        label: &str,
        nodes: usize,
        extra: impl FnOnce(&Path) -> String,
        interrupt: &Interrupt,
    ) -> anyhow::Result<Self> {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let dir = paths::target_dir().join("chaos").join(label);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let cp_dir = paths::target_dir()
            .join("controlplane")
            .join(format!("chaos-{}-{run}", std::process::id()));
        let options =
            LaunchOptions::new(Binaries::find()?, &cp_dir, Supervision::Watchdog).with_audit();
        let control_plane = controlplane::launch_with(options, interrupt).await?;
        let audit_log = control_plane
            .audit_log_path()
            .context("the control plane runs without an audit log")?;
        let env = TestEnv::attach(&control_plane.env_file_path())
            .context("reading the control plane's env file")?;
        let client = env.try_client().context("building the admin client")?;
        let names = node_names(nodes);
        let inventory = dir.join("inventory.yaml");
        let text = inventory_yaml(&names) + &extra(&dir);
        std::fs::write(&inventory, text)
            .with_context(|| format!("writing {}", inventory.display()))?;
        Ok(World {
            control_plane,
            env,
            client,
            dir,
            inventory,
            names,
            audit_log,
        })
    }

    /// A replica named `name` on this run's inventory, not started.
    ///
    /// # Errors
    /// If no port is free for it.
    pub fn replica(
        &self,
        name: &str,
        implementation: Implementation,
        program: &Path,
    ) -> anyhow::Result<Replica> {
        Replica::new(name, implementation, program, &self.inventory, &self.dir)
    }

    /// Starts a new incarnation of `replica` with a client certificate of its own (user
    /// [`Replica::next_user`], group `system:masters`).
    ///
    /// # Errors
    /// If its kubeconfig cannot be written or the process cannot be started.
    pub fn start_replica(&self, replica: &mut Replica) -> anyhow::Result<()> {
        let user = replica.next_user();
        let kubeconfig = self.dir.join(format!("{user}.kubeconfig"));
        self.env
            .write_user_kubeconfig(&user, &["system:masters"], &kubeconfig)
            .with_context(|| format!("writing the kubeconfig of {user}"))?;
        replica.start(&kubeconfig)
    }

    /// The audit events so far.
    ///
    /// # Errors
    /// If the log cannot be read or parsed.
    pub fn audit(&self) -> anyhow::Result<Vec<AuditEvent>> {
        Ok(audit::read_log(&self.audit_log)?)
    }

    /// The proof so far over every incarnation of `replicas`.
    ///
    /// # Errors
    /// If the audit log cannot be read.
    pub fn proof(&self, replicas: &[Replica]) -> anyhow::Result<Proof> {
        let users: Vec<String> = replicas.iter().flat_map(|r| r.users.clone()).collect();
        Ok(Proof::from_events(
            &self.audit()?,
            &users,
            &LeaseName::default_ccm(),
        ))
    }

    /// Waits until the audit log names a holder of the Lease (a replica incarnation's user),
    /// other than `not` if given; returns it.
    ///
    /// # Errors
    /// On timeout or Ctrl-C.
    pub async fn wait_for_leader(
        &self,
        replicas: &[Replica],
        not: Option<&str>,
        timeout: Duration,
        interrupt: &Interrupt,
    ) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let proof = self.proof(replicas)?;
            if let Some(holder) = proof.holder_at(i64::MAX)
                && Some(holder) != not
            {
                return Ok(holder.to_owned());
            }
            if Instant::now() >= deadline {
                bail!(
                    "no replica{} held the lease after {} s",
                    not.map(|n| format!(" other than {n}")).unwrap_or_default(),
                    timeout.as_secs()
                );
            }
            pause(Duration::from_millis(200), interrupt).await?;
        }
    }

    /// Creates the LoadBalancer Service and then the tainted Nodes, one every `every`, in the
    /// background.
    ///
    /// # Errors
    /// If the Service cannot be created.
    pub async fn start_workload(&self, every: Duration) -> anyhow::Result<Workload> {
        let services: Api<Service> = Api::namespaced(self.client.clone(), "default");
        services
            .create(&PostParams::default(), &lb_service(SERVICE))
            .await
            .context("creating the LoadBalancer Service")?;
        let nodes: Api<Node> = Api::all(self.client.clone());
        let names = self.names.clone();
        let task = tokio::spawn(async move {
            for name in names {
                let node = tainted_node(&name);
                create_retrying(&nodes, &node).await?;
                tokio::time::sleep(every).await;
            }
            Ok(())
        });
        Ok(Workload { task })
    }

    /// Waits until every Node is initialized and the Service has an ingress, restarting replicas
    /// that exited meanwhile (as a kubelet would); returns how long after `since` (the end of the
    /// last fault) that was first seen.
    ///
    /// # Errors
    /// On timeout (saying what is missing), if a replica cannot be restarted, or on Ctrl-C.
    pub async fn converge(
        &self,
        replicas: &mut [Replica],
        since: Instant,
        timeout: Duration,
        interrupt: &Interrupt,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let services: Api<Service> = Api::namespaced(self.client.clone(), "default");
        loop {
            self.restart_exited(replicas).await?;
            let listed = nodes.list(&ListParams::default()).await;
            let service = services.get_opt(SERVICE).await;
            let (initialized, total) = match &listed {
                Ok(list) => (
                    list.items.iter().filter(|n| node_initialized(n)).count(),
                    list.items.len(),
                ),
                Err(_) => (0, 0),
            };
            let ingress = matches!(&service, Ok(Some(s)) if has_ingress(s));
            if total == self.names.len() && initialized == total && ingress {
                return Ok(since.elapsed());
            }
            if started.elapsed() >= timeout {
                bail!(
                    "not converged after {} s: {initialized} of {} nodes initialized, service \
                     ingress: {ingress}",
                    timeout.as_secs(),
                    self.names.len()
                );
            }
            pause(Duration::from_millis(250), interrupt).await?;
        }
    }

    /// Starts a new incarnation of every replica whose process exited.
    ///
    /// # Errors
    /// If one cannot be started.
    pub async fn restart_exited(&self, replicas: &mut [Replica]) -> anyhow::Result<()> {
        for replica in replicas.iter_mut() {
            if !replica.is_running() {
                replica.reap().await?;
                self.start_replica(replica)?;
            }
        }
        Ok(())
    }

    /// Kills kube-apiserver (SIGKILL) and starts it again on the same etcd; returns once it is
    /// ready.
    ///
    /// # Errors
    /// If it does not come back.
    pub async fn restart_apiserver(&mut self) -> anyhow::Result<()> {
        self.control_plane
            .restart_apiserver()
            .await
            .context("restarting kube-apiserver")
    }

    /// Sends `signal` (a `kill -s` name, e.g. `STOP`, `CONT`) to etcd.
    ///
    /// # Errors
    /// If `kill` fails.
    pub async fn signal_etcd(&self, signal: &str) -> anyhow::Result<()> {
        let pid = self.control_plane.env().pids.etcd;
        let status = tokio::process::Command::new("kill")
            .args(["-s", signal, &pid.to_string()])
            .status()
            .await
            .context("running kill")?;
        if !status.success() {
            bail!("kill -s {signal} {pid} (etcd) failed with {status}");
        }
        Ok(())
    }

    /// Stops the control plane and removes its directory (the run's files stay).
    ///
    /// # Errors
    /// If a server cannot be stopped.
    pub fn stop(self) -> anyhow::Result<()> {
        // Keep the audit log with the run's files for inspection.
        let kept = self.dir.join("audit.log");
        if let Err(err) = std::fs::copy(&self.audit_log, &kept) {
            eprintln!("warning: could not keep the audit log: {err}");
        }
        self.control_plane
            .stop()
            .context("stopping the scenario's control plane")
    }
}

/// How long a create or delete is retried while the API server does not answer (it may be
/// restarting).
pub const RETRY_FOR: Duration = Duration::from_secs(60);

/// Creates `object`, retrying failures for up to [`RETRY_FOR`]; "already exists" counts as
/// created (an earlier attempt may have landed without an answer).
///
/// # Errors
/// The last error once the time is up.
pub async fn create_retrying<K>(api: &Api<K>, object: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match api.create(&PostParams::default(), object).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
            Err(err) if Instant::now() >= deadline => {
                let name = object.meta().name.clone().unwrap_or_default();
                return Err(anyhow::Error::new(err).context(format!("creating {name}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Deletes `name`, retrying failures for up to [`RETRY_FOR`]; "not found" counts as deleted.
///
/// # Errors
/// The last error once the time is up.
pub async fn delete_retrying<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match api.delete(name, &kube::api::DeleteParams::default()).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(err) if Instant::now() >= deadline => {
                return Err(anyhow::Error::new(err).context(format!("deleting {name}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// The background registration of Nodes.
pub struct Workload {
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Workload {
    /// Waits until every Node was registered.
    ///
    /// # Errors
    /// If a Node could not be created.
    pub async fn finish(self) -> anyhow::Result<()> {
        self.task.await.context("the workload task failed")?
    }
}
