//! Benchmark (not a test) of the service controller against a real cluster named by `KUBECONFIG`, with the
//! fake cloud.
//!
//! 1. Creates `--services` (500) `type: LoadBalancer` Services and measures how long until every one has an
//!    ingress IP in its status.
//! 2. Makes a burst of `--node-changes` (100) node changes (new nodes) and counts the `UpdateLoadBalancer` calls
//!    the cloud receives until every load balancer has every node. The Go reference makes one pass over every
//!    load balancer per node event (up to 100 × 500 = 50,000 calls); this controller coalesces the burst.
//! 3. Deletes everything it created and checks that the cloud holds no load balancer afterwards.
//!
//! ```text
//! eval "$(cargo xtask controlplane start)"
//! cargo run --release -p examples --example bench-lb -- --services 500 --node-changes 100
//! ```
//!
//! Options: `--services N`, `--initial-nodes N` (10), `--node-changes N`, `--workers N`
//! (`concurrent_service_syncs`, default 1 as in Go), `--debounce-ms N` (the opt-in node-change quiet period;
//! default: the controller's default, 0 = none: a change starts a pass at once when none runs, changes during a
//! pass share the next one), `--node-change-interval-ms N` (spread the node changes; default 0 = all at once, 16
//! in flight).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ccm_core::runtime::controller::ControllerContext;
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_provider_fake::{FakeCloud, Operation};
use ccm_servicecontroller::{Config, ServiceController};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, NodeSpec, Service, ServicePort, ServiceSpec};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio_util::sync::CancellationToken;

struct Options {
    services: usize,
    initial_nodes: usize,
    node_changes: usize,
    workers: usize,
    debounce: Duration,
    interval: Duration,
}

fn parse_options() -> anyhow::Result<Options> {
    let mut o = Options {
        services: 500,
        initial_nodes: 10,
        node_changes: 100,
        workers: 1,
        debounce: Config::default().node_sync_debounce,
        interval: Duration::ZERO,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .with_context(|| format!("{flag} {value:?} is not a number"))?;
        let n_usize = usize::try_from(n).context("value too large")?;
        match flag.as_str() {
            "--services" => o.services = n_usize,
            "--initial-nodes" => o.initial_nodes = n_usize,
            "--node-changes" => o.node_changes = n_usize,
            "--workers" => o.workers = n_usize,
            "--debounce-ms" => o.debounce = Duration::from_millis(n),
            "--node-change-interval-ms" => o.interval = Duration::from_millis(n),
            other => bail!(
                "unknown option {other}; use --services, --initial-nodes, --node-changes, --node-change-interval-ms, --workers or --debounce-ms"
            ),
        }
    }
    Ok(o)
}

fn node(name: &str, label: &str) -> Node {
    let mut n = Node {
        spec: Some(NodeSpec {
            provider_id: Some(format!("fake://{name}")),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n.metadata.labels = Some([("ccm-bench".to_string(), label.to_string())].into());
    n
}

fn lb_service(name: &str) -> Service {
    let mut s = Service {
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    s.metadata.name = Some(name.into());
    s
}

async fn poll<F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let started = Instant::now();
    let mut reported = started;
    loop {
        if check().await? {
            return Ok(());
        }
        if started.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        if reported.elapsed() > Duration::from_secs(10) {
            eprintln!("  ... still waiting for {what} ({:.0?})", started.elapsed());
            reported = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn create_all<K, I>(api: &Api<K>, objects: I) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    I: IntoIterator<Item = K>,
{
    futures::stream::iter(objects)
        .map(|o| async move { api.create(&PostParams::default(), &o).await.map(|_| ()) })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let o = parse_options()?;
    let client = kube::Client::try_default()
        .await
        .context("building a client from KUBECONFIG (start a control plane with `cargo xtask controlplane start`)")?;
    let id = format!("{:08x}", rand::random::<u32>());
    let label = format!("bench-{id}");
    let ns = format!("bench-lb-{id}");
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.clone());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .context("creating the namespace")?;
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);

    create_all(
        &nodes,
        (0..o.initial_nodes).map(|i| node(&format!("{label}-init-{i}"), &label)),
    )
    .await?;

    let fake = FakeCloud::new();
    // The default pool (203.0.113.0/24) has 254 addresses.
    fake.set_load_balancer_ip_pool("10.200.0.0/16".parse().context("a valid pool")?);
    let informers = SharedInformers::new(
        client.clone(),
        &InformerScope::all()
            .with_node_selector(format!("ccm-bench={label}"))
            .with_service_namespace(ns.clone()),
    );
    let registry = SharedRegistry::new();
    let ctx = ControllerContext::new(
        client.clone(),
        Arc::new(fake.clone()),
        informers.clone(),
        registry.clone(),
        "kubernetes",
    );
    let config = Config::default()
        .with_concurrent_service_syncs(o.workers)
        .with_node_sync_debounce(o.debounce)
        .with_node_sync_max_delay(o.debounce.max(Duration::from_secs(10)));
    let controller = ServiceController::new(&ctx, config)?;
    let token = CancellationToken::new();
    let informer_task = tokio::spawn(informers.clone().run(token.clone()));
    let controller_task = tokio::spawn(controller.run(token.clone()));
    informers.wait_synced().await;

    // Phase 1: time to ingress.
    let started = Instant::now();
    create_all(
        &services,
        (0..o.services).map(|i| lb_service(&format!("svc-{i}"))),
    )
    .await?;
    let created = started.elapsed();
    poll(
        "every Service to get an ingress",
        Duration::from_secs(1800),
        || async {
            let list = services.list(&ListParams::default()).await?;
            let ready = list
                .items
                .iter()
                .filter(|s| {
                    s.status
                        .as_ref()
                        .and_then(|st| st.load_balancer.as_ref())
                        .and_then(|lb| lb.ingress.as_ref())
                        .is_some_and(|i| !i.is_empty())
                })
                .count();
            Ok(ready == o.services)
        },
    )
    .await?;
    let to_ingress = started.elapsed();
    let ensures = fake.call_count(Operation::EnsureLoadBalancer);

    // Phase 2: a burst of node changes.
    fake.clear_calls();
    let burst_started = Instant::now();
    if o.interval.is_zero() {
        create_all(
            &nodes,
            (0..o.node_changes).map(|i| node(&format!("{label}-new-{i}"), &label)),
        )
        .await?;
    } else {
        for i in 0..o.node_changes {
            nodes
                .create(
                    &PostParams::default(),
                    &node(&format!("{label}-new-{i}"), &label),
                )
                .await?;
            tokio::time::sleep(o.interval).await;
        }
    }
    let burst_took = burst_started.elapsed();
    let total_nodes = o.initial_nodes + o.node_changes;
    poll(
        "every load balancer to have every node",
        Duration::from_secs(1800),
        || async {
            let lbs = fake.load_balancers();
            Ok(lbs.len() == o.services && lbs.iter().all(|lb| lb.hosts.len() == total_nodes))
        },
    )
    .await?;
    let converged = burst_started.elapsed();
    // Wait for quiet: no further host update for 3 s.
    let mut last = fake.call_count(Operation::UpdateLoadBalancer);
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = fake.call_count(Operation::UpdateLoadBalancer);
        if now == last {
            break;
        }
        last = now;
    }
    let updates = last;

    println!(
        "service controller benchmark (workers {}, node-change quiet period {:?})",
        o.workers, o.debounce
    );
    println!(
        "  {} LoadBalancer Services: created in {:.2?}, all with an ingress after {:.2?} ({:.1} Services/s, {} ensure calls)",
        o.services,
        created,
        to_ingress,
        o.services as f64 / to_ingress.as_secs_f64(),
        ensures
    );
    println!(
        "  {} node changes (made in {:.2?}) with {} load balancers: {} UpdateLoadBalancer calls, hosts converged after {:.2?}",
        o.node_changes, burst_took, o.services, updates, converged
    );
    println!(
        "  reference (one host update per load balancer per node event): {} calls",
        o.node_changes * o.services
    );
    for line in registry.encode().lines() {
        if line.starts_with("service_controller_loadbalancer_sync_total")
            || line.starts_with("service_controller_nodesync_latency_seconds_count")
            || line.starts_with("service_controller_nodesync_latency_seconds_sum")
        {
            println!("  {line}");
        }
    }

    // Clean up: the controller deletes the load balancers and releases the finalizers.
    let cleanup = Instant::now();
    services
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    poll(
        "every Service to be deleted",
        Duration::from_secs(1800),
        || async {
            Ok(services
                .list(&ListParams::default())
                .await?
                .items
                .is_empty())
        },
    )
    .await?;
    let leaked = fake.load_balancers().len();
    println!(
        "  cleanup: {} Services deleted in {:.2?}; load balancers left in the cloud: {leaked}",
        o.services,
        cleanup.elapsed()
    );
    token.cancel();
    controller_task.await?;
    informer_task.await?;
    nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&format!("ccm-bench={label}")),
        )
        .await?;
    Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await?;
    if leaked != 0 {
        bail!("{leaked} load balancers leaked");
    }
    Ok(())
}
