//! `cargo xtask demo`: the SDK in one command. Builds what it needs (the control plane binaries and the
//! examples), starts a local kube-apiserver + etcd, runs the reference CCM (`examples --example reference-ccm`,
//! fake provider, `examples/inventory.yaml`) against it, registers tainted Nodes and a LoadBalancer Service
//! (`examples --example demo`), prints them initialized and provisioned, then stops everything.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use ccm_testenv::controlplane::Supervision;
use clap::Args;

use crate::controlplane;
use crate::paths;
use crate::process::{self, Interrupt, Interrupted};

/// How long the reference CCM may take to stop after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Arguments of `cargo xtask demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How long to wait for each step of the demo, in seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout_seconds: u64,
}

/// The reference CCM's command line for the control plane's kubeconfig.
pub fn ccm_args(kubeconfig: &Path, inventory: &Path) -> Vec<String> {
    vec![
        "--cloud-provider=fake".to_owned(),
        format!("--cloud-config={}", inventory.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
        "--leader-elect=true".to_owned(),
        "--secure-port=0".to_owned(),
        "--v=2".to_owned(),
    ]
}

fn example_binary(name: &str) -> PathBuf {
    paths::target_dir()
        .join("debug")
        .join("examples")
        .join(name)
}

/// Runs `cargo xtask demo`.
///
/// # Errors
/// If a build fails, the control plane does not start, or the CCM does not initialize the nodes and provision the
/// load balancer in time.
pub async fn run(args: &DemoArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    controlplane::build_api_server(interrupt).await?;
    let mut build = process::cargo();
    build.args([
        "build",
        "-p",
        "examples",
        "--example",
        "reference-ccm",
        "--example",
        "demo",
    ]);
    process::run(build, interrupt, "").await?;

    let dir = paths::target_dir()
        .join("controlplane")
        .join(format!("demo-{}", std::process::id()));
    let control_plane = controlplane::launch(&dir, Supervision::Watchdog, interrupt).await?;
    let kubeconfig = control_plane.env().kubeconfig.clone();

    let log_dir = paths::target_dir().join("demo");
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let log_path = log_dir.join("reference-ccm.log");
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let inventory = paths::workspace_root()
        .join("examples")
        .join("inventory.yaml");
    let mut ccm = tokio::process::Command::new(example_binary("reference-ccm"));
    ccm.args(ccm_args(&kubeconfig, &inventory))
        .stdin(Stdio::null())
        .stdout(Stdio::from(
            log.try_clone().context("duplicating the log file handle")?,
        ))
        .stderr(Stdio::from(log))
        .kill_on_drop(true);
    eprintln!("starting the reference CCM (log: {})", log_path.display());
    let mut ccm = ccm.spawn().context("starting the reference CCM")?;

    let mut driver = tokio::process::Command::new(example_binary("demo"));
    driver
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--timeout-seconds")
        .arg(args.timeout_seconds.to_string());
    let demo_result = process::run(driver, interrupt, "").await;

    let stop_result = stop_gracefully(&mut ccm).await;
    let stop_plane = control_plane.stop();
    match (&demo_result, &stop_result) {
        (Err(err), _) if err.is::<Interrupted>() => {}
        (Err(_), _) | (_, Err(_)) => eprintln!("the reference CCM's log: {}", log_path.display()),
        _ => {}
    }
    demo_result?;
    stop_result?;
    stop_plane.context("stopping the control plane")?;
    eprintln!("stopped the reference CCM and the control plane");
    Ok(())
}

/// SIGTERM, then wait; the CCM must exit 0 (controllers stopped, lease released).
async fn stop_gracefully(child: &mut tokio::process::Child) -> anyhow::Result<()> {
    if let Some(status) = child.try_wait().context("checking the reference CCM")? {
        bail!("the reference CCM exited early with {status}");
    }
    let Some(pid) = child.id() else {
        bail!("the reference CCM has no process id");
    };
    let sent = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .context("sending SIGTERM to the reference CCM")?;
    if !sent.success() {
        bail!("`kill -TERM {pid}` failed with {sent}");
    }
    match tokio::time::timeout(STOP_TIMEOUT, child.wait()).await {
        Ok(Ok(status)) if status.success() => {
            eprintln!("the reference CCM shut down cleanly after SIGTERM (lease released)");
            Ok(())
        }
        Ok(Ok(status)) => bail!("the reference CCM exited with {status} after SIGTERM"),
        Ok(Err(err)) => Err(err).context("waiting for the reference CCM"),
        Err(_) => {
            let _ = child.kill().await;
            bail!("the reference CCM did not stop within {STOP_TIMEOUT:?} of SIGTERM; killed it")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccm_command_line() {
        let args = ccm_args(
            Path::new("/tmp/kubeconfig"),
            Path::new("/w/examples/inventory.yaml"),
        );
        assert!(args.contains(&"--cloud-provider=fake".to_owned()));
        assert!(args.contains(&"--kubeconfig=/tmp/kubeconfig".to_owned()));
        assert!(args.contains(&"--cloud-config=/w/examples/inventory.yaml".to_owned()));
        assert!(example_binary("demo").ends_with("debug/examples/demo"));
    }
}
