//! A vendor controller on the controller kit (`examples::tagging`) inside the real runtime, against a real
//! kube-apiserver: enabled by `--controllers=*,tagging` it tags the instances of the Nodes the cloud node
//! controller initialized, records `TaggedInstance` Events, shows in the metrics, re-tags after drift and stops
//! with the CCM; with the default `--controllers=*` it does not run; the reference CCM wires it to its own cloud,
//! with its vendor flag and config section, and reloads a changed `--cloud-config` without a restart.

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_app::{CcmBuilder, CcmStatus, CloudControllerManager, RunningCcm};
use ccm_core::ProviderRegistry;
use ccm_provider_fake::{FakeCloud, FakeInstance};
use ccm_testenv::ccm::{TEST_LABEL, TIMEOUT};
use ccm_testenv::nodes::TestNode;
use ccm_testenv::{TestEnv, wait_for};
use examples::tagging;
use k8s_openapi::api::core::v1::{Event, Node, ObjectReference};
use kube::api::{Api, ListParams};
use tokio_util::sync::CancellationToken;

/// The tagging controller's resync in these tests: short, so drift is repaired within the test.
const RESYNC: Duration = Duration::from_secs(1);

/// A Node as a kubelet with `--cloud-provider=external` registers it: tainted uninitialized, then reported Ready.
async fn create_node(client: &kube::Client, name: &str, label: &str) {
    TestNode::new(name)
        .with_label(TEST_LABEL, label)
        .create_ready(client)
        .await
        .unwrap_or_else(|e| panic!("creating node {name} and reporting it Ready: {e}"));
}

async fn delete_nodes(client: &kube::Client, label: &str) {
    ccm_testenv::nodes::delete_nodes(client, &format!("{TEST_LABEL}={label}")).await;
}

/// The runtime's flags for a test: its own Nodes, Lease and cluster name, short election timings, and `extra`.
fn flags(label: &str, namespace: &str, extra: &[&str]) -> Vec<String> {
    let mut args = ccm_testenv::ccm::flags(label, namespace, "ccm");
    args.extend([
        format!("--cluster-name={label}"),
        // Longer than TIMEOUT: a controller that did not stop would hold the CCM past the test's wait.
        "--shutdown-timeout=5m".to_owned(),
    ]);
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// A builder over the test apiserver with the default controllers, serving on an ephemeral port.
fn builder(registry: ProviderRegistry, client: &kube::Client) -> CcmBuilder {
    CloudControllerManager::builder(registry)
        .with_default_controllers()
        .with_client(client.clone())
        .with_admin_listener(ccm_testenv::ccm::admin_listener())
}

/// A fake cloud with one instance per node name, registered as `fake`.
fn fake_cloud(node_names: &[String]) -> (FakeCloud, ProviderRegistry) {
    let cloud = FakeCloud::new();
    for (i, name) in node_names.iter().enumerate() {
        cloud.add_instance(
            FakeInstance::new(name.clone())
                .with_internal_ip(format!("10.0.0.{}", i + 10))
                .with_zone("zone-a", "region-1"),
        );
    }
    let registry = ProviderRegistry::new();
    cloud
        .register_shared(&registry, "fake")
        .expect("register the fake cloud");
    (cloud, registry)
}

async fn start(builder: CcmBuilder, args: Vec<String>) -> (RunningCcm, CancellationToken) {
    let options = builder.parse_args(args).expect("valid flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    ccm_testenv::ccm::wait_status(running.status(), CcmStatus::Running, TIMEOUT).await;
    (running, shutdown)
}

/// Cancel the token (SIGTERM) and wait for the CCM task to return: within TIMEOUT, so every controller returned
/// by itself (the runtime would wait the 5-minute `--shutdown-timeout` for one that does not).
async fn stop(running: RunningCcm, shutdown: CancellationToken) {
    shutdown.cancel();
    tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("the CCM stops in time")
        .expect("a clean shutdown");
}

/// The tags the controller puts on the instance of `node` in the cluster `cluster`.
fn tags_of(cluster: &str, node: &str) -> [(String, String); 2] {
    [
        (tagging::cluster_tag(cluster), "owned".to_owned()),
        (tagging::NODE_NAME_TAG.to_owned(), node.to_owned()),
    ]
}

fn tagged(cloud: &FakeCloud, cluster: &str, node: &str) -> bool {
    cloud.instance(node).is_some_and(|instance| {
        tags_of(cluster, node)
            .iter()
            .all(|(k, v)| instance.labels.get(k) == Some(v))
    })
}

/// The `TaggedInstance` Events of the Node `node`.
async fn tagged_events(client: &kube::Client, node: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let selector = format!(
        "involvedObject.kind=Node,involvedObject.name={node},reason={}",
        tagging::TAGGED_INSTANCE
    );
    events
        .list(&ListParams::default().fields(&selector))
        .await
        .map(|list| list.items)
        .unwrap_or_default()
}

/// The value of the sample `name{labels}` in the Prometheus text `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.parse().ok())
}

const RUNNING_TAGGING: &str =
    "running_managed_controllers{manager=\"cloud-controller-manager\",name=\"tagging\"}";
const TAGGING_ADDS: &str = "workqueue_adds_total{name=\"tagging\"}";

#[tokio::test]
async fn enabled_by_name_it_tags_instances_records_events_repairs_drift_and_stops_with_the_ccm() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("tag");
    let ns = env.namespace("tag").await;
    let node_names: Vec<String> = (0..2).map(|i| format!("{label}-n{i}")).collect();
    let (cloud, registry) = fake_cloud(&node_names);
    let builder =
        builder(registry, &client).register_controller(tagging::descriptor(cloud.clone(), RESYNC));
    let (running, shutdown) =
        start(builder, flags(&label, &ns, &["--controllers=*,tagging"])).await;
    for name in &node_names {
        create_node(&client, name, &label).await;
    }

    // (a) The cloud node controller initializes the Nodes, then their instances get tagged.
    wait_for("the instances to be tagged", TIMEOUT, || async {
        node_names
            .iter()
            .all(|name| tagged(&cloud, &label, name))
            .then_some(())
    })
    .await
    .expect("instances tagged");
    let nodes: Api<Node> = Api::all(client.clone());
    for name in &node_names {
        let node = nodes.get(name).await.expect("the node");
        let provider_id = node.spec.and_then(|s| s.provider_id).unwrap_or_default();
        assert_eq!(provider_id, format!("fake://{name}"), "initialized first");
    }

    // (b) A Normal TaggedInstance Event per Node, from the controller's component.
    for name in &node_names {
        let events = wait_for("the TaggedInstance Event", TIMEOUT, || async {
            let events = tagged_events(&client, name).await;
            (!events.is_empty()).then_some(events)
        })
        .await
        .expect("an Event");
        let event = &events[0];
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(
            event.source.as_ref().and_then(|s| s.component.as_deref()),
            Some(tagging::COMPONENT)
        );
        let message = event.message.as_deref().unwrap_or_default();
        assert!(
            message.contains(&format!("fake://{name}"))
                && message.contains(&format!("{}=owned", tagging::cluster_tag(&label))),
            "{message}"
        );
    }

    // (c) The runtime reports it running; its queue has the Go workqueue metrics.
    let text = running.metrics().encode();
    assert_eq!(sample(&text, RUNNING_TAGGING), Some(1.0), "{text}");
    let adds = sample(&text, TAGGING_ADDS).expect("workqueue_adds_total{name=\"tagging\"}");
    assert!(adds >= 2.0, "{adds} adds\n{text}");

    // Drift: someone removes the tags; the periodic re-check (Action::RequeueAfter) puts them back.
    let drifted = &node_names[0];
    assert!(cloud.update_instance(drifted, |instance| instance.labels.clear()));
    wait_for("the removed tags to be restored", TIMEOUT, || async {
        tagged(&cloud, &label, drifted).then_some(())
    })
    .await
    .expect("tags restored");
    let others_untouched = cloud.instance(&node_names[1]).expect("instance").labels;
    assert_eq!(others_untouched.len(), 2, "{others_untouched:?}");

    // (e) Shutdown stops it: the CCM task returns and the gauge drops to 0.
    let metrics = running.metrics().clone();
    stop(running, shutdown).await;
    assert_eq!(sample(&metrics.encode(), RUNNING_TAGGING), Some(0.0));
    delete_nodes(&client, &label).await;
}

#[tokio::test]
async fn with_the_default_controllers_it_does_not_run() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("notag");
    let ns = env.namespace("notag").await;
    let node_names = vec![format!("{label}-n0")];
    let (cloud, registry) = fake_cloud(&node_names);
    let builder =
        builder(registry, &client).register_controller(tagging::descriptor(cloud.clone(), RESYNC));
    // --controllers=* (the default) leaves a disabled-by-default controller off.
    let args = flags(&label, &ns, &["--controllers=*", "--leader-elect=false"]);
    let options = builder.parse_args(args.clone()).expect("valid flags");
    let plan = builder.validate(&options).expect("valid");
    assert!(plan.iter().any(|d| d.name == "cloud-node-controller"));
    assert!(!plan.iter().any(|d| d.name == tagging::NAME));

    let (running, shutdown) = start(builder, args).await;
    create_node(&client, &node_names[0], &label).await;
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the node to be initialized", TIMEOUT, || async {
        let node = nodes.get(&node_names[0]).await.ok()?;
        node.spec?.provider_id.map(drop)
    })
    .await
    .expect("initialized");
    // Every enabled controller was started before the CCM reported Running: the tagging one was not.
    let text = running.metrics().encode();
    assert_eq!(sample(&text, RUNNING_TAGGING), None, "{text}");
    assert_eq!(sample(&text, TAGGING_ADDS), None, "{text}");
    assert!(
        sample(
            &text,
            "running_managed_controllers{manager=\"cloud-controller-manager\",name=\"cloud-node\"}"
        ) == Some(1.0),
        "{text}"
    );
    assert!(!tagged(&cloud, &label, &node_names[0]));
    stop(running, shutdown).await;
    delete_nodes(&client, &label).await;
}

/// Write `text` to `path` atomically (a new file renamed over the old one, as a Secret volume's `..data` swap
/// does): the watcher never sees a half-written inventory.
fn replace_file(path: &std::path::Path, text: &str) {
    let staging = path.with_extension("staging");
    std::fs::write(&staging, text).expect("write the new file");
    std::fs::rename(&staging, path).expect("swap it in");
}

/// An inventory of the fake cloud with one instance per name and no instance types (the vendor flag sets them).
fn inventory(nodes: &[&str]) -> String {
    let mut text = "providerName: fake\ninstances:\n".to_owned();
    for (i, node) in nodes.iter().enumerate() {
        text.push_str(&format!(
            "  - name: {node}\n    zone: zone-a\n    region: region-1\n    addresses:\n      - {{type: InternalIP, \
             address: 10.0.0.{}}}\n",
            30 + i
        ));
    }
    text
}

/// The Events with `reason` about `regarding`.
async fn events_about(
    client: &kube::Client,
    regarding: &ObjectReference,
    reason: &str,
) -> Vec<Event> {
    let namespace = regarding.namespace.as_deref().unwrap_or("default");
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let selector = format!(
        "involvedObject.name={},reason={reason}",
        regarding.name.as_deref().unwrap_or_default()
    );
    events
        .list(&ListParams::default().fields(&selector))
        .await
        .map(|list| list.items)
        .unwrap_or_default()
}

/// Wait until the Node `name` is initialized; returns its labels.
async fn initialized_labels(client: &kube::Client, name: &str) -> BTreeMap<String, String> {
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the node to be initialized", TIMEOUT, || async {
        let node = nodes.get(name).await.ok()?;
        node.spec.as_ref()?.provider_id.as_ref()?;
        node.metadata.labels
    })
    .await
    .unwrap_or_else(|e| panic!("{name} initialized: {e}"))
}

const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

/// The "done when": the reference CCM against the real apiserver with a vendor flag
/// (`--fake-default-instance-type`), a vendor config section (`fake: {instanceLabels}`), a vendor controller
/// (`tagging`, taking the cloud its factory shared) and a live reload of `--cloud-config`: a valid new inventory
/// is applied without a restart, a broken one is rejected with a Warning Event and the old one keeps working.
#[tokio::test]
async fn the_reference_ccm_with_a_vendor_flag_config_section_controller_and_live_reload() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("vendor");
    let ns = env.namespace("vendor").await;
    let [n0, n1, n2] = [0, 1, 2].map(|i| format!("{label}-n{i}"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let inventory_path = dir.path().join("inventory.yaml");
    replace_file(&inventory_path, &inventory(&[&n0]));
    let config_path = dir.path().join("ccm.yaml");
    std::fs::write(
        &config_path,
        "fake:\n  instanceLabels:\n    ccm.example/team: infra\n",
    )
    .expect("write the config file");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    let builder = examples::reference_ccm()
        .expect("the reference CCM")
        .with_client(client.clone())
        .with_admin_listener(listener);
    let cloud_config = format!("--cloud-config={}", inventory_path.display());
    let config = format!("--config={}", config_path.display());
    let args = flags(
        &label,
        &ns,
        &[
            &cloud_config,
            &config,
            "--fake-default-instance-type=fake.vendor",
            "--controllers=*,tagging",
            "--cloud-config-reload-interval=500ms",
        ],
    );
    let (running, shutdown) = start(builder, args).await;

    // The flag and the config section reached the provider factory: the Node's labels come from them.
    create_node(&client, &n0, &label).await;
    let labels = initialized_labels(&client, &n0).await;
    assert_eq!(
        labels.get(INSTANCE_TYPE_LABEL).map(String::as_str),
        Some("fake.vendor"),
        "{labels:?}"
    );
    assert_eq!(
        labels.get("ccm.example/team").map(String::as_str),
        Some("infra"),
        "{labels:?}"
    );

    // The vendor controller reconciles: it tags the instance of the cloud the factory built and shared.
    let events = wait_for("the TaggedInstance Event", TIMEOUT, || async {
        let events = tagged_events(&client, &n0).await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("an Event");
    let message = events[0].message.as_deref().unwrap_or_default();
    assert!(message.contains(&format!("fake://{n0}")), "{message}");
    assert_eq!(
        sample(&running.metrics().encode(), RUNNING_TAGGING),
        Some(1.0)
    );

    // A changed inventory is applied without a restart: a Normal Event, and a Node of the new instance is
    // initialized, with the vendor defaults filled in again.
    // Without POD_NAME/POD_NAMESPACE (as here) the runtime's reload Events are about its Lease.
    let regarding = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".to_owned()),
        kind: Some("Lease".to_owned()),
        namespace: Some(ns.clone()),
        name: Some("ccm".to_owned()),
        ..ObjectReference::default()
    };
    replace_file(&inventory_path, &inventory(&[&n0, &n1, &n2]));
    let reloaded = wait_for("the CloudConfigReloaded Event", TIMEOUT, || async {
        let events = events_about(&client, &regarding, "CloudConfigReloaded").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a reload Event");
    assert_eq!(reloaded[0].type_.as_deref(), Some("Normal"));
    create_node(&client, &n1, &label).await;
    let labels = initialized_labels(&client, &n1).await;
    assert_eq!(
        labels.get(INSTANCE_TYPE_LABEL).map(String::as_str),
        Some("fake.vendor"),
        "{labels:?}"
    );

    // A broken inventory is rejected: a Warning Event saying why, and the previous inventory stays in force.
    replace_file(&inventory_path, "instances: [{name: x, zonee: a}]\n");
    let failed = wait_for("the CloudConfigReloadFailed Event", TIMEOUT, || async {
        let events = events_about(&client, &regarding, "CloudConfigReloadFailed").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a Warning Event");
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    let message = failed[0].message.as_deref().unwrap_or_default();
    assert!(
        message.contains("zonee") && message.contains("stays in force"),
        "{message}"
    );
    create_node(&client, &n2, &label).await;
    let labels = initialized_labels(&client, &n2).await;
    assert_eq!(
        labels.get("ccm.example/team").map(String::as_str),
        Some("infra"),
        "{labels:?}"
    );

    let text = running.metrics().encode();
    assert_eq!(
        sample(
            &text,
            "cloud_provider_config_reloads_total{result=\"success\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "cloud_provider_config_reloads_total{result=\"failure\"}"
        ),
        Some(1.0),
        "{text}"
    );
    stop(running, shutdown).await;
    delete_nodes(&client, &label).await;
}
