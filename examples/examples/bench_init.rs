//! Benchmark: how fast the cloud node controller initializes many nodes registered at once, and what it costs.
//!
//! Against the API server of `KUBECONFIG` (for example `eval "$(cargo xtask controlplane start)"`), it creates N
//! Nodes as kubelets with `--cloud-provider=external` would (the uninitialized taint, a hostname address), then
//! runs the cloud node controller with the fake cloud until every node is initialized, and prints:
//!
//! - the time from the controller's start until all nodes are initialized;
//! - the controller's API requests by verb and resource, counted by a tower layer on its client;
//! - the cloud calls per node.
//!
//! ```sh
//! cargo run --release -p examples --example bench-init -- --nodes 1000 --concurrent-node-syncs 10
//! ```
//!
//! The nodes carry a unique label and are deleted at the end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ccm_core::names;
use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_nodecontroller::{CloudNodeConfig, CloudNodeController};
use ccm_provider_fake::{Capability, FakeCloud, FakeInstance};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, Taint};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(about = "Time the cloud node controller initializing many nodes at once")]
struct Args {
    /// How many nodes to create.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// `--concurrent-node-syncs` of the controller.
    #[arg(long, default_value_t = 1)]
    concurrent_node_syncs: usize,
    /// Use the V1 Instances + Zones API instead of InstancesV2.
    #[arg(long)]
    v1: bool,
    /// Requests in flight while creating the nodes (not measured).
    #[arg(long, default_value_t = 32)]
    create_concurrency: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Instead of the Rust controller, time this command (for example the Go reference CCM, started with
    /// `--controllers=cloud-node`) initializing the nodes; only the time is measured then. Split on whitespace.
    #[arg(long)]
    external_command: Option<String>,
}

/// Counts requests by "VERB resource[/subresource]".
#[derive(Clone, Default)]
struct RequestCounter(Arc<Mutex<BTreeMap<String, u64>>>);

impl RequestCounter {
    fn record(&self, req: &http::Request<kube::client::Body>) {
        let key = classify(req.method(), req.uri());
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default() += 1;
    }

    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `GET nodes (list)`, `GET nodes (watch)`, `PATCH nodes/status`, `POST events`, ...
fn classify(method: &http::Method, uri: &http::Uri) -> String {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    // /api/v1/<res>[/name[/sub]] or /apis/<group>/<version>/[namespaces/<ns>/]<res>[/name[/sub]]
    let rest: &[&str] = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or_default(),
        Some(&"apis") => segments.get(3..).unwrap_or_default(),
        _ => &segments,
    };
    let rest = if rest.first() == Some(&"namespaces") && rest.len() > 2 {
        &rest[2..]
    } else {
        rest
    };
    let resource = rest.first().copied().unwrap_or("?");
    let sub = rest.get(2).map(|s| format!("/{s}")).unwrap_or_default();
    let watch = uri
        .query()
        .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    let kind = match (method.as_str(), rest.len(), watch) {
        ("GET", _, true) => " (watch)",
        ("GET", 1, false) => " (list)",
        _ => "",
    };
    format!("{method} {resource}{sub}{kind}")
}

fn is_write(key: &str) -> bool {
    !key.starts_with("GET ")
}

fn bench_node(name: &str, run: &str) -> Node {
    let mut node = Node {
        spec: Some(NodeSpec {
            taints: Some(vec![Taint {
                key: names::taints::UNINITIALIZED.into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    node.metadata.name = Some(name.to_owned());
    node.metadata.labels = Some(BTreeMap::from([
        ("ccm-bench".to_owned(), run.to_owned()),
        (names::labels::HOSTNAME.to_owned(), name.to_owned()),
    ]));
    node
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.nodes == 0 || args.concurrent_node_syncs == 0 {
        bail!("--nodes and --concurrent-node-syncs must be greater than 0");
    }
    let config = kube::Config::infer().await.context(
        "no usable kubeconfig: set KUBECONFIG (e.g. eval \"$(cargo xtask controlplane start)\")",
    )?;
    let plain = kube::Client::try_from(config.clone()).context("building a client")?;
    let counter = RequestCounter::default();
    let layer = {
        let counter = counter.clone();
        tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
            counter.record(&req);
            req
        })
    };
    let counted = kube::client::ClientBuilder::try_from(config)
        .context("building the counted client")?
        .with_layer(&layer)
        .build();

    let run = format!("b{}", std::process::id());
    let selector = format!("ccm-bench={run}");
    let nodes: Api<Node> = Api::all(plain.clone());
    let names: Vec<String> = (0..args.nodes)
        .map(|i| format!("bench-{run}-{i:05}"))
        .collect();

    // The cloud knows every instance.
    let fake = FakeCloud::new();
    if args.v1 {
        fake.set_capability(Capability::InstancesV2, false);
    }
    for (i, name) in names.iter().enumerate() {
        let ip = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        fake.add_instance(
            FakeInstance::new(name)
                .with_internal_ip(ip)
                .with_instance_type("fake.large")
                .with_zone(format!("zone-{}", i % 3), "region-1"),
        );
    }

    eprintln!("creating {} tainted nodes ({selector}) ...", args.nodes);
    let created = Instant::now();
    futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let nodes = nodes.clone();
            let run = run.clone();
            async move {
                nodes
                    .create(&PostParams::default(), &bench_node(&name, &run))
                    .await
                    .with_context(|| format!("creating node {name}"))?;
                let status = NodeStatus {
                    addresses: Some(vec![NodeAddress {
                        type_: "Hostname".into(),
                        address: name.clone(),
                    }]),
                    ..Default::default()
                };
                nodes
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({ "status": status })),
                    )
                    .await
                    .with_context(|| format!("writing the status of node {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.create_concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    eprintln!("created in {:.1?}", created.elapsed());

    let informers = SharedInformers::new(
        counted.clone(),
        &InformerScope::all().with_node_selector(&selector),
    );
    let registry = SharedRegistry::new();
    let ctx = ControllerContext::new(
        counted,
        Arc::new(fake.clone()),
        informers.clone(),
        registry.clone(),
        "kubernetes",
    )
    .with_instance("bench-init");
    let token = CancellationToken::new();
    let controller = CloudNodeController::new(
        &ctx,
        CloudNodeConfig::default().with_concurrent_node_syncs(args.concurrent_node_syncs),
    )?;

    let start = Instant::now();
    let informer_task = tokio::spawn(informers.clone().run(token.clone()));
    let mut external = None;
    let controller_task = match &args.external_command {
        None => Some(tokio::spawn(Box::new(controller).run(token.clone()))),
        Some(command) => {
            let mut parts = command.split_whitespace();
            let program = parts.next().context("--external-command is empty")?;
            let child = tokio::process::Command::new(program)
                .args(parts)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting {program}"))?;
            external = Some(child);
            None
        }
    };
    let store = informers.nodes().store();
    let deadline = start + Duration::from_secs(args.timeout_secs);
    let mut last_report = Instant::now();
    let all_done = loop {
        let pending = store
            .list()
            .iter()
            .filter(|n| ccm_core::helpers::node_has_taint(n, names::taints::UNINITIALIZED))
            .count();
        let seen = store.len();
        if seen == args.nodes && pending == 0 {
            break start.elapsed();
        }
        if Instant::now() > deadline {
            token.cancel();
            bail!("timed out with {pending} of {seen} nodes still tainted");
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "  {:>6.1?}: {} initialized",
                start.elapsed(),
                seen - pending
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Let the in-flight events and the last queue passes settle before reading the counters.
    tokio::time::sleep(Duration::from_secs(2)).await;
    token.cancel();
    if let Some(task) = controller_task {
        task.await
            .context("controller task")?
            .map_err(|e| anyhow::anyhow!("controller failed: {e}"))?;
    }
    if let Some(mut child) = external {
        child
            .kill()
            .await
            .context("stopping the external command")?;
    }
    informer_task.await.context("informer task")?;

    let requests = counter.snapshot();
    let calls = fake.calls();
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for call in &calls {
        *per_node.entry(call.op.as_str()).or_default() += 1;
    }
    let writes: u64 = requests
        .iter()
        .filter(|(k, _)| is_write(k))
        .map(|(_, v)| v)
        .sum();
    let reads: u64 = requests
        .iter()
        .filter(|(k, _)| !is_write(k))
        .map(|(_, v)| v)
        .sum();

    println!("nodes:                  {}", args.nodes);
    if let Some(command) = &args.external_command {
        println!("controller:             external: {command}");
        println!(
            "all initialized after:  {:.2?} ({:.0} nodes/s)",
            all_done,
            args.nodes as f64 / all_done.as_secs_f64()
        );
        println!("(API requests and cloud calls are only counted for the Rust controller)");
        eprintln!("deleting the nodes ...");
        nodes
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&selector),
            )
            .await
            .context("deleting the bench nodes")?;
        return Ok(());
    }
    println!(
        "instance API:           {}",
        if args.v1 {
            "V1 (Instances + Zones)"
        } else {
            "InstancesV2"
        }
    );
    println!("concurrent node syncs:  {}", args.concurrent_node_syncs);
    println!(
        "all initialized after:  {:.2?} ({:.0} nodes/s)",
        all_done,
        args.nodes as f64 / all_done.as_secs_f64()
    );
    println!(
        "API requests by the controller (writes {writes}, reads {reads}; {:.2} writes/node):",
        writes as f64 / args.nodes as f64
    );
    for (key, count) in &requests {
        println!("  {key:<28} {count:>7}");
    }
    println!(
        "cloud calls: {} ({:.2}/node)",
        calls.len(),
        calls.len() as f64 / args.nodes as f64
    );
    for (op, count) in &per_node {
        println!(
            "  {op:<34} {count:>7} ({:.2}/node)",
            *count as f64 / args.nodes as f64
        );
    }

    eprintln!("deleting the nodes ...");
    nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&selector),
        )
        .await
        .context("deleting the bench nodes")?;
    Ok(())
}
