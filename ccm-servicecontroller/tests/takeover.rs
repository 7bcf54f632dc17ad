//! Takeover against the real apiserver: a restarted controller whose provider lists its load balancers ensures only
//! the Services whose load balancer is missing or differs; without a listing, with a failed listing, or with
//! `Takeover::EnsureAll`, it ensures every Service, as Go does.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_provider_fake::{Fault, InjectedError, Operation};
use ccm_servicecontroller::Takeover;
use ccm_testenv::wait_for;
use serde_json::json;
use support::*;

const SERVICES: [&str; 5] = ["s1", "s2", "s3", "s4", "s5"];

/// Five LoadBalancer Services on nodes a and b, each ensured, with the controller stopped afterwards.
async fn five_ensured_services(listing: Option<usize>) -> Harness {
    let mut h = Harness::start(test_config()).await;
    h.fake.set_listing(listing);
    h.create_node("a").await;
    h.create_node("b").await;
    for name in SERVICES {
        h.create_lb(name).await;
    }
    let hosts = h.hosts(&["a", "b"]);
    for name in SERVICES {
        h.wait_ingress(name).await;
        h.wait_hosts(name, &hosts).await;
    }
    h.stop_controller().await;
    h
}

/// The Services whose load balancer was ensured since the calls were cleared, once `count` ensures came (and a
/// little longer, for any extra one).
async fn ensured_after_restart(
    h: &mut Harness,
    config: ccm_servicecontroller::Config,
    count: usize,
) -> BTreeSet<String> {
    h.fake.clear_calls();
    h.start_controller(config).await;
    wait_for("the start-up ensures", TIMEOUT, || async {
        (h.fake.call_count(Operation::EnsureLoadBalancer) >= count).then_some(())
    })
    .await
    .expect("ensures");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    h.fake
        .call_targets(Operation::EnsureLoadBalancer)
        .into_iter()
        .collect()
}

fn keys(h: &Harness, names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| h.key(n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_ensures_only_what_is_missing_or_differs() {
    let mut h = five_ensured_services(Some(2)).await;

    // While no controller runs: s2's load balancer is deleted behind its back, s3 gets a new annotation, s4's
    // backends drift in the cloud. s1 and s5 stay as they were.
    assert!(h.fake.remove_load_balancer(&h.key("s2")));
    h.services()
        .patch(
            "s3",
            &Default::default(),
            &merge(json!({"metadata": {"annotations": {"example.com/lb-size": "large"}}})),
        )
        .await
        .expect("annotate s3");
    assert!(
        h.fake
            .set_load_balancer_hosts(&h.key("s4"), h.hosts(&["a"]))
    );

    let ensured = ensured_after_restart(&mut h, test_config(), 3).await;
    assert_eq!(ensured, keys(&h, &["s2", "s3", "s4"]));
    assert_eq!(
        h.fake.call_count(Operation::EnsureLoadBalancer),
        3,
        "each once"
    );
    // Four load balancers in pages of two: two listing calls, and nothing else for s1 and s5.
    assert_eq!(h.fake.call_count(Operation::ListLoadBalancers), 2);
    assert_eq!(h.fake.call_count(Operation::GetLoadBalancer), 0);
    assert!(h.fake.load_balancer(&h.key("s2")).is_some(), "s2 recreated");
    h.wait_hosts("s4", &h.hosts(&["a", "b"])).await;

    // The steady Services are remembered as synced: a new node reaches them through the node-sync loop.
    h.create_node("c").await;
    for name in SERVICES {
        h.wait_hosts(name, &h.hosts(&["a", "b", "c"])).await;
    }
    h.stop_controller().await;

    // Go's behaviour is one setting away.
    let ensured = ensured_after_restart(
        &mut h,
        test_config().with_takeover(Takeover::EnsureAll),
        SERVICES.len(),
    )
    .await;
    assert_eq!(ensured, keys(&h, &SERVICES));
    assert_eq!(h.fake.call_count(Operation::ListLoadBalancers), 0);
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_listing_or_no_listing_ensures_every_service() {
    let mut h = five_ensured_services(Some(100)).await;
    h.fake.inject(
        Operation::ListLoadBalancers,
        Fault::once(InjectedError::Other("the listing API is down".into())),
    );
    let ensured = ensured_after_restart(&mut h, test_config(), SERVICES.len()).await;
    assert_eq!(ensured, keys(&h, &SERVICES));
    assert_eq!(h.fake.call_count(Operation::ListLoadBalancers), 1);
    h.stop_controller().await;

    h.fake.set_listing(None);
    let ensured = ensured_after_restart(&mut h, test_config(), SERVICES.len()).await;
    assert_eq!(ensured, keys(&h, &SERVICES));
    assert_eq!(h.fake.call_count(Operation::ListLoadBalancers), 0);
    h.finish().await;
}
