//! The leadership fence in the cloud interception layer: a closed fence refuses every call before it reaches
//! the provider, even when an interceptor waited across the moment the fence closed.
//! Also the Event backlog's bounds (discarded at a lost lease, full at a burst), which need a writer that never
//! finishes a write.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::fence::{FenceClosed, LeadershipFence, is_fenced};
use ccm_core::intercept::{CallInfo, InterceptedProvider, Operation, ProviderInterceptor};
use ccm_core::{CloudError, CloudProvider, ErrorKind, Zone, Zones};
use tokio::time::Instant;

#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
}

#[async_trait]
impl Zones for Counting {
    async fn get_zone(&self) -> Result<Zone, CloudError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Zone::default())
    }
    async fn get_zone_by_provider_id(&self, _provider_id: &str) -> Result<Zone, CloudError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Zone::default())
    }
    async fn get_zone_by_node_name(&self, _node_name: &str) -> Result<Zone, CloudError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Zone::default())
    }
}

struct Cloud(Arc<Counting>);

impl CloudProvider for Cloud {
    fn provider_name(&self) -> &str {
        "counting"
    }
    fn zones(self: Arc<Self>) -> Option<Arc<dyn Zones>> {
        Some(self.0.clone())
    }
}

/// Waits before every call (like a budget wait) and remembers the outcomes it saw.
#[derive(Default)]
struct Slow {
    wait: Duration,
    outcomes: std::sync::Mutex<Vec<Option<ErrorKind>>>,
}

#[async_trait]
impl ProviderInterceptor for Slow {
    async fn before_call(&self, _call: &CallInfo<'_>) -> Result<(), CloudError> {
        tokio::time::sleep(self.wait).await;
        Ok(())
    }
    fn after_call(
        &self,
        _call: &CallInfo<'_>,
        _elapsed: Duration,
        outcome: Result<(), &CloudError>,
    ) {
        self.outcomes
            .lock()
            .unwrap()
            .push(outcome.err().map(CloudError::kind));
    }
}

fn setup(fence: &LeadershipFence, wait: Duration) -> (Arc<Counting>, Arc<Slow>, Arc<dyn Zones>) {
    let counting = Arc::new(Counting::default());
    let slow = Arc::new(Slow {
        wait,
        ..Slow::default()
    });
    let cloud = InterceptedProvider::new(Arc::new(Cloud(counting.clone())))
        .with_shared_interceptor(slow.clone())
        .with_fence(fence.clone());
    let zones = Arc::new(cloud).zones().expect("zones");
    (counting, slow, zones)
}

#[tokio::test(start_paused = true)]
async fn a_closed_fence_refuses_cloud_calls_without_calling_the_provider() {
    let fence = LeadershipFence::new();
    let (counting, slow, zones) = setup(&fence, Duration::ZERO);

    let err = zones
        .get_zone_by_provider_id("test://i-1")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotLeader);
    assert!(is_fenced(&err));
    assert!(
        matches!(
            err,
            CloudError::NotLeader {
                operation: Operation::GetZoneByProviderId,
                reason: FenceClosed::NotConfirmed
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(
            "leadership not confirmed: refusing to call the cloud (get-zone-by-provider-id)"
        ),
        "{err}"
    );
    assert_eq!(counting.calls.load(Ordering::SeqCst), 0, "nothing was sent");

    fence.confirm(Instant::now(), Duration::from_secs(10));
    zones.get_zone_by_node_name("n1").await.unwrap();
    assert_eq!(counting.calls.load(Ordering::SeqCst), 1);

    fence.revoke();
    let err = zones.get_zone_by_node_name("n1").await.unwrap_err();
    assert!(
        matches!(
            err,
            CloudError::NotLeader {
                reason: FenceClosed::Revoked,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        *slow.outcomes.lock().unwrap(),
        vec![Some(ErrorKind::NotLeader), None, Some(ErrorKind::NotLeader)],
        "interceptors see refused calls as failed (metrics count them)"
    );
}

#[tokio::test(start_paused = true)]
async fn the_fence_is_checked_after_the_interceptors_waited() {
    let fence = LeadershipFence::new();
    fence.confirm(Instant::now(), Duration::from_secs(10));
    // The call waits 11 s in an interceptor (a budget wait, or a process stop): the fence closes meanwhile.
    let (counting, _slow, zones) = setup(&fence, Duration::from_secs(11));
    assert!(fence.is_open(), "open when the call starts");
    let err = zones.get_zone().await.unwrap_err();
    assert!(
        matches!(
            err,
            CloudError::NotLeader {
                reason: FenceClosed::Expired { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(counting.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn unfenced_and_fenceless_providers_always_call() {
    let (counting, _slow, zones) = setup(&LeadershipFence::unfenced(), Duration::ZERO);
    tokio::time::advance(Duration::from_secs(3600)).await;
    zones.get_zone().await.unwrap();
    assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
    let counting = Arc::new(Counting::default());
    let cloud = InterceptedProvider::new(Arc::new(Cloud(counting.clone())));
    Arc::new(cloud).zones().unwrap().get_zone().await.unwrap();
    assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
}

/// A client whose requests never get an answer: the Event writer stays busy with its first event.
fn hanging_client() -> kube::Client {
    let service = tower::service_fn(|_request: http::Request<kube::client::Body>| {
        std::future::pending::<Result<http::Response<kube::client::Body>, std::convert::Infallible>>(
        )
    });
    kube::Client::new(service, "default")
}

#[tokio::test]
async fn discarding_the_event_backlog_counts_every_dropped_event() {
    use ccm_core::runtime::events::EventSink;
    use ccm_core::runtime::events::metrics::Outcome;
    use ccm_core::runtime::metrics::SharedRegistry;
    use k8s_openapi::api::core::v1::ObjectReference;

    let sink = EventSink::new().with_metrics(&SharedRegistry::new());
    let component = ccm_core::names::components::SERVICE_CONTROLLER;
    let recorder = sink.recorder(hanging_client(), component, Some("ccm-0".into()));
    for i in 0..5 {
        let regarding = ObjectReference {
            kind: Some("Service".into()),
            namespace: Some("default".into()),
            name: Some(format!("svc-{i}")),
            uid: Some(format!("uid-{i}")),
            ..ObjectReference::default()
        };
        recorder.normal(&regarding, "EnsuringLoadBalancer", "Ensuring load balancer");
    }
    let waiting = sink.waiting();
    assert!(waiting >= 4, "at most one is in flight: {waiting}");
    assert_eq!(sink.discard(), waiting);
    assert_eq!(sink.waiting(), 0);
    let metrics = sink.metrics().expect("metrics");
    assert_eq!(metrics.total(component, Outcome::Fenced), waiting as u64);
    // Closed: later events are dropped, not queued.
    recorder.normal(&ObjectReference::default(), "X", "y");
    assert_eq!(sink.waiting(), 0);
    assert_eq!(sink.discard(), 0, "nothing left");
}

#[tokio::test]
async fn a_full_backlog_drops_new_events_and_counts_them_but_still_merges_repeats() {
    use ccm_core::runtime::events::metrics::Outcome;
    use ccm_core::runtime::events::{DEFAULT_BACKLOG, EventSink};
    use k8s_openapi::api::core::v1::ObjectReference;

    let sink = EventSink::new().with_metrics(&ccm_core::runtime::metrics::SharedRegistry::new());
    let component = ccm_core::names::components::CLOUD_NODE_CONTROLLER;
    let recorder = sink.recorder(hanging_client(), component, None);
    let node = |i: usize| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(format!("node-{i}")),
        uid: Some(format!("uid-{i}")),
        ..ObjectReference::default()
    };
    // One more than fits, and the writer takes one to write (it never returns): ten are dropped.
    let emitted = DEFAULT_BACKLOG + 11;
    for i in 0..emitted {
        recorder.normal(&node(i), "Synced", "Node synced successfully");
        // Let the writer take its first event, so that what waits is exactly the backlog.
        tokio::task::yield_now().await;
    }
    let metrics = sink.metrics().expect("metrics");
    let dropped = metrics.total(component, Outcome::Dropped);
    assert_eq!(
        sink.waiting(),
        DEFAULT_BACKLOG,
        "the backlog is full, the one in flight not counted"
    );
    assert_eq!(dropped, 10, "what did not fit is dropped and counted");
    // A repeat of an event that waits merges into it: no room needed.
    recorder.normal(&node(1), "Synced", "Node synced successfully");
    assert_eq!(metrics.total(component, Outcome::Merged), 1);
    assert_eq!(metrics.total(component, Outcome::Dropped), 10);
    assert_eq!(sink.waiting(), DEFAULT_BACKLOG);
}
