//! Random faults from an inventory (seeded error probability, latency ± jitter, time window) and the state
//! file, through the provider traits.

mod common;

use std::time::Duration;

use ccm_core::{CloudProvider, ErrorKind};
use ccm_provider_fake::{CloudSnapshot, FakeCloud};
use common::{node, service};

const INSTANCES: &str = "instances:\n  - name: node-a\n";

#[tokio::test(start_paused = true)]
async fn a_windowed_rule_fails_and_delays_calls_only_inside_its_window() {
    let yaml = format!(
        "{INSTANCES}randomFaults:\n  rules:\n    - operations: [instance-exists]\n      errorProbability: 1\n      \
         error: timeout\n      latency: 1s\n      startAfter: 2s\n      stopAfter: 10s\n"
    );
    let cloud = FakeCloud::from_inventory_str(&yaml, "inv.yaml").unwrap();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let node = node("node-a", "");
    let started = tokio::time::Instant::now();
    // before the window
    assert!(v2.instance_exists(&node).await.unwrap());
    assert_eq!(started.elapsed(), Duration::ZERO);
    // inside it: one second late, then a timeout
    tokio::time::sleep(Duration::from_secs(2)).await;
    let err = v2.instance_exists(&node).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    // other operations are untouched
    assert!(v2.instance_metadata(&node).await.unwrap().found().is_some());
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    // after it: answered at once
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(v2.instance_exists(&node).await.unwrap());
    assert_eq!(started.elapsed(), Duration::from_secs(10));
    // clear_faults removes the rules too
    cloud.clear_faults();
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_fails_the_same_calls() {
    let outcomes = |seed: u64| async move {
        let yaml = format!(
            "{INSTANCES}randomFaults:\n  seed: {seed}\n  rules:\n    - errorProbability: 0.5\n      latency: 200ms\n      \
             jitter: 150ms\n"
        );
        let cloud = FakeCloud::from_inventory_str(&yaml, "inv.yaml").unwrap();
        let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
        let mut out = Vec::new();
        for _ in 0..40 {
            let before = tokio::time::Instant::now();
            let ok = v2.instance_exists(&node("node-a", "")).await.is_ok();
            let took = before.elapsed();
            assert!(
                took >= Duration::from_millis(50) && took <= Duration::from_millis(350),
                "{took:?}"
            );
            out.push((ok, took));
        }
        out
    };
    let first = outcomes(11).await;
    assert_eq!(first, outcomes(11).await);
    assert_ne!(first, outcomes(12).await);
    let failures = first.iter().filter(|(ok, _)| !ok).count();
    assert!((5..35).contains(&failures), "{failures} of 40");
}

#[tokio::test]
async fn the_state_file_follows_the_load_balancers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let yaml = format!("{INSTANCES}stateFile: {}\n", path.display());
    let cloud = FakeCloud::from_inventory_str(&yaml, "inv.yaml").unwrap();
    let read = || CloudSnapshot::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(read().instances, ["node-a"]);
    assert!(read().load_balancers.is_empty());

    let lb = CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone())).unwrap();
    let svc = service("default", "web", &[80]);
    lb.ensure_load_balancer("kubernetes", &svc, &[node("node-a", "")])
        .await
        .unwrap();
    let state = read();
    assert_eq!(state, cloud.snapshot());
    assert_eq!(state.load_balancers.len(), 1);
    assert_eq!(state.load_balancers[0].service, "default/web");
    assert_eq!(state.load_balancers[0].hosts, 1);
    assert_eq!(state.load_balancers[0].ingress_ip, "203.0.113.1");

    lb.update_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert_eq!(read().load_balancers[0].hosts, 0);
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert!(read().load_balancers.is_empty());

    let err = FakeCloud::from_inventory_str("stateFile: \"\"\n", "inv.yaml").unwrap_err();
    assert_eq!(
        err.to_string(),
        "inv.yaml: stateFile: the state file path must not be empty"
    );
}
