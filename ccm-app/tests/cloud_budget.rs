//! The cloud-call budget, the instance cache and bulk calls at scale: a whole CCM (the node and lifecycle
//! controllers, built by the runtime from its flags) against the real kube-apiserver and a fake cloud that enforces
//! a quota of 50 requests per second, with 1,000 nodes.
//!
//! - With `--cloud-api-qps=45` the CCM initializes every node and checks every NotReady node without a single
//!   throttled call; the budget, not the cloud, sets the pace.
//! - With the default (adaptive) budget and a quota of 50 requests/s (burst 100), the CCM learns the quota from
//!   the cloud's answers: at most 5 % of its calls are throttled, and initialization takes at most 1.2x the
//!   ideal (calls / quota), with the lifecycle controller's sweeps waiting behind it.
//! - With no quota, the adaptive default never makes a call wait: it costs nothing over no budget at all.
//! - With a provider that answers bulk calls, one address-sync period is one cloud call for all 1,000 nodes.
//! - The instance cache keeps metadata, never existence answers, and the runtime's invalidator follows Node events:
//!   a changed Ready condition forgets kept answers.

mod support;

use std::time::{Duration, Instant};

use ccm_app::RunningCcm;
use ccm_core::{ProviderRegistry, names};
use ccm_provider_fake::{FakeCloud, FakeInstance, Operation};
use ccm_testenv::{TestEnv, wait_for};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use support::{ALLOW_ADMIN_PATHS, TEST_LABEL, ccm, delete_nodes, https_get, initialized, metric};

const NODES: usize = 1000;
/// Every tenth node is NotReady, so the lifecycle controller has work (and cloud calls) too.
const NOT_READY_EVERY: usize = 10;
const NOT_READY: usize = NODES / NOT_READY_EVERY;
const QUOTA_RPS: f64 = 50.0;
const QUOTA_BURST: u32 = 50;
/// The quota of the cloud the adaptive default is measured against: 50 requests per second, burst 100.
const ADAPTIVE_QUOTA: (f64, u32) = (50.0, 100);
const BUDGET_QPS: f64 = 45.0;
const BUDGET_BURST: u32 = 40;
/// How long converging at scale may take on a loaded 2-core machine.
const LONG: Duration = Duration::from_secs(150);
/// Requests in flight while creating the nodes.
const CREATE_CONCURRENCY: usize = 32;

/// One test's nodes and their instances in a fake cloud with a quota.
struct World {
    client: kube::Client,
    label: String,
    namespace: String,
    cloud: FakeCloud,
}

impl World {
    /// `count` nodes labelled for this test (every tenth NotReady, starting with the first), created in
    /// parallel; `initialized` nodes already have their providerID and no uninitialized taint (as after a
    /// previous CCM run).
    async fn new(prefix: &str, count: usize, initialized: bool, bulk: bool) -> World {
        Self::with_quota(
            prefix,
            count,
            initialized,
            bulk,
            Some((QUOTA_RPS, QUOTA_BURST)),
        )
        .await
    }

    /// The same with the cloud's quota (requests per second, burst), or none.
    async fn with_quota(
        prefix: &str,
        count: usize,
        initialized: bool,
        bulk: bool,
        quota: Option<(f64, u32)>,
    ) -> World {
        let env = TestEnv::shared().await;
        let client = env.client();
        let label = env.unique_name(prefix);
        let namespace = env.namespace(prefix).await;
        let cloud = FakeCloud::new();
        let names: Vec<String> = (0..count).map(|i| format!("{label}-{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            cloud.add_instance(
                FakeInstance::new(name.clone())
                    .with_internal_ip(ip(i))
                    .with_instance_type("fake.large")
                    .with_zone("zone-a", "region-1"),
            );
        }
        cloud.set_bulk(bulk);
        if let Some((rps, burst)) = quota {
            cloud.set_quota(rps, burst).expect("a valid quota");
        }
        let nodes: Api<Node> = Api::all(client.clone());
        futures::stream::iter(names.iter().enumerate())
            .map(|(i, name)| {
                let nodes = nodes.clone();
                let node = node_object(name, &label, i % NOT_READY_EVERY != 0, initialized);
                async move {
                    create_node(&nodes, &node).await;
                    Ok::<(), ()>(())
                }
            })
            .buffer_unordered(CREATE_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .expect("nodes created");
        World {
            client,
            label,
            namespace,
            cloud,
        }
    }

    /// Start a CCM running only the two node controllers, scoped to this test's nodes, with `extra` flags.
    async fn start(&self, extra: &[&str]) -> (RunningCcm, CancellationToken) {
        let mut argv: Vec<String> = [
            "test-ccm",
            "--cloud-provider=fake",
            "--leader-elect=false",
            "--controllers=cloud-node,cloud-node-lifecycle",
            // the API server is not what is measured here
            "--kube-api-qps=5000",
            "--kube-api-burst=5000",
            "--concurrent-node-syncs=10",
            "--shutdown-timeout=10s",
        ]
        .map(str::to_owned)
        .to_vec();
        argv.push(format!("--node-selector={TEST_LABEL}={}", self.label));
        argv.push(format!("--service-namespace={}", self.namespace));
        argv.push(ALLOW_ADMIN_PATHS.to_owned());
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        let registry = ProviderRegistry::new();
        self.cloud
            .register_shared(&registry, "fake")
            .expect("register the fake cloud");
        let builder = ccm(registry, self.client.clone());
        let options = builder.parse_args(argv).expect("valid flags");
        let token = CancellationToken::new();
        let running = builder
            .start(options, token.clone())
            .await
            .expect("the CCM starts");
        (running, token)
    }

    async fn finish(self) {
        delete_nodes(&self.client, &self.label).await;
    }

    /// Every node of this test, read from the API server once.
    async fn nodes(&self) -> Vec<Node> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .list(&ListParams::default().labels(&format!("{TEST_LABEL}={}", self.label)))
            .await
            .expect("list the nodes")
            .items
    }
}

fn ip(i: usize) -> String {
    format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256)
}

/// A Node as a kubelet registers it (Ready or not), or as it looks once initialized.
fn node_object(name: &str, label: &str, ready: bool, initialized: bool) -> Node {
    let taints = (!initialized).then(|| {
        vec![Taint {
            key: names::taints::UNINITIALIZED.to_owned(),
            value: Some("true".to_owned()),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        }]
    });
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                [
                    (TEST_LABEL.to_owned(), label.to_owned()),
                    (names::labels::HOSTNAME.to_owned(), name.to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints,
            provider_id: initialized.then(|| format!("fake://{name}")),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: names::conditions::READY.to_owned(),
                status: if ready { "True" } else { "False" }.to_owned(),
                reason: Some(
                    if ready {
                        "KubeletReady"
                    } else {
                        "KubeletNotReady"
                    }
                    .to_owned(),
                ),
                ..NodeCondition::default()
            }]),
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".to_owned(),
                address: name.to_owned(),
            }]),
            ..NodeStatus::default()
        }),
    }
}

async fn create_node(nodes: &Api<Node>, node: &Node) {
    let name = node.metadata.name.clone().unwrap_or_default();
    nodes
        .create(&PostParams::default(), node)
        .await
        .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
    nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "status": node.status })),
        )
        .await
        .unwrap_or_else(|e| panic!("reporting the status of node {name}: {e}"));
}

/// How many nodes the node controller initialized (the count of its initial-sync histogram).
fn initialized_count(running: &RunningCcm) -> usize {
    let text = running.metrics().encode();
    metric(
        &text,
        "node_controller_initial_node_sync_delay_seconds_count",
    )
    .unwrap_or(0.0) as usize
}

/// The sum of every sample of `family` whose labels contain `labels`.
fn sum(text: &str, family: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn stop(running: RunningCcm, token: CancellationToken) {
    token.cancel();
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the CCM stops in time")
        .expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_keeps_a_thousand_node_ccm_inside_the_cloud_quota() {
    let world = World::new("budget", NODES, false, false).await;
    let qps = format!("--cloud-api-qps={BUDGET_QPS}");
    let burst = format!("--cloud-api-burst={BUDGET_BURST}");
    let start = Instant::now();
    let (running, token) = world.start(&[&qps, &burst]).await;

    wait_for("every node to be initialized", LONG, || async {
        (initialized_count(&running) >= NODES).then_some(())
    })
    .await
    .expect("all nodes initialized");
    let took = start.elapsed();
    // The lifecycle controller checked every NotReady node, and asked the cloud again a period later: existence
    // and shutdown answers are never taken from the cache.
    let registry = running.metrics().clone();
    wait_for("two lifecycle passes", LONG, || async {
        (world.cloud.call_count(Operation::InstanceShutdown) >= 2 * NOT_READY).then_some(())
    })
    .await
    .expect("lifecycle checks");
    assert_eq!(
        sum(
            &registry.encode(),
            "cloudprovider_instance_cache_requests_total",
            &format!(r#"operation="{}",result="hit""#, Operation::InstanceExists),
        ),
        0.0,
        "no existence answer comes from the cache"
    );

    assert_eq!(
        world.cloud.throttled_count(),
        0,
        "the budget keeps the CCM inside the cloud's quota"
    );
    // 1,000 initializations (plus the lifecycle's checks) cannot go faster than the budget allows.
    let floor = Duration::from_secs_f64((NODES as f64 - f64::from(BUDGET_BURST)) / BUDGET_QPS);
    assert!(
        took >= floor,
        "initialized {NODES} nodes in {took:?}, faster than the budget of {BUDGET_QPS}/s allows ({floor:?})"
    );
    assert_eq!(
        world.cloud.call_count(Operation::InstanceMetadata),
        NODES,
        "one call per node initialization"
    );

    // the metrics, once each, on /metrics
    let addr = running.admin_addr().expect("serving");
    let cert = running
        .admin_certificate_pem()
        .expect("certificate")
        .to_owned();
    let (status, text) = https_get(addr, &cert, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        sum(
            &text,
            "cloudprovider_api_requests_total",
            &format!(
                r#"operation="{}",result="success""#,
                Operation::InstanceMetadata
            )
        ) >= NODES as f64,
        "{text}"
    );
    assert_eq!(
        sum(
            &text,
            "cloudprovider_api_request_errors_total",
            r#"kind="throttled""#
        ),
        0.0
    );
    assert!(
        sum(
            &text,
            "cloudprovider_api_budget_wait_seconds_count",
            &format!(r#"operation="{}""#, Operation::InstanceMetadata)
        ) >= NODES as f64,
        "every call passed the budget: {text}"
    );
    assert!(
        sum(
            &text,
            "cloudprovider_api_budget_wait_seconds_sum",
            &format!(r#"operation="{}""#, Operation::InstanceMetadata)
        ) > 1.0,
        "calls waited for budget: {text}"
    );
    // (a family without samples, like the error counter here, is not printed at all)
    for family in [
        "cloudprovider_api_requests",
        "cloudprovider_api_request_duration_seconds",
        "cloudprovider_api_budget_wait_seconds",
        "cloudprovider_instance_cache_requests",
    ] {
        let type_lines = text
            .lines()
            .filter(|l| l.starts_with(&format!("# TYPE {family} ")))
            .count();
        assert_eq!(type_lines, 1, "{family} registered once");
    }

    let nodes = world.nodes().await;
    assert_eq!(nodes.len(), NODES);
    assert!(nodes.iter().all(initialized));
    stop(running, token).await;
    world.finish().await;
}

/// Wait until every node is initialized; returns the time since `start` (to the 100 ms poll).
async fn all_initialized(running: &RunningCcm, start: Instant) -> Duration {
    wait_for("every node to be initialized", LONG, || async {
        (initialized_count(running) >= NODES).then_some(())
    })
    .await
    .expect("all nodes initialized");
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_default_learns_the_quota_with_few_throttled_calls() {
    let world = World::with_quota("adaptive", NODES, false, false, Some(ADAPTIVE_QUOTA)).await;
    let (quota_rps, quota_burst) = ADAPTIVE_QUOTA;
    let start = Instant::now();
    // the default flags: no hard cap, adaptive
    let (running, token) = world.start(&[]).await;
    let took = all_initialized(&running, start).await;
    let calls = world.cloud.calls().len();
    let throttled = world.cloud.throttled_count();
    let accepted = calls - throttled;
    let text = running.metrics().encode();

    // The cloud took `accepted` calls during initialization (1,000 initializations and the lifecycle
    // controller's checks of the NotReady nodes initialized meanwhile); at its quota that takes this long.
    let ideal = Duration::from_secs_f64(accepted as f64 / quota_rps);
    let burst_credit = Duration::from_secs_f64(f64::from(quota_burst) / quota_rps);
    println!(
        "adaptive default, quota {quota_rps}/s burst {quota_burst}: {NODES} nodes initialized in {:.2} s; \
         {calls} calls, {throttled} throttled ({:.1} %), {accepted} accepted; ideal {:.2} s ({:.2}x); \
         budget rate now {:?}",
        took.as_secs_f64(),
        100.0 * throttled as f64 / calls as f64,
        ideal.as_secs_f64(),
        took.as_secs_f64() / ideal.as_secs_f64(),
        metric(&text, "cloudprovider_api_budget_rate"),
    );
    assert!(
        throttled as f64 <= 0.05 * calls as f64,
        "{throttled} of {calls} calls throttled"
    );
    assert!(
        took <= ideal.mul_f64(1.2),
        "initialized in {took:?}, ideal {ideal:?}"
    );
    // and no faster than the quota allows: the fake cloud enforced it
    assert!(took + burst_credit >= ideal, "{took:?} < {ideal:?}");
    assert!(world.cloud.call_count(Operation::InstanceMetadata) >= NODES);

    // the budget reports what it did
    assert!(
        sum(&text, "cloudprovider_api_budget_throttled_total", "") >= 1.0,
        "{text}"
    );
    let rate = metric(&text, "cloudprovider_api_budget_rate").expect("the rate gauge");
    assert!(
        rate > 0.0 && rate < 2.0 * quota_rps,
        "limited near the quota: {rate}"
    );
    for priority in ["high", "normal", "low"] {
        assert!(
            text.contains(&format!(
                r#"cloudprovider_api_budget_waiting{{priority="{priority}"}}"#
            )),
            "{text}"
        );
    }
    // the lifecycle controller still checks the NotReady nodes once initialization is done
    let checked = world.cloud.call_count(Operation::InstanceShutdown);
    wait_for("lifecycle checks after initialization", LONG, || async {
        (world.cloud.call_count(Operation::InstanceShutdown) >= checked + NOT_READY).then_some(())
    })
    .await
    .expect("lifecycle checks");
    stop(running, token).await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_quota_the_adaptive_default_never_makes_a_call_wait() {
    let world = World::with_quota("noquota", NODES, false, false, None).await;
    let start = Instant::now();
    let (running, token) = world.start(&[]).await;
    let took = all_initialized(&running, start).await;
    let text = running.metrics().encode();
    println!(
        "adaptive default, no quota: {NODES} nodes initialized in {:.2} s, {} calls",
        took.as_secs_f64(),
        world.cloud.calls().len()
    );
    assert_eq!(world.cloud.throttled_count(), 0);
    // every call passed the budget without waiting a moment: the same as no budget at all
    assert!(
        sum(
            &text,
            "cloudprovider_api_budget_wait_seconds_count",
            &format!(r#"operation="{}""#, Operation::InstanceMetadata)
        ) >= NODES as f64,
        "{text}"
    );
    assert_eq!(
        sum(&text, "cloudprovider_api_budget_wait_seconds_sum", ""),
        0.0,
        "{text}"
    );
    assert_eq!(metric(&text, "cloudprovider_api_budget_rate"), Some(0.0));
    stop(running, token).await;
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_bulk_calls_an_address_sync_period_is_one_cloud_call() {
    let world = World::new("bulk", NODES, true, true).await;
    let qps = format!("--cloud-api-qps={BUDGET_QPS}");
    let burst = format!("--cloud-api-burst={BUDGET_BURST}");
    // No cache: with a TTL longer than the sync period, most periods would be answered without any call.
    let (running, token) = world
        .start(&[
            &qps,
            &burst,
            "--node-status-update-frequency=2s",
            "--cloud-instance-cache-ttl=0s",
        ])
        .await;
    let cloud = &world.cloud;
    wait_for("two address-sync periods", LONG, || async {
        (cloud.call_count(Operation::InstanceMetadataBulk) >= 2).then_some(())
    })
    .await
    .expect("bulk address syncs");
    // every node got its cloud address from those calls
    let nodes = world.nodes().await;
    let with_ip = nodes
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .is_some_and(|a| a.iter().any(|a| a.type_ == "InternalIP"))
        })
        .count();
    assert_eq!(with_ip, NODES);
    // the lifecycle controller asked about the NotReady nodes in one bulk call
    let exists = cloud.call_targets(Operation::InstanceExistsBulk);
    assert_eq!(
        exists.first().map(String::as_str),
        Some(format!("{NOT_READY} nodes").as_str())
    );

    assert_eq!(cloud.throttled_count(), 0);
    // In steady state each address-sync period is one call for all the nodes, and each lifecycle period one
    // existence call for all the NotReady nodes (and one bulk shutdown call for those that exist).
    cloud.clear_calls();
    let window = Instant::now();
    wait_for("three more address-sync periods", LONG, || async {
        (cloud.call_count(Operation::InstanceMetadataBulk) >= 3).then_some(())
    })
    .await
    .expect("bulk address syncs");
    let periods = window.elapsed().as_secs_f64() / 2.0;
    let calls = cloud.calls();
    let sync_calls: Vec<_> = calls
        .iter()
        .filter(|c| {
            matches!(
                c.op,
                Operation::InstanceMetadata | Operation::InstanceMetadataBulk
            )
        })
        .collect();
    assert!(
        sync_calls.iter().all(
            |c| c.op == Operation::InstanceMetadataBulk && c.target == format!("{NODES} nodes")
        ),
        "the address sync makes only bulk calls about every node: {sync_calls:?}"
    );
    assert!(
        (sync_calls.len() as f64) <= periods.ceil() + 1.0,
        "{} address-sync calls in {periods:.1} periods",
        sync_calls.len()
    );
    assert!(
        calls.iter().all(|c| c.op != Operation::InstanceExists),
        "no per-node existence check"
    );
    assert!(
        calls
            .iter()
            .filter(|c| c.op == Operation::InstanceExistsBulk)
            .all(|c| c.target == format!("{NOT_READY} nodes"))
    );
    assert_eq!(cloud.throttled_count(), 0);
    stop(running, token).await;
    world.finish().await;
}

/// The runtime runs the cache's invalidator on the shared Node informer. With a TTL of 10 minutes, the address
/// sync's metadata answers are reused until the node's Ready condition changes; existence answers are never
/// reused, so a NotReady node whose instance disappears is deleted at the next lifecycle pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_reused_until_node_events_invalidate_it_and_existence_never_is() {
    let world = World::new("invalidate", 1, true, false).await;
    let name = format!("{}-0", world.label);
    let period = Duration::from_millis(200);
    let (running, token) = world
        .start(&[
            "--cloud-instance-cache-ttl=10m",
            "--node-monitor-period=200ms",
            "--node-status-update-frequency=300ms",
        ])
        .await;
    let registry = running.metrics().clone();
    let cache = |op: Operation, result: &str| {
        sum(
            &registry.encode(),
            "cloudprovider_instance_cache_requests_total",
            &format!(r#"operation="{op}",result="{result}""#),
        )
    };
    let cloud = &world.cloud;
    wait_for("reused metadata answers", LONG, || async {
        (cache(Operation::InstanceMetadata, "hit") >= 2.0).then_some(())
    })
    .await
    .expect("the address sync reuses the answer");
    let asked = cloud.call_count(Operation::InstanceMetadata);
    assert_eq!(asked, 1, "one metadata call, then answers from the cache");
    // The node is NotReady: the lifecycle controller asked the cloud on every pass.
    assert!(cloud.call_count(Operation::InstanceExists) >= 2);
    assert_eq!(cache(Operation::InstanceExists, "hit"), 0.0);

    // the kubelet reports Ready: the node's kept answers are forgotten, the next address sync asks the cloud
    let nodes: Api<Node> = Api::all(world.client.clone());
    let set_ready = |status: &'static str| {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            let patch = serde_json::json!({ "status": { "conditions": [{
                "type": names::conditions::READY, "status": status, "reason": "Test",
            }]}});
            nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("report the Ready condition");
        }
    };
    set_ready("True").await;
    wait_for("metadata asked again", LONG, || async {
        (cloud.call_count(Operation::InstanceMetadata) > asked).then_some(())
    })
    .await
    .expect("a fresh metadata answer after the Ready change");

    // NotReady again, and the instance goes away: the next lifecycle pass deletes the node
    set_ready("False").await;
    tokio::time::sleep(3 * period).await;
    assert!(cloud.remove_instance(&name));
    let removed = Instant::now();
    wait_for("the node to be deleted", LONG, || async {
        matches!(nodes.get_opt(&name).await, Ok(None)).then_some(())
    })
    .await
    .expect("a fresh answer deletes the node");
    assert!(
        removed.elapsed() < period + Duration::from_secs(2),
        "deleted {:?} after the instance went away, with a 10-minute TTL",
        removed.elapsed()
    );
    stop(running, token).await;
    world.finish().await;
}
