//! `cargo xtask controlplane build|start|stop`: the local kube-apiserver + etcd used by tests.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ccm_testenv::controlplane::{self, Binaries, ControlPlane, LaunchOptions, Supervision};
use ccm_testenv::envfile;
use clap::{Args, Subcommand};

use crate::gobuild::{
    self, ETCD, GO_CCM, HELM, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER,
    KUBERNETES_VERSION, KWOK,
};
use crate::paths;
use crate::process::{self, Interrupt, Interrupted, Stopwatch};

/// Arguments of `cargo xtask controlplane`.
#[derive(Debug, Args)]
pub struct ControlPlaneArgs {
    #[command(subcommand)]
    command: ControlPlaneCommand,
}

#[derive(Debug, Subcommand)]
enum ControlPlaneCommand {
    /// Build kube-apiserver, etcd, kube-scheduler and kube-controller-manager from xtask/go and kwok
    /// from xtask/go/kwok into `<target dir>/controlplane/bin`, and helm
    /// (for the chart tests) from xtask/go/helm into `<target dir>/tools/bin` (cached).
    Build(BuildArgs),
    /// Start etcd + kube-apiserver on free loopback ports and print `export` lines.
    Start(DirArgs),
    /// Stop a control plane started by `start` and remove its directory.
    Stop(DirArgs),
}

/// Arguments of `controlplane build`.
#[derive(Debug, Args, Default)]
pub struct BuildArgs {
    /// Also build the Go reference cloud-controller-manager (k8s.io/cloud-provider + its fake
    /// provider) for side-by-side comparisons.
    #[arg(long)]
    pub go_ccm: bool,
    /// Rebuild even if the stamps say the binaries are current.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
struct DirArgs {
    /// Directory of the control plane (default: `<target dir>/controlplane/run`).
    #[arg(long)]
    dir: Option<PathBuf>,
}

impl DirArgs {
    fn dir(&self) -> PathBuf {
        self.dir
            .as_deref()
            .map_or_else(paths::default_run_dir, paths::absolute)
    }
}

/// Runs `cargo xtask controlplane ...`.
pub async fn run(args: ControlPlaneArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    match args.command {
        ControlPlaneCommand::Build(build_args) => build(&build_args, interrupt).await,
        ControlPlaneCommand::Start(dir) => start(&dir.dir(), interrupt).await,
        ControlPlaneCommand::Stop(dir) => stop(&dir.dir()),
    }
}

/// Builds (or confirms up to date) the control-plane binaries and helm.
///
/// # Errors
/// If Go is missing or a build fails.
pub async fn build(args: &BuildArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let module_dir = paths::go_module_dir();
    let bin_dir = paths::controlplane_bin_dir();
    let mut programs = vec![
        ETCD,
        KUBE_APISERVER,
        KUBE_SCHEDULER,
        KUBE_CONTROLLER_MANAGER,
        KWOK,
    ];
    if args.go_ccm {
        programs.push(GO_CCM);
    }
    for program in &programs {
        gobuild::ensure_built(program, &module_dir, &bin_dir, args.force, interrupt).await?;
    }
    gobuild::ensure_built(
        &HELM,
        &module_dir,
        &paths::tools_bin_dir(),
        args.force,
        interrupt,
    )
    .await?;
    Ok(())
}

/// Builds (or confirms up to date) only etcd and kube-apiserver: what `cargo xtask demo` needs, so the quick
/// start does not wait for the cluster-in-a-box binaries and helm.
///
/// # Errors
/// If Go is missing or a build fails.
pub async fn build_api_server(interrupt: &Interrupt) -> anyhow::Result<()> {
    let module_dir = paths::go_module_dir();
    let bin_dir = paths::controlplane_bin_dir();
    for program in [&ETCD, &KUBE_APISERVER] {
        gobuild::ensure_built(program, &module_dir, &bin_dir, false, interrupt).await?;
    }
    Ok(())
}

/// The binaries `build` produces, checked to exist.
///
/// # Errors
/// If they are missing (the message names `cargo xtask controlplane build`).
pub fn binaries() -> anyhow::Result<Binaries> {
    let binaries = Binaries::in_dir(&paths::controlplane_bin_dir());
    binaries.verify()?;
    Ok(binaries)
}

/// Launches a control plane in `dir`, giving up on Ctrl-C.
///
/// # Errors
/// If the launch fails or is interrupted (a partly started control plane is cleaned up).
pub async fn launch(
    dir: &Path,
    supervision: Supervision,
    interrupt: &Interrupt,
) -> anyhow::Result<ControlPlane> {
    launch_with(LaunchOptions::new(binaries()?, dir, supervision), interrupt).await
}

/// Like [`launch`], with the options given (e.g. with audit logging).
///
/// # Errors
/// If the control plane does not start, or on Ctrl-C.
pub async fn launch_with(
    options: LaunchOptions,
    interrupt: &Interrupt,
) -> anyhow::Result<ControlPlane> {
    let dir = options.dir.clone();
    eprintln!(
        "starting etcd and kube-apiserver {KUBERNETES_VERSION} in {}...",
        dir.display()
    );
    let stopwatch = Stopwatch::start();
    let control_plane = tokio::select! {
        launched = ControlPlane::launch(options) => launched?,
        () = interrupt.interrupted() => return Err(Interrupted.into()),
    };
    eprintln!(
        "control plane ready in {}: {}",
        process::seconds(stopwatch.elapsed()),
        control_plane.env().server
    );
    Ok(control_plane)
}

async fn start(dir: &Path, interrupt: &Interrupt) -> anyhow::Result<()> {
    let control_plane = launch(dir, Supervision::Detached, interrupt).await?;
    let env_path = control_plane.env_file_path();
    let env = control_plane.detach();
    eprintln!(
        "logs: {}\nstop it with: cargo xtask controlplane stop --dir {}",
        dir.join("logs").display(),
        dir.display()
    );
    // On stdout alone, so `eval "$(cargo xtask controlplane start)"` works.
    println!("export KUBECONFIG={}", shell_quote(&env.kubeconfig));
    println!("export {}={}", envfile::ENV_VAR, shell_quote(&env_path));
    Ok(())
}

fn stop(dir: &Path) -> anyhow::Result<()> {
    controlplane::stop_detached(dir)
        .with_context(|| format!("stopping the control plane in {}", dir.display()))?;
    eprintln!("stopped the control plane in {}", dir.display());
    Ok(())
}

/// Quotes a path for POSIX shells when it contains anything but safe characters.
fn shell_quote(path: &Path) -> String {
    let text = path.display().to_string();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(shell_quote(Path::new("/a/b-c.d")), "/a/b-c.d");
        assert_eq!(shell_quote(Path::new("/a b")), "'/a b'");
        assert_eq!(shell_quote(Path::new("/it's")), r"'/it'\''s'");
    }

    #[test]
    fn relative_dirs_become_absolute() {
        let args = DirArgs {
            dir: Some(PathBuf::from("cp")),
        };
        assert!(args.dir().is_absolute());
        let default = DirArgs { dir: None };
        assert_eq!(default.dir(), paths::default_run_dir());
    }
}
