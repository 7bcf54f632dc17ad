//! Benchmark: what the node controllers cost in cloud calls, for sizing a CCM's cloud-call budget
//! (`docs/cloud-budget.md`).
//!
//! Against the API server of `KUBECONFIG` (`cargo xtask bench budget` starts a local one), for each node count it
//! creates the nodes as kubelets register them (a tenth of them NotReady), and with the fake cloud wrapped the way
//! the runtime wraps a provider (the cloud-call budget and call metrics, then the instance cache) it measures:
//!
//! 1. **initialization**: the cloud node controller initializes every node, through each cloud-call budget of
//!    `--init-budget` (`fixed`: a token bucket of `--init-qps`/`--init-burst` that does not adapt; `adaptive`:
//!    the runtime's default, no cap, adapting to throttling; `none`: no budget at all) against a cloud quota of
//!    `--quota-rps`/`--quota-burst`; cloud calls per node, time, throttled calls (fresh nodes for every run,
//!    `--repeat` runs per budget, the budgets taking turns);
//! 2. for each variant (native bulk calls off/on × instance cache off/on):
//!    - **one address-sync period** (`CloudNodeController::sync_addresses_once`, a fresh cache: with the default
//!      5-minute period every period starts with an expired cache);
//!    - **lifecycle periods** (`CloudNodeLifecycleController::monitor_nodes`): the first pass (cold cache) and the
//!      next one (warm), and the average per period over one cache TTL at the default 5-second period.
//!
//! Calls are counted in the fake cloud's call log. The nodes carry a unique label and are deleted at the end.
//!
//! ```sh
//! cargo xtask bench budget                       # 1,000 and 5,000 nodes
//! cargo run -p examples --example bench-budget -- --nodes 1000   # against $KUBECONFIG
//! # the adaptive default against no budget at all, without a quota, 3 runs each, initialization only
//! cargo xtask bench budget --nodes 1000 --quota-rps 0 --init-budget adaptive --init-budget none \
//!     --repeat 3 --skip-periods
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ccm_core::CloudProvider;
use ccm_core::budget::{CloudBudget, CloudCallMetrics, RateLimitInterceptor};
use ccm_core::cache::{DEFAULT_INSTANCE_CACHE_TTL, InstanceCache};
use ccm_core::helpers::node_has_taint;
use ccm_core::intercept::InterceptedProvider;
use ccm_core::names;
use ccm_core::runtime::controller::{Controller, ControllerContext};
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_nodecontroller::lifecycle::DEFAULT_NODE_MONITOR_PERIOD;
use ccm_nodecontroller::{
    CloudNodeConfig, CloudNodeController, CloudNodeLifecycleConfig, CloudNodeLifecycleController,
};
use ccm_provider_fake::{FakeCloud, FakeInstance};
use clap::{Parser, ValueEnum};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(
    about = "Cloud calls of the node controllers per period and per node, with and without bulk calls and cache"
)]
struct Args {
    /// Node counts to measure (repeat the flag); default 1000 and 5000.
    #[arg(long = "nodes")]
    nodes: Vec<usize>,
    /// Percentage of the nodes that are NotReady (the lifecycle controller checks those).
    #[arg(long, default_value_t = 10)]
    not_ready_percent: usize,
    /// The cloud-call budgets to initialize through (repeat the flag); default `fixed`.
    #[arg(long = "init-budget", value_enum)]
    init_budgets: Vec<InitBudget>,
    /// The rate of the `fixed` budget, calls per second (0 = unlimited).
    #[arg(long, default_value_t = 45.0)]
    init_qps: f64,
    /// The burst of the `fixed` budget.
    #[arg(long, default_value_t = 40)]
    init_burst: u32,
    /// The fake cloud's quota during initialization, requests per second (0 = none).
    #[arg(long, default_value_t = 50.0)]
    quota_rps: f64,
    /// The burst of that quota (default: the rate, rounded up).
    #[arg(long)]
    quota_burst: Option<u32>,
    /// Initialization runs per budget (the budgets take turns).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Measure initialization only, not the address-sync and lifecycle periods.
    #[arg(long)]
    skip_periods: bool,
    /// The budget used to express per-period calls in seconds of budget.
    #[arg(long, default_value_t = 45.0)]
    budget_qps: f64,
    /// `--concurrent-node-syncs` during initialization.
    #[arg(long, default_value_t = 10)]
    concurrent_node_syncs: usize,
    /// Requests in flight while creating and deleting the nodes (not measured).
    #[arg(long, default_value_t = 32)]
    create_concurrency: usize,
    /// Give up waiting for initialization after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
}

const LABEL: &str = "ccm-bench";

/// A cloud-call budget for the initialization runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum InitBudget {
    /// A token bucket of `--init-qps`/`--init-burst` that does not adapt (the SDK's old default was 50/100).
    Fixed,
    /// The runtime's default: no cap, adapting to the cloud's throttling.
    Adaptive,
    /// No budget at all.
    None,
}

impl InitBudget {
    fn budget(self, args: &Args) -> CloudBudget {
        match self {
            InitBudget::Fixed => CloudBudget::default()
                .with_adaptive(false)
                .with_qps(args.init_qps)
                .with_burst(args.init_burst),
            InitBudget::Adaptive => CloudBudget::default(),
            InitBudget::None => CloudBudget::unlimited(),
        }
    }

    fn describe(self, args: &Args) -> String {
        match self {
            InitBudget::Fixed => format!("fixed {} qps (burst {})", args.init_qps, args.init_burst),
            InitBudget::Adaptive => "adaptive (default)".to_owned(),
            InitBudget::None => "none".to_owned(),
        }
    }
}

/// A node as a kubelet with `--cloud-provider=external` registers it.
fn kubelet_node(name: &str, run: &str, ready: bool) -> Node {
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
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: names::conditions::READY.into(),
                status: if ready { "True" } else { "False" }.into(),
                reason: Some(
                    if ready {
                        "KubeletReady"
                    } else {
                        "KubeletNotReady"
                    }
                    .into(),
                ),
                ..Default::default()
            }]),
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: name.into(),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    node.metadata.name = Some(name.to_owned());
    node.metadata.labels = Some(BTreeMap::from([
        (LABEL.to_owned(), run.to_owned()),
        (names::labels::HOSTNAME.to_owned(), name.to_owned()),
    ]));
    node
}

/// The fake cloud wrapped as the runtime wraps a provider: budget and call metrics, then the instance cache.
fn wrap(
    fake: &FakeCloud,
    budget: &CloudBudget,
    ttl: Duration,
) -> anyhow::Result<Arc<dyn CloudProvider>> {
    let registry = SharedRegistry::new();
    let limiter = RateLimitInterceptor::new(budget, CancellationToken::new())
        .context("the budget is invalid")?;
    Ok(Arc::new(
        InterceptedProvider::new(Arc::new(fake.clone()))
            .with_interceptor(limiter)
            .with_interceptor(CloudCallMetrics::register(&registry))
            .with_instance_cache(Arc::new(InstanceCache::new(ttl))),
    ))
}

fn context(
    client: &kube::Client,
    provider: Arc<dyn CloudProvider>,
    informers: &SharedInformers,
) -> ControllerContext {
    ControllerContext::new(
        client.clone(),
        provider,
        informers.clone(),
        SharedRegistry::new(),
        "kubernetes",
    )
    .with_instance("bench-budget")
}

/// Calls in the fake's log, by operation.
fn calls_by_op(fake: &FakeCloud) -> BTreeMap<String, usize> {
    let mut by_op = BTreeMap::new();
    for call in fake.calls() {
        *by_op.entry(call.op.as_str().to_owned()).or_default() += 1;
    }
    by_op
}

fn show(by_op: &BTreeMap<String, usize>) -> String {
    if by_op.is_empty() {
        return "none".to_owned();
    }
    by_op
        .iter()
        .map(|(op, n)| format!("{n} {op}"))
        .collect::<Vec<_>>()
        .join(", ")
}

struct Init {
    budget: InitBudget,
    took: Duration,
    calls: BTreeMap<String, usize>,
    throttled: usize,
}

struct Variant {
    bulk: bool,
    ttl: Duration,
    sync: BTreeMap<String, usize>,
    sync_took: Duration,
    cold: BTreeMap<String, usize>,
    warm: BTreeMap<String, usize>,
}

fn total(by_op: &BTreeMap<String, usize>) -> usize {
    by_op.values().sum()
}

/// Every initialization run (each budget `--repeat` times, taking turns), then the periods once.
async fn run_count(
    client: &kube::Client,
    args: &Args,
    count: usize,
) -> anyhow::Result<(Vec<Init>, Vec<Variant>)> {
    let mut inits = Vec::new();
    let mut variants = Vec::new();
    let runs: Vec<InitBudget> = (0..args.repeat.max(1))
        .flat_map(|_| args.init_budgets.iter().copied())
        .collect();
    let last = runs.len() - 1;
    for (i, budget) in runs.into_iter().enumerate() {
        let periods = i == last && !args.skip_periods;
        let (init, measured) = run_one(client, args, count, i, budget, periods).await?;
        inits.push(init);
        variants.extend(measured);
    }
    Ok((inits, variants))
}

async fn run_one(
    client: &kube::Client,
    args: &Args,
    count: usize,
    round: usize,
    budget: InitBudget,
    periods: bool,
) -> anyhow::Result<(Init, Vec<Variant>)> {
    let run = format!("b{}-{count}-{round}", std::process::id());
    let selector = format!("{LABEL}={run}");
    let nodes: Api<Node> = Api::all(client.clone());
    let not_ready = count * args.not_ready_percent / 100;
    let names: Vec<String> = (0..count).map(|i| format!("bb-{run}-{i:05}")).collect();

    let fake = FakeCloud::new();
    for (i, name) in names.iter().enumerate() {
        let ip = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        fake.add_instance(
            FakeInstance::new(name)
                .with_internal_ip(ip)
                .with_instance_type("fake.large")
                .with_zone(format!("zone-{}", i % 3), "region-1"),
        );
    }

    eprintln!("[{count}] creating {count} nodes ({not_ready} NotReady, {selector}) ...");
    let created = Instant::now();
    futures::stream::iter(names.iter().enumerate())
        .map(|(i, name)| {
            let nodes = nodes.clone();
            let node = kubelet_node(name, &run, i >= not_ready);
            async move {
                nodes
                    .create(&PostParams::default(), &node)
                    .await
                    .with_context(|| format!("creating node {name}"))?;
                nodes
                    .patch_status(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({ "status": node.status })),
                    )
                    .await
                    .with_context(|| format!("writing the status of node {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.create_concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    eprintln!(
        "[{count}] created in {:.1} s",
        created.elapsed().as_secs_f64()
    );

    let token = CancellationToken::new();
    let informers = SharedInformers::new(
        client.clone(),
        &InformerScope::all()
            .with_node_selector(selector.clone())
            .with_service_namespace("default"),
    );
    tokio::spawn(informers.clone().run(token.clone()));
    informers.nodes().wait_synced().await;

    let result = measure(client, args, count, &fake, &informers, budget, periods).await;

    token.cancel();
    eprintln!("[{count}] deleting the nodes ...");
    nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&selector),
        )
        .await
        .context("deleting the nodes")?;
    result
}

async fn measure(
    client: &kube::Client,
    args: &Args,
    count: usize,
    fake: &FakeCloud,
    informers: &SharedInformers,
    init_budget: InitBudget,
    periods: bool,
) -> anyhow::Result<(Init, Vec<Variant>)> {
    // 1. Initialization through the budget, against the quota.
    if args.quota_rps > 0.0 {
        let burst = args
            .quota_burst
            .unwrap_or(args.quota_rps.ceil().max(1.0) as u32);
        fake.set_quota(args.quota_rps, burst)
            .context("the quota is invalid")?;
    }
    let budget = init_budget.budget(args);
    let provider = wrap(fake, &budget, DEFAULT_INSTANCE_CACHE_TTL)?;
    let ctx = context(client, provider, informers);
    let registry = ctx.metrics.clone();
    let controller = CloudNodeController::new(
        &ctx,
        CloudNodeConfig::default()
            .with_concurrent_node_syncs(args.concurrent_node_syncs)
            // one (empty) pass at the start, none during the measurement
            .with_node_status_update_frequency(Duration::from_secs(3600)),
    )?;
    let stop = CancellationToken::new();
    eprintln!(
        "[{count}] initializing (budget {}, quota {} rps) ...",
        init_budget.describe(args),
        args.quota_rps
    );
    fake.clear_calls();
    let start = Instant::now();
    let task = tokio::spawn(Box::new(controller).run(stop.clone()));
    let deadline = start + Duration::from_secs(args.timeout_secs);
    loop {
        let text = registry.encode();
        let done = text
            .lines()
            .find(|l| l.starts_with("node_controller_initial_node_sync_delay_seconds_count"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0);
        if done as usize >= count {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "only {done} of {count} nodes initialized after {} s",
                args.timeout_secs
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let init = Init {
        budget: init_budget,
        took: start.elapsed(),
        calls: calls_by_op(fake),
        throttled: fake.throttled_count(),
    };
    stop.cancel();
    let _ = task.await;
    fake.clear_quota();
    // the cache must show every node initialized before the periodic passes are measured
    let store = informers.nodes().store();
    while store
        .list()
        .iter()
        .any(|n| node_has_taint(n, names::taints::UNINITIALIZED))
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    eprintln!(
        "[{count}] initialized in {:.2} s, {} calls, {} throttled",
        init.took.as_secs_f64(),
        total(&init.calls),
        init.throttled
    );
    // 2. One period of each loop, per variant; no budget, so only calls are counted.
    let mut variants = Vec::new();
    if !periods {
        return Ok((init, variants));
    }
    for (bulk, ttl) in [
        (false, Duration::ZERO),
        (false, DEFAULT_INSTANCE_CACHE_TTL),
        (true, Duration::ZERO),
        (true, DEFAULT_INSTANCE_CACHE_TTL),
    ] {
        fake.set_bulk(bulk);
        let provider = wrap(fake, &CloudBudget::unlimited(), ttl)?;
        let ctx = context(client, provider, informers);
        let node_controller = CloudNodeController::new(
            &ctx,
            CloudNodeConfig::default().with_concurrent_node_syncs(args.concurrent_node_syncs),
        )?;
        let lifecycle =
            CloudNodeLifecycleController::new(&ctx, CloudNodeLifecycleConfig::default())?;
        fake.clear_calls();
        let started = Instant::now();
        node_controller.sync_addresses_once().await;
        let sync_took = started.elapsed();
        let sync = calls_by_op(fake);
        fake.clear_calls();
        lifecycle.monitor_nodes().await;
        let cold = calls_by_op(fake);
        fake.clear_calls();
        lifecycle.monitor_nodes().await;
        let warm = calls_by_op(fake);
        eprintln!(
            "[{count}] bulk={bulk} ttl={}s: sync {}, lifecycle {} then {}",
            ttl.as_secs(),
            total(&sync),
            total(&cold),
            total(&warm)
        );
        variants.push(Variant {
            bulk,
            ttl,
            sync,
            sync_took,
            cold,
            warm,
        });
    }
    Ok((init, variants))
}

/// Lifecycle calls per period averaged over one cache TTL at the default monitor period: the first pass after
/// the answers expire asks the cloud, the others are answered by the cache.
fn average_per_period(variant: &Variant) -> f64 {
    let periods = (variant.ttl.as_secs_f64() / DEFAULT_NODE_MONITOR_PERIOD.as_secs_f64())
        .floor()
        .max(1.0);
    (total(&variant.cold) as f64 + (periods - 1.0) * total(&variant.warm) as f64) / periods
}

fn report(args: &Args, count: usize, inits: &[Init], variants: &[Variant]) {
    let not_ready = count * args.not_ready_percent / 100;
    println!("\n## {count} nodes ({not_ready} NotReady)\n");
    let quota = if args.quota_rps > 0.0 {
        format!(
            "a quota of {} rps (burst {})",
            args.quota_rps,
            args.quota_burst
                .unwrap_or(args.quota_rps.ceil().max(1.0) as u32)
        )
    } else {
        "no quota".to_owned()
    };
    println!("Initialization against {quota}:\n");
    println!("| budget | time | cloud calls | per node | throttled | calls |");
    println!("|---|---|---|---|---|---|");
    for init in inits {
        let init_calls = total(&init.calls);
        println!(
            "| {} | {:.2} s | {} | {:.2} | {} | {} |",
            init.budget.describe(args),
            init.took.as_secs_f64(),
            init_calls,
            init_calls as f64 / count as f64,
            init.throttled,
            show(&init.calls),
        );
    }
    if variants.is_empty() {
        return;
    }
    println!();
    println!(
        "| bulk | cache TTL | address sync: calls per period | pass time | s of budget at {} qps | lifecycle: 1st pass | next pass (cached) | avg per 5 s period | s of budget at {} qps |",
        args.budget_qps, args.budget_qps
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for v in variants {
        let avg = average_per_period(v);
        println!(
            "| {} | {} | {} ({}) | {:.2} s | {:.1} | {} | {} | {:.1} | {:.1} |",
            if v.bulk { "yes" } else { "no" },
            if v.ttl.is_zero() {
                "0 (coalesce only)".to_owned()
            } else {
                format!("{} s", v.ttl.as_secs())
            },
            total(&v.sync),
            show(&v.sync),
            v.sync_took.as_secs_f64(),
            total(&v.sync) as f64 / args.budget_qps,
            total(&v.cold),
            total(&v.warm),
            avg,
            avg / args.budget_qps,
        );
    }
    for v in variants {
        println!(
            "\nbulk={} ttl={}s lifecycle first pass: {}",
            v.bulk,
            v.ttl.as_secs(),
            show(&v.cold)
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if args.nodes.is_empty() {
        args.nodes = vec![1000, 5000];
    }
    if args.init_budgets.is_empty() {
        args.init_budgets = vec![InitBudget::Fixed];
    }
    if args.nodes.contains(&0)
        || args.concurrent_node_syncs == 0
        || args.create_concurrency == 0
        || args.repeat == 0
    {
        bail!(
            "--nodes, --concurrent-node-syncs, --create-concurrency and --repeat must be greater than 0"
        );
    }
    if args.not_ready_percent > 100 {
        bail!("--not-ready-percent must be at most 100");
    }
    if !(args.budget_qps.is_finite() && args.budget_qps > 0.0) {
        bail!("--budget-qps must be a number greater than 0");
    }
    let config = kube::Config::infer().await.context(
        "no usable kubeconfig: set KUBECONFIG (cargo xtask bench budget starts a local control plane)",
    )?;
    let client = kube::Client::try_from(config).context("building a client")?;
    let mut results = Vec::new();
    for &count in &args.nodes {
        let (inits, variants) = run_count(&client, &args, count).await?;
        results.push((count, inits, variants));
    }
    println!("# Cloud calls of the node controllers (fake cloud, InstancesV2)");
    for (count, inits, variants) in &results {
        report(&args, *count, inits, variants);
    }
    Ok(())
}
