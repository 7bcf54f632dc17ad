//! The node controllers tell the cloud-call budget how urgent their calls are: initializing a new node is
//! `High`, the periodic address sync and the lifecycle pass are `Low` (so when calls must wait, a new node never
//! waits behind a sweep).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::CloudError;
use ccm_core::budget::CallPriority;
use ccm_core::intercept::{CallInfo, InterceptedProvider, ProviderInterceptor};
use ccm_nodecontroller::{CloudNodeConfig, CloudNodeLifecycleConfig};
use ccm_provider_fake::{FakeCloud, FakeInstance, Operation};

use support::{Harness, has_taint};

type Seen = Arc<Mutex<Vec<(Operation, String, CallPriority)>>>;

/// Records the priority every provider call is made at.
struct Recorder(Seen);

#[async_trait]
impl ProviderInterceptor for Recorder {
    async fn before_call(&self, call: &CallInfo<'_>) -> Result<(), CloudError> {
        self.0.lock().unwrap().push((
            call.operation,
            call.target.to_owned(),
            CallPriority::current(),
        ));
        Ok(())
    }
}

#[tokio::test]
async fn initialization_calls_are_high_priority_and_sweeps_are_low() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let seen: Seen = Arc::default();
    h.ctx.provider = Arc::new(
        InterceptedProvider::new(Arc::new(fake.clone())).with_interceptor(Recorder(seen.clone())),
    );
    let ready = h.name("ready");
    let down = h.name("down");
    for name in [&ready, &down] {
        fake.add_instance(FakeInstance::new(name).with_internal_ip("10.0.9.1"));
    }
    h.create(&h.kubelet_node(&ready, true)).await;
    h.create(&h.kubelet_node(&down, false)).await;
    h.start_node_controller(
        CloudNodeConfig::default().with_node_status_update_frequency(Duration::from_millis(300)),
    );
    h.start_lifecycle_controller(
        CloudNodeLifecycleConfig::default().with_node_monitor_period(Duration::from_millis(200)),
    );
    for name in [&ready, &down] {
        h.wait_node(name, "initialized", |n| {
            !has_taint(n, ccm_core::names::taints::UNINITIALIZED)
        })
        .await;
    }
    // a few address syncs and lifecycle passes (the NotReady node is checked on each)
    h.wait_calls(Operation::InstanceMetadata, 6).await;
    h.wait_calls(Operation::InstanceShutdown, 2).await;
    h.finish().await;

    let seen = seen.lock().unwrap().clone();
    let fake_id = |name: &str| format!("fake://{name}");
    for name in [&ready, &down] {
        let metadata: Vec<CallPriority> = seen
            .iter()
            .filter(|(op, target, _)| {
                *op == Operation::InstanceMetadata && (target == name || *target == fake_id(name))
            })
            .map(|(_, _, p)| *p)
            .collect();
        // the first metadata call initialized the node; every later one is the address sync
        assert_eq!(
            metadata.first(),
            Some(&CallPriority::High),
            "{name}: {seen:?}"
        );
        assert!(metadata.len() >= 2, "{name}: {seen:?}");
        assert!(
            metadata[1..].iter().all(|p| *p == CallPriority::Low),
            "{name}: {seen:?}"
        );
    }
    let checks: Vec<_> = seen
        .iter()
        .filter(|(op, _, _)| matches!(op, Operation::InstanceExists | Operation::InstanceShutdown))
        .collect();
    assert!(checks.len() >= 4, "{seen:?}");
    assert!(
        checks
            .iter()
            .all(|(_, target, p)| *p == CallPriority::Low && *target == fake_id(&down)),
        "{checks:?}"
    );
}
