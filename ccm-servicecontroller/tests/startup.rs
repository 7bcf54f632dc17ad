//! Start-up against a cluster that already has many LoadBalancer Services: every Service is ensured exactly once.
//!
//! The controller queues the whole cache after the caches synced and drops the events the initial list buffered in
//! its subscriptions. Dropping them stopped after tokio's cooperative budget (128 receives per task poll) when the
//! drain polled `recv` with `now_or_never`: the rest of the initial list's `Added` events then reached the event
//! router, which queued those Services again. The dedup of the work queue hid that for keys still waiting, but not
//! for the keys the workers had already taken, which were ensured a second time at the end of the queue.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use ccm_provider_fake::Operation;
use ccm_testenv::wait_for;
use support::*;

/// More than twice tokio's cooperative budget: the initial list buffers more events than one poll drained, and the
/// event router, which also receives at most 128 events per poll, yields while the workers already sync.
const SERVICES: usize = 400;

/// How many times the fake cloud was asked to ensure each load balancer.
fn ensures_per_service(h: &Harness) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for call in h.fake.calls() {
        if call.op == Operation::EnsureLoadBalancer {
            *counts.entry(call.target).or_default() += 1;
        }
    }
    counts
}

/// Start the controller and wait until the fake cloud saw `expected` ensure calls, then a little longer for any
/// duplicate (it would come at the end of the queue, right after the last one).
async fn start_and_count(
    h: &mut Harness,
    workers: usize,
    expected: usize,
) -> HashMap<String, usize> {
    h.fake.clear_calls();
    h.start_controller(test_config().with_concurrent_service_syncs(workers))
        .await;
    wait_for(
        "every Service ensured",
        Duration::from_secs(120),
        || async { (h.fake.call_count(Operation::EnsureLoadBalancer) >= expected).then_some(()) },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    h.stop_controller().await;
    ensures_per_service(h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_existing_services_are_ensured_exactly_once_at_start() {
    let mut h = Harness::start(test_config()).await;
    h.stop_controller().await;
    h.fake
        .set_load_balancer_ip_pool("198.18.0.0/16".parse().expect("a CIDR"));
    h.create_node("a").await;
    let names: Vec<String> = (0..SERVICES).map(|i| format!("svc-{i:04}")).collect();
    for chunk in names.chunks(50) {
        futures::future::join_all(chunk.iter().map(|name| h.create_lb(name))).await;
    }

    // The first start adds the finalizers; the restarts re-ensure Services that already have them (as Go does).
    for (round, workers) in [(1, 8), (2, 8), (3, 1)] {
        let counts = start_and_count(&mut h, workers, SERVICES).await;
        let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "round {round} ({workers} workers): ensured more than once: {twice:?}"
        );
        assert_eq!(
            counts.len(),
            SERVICES,
            "round {round}: every Service ensured"
        );
    }
    for name in &names {
        assert!(h.fake.load_balancer(&h.key(name)).is_some(), "{name}");
    }
    h.start_controller(test_config()).await;
    h.finish().await;
}
