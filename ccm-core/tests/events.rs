//! The Event recorder against a real kube-apiserver: `core/v1` Events as Go writes them, repeats counted on one
//! object, bursts merged before they are written, and an expired object written again.

use std::time::Duration;

use ccm_core::names;
use ccm_core::runtime::events::EventSink;
use ccm_core::runtime::events::metrics::Outcome;
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_testenv::TestEnv;
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, DeleteParams, ListParams};

const FLUSH: Duration = Duration::from_secs(30);

fn node_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        uid: Some(format!("{name}-uid")),
        ..ObjectReference::default()
    }
}

async fn events_about(client: &kube::Client, namespace: &str, object: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default().fields(&format!("involvedObject.name={object}")))
        .await
        .expect("list events")
        .items
}

async fn flush(sink: &EventSink) {
    tokio::time::timeout(FLUSH, sink.flush())
        .await
        .expect("events written in time");
}

#[tokio::test]
async fn twelve_emissions_make_one_v1_event_with_count_12() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let node = env.unique_name("node");
    let registry = SharedRegistry::new();
    let sink = EventSink::new().with_metrics(&registry);
    let recorder = sink.recorder(
        client.clone(),
        names::components::CLOUD_NODE_CONTROLLER,
        Some("ccm-0".into()),
    );
    // Twelve emissions within 10 s, some while earlier writes are still in flight.
    for i in 0..12 {
        recorder.warning(
            &node_ref(&node),
            "MissingProviderID",
            "failed to get provider ID for node",
        );
        if i % 4 == 3 {
            flush(&sink).await;
        }
    }
    flush(&sink).await;

    let events = events_about(&client, "default", &node).await;
    assert_eq!(events.len(), 1, "one object: {events:#?}");
    let event = &events[0];
    assert_eq!(event.count, Some(12));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("MissingProviderID"));
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("cloud-node-controller")
    );
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("cloud-node-controller")
    );
    assert_eq!(event.reporting_instance.as_deref(), Some("ccm-0"));
    let first = event.first_timestamp.as_ref().expect("firstTimestamp").0;
    let last = event.last_timestamp.as_ref().expect("lastTimestamp").0;
    assert!(first <= last);
    assert_eq!(
        event.involved_object.uid.as_deref(),
        Some(format!("{node}-uid").as_str())
    );
    assert!(
        event
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with(&format!("{node}.")))
    );

    let metrics = sink.metrics().unwrap();
    let component = names::components::CLOUD_NODE_CONTROLLER;
    let writes =
        metrics.total(component, Outcome::Created) + metrics.total(component, Outcome::Patched);
    let merged = metrics.total(component, Outcome::Merged);
    assert_eq!(metrics.total(component, Outcome::Created), 1);
    assert_eq!(writes + merged, 12, "every emission accounted for");
    assert!(
        writes <= 4,
        "repeats in a burst merge before they are written: {writes} writes"
    );
    assert!(registry.encode().contains("ccm_events_total"));
}

#[tokio::test]
async fn a_burst_of_identical_emissions_is_one_object_and_one_write() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let namespace = env.namespace("events").await;
    let sink = EventSink::new().with_metrics(&SharedRegistry::new());
    let recorder = sink.recorder(
        client.clone(),
        names::components::SERVICE_CONTROLLER,
        Some("ccm-0".into()),
    );
    let service = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        namespace: Some(namespace.clone()),
        name: Some("web".into()),
        uid: Some("web-uid".into()),
        ..ObjectReference::default()
    };
    for _ in 0..100 {
        recorder.normal(
            &service,
            names::events::ENSURING_LOAD_BALANCER,
            "Ensuring load balancer",
        );
    }
    flush(&sink).await;
    let events = events_about(&client, &namespace, "web").await;
    assert_eq!(events.len(), 1);
    // The spam filter lets 25 through per object; the count reports what was written.
    assert_eq!(events[0].count, Some(25));
    assert_eq!(
        events[0].metadata.namespace.as_deref(),
        Some(namespace.as_str())
    );
    let metrics = sink.metrics().unwrap();
    let component = names::components::SERVICE_CONTROLLER;
    assert_eq!(metrics.total(component, Outcome::SpamFiltered), 75);
    assert!(
        metrics.total(component, Outcome::Created) + metrics.total(component, Outcome::Patched)
            <= 2,
        "at most the create and one patch"
    );
}

#[tokio::test]
async fn a_repeat_of_a_deleted_event_creates_it_again_with_the_count_so_far() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let node = env.unique_name("node");
    let sink = EventSink::new();
    let recorder = sink.recorder(
        client.clone(),
        names::components::CLOUD_NODE_LIFECYCLE_CONTROLLER,
        None,
    );
    recorder.normal(
        &node_ref(&node),
        names::events::DELETING_NODE,
        "Deleting node",
    );
    flush(&sink).await;
    let events = events_about(&client, "default", &node).await;
    assert_eq!(events.len(), 1);
    let name = events[0].metadata.name.clone().unwrap();
    Api::<Event>::namespaced(client.clone(), "default")
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();

    recorder.normal(
        &node_ref(&node),
        names::events::DELETING_NODE,
        "Deleting node",
    );
    flush(&sink).await;
    let events = events_about(&client, "default", &node).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(events[0].count, Some(2));
    assert_eq!(
        events[0].reporting_instance.as_deref().unwrap_or_default(),
        ""
    );
}

#[tokio::test]
async fn close_writes_what_is_waiting_then_refuses_more() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let sink = EventSink::new().with_metrics(&SharedRegistry::new());
    let recorder = sink.recorder(client.clone(), "tagging-controller", None);
    let nodes: Vec<String> = (0..20).map(|_| env.unique_name("node")).collect();
    for node in &nodes {
        recorder.normal(&node_ref(node), "Tagged", "instance tagged");
    }
    assert_eq!(sink.close(FLUSH).await, 0);
    for node in &nodes {
        assert_eq!(
            events_about(&client, "default", node).await.len(),
            1,
            "{node}"
        );
    }
    recorder.normal(&node_ref(&nodes[0]), "Tagged", "instance tagged");
    let metrics = sink.metrics().unwrap();
    assert_eq!(metrics.total("tagging-controller", Outcome::Dropped), 1);
}

#[tokio::test]
async fn a_second_sink_counts_into_the_first_ones_metrics() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let node = env.unique_name("node");
    let registry = SharedRegistry::new();
    let controllers = EventSink::new().with_metrics(&registry);
    // A pipeline of its own (leader election's in ccm-app), counted in the same registration.
    let second = EventSink::new().sharing_metrics(&controllers);
    let component = names::components::CLOUD_CONTROLLER_MANAGER;
    second
        .recorder(client.clone(), component, Some("ccm-0".into()))
        .normal(&node_ref(&node), "LeaderElection", "ccm-0 became leader");
    flush(&second).await;
    assert_eq!(events_about(&client, "default", &node).await.len(), 1);
    let metrics = controllers.metrics().expect("registered");
    assert_eq!(metrics.total(component, Outcome::Created), 1);
    assert_eq!(controllers.waiting(), 0, "the first sink has no lane of it");
    let text = registry.encode();
    assert_eq!(
        text.matches("# TYPE ccm_events counter").count(),
        1,
        "registered once: {text}"
    );
    assert!(
        EventSink::new()
            .sharing_metrics(&EventSink::new())
            .metrics()
            .is_none(),
        "nothing to share"
    );
}
