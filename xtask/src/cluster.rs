//! `cargo xtask cluster up|down`: the cluster in a box (`ccm_testenv::cluster`: kube-apiserver, etcd,
//! kube-scheduler, kube-controller-manager, kwok) with registered Nodes and the reference CCM running
//! against it, for exploration. It outlives xtask; `down` stops it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use ccm_testenv::cluster::{
    self, Cluster, ClusterOptions, ComponentPids, NodeRole, NodeTimings, UNINITIALIZED_TAINT,
};
use ccm_testenv::controlplane::{LaunchOptions, Supervision};
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use crate::controlplane::{self, BuildArgs};
use crate::paths;
use crate::process::{self, Interrupt, Interrupted, Stopwatch};

/// Arguments of `cargo xtask cluster`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Start the cluster in a box with N worker nodes and the reference CCM, print how to reach it.
    Up(UpArgs),
    /// Stop a cluster started by `up` and remove its directory.
    Down(DirArgs),
}

#[derive(Debug, Args)]
struct UpArgs {
    /// Worker nodes to register.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Control-plane nodes to register (labelled and tainted as kubeadm does).
    #[arg(long, default_value_t = 1)]
    control_plane_nodes: usize,
    /// Use the node-monitoring timings of the Go components (40 s leases, unreachable after 50 s) instead of
    /// the fast ones of the tests (4 s, 8 s).
    #[arg(long)]
    go_timings: bool,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, Args)]
struct DirArgs {
    /// Directory of the cluster (default: `<target dir>/cluster/run`).
    #[arg(long)]
    dir: Option<PathBuf>,
}

impl DirArgs {
    fn dir(&self) -> PathBuf {
        self.dir.as_deref().map_or_else(
            || paths::target_dir().join("cluster").join("run"),
            paths::absolute,
        )
    }
}

/// Runs `cargo xtask cluster ...`.
pub async fn run(args: ClusterArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    match args.command {
        ClusterCommand::Up(up_args) => up(&up_args, interrupt).await,
        ClusterCommand::Down(dir) => {
            let dir = dir.dir();
            cluster::stop_detached(&dir)
                .with_context(|| format!("stopping the cluster in {}", dir.display()))?;
            eprintln!("stopped the cluster in {}", dir.display());
            Ok(())
        }
    }
}

/// The names of the nodes `up` registers: `control-plane-1..` then `worker-1..`.
fn node_names(control_plane: usize, workers: usize) -> Vec<(String, NodeRole)> {
    (1..=control_plane)
        .map(|i| (format!("control-plane-{i}"), NodeRole::ControlPlane))
        .chain((1..=workers).map(|i| (format!("worker-{i}"), NodeRole::Worker)))
        .collect()
}

/// The reference CCM's command line in the cluster (as `deploy/` runs it, with the admin kubeconfig).
fn ccm_args(kubeconfig: &Path, inventory: &Path) -> Vec<String> {
    vec![
        "--cloud-provider=fake".to_owned(),
        format!("--cloud-config={}", inventory.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--cluster-cidr={}", cluster::CLUSTER_CIDR),
        "--leader-elect=true".to_owned(),
        "--leader-elect-resource-namespace=kube-system".to_owned(),
        "--leader-elect-resource-name=cloud-controller-manager".to_owned(),
        "--secure-port=0".to_owned(),
        "--v=2".to_owned(),
    ]
}

async fn up(args: &UpArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    if args.control_plane_nodes + args.nodes == 0 {
        bail!(
            "a cluster needs at least one node: give --nodes or --control-plane-nodes a positive number"
        );
    }
    let dir = args.dir.dir();
    if dir.join(ccm_testenv::envfile::FILE_NAME).exists() {
        bail!(
            "a cluster already runs in {0}: stop it with `cargo xtask cluster down --dir {0}`",
            dir.display()
        );
    }
    controlplane::build(&BuildArgs::default(), interrupt).await?;
    let mut build = process::cargo();
    build.args(["build", "-p", "examples", "--example", "reference-ccm"]);
    process::run(build, interrupt, "").await?;
    let ccm_binary = paths::target_dir()
        .join("debug")
        .join("examples")
        .join("reference-ccm");

    eprintln!("starting the cluster in a box in {}...", dir.display());
    let stopwatch = Stopwatch::start();
    let timings = if args.go_timings {
        NodeTimings::GO_DEFAULTS
    } else {
        NodeTimings::FAST
    };
    let options = ClusterOptions::new(LaunchOptions::new(
        controlplane::binaries()?,
        &dir,
        Supervision::Detached,
    ))
    .with_timings(timings);
    let cluster = tokio::select! {
        launched = Cluster::launch(options) => launched?,
        () = interrupt.interrupted() => return Err(Interrupted.into()),
    };
    eprintln!(
        "kube-apiserver, etcd, kube-scheduler, kube-controller-manager and kwok ready in {}",
        process::seconds(stopwatch.elapsed())
    );
    let client = cluster.client()?;
    let nodes = node_names(args.control_plane_nodes, args.nodes);
    for (name, role) in &nodes {
        cluster::register_node(&client, name, *role)
            .await
            .with_context(|| format!("registering node {name}"))?;
    }
    let names: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
    let inventory = dir.join("inventory.yaml");
    std::fs::write(&inventory, cluster::fake_inventory(&names))
        .with_context(|| format!("writing {}", inventory.display()))?;
    let ccm_pid = spawn_detached(
        &ccm_binary,
        &ccm_args(cluster.kubeconfig_path(), &inventory),
        &cluster.log_path("reference-ccm"),
    )?;
    let kubeconfig = cluster.kubeconfig_path().to_owned();
    cluster.detach()?;
    record_pid(&dir, "reference-ccm", ccm_pid)?;

    let ready = wait_initialized(&client, nodes.len(), Duration::from_secs(60)).await;
    // On stdout alone, so `eval "$(cargo xtask cluster up)"` works.
    println!("export KUBECONFIG={}", kubeconfig.display());
    eprintln!(
        "\n{}\nlogs: {}\n\
         The kubeconfig works with any Kubernetes client; without kubectl, for example:\n  \
         {} doctor --kubeconfig {}\n\
         stop it with: cargo xtask cluster down{}",
        ready,
        dir.join("logs").display(),
        ccm_binary.display(),
        kubeconfig.display(),
        args.dir
            .dir
            .as_ref()
            .map(|_| format!(" --dir {}", dir.display()))
            .unwrap_or_default()
    );
    Ok(())
}

/// Starts `binary` in a process group of its own, logging to `log`, and leaves it running.
fn spawn_detached(binary: &Path, args: &[String], log: &Path) -> anyhow::Result<u32> {
    use std::os::unix::process::CommandExt as _;
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone().context("duplicating the log file handle")?;
    let child = std::process::Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    Ok(child.id())
}

/// Adds a process to the components file, so that `down` stops it (first: it was started last).
fn record_pid(dir: &Path, name: &str, pid: u32) -> anyhow::Result<()> {
    let path = dir.join(cluster::COMPONENTS_FILE);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut pids: ComponentPids =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    pids.components.push((name.to_owned(), pid));
    std::fs::write(&path, serde_json::to_string_pretty(&pids)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// Waits until `expected` nodes have lost the uninitialized taint; describes the outcome.
async fn wait_initialized(client: &kube::Client, expected: usize, timeout: Duration) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let outcome = ccm_testenv::wait_for("the nodes to be initialized", timeout, || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        let initialized = list
            .items
            .iter()
            .filter(|node| {
                !node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT))
            })
            .count();
        (initialized >= expected).then_some(initialized)
    })
    .await;
    match outcome {
        Ok(count) => format!("the reference CCM initialized all {count} nodes"),
        Err(err) => format!("warning: {err} (see the reference CCM's log)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_named_by_role() {
        let nodes = node_names(2, 1);
        assert_eq!(
            nodes,
            [
                ("control-plane-1".to_owned(), NodeRole::ControlPlane),
                ("control-plane-2".to_owned(), NodeRole::ControlPlane),
                ("worker-1".to_owned(), NodeRole::Worker),
            ]
        );
    }

    #[test]
    fn the_ccm_runs_like_the_deployment() {
        let args = ccm_args(
            Path::new("/c/admin.kubeconfig"),
            Path::new("/c/inventory.yaml"),
        );
        assert!(args.contains(&"--cloud-config=/c/inventory.yaml".to_owned()));
        assert!(args.contains(&"--cluster-cidr=10.244.0.0/16".to_owned()));
        assert!(args.contains(&"--leader-elect-resource-name=cloud-controller-manager".to_owned()));
    }

    #[test]
    fn the_default_directory_is_under_target() {
        let args = DirArgs { dir: None };
        assert!(args.dir().ends_with("cluster/run"));
    }
}
