//! `cargo xtask bench aws`: node initialization through a real cloud API. N instances in the EC2 emulator
//! (moto, installed and started by `ccm_testenv::emulator`), N Nodes named after their private DNS names with
//! the uninitialized taint and no providerID, then `aws-ccm --controllers=cloud-node`: the time until every
//! Node is initialized, and the cloud calls per Node counted twice: the AWS requests the emulator answered, and
//! the SDK's own per-operation count (`cloudprovider_api_requests_total`). Once with the provider's native bulk
//! lookups (`--aws-bulk-lookups=true`), once without. A measurement, not a test: nothing asserts a time.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ccm_testenv::emulator::Emulator;
use clap::Args;
use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::nodes::{node_initialized, tainted_node};
use super::support::{self, Cluster, MetricsEndpoint, Table, Tracker, Watchdog};
use crate::process::{self, Interrupt};

/// Arguments of `cargo xtask bench aws`.
#[derive(Debug, Args)]
pub struct AwsArgs {
    /// Instances in the emulator and Nodes in the cluster.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// `--concurrent-node-syncs` of aws-ccm.
    #[arg(long, default_value_t = 10)]
    pub workers: u32,
    /// Build and run the release aws-ccm (the AWS SDK with the workspace's whole-program optimization takes long
    /// on a small machine); default: the dev build.
    #[arg(long)]
    pub release: bool,
    /// Use the aws-ccm already built.
    #[arg(long)]
    pub no_build: bool,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 1200)]
    pub timeout_seconds: u64,
}

/// What one run measured.
#[derive(Debug)]
struct Measured {
    bulk: bool,
    all: Duration,
    aws_requests: usize,
    sdk_calls: BTreeMap<String, f64>,
    load: Option<f64>,
}

/// The EC2 query API of the emulator, spoken directly (xtask does not link the AWS SDK): enough to seed it.
struct Ec2<'a> {
    emulator: &'a Emulator,
}

impl Ec2<'_> {
    async fn call(&self, params: &[(&str, String)]) -> anyhow::Result<String> {
        let body: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", v.replace('/', "%2F")))
            .chain(["Version=2016-11-15".to_owned()])
            .collect();
        let port = self.emulator.port();
        let body = body.join("&");
        let answer = tokio::task::spawn_blocking(move || post(port, &body))
            .await
            .context("joining the emulator request")??;
        if !answer.starts_with("HTTP/1.1 200") && !answer.starts_with("HTTP/1.0 200") {
            bail!(
                "the emulator refused {params:?}: {}",
                answer.lines().next().unwrap_or_default()
            );
        }
        Ok(answer)
    }
}

fn post(port: u16, body: &str) -> anyhow::Result<String> {
    use std::io::{Read as _, Write as _};
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).context("connecting to the emulator")?;
    write!(
        stream,
        "POST / HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/ec2/aws4_request, \
         SignedHeaders=host, Signature=00\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Every text between `<tag>` and `</tag>` in `xml`.
fn elements<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = &rest[start + open.len()..];
        let Some(end) = rest.find(&close) else { break };
        out.push(&rest[..end]);
        rest = &rest[end + close.len()..];
    }
    out
}

/// A VPC, a subnet and `count` instances; their private DNS names.
async fn seed(emulator: &Emulator, count: usize) -> anyhow::Result<Vec<String>> {
    let ec2 = Ec2 { emulator };
    let vpc = ec2
        .call(&[
            ("Action", "CreateVpc".into()),
            ("CidrBlock", "10.0.0.0/16".into()),
        ])
        .await?;
    let vpc = elements(&vpc, "vpcId")
        .first()
        .context("no vpcId")?
        .to_string();
    let subnet = ec2
        .call(&[
            ("Action", "CreateSubnet".into()),
            ("VpcId", vpc),
            ("CidrBlock", "10.0.0.0/16".into()),
            ("AvailabilityZone", "us-east-1a".into()),
        ])
        .await?;
    let subnet = elements(&subnet, "subnetId")
        .first()
        .context("no subnetId")?
        .to_string();
    let mut names = Vec::with_capacity(count);
    while names.len() < count {
        let batch = (count - names.len()).min(100);
        let answer = ec2
            .call(&[
                ("Action", "RunInstances".into()),
                ("ImageId", "ami-12c6146b".into()),
                ("InstanceType", "m5.large".into()),
                ("SubnetId", subnet.clone()),
                ("MinCount", batch.to_string()),
                ("MaxCount", batch.to_string()),
            ])
            .await?;
        names.extend(
            elements(&answer, "privateDnsName")
                .into_iter()
                .map(str::to_owned),
        );
    }
    names.truncate(count);
    Ok(names)
}

/// Runs `cargo xtask bench aws`.
///
/// # Errors
/// A failed build, emulator or run.
pub async fn run(args: &AwsArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let profile = if args.release { "release" } else { "debug" };
    if !args.no_build {
        crate::controlplane::build(&Default::default(), interrupt).await?;
        let mut build = process::cargo();
        build.args(["build", "-p", "ccm-provider-aws", "--bin", "aws-ccm"]);
        if args.release {
            build.arg("--release");
        }
        process::run(build, interrupt, "").await?;
    }
    let binary = crate::paths::target_dir().join(profile).join("aws-ccm");
    if !binary.is_file() {
        bail!("{} is missing; run without --no-build", binary.display());
    }
    let out = support::output_dir("aws")?;
    eprintln!("starting the cloud emulator (installed on first use)");
    let emulator = tokio::task::spawn_blocking(Emulator::start)
        .await
        .context("joining the emulator start")?
        .context("starting the cloud emulator")?;
    let mut results = Vec::new();
    for bulk in [true, false] {
        eprintln!(
            "\n== {} Nodes, bulk lookups {}",
            args.nodes,
            if bulk { "on" } else { "off" }
        );
        emulator.reset().context("resetting the emulator")?;
        let names = seed(&emulator, args.nodes).await?;
        let cluster = Cluster::start(interrupt).await?;
        let measured = measure(
            args, &binary, &emulator, &cluster, &names, bulk, &out, interrupt,
        )
        .await;
        let stopped = cluster.stop();
        results.push(measured?);
        stopped?;
    }
    let mut table = Table::new(&[
        "aws-ccm",
        "Nodes",
        "all initialized",
        "AWS requests",
        "per Node",
        "SDK cloud calls by operation",
        "load average",
    ]);
    for m in &results {
        let calls: Vec<String> = m
            .sdk_calls
            .iter()
            .map(|(op, n)| format!("{op} {n}"))
            .collect();
        table.push(vec![
            format!(
                "{profile}, bulk lookups {}",
                if m.bulk { "on" } else { "off" }
            ),
            args.nodes.to_string(),
            process::seconds(m.all),
            m.aws_requests.to_string(),
            format!("{:.3}", m.aws_requests as f64 / args.nodes.max(1) as f64),
            calls.join(", "),
            m.load.map_or_else(|| "?".to_owned(), |l| format!("{l:.2}")),
        ]);
    }
    println!(
        "\nNode initialization through the EC2 emulator: {} instances, {} Nodes registered with the \
         uninitialized taint (no providerID: found by private DNS name), aws-ccm --controllers=cloud-node \
         --concurrent-node-syncs={}; fresh control plane per run\n",
        args.nodes, args.nodes, args.workers
    );
    println!("{}", table.render());
    println!("\nCCM logs: {}", out.display());
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    args: &AwsArgs,
    binary: &std::path::Path,
    emulator: &Emulator,
    cluster: &Cluster,
    names: &[String],
    bulk: bool,
    out: &std::path::Path,
    interrupt: &Interrupt,
) -> anyhow::Result<Measured> {
    let timeout = Duration::from_secs(args.timeout_seconds);
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    support::create_all(
        &nodes,
        names.iter().map(|n| tainted_node(n)).collect(),
        32,
        interrupt,
    )
    .await?;
    let mut tracker = Tracker::start(nodes.clone(), node_initialized);
    tracker
        .wait_until(
            "the watch to list every node",
            |p| p.seen >= names.len(),
            timeout,
            None,
            interrupt,
        )
        .await?;
    let load = support::load_average();
    let port = support::free_port()?;
    let log = out.join(format!("aws-ccm-bulk-{bulk}.log"));
    let file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let admin = cluster.kubeconfig.display().to_string();
    let before = emulator.requests();
    let started = Instant::now();
    let mut child = tokio::process::Command::new(binary)
        .args([
            format!("--kubeconfig={admin}"),
            "--controllers=cloud-node".to_owned(),
            "--leader-elect=false".to_owned(),
            "--cluster-name=bench".to_owned(),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--authentication-kubeconfig={admin}"),
            format!("--authorization-kubeconfig={admin}"),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
            format!("--concurrent-node-syncs={}", args.workers),
            format!("--aws-bulk-lookups={bulk}"),
        ])
        .envs(emulator.aws_env())
        .stdin(Stdio::null())
        .stdout(Stdio::from(file.try_clone()?))
        .stderr(Stdio::from(file))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let watchdog = child.id().map(Watchdog::watch).transpose()?;
    let done = tracker
        .wait_until(
            "every node to be initialized",
            |p| p.done >= names.len(),
            timeout,
            None,
            interrupt,
        )
        .await;
    let all = match &done {
        Ok(at) => at.saturating_duration_since(started),
        Err(_) => started.elapsed(),
    };
    let aws_requests = emulator.requests().saturating_sub(before);
    let samples = MetricsEndpoint::loopback(port)?
        .scrape()
        .await
        .unwrap_or_default();
    let sdk_calls = super::nodes::cloud_calls_by_operation(&samples);
    let _ = child.kill().await;
    if let Some(watchdog) = watchdog {
        watchdog.dismiss().await;
    }
    done.map_err(|err| anyhow::anyhow!("{err:#} (log: {})", log.display()))?;
    eprintln!(
        "all {} nodes initialized after {}",
        names.len(),
        process::seconds(all)
    );
    Ok(Measured {
        bulk,
        all,
        aws_requests,
        sdk_calls,
        load,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_read_in_order() {
        let xml = "<a><privateDnsName>x</privateDnsName><b/><privateDnsName>y</privateDnsName></a>";
        assert_eq!(elements(xml, "privateDnsName"), ["x", "y"]);
        assert!(elements("<privateDnsName>unclosed", "privateDnsName").is_empty());
    }
}
