//! The self-check controller, built by its descriptor from a real `ControllerContext`, against a real
//! kube-apiserver: it waits for the shared Node informer and exports the waiting nodes.

use std::sync::Arc;
use std::time::Duration;

use ccm_core::names::taints;
use ccm_core::runtime::controller::ControllerContext;
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_doctor::selfcheck::{
    METRIC_OLDEST_AGE, METRIC_OVER_THRESHOLD, METRIC_WAITING, SelfCheckConfig, descriptor,
};
use ccm_provider_fake::FakeCloud;
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn metric(registry: &SharedRegistry, name: &str) -> Option<f64> {
    registry
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn the_self_check_follows_the_node_informer() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("sc");
    let selector = format!("ccm-doctor-selfcheck={label}");
    let nodes: Api<Node> = Api::all(client.clone());
    let create = |name: String, tainted: bool| {
        let nodes = nodes.clone();
        let label = label.clone();
        async move {
            let mut spec = json!({});
            if tainted {
                spec["taints"] = json!([{"key": taints::UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]);
            }
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"ccm-doctor-selfcheck": label}},
                "spec": spec,
            }))
            .unwrap();
            nodes.create(&PostParams::default(), &node).await.unwrap();
        }
    };
    create(format!("{label}-a"), true).await;
    create(format!("{label}-b"), true).await;
    create(format!("{label}-done"), false).await;

    let informers = SharedInformers::new(
        client.clone(),
        &InformerScope::all().with_node_selector(&selector),
    );
    let registry = SharedRegistry::new();
    let ctx = ControllerContext::new(
        client.clone(),
        Arc::new(FakeCloud::new()),
        informers.clone(),
        registry.clone(),
        "kubernetes",
    );
    let config = SelfCheckConfig::default()
        .with_interval(Duration::from_secs(1))
        .with_threshold(Duration::ZERO);
    let controller = (descriptor(config).init)(&ctx)
        .unwrap()
        .expect("the self-check always starts");
    let shutdown = CancellationToken::new();
    tokio::spawn(informers.clone().run(shutdown.clone()));
    let task = tokio::spawn(controller.run(shutdown.clone()));

    wait_for("two nodes waiting", Duration::from_secs(30), || async {
        (metric(&registry, METRIC_WAITING) == Some(2.0)).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(metric(&registry, METRIC_OVER_THRESHOLD), Some(2.0));
    assert!(metric(&registry, METRIC_OLDEST_AGE).is_some_and(|age| age >= 0.0));

    // The cloud node controller initializes a: the taint goes, and so does a from the gauges.
    nodes
        .patch(
            &format!("{label}-a"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null, "providerID": "fake://a"}})),
        )
        .await
        .unwrap();
    wait_for("one node waiting", Duration::from_secs(30), || async {
        (metric(&registry, METRIC_WAITING) == Some(1.0)).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(metric(&registry, METRIC_OVER_THRESHOLD), Some(1.0));

    shutdown.cancel();
    task.await.unwrap().unwrap();
    nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&selector),
        )
        .await
        .unwrap();
}
