//! The demo driver run by `cargo xtask demo`: registers tainted Nodes and a LoadBalancer Service in the cluster
//! of `--kubeconfig`, waits for the reference CCM (running separately) to initialize and provision them, prints
//! tables, and cleans up.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use examples::demo::{DemoOptions, run};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Register kubelet-like Nodes and a LoadBalancer Service and watch a CCM handle them.
#[derive(Debug, Parser)]
#[command(name = "demo")]
struct Args {
    /// The kubeconfig of the cluster the CCM manages.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// How long to wait for each step, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout_seconds: u64,
}

async fn demo(args: Args) -> anyhow::Result<String> {
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config)?;
    let options = DemoOptions {
        timeout: Duration::from_secs(args.timeout_seconds),
        ..DemoOptions::default()
    };
    let mut out = String::new();
    let result = run(client, &options, &mut out).await;
    print!("{out}");
    result.map(|()| out)
}

#[tokio::main]
async fn main() -> ExitCode {
    match demo(Args::parse()).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("demo: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
