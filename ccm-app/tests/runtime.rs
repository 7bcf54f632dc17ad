//! The runtime against a real kube-apiserver with the fake provider: node initialization, load-balancer
//! provisioning, the admin endpoints, graceful shutdown, leader election between replicas, lost leadership.

mod support;

use std::time::Duration;

use ccm_app::{CcmStatus, RunError};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use support::*;

async fn lease_holder(client: &kube::Client, namespace: &str, name: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    leases
        .get_opt(name)
        .await
        .expect("read the lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn initializes_nodes_provisions_load_balancers_serves_endpoints_and_shuts_down_cleanly() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("rt");
    let ns = env.namespace("rt").await;
    let node_names: Vec<String> = (0..2).map(|i| format!("{label}-n{i}")).collect();
    let (cloud, registry) = fake_cloud(&node_names);
    let builder = ccm(registry, client.clone());
    let options = builder
        .parse_args(flags(&label, &ns, "ccm"))
        .expect("valid flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    let addr = running.admin_addr().expect("serving");
    let cert = running
        .admin_certificate_pem()
        .expect("certificate")
        .to_owned();

    // before leading: alive, not ready
    let (status, body) = https_get(addr, &cert, "/livez").await;
    assert_eq!((status, body.as_str()), (200, "ok"));

    wait_status(&running, CcmStatus::Running).await;
    for (i, name) in node_names.iter().enumerate() {
        create_node(&client, name, &label, &format!("10.244.{i}.0/24")).await;
    }
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    services
        .create(&PostParams::default(), &load_balancer_service(&ns, "web"))
        .await
        .expect("create the Service");

    let nodes: Api<Node> = Api::all(client.clone());
    let selector = ListParams::default().labels(&format!("{TEST_LABEL}={label}"));
    let initialized_nodes = wait_for("the nodes to be initialized", TIMEOUT, || async {
        let list = nodes.list(&selector).await.ok()?;
        (list.items.len() == 2 && list.items.iter().all(initialized)).then_some(list.items)
    })
    .await
    .expect("nodes initialized");
    for node in &initialized_nodes {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("topology.kubernetes.io/zone")
                .map(String::as_str),
            Some("zone-a")
        );
        assert_eq!(
            labels
                .get("node.kubernetes.io/instance-type")
                .map(String::as_str),
            Some("fake.large")
        );
    }
    let ips = wait_for("the load balancer", TIMEOUT, || async {
        let service = services.get("web").await.ok()?;
        let ips = ingress_ips(&service);
        (!ips.is_empty()).then_some(ips)
    })
    .await
    .expect("load balancer provisioned");
    let lb = cloud
        .load_balancer(&format!("{ns}/web"))
        .expect("the fake cloud has the load balancer");
    assert_eq!(ips, vec![lb.ingress_ip.clone()]);

    // admin endpoints
    let (status, body) = https_get(addr, &cert, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = https_get(addr, &cert, "/healthz?verbose").await;
    assert_eq!(status, 200);
    for check in [
        "[+]ping ok",
        "[+]leaderElection ok",
        "[+]cloud-node-controller ok",
        "[+]cloud-node-lifecycle-controller ok",
        "[+]service-lb-controller ok",
        "[+]node-route-controller ok",
    ] {
        assert!(body.contains(check), "{check} missing from\n{body}");
    }
    for path in [
        "/healthz/leaderElection",
        "/healthz/service-lb-controller",
        "/livez/ping",
    ] {
        let (status, body) = https_get(addr, &cert, path).await;
        assert_eq!((status, body.as_str()), (200, "ok"), "{path}");
    }
    assert_eq!(https_get(addr, &cert, "/healthz/nope").await.0, 404);
    let (status, body) = https_get(addr, &cert, "/readyz?verbose").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("[+]leader ok") && body.contains("[+]informer-sync ok"),
        "{body}"
    );
    let (status, metrics) = https_get(addr, &cert, "/metrics").await;
    assert_eq!(status, 200);
    for name in ["cloud-node", "cloud-node-lifecycle", "service", "route"] {
        let sample = format!(
            "running_managed_controllers{{manager=\"cloud-controller-manager\",name=\"{name}\"}}"
        );
        assert_eq!(
            metric(&metrics, &sample),
            Some(1.0),
            "{sample} in\n{metrics}"
        );
    }
    assert_eq!(
        metric(&metrics, "leader_election_master_status{name=\"ccm\"}"),
        Some(1.0),
        "{metrics}"
    );
    assert!(
        metrics.contains("workqueue_adds_total{name=\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("cloudprovider_api_requests_total{"),
        "{metrics}"
    );
    let (status, configz) = https_get(addr, &cert, "/configz").await;
    assert_eq!(status, 200);
    let configz: serde_json::Value = serde_json::from_str(&configz).expect("JSON");
    assert_eq!(
        configz["cloudcontrollermanager.config.k8s.io"]["cloudProvider"],
        "fake"
    );
    assert_eq!(
        lease_holder(&client, &ns, "ccm").await.as_deref(),
        running.identity()
    );

    // SIGTERM-equivalent: a clean exit, the lease released, the gauges back to 0
    let registry = running.metrics().clone();
    shutdown.cancel();
    tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("stops in time")
        .expect("a clean shutdown");
    assert_eq!(
        lease_holder(&client, &ns, "ccm").await,
        None,
        "the lease is released"
    );
    let text = registry.encode();
    assert_eq!(
        metric(
            &text,
            "running_managed_controllers{manager=\"cloud-controller-manager\",name=\"service\"}"
        ),
        Some(0.0),
        "{text}"
    );
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the admin server stopped"
    );
    delete_nodes(&client, &label).await;
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_fail_over_on_shutdown() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("ha");
    let ns = env.namespace("ha").await;
    let node_names = vec![format!("{label}-n0")];
    let (_cloud_a, registry_a) = fake_cloud(&node_names);
    let (_cloud_b, registry_b) = fake_cloud(&node_names);
    let a = ccm(registry_a, client.clone());
    let b = ccm(registry_b, client.clone());
    let options_a = a.parse_args(flags(&label, &ns, "ha")).expect("flags");
    let options_b = b.parse_args(flags(&label, &ns, "ha")).expect("flags");
    let stop_a = CancellationToken::new();
    let stop_b = CancellationToken::new();
    let running_a = a.start(options_a, stop_a.clone()).await.expect("start a");
    let running_b = b.start(options_b, stop_b.clone()).await.expect("start b");

    let holder = wait_for("a leader", TIMEOUT, || async {
        lease_holder(&client, &ns, "ha").await
    })
    .await
    .expect("a leader");
    let (leader, leader_stop, follower, follower_stop) =
        if Some(holder.as_str()) == running_a.identity() {
            (running_a, stop_a, running_b, stop_b)
        } else {
            assert_eq!(Some(holder.as_str()), running_b.identity());
            (running_b, stop_b, running_a, stop_a)
        };
    wait_status(&leader, CcmStatus::Running).await;
    // the follower stays a follower for several retry periods, and is alive but not ready
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(*follower.status().borrow(), CcmStatus::WaitingForLeadership);
    let addr = follower.admin_addr().expect("serving");
    let cert = follower.admin_certificate_pem().expect("cert").to_owned();
    assert_eq!(
        https_get(addr, &cert, "/healthz").await,
        (200, "ok".to_owned())
    );
    let (status, body) = https_get(addr, &cert, "/readyz").await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("[-]leader failed"), "{body}");
    let (_, metrics) = https_get(addr, &cert, "/metrics").await;
    assert_eq!(
        metric(&metrics, "leader_election_master_status{name=\"ha\"}"),
        Some(0.0),
        "{metrics}"
    );

    // the leader shuts down cleanly and releases the lease: the follower takes over at once
    leader_stop.cancel();
    leader.wait().await.expect("clean shutdown");
    let new_holder = wait_for(
        "the follower to take over",
        Duration::from_secs(10),
        || async {
            lease_holder(&client, &ns, "ha")
                .await
                .filter(|h| h != &holder)
        },
    )
    .await
    .expect("take-over");
    assert_eq!(Some(new_holder.as_str()), follower.identity());
    // The first leader's LeaderElection Events, core/v1 through the kit's recorder on a fenced client: "stopped
    // leading" was written while it still held the lease (after the controllers' Event sink had closed).
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let messages = wait_for("the leader election events", TIMEOUT, || async {
        let about_the_lease =
            ListParams::default().fields("involvedObject.kind=Lease,involvedObject.name=ha");
        let list = events.list(&about_the_lease).await.ok()?;
        let mut messages: Vec<String> = list
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("LeaderElection"))
            .filter(|e| {
                e.source.as_ref().and_then(|s| s.component.as_deref())
                    == Some("cloud-controller-manager")
            })
            .filter_map(|e| e.message.clone())
            .filter(|m| m.starts_with(holder.as_str()))
            .collect();
        messages.sort();
        (messages.len() == 2).then_some(messages)
    })
    .await
    .expect("both events of the first leader");
    assert_eq!(
        messages,
        [
            format!("{holder} became leader"),
            format!("{holder} stopped leading")
        ]
    );
    wait_status(&follower, CcmStatus::Running).await;
    follower_stop.cancel();
    follower.wait().await.expect("clean shutdown");
    delete_nodes(&client, &label).await;
}

#[tokio::test]
async fn lost_leadership_stops_the_controllers_with_an_error() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("lost");
    let ns = env.namespace("lost").await;
    let (_cloud, registry) = fake_cloud(&[]);
    let builder = ccm(registry, client.clone());
    let options = builder
        .parse_args(flags(&label, &ns, "lost"))
        .expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    wait_status(&running, CcmStatus::Running).await;
    let registry = running.metrics().clone();

    // another identity takes the lease behind this replica's back
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let patch =
        serde_json::json!({"spec": {"holderIdentity": "usurper", "leaseDurationSeconds": 600}});
    leases
        .patch("lost", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("steal the lease");

    let result = tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("stops in time");
    match result {
        Err(RunError::LeadershipLost(reason)) => {
            assert!(reason.to_string().contains("usurper"), "{reason}");
        }
        other => panic!("expected lost leadership, got {other:?}"),
    }
    let text = registry.encode();
    assert_eq!(
        metric(
            &text,
            "running_managed_controllers{manager=\"cloud-controller-manager\",name=\"cloud-node\"}"
        ),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        lease_holder(&client, &ns, "lost").await.as_deref(),
        Some("usurper"),
        "not released"
    );
    assert!(!shutdown.is_cancelled());
}

#[tokio::test]
async fn without_leader_election_the_controllers_start_at_once() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let label = env.unique_name("nole");
    let ns = env.namespace("nole").await;
    let node_names = vec![format!("{label}-n0")];
    let (_cloud, registry) = fake_cloud(&node_names);
    let builder = ccm(registry, client.clone());
    let mut args = flags(&label, &ns, "nole");
    args.push("--leader-elect=false".to_owned());
    args.push("--controllers=cloud-node".to_owned());
    let options = builder.parse_args(args).expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    wait_status(&running, CcmStatus::Running).await;
    create_node(&client, &node_names[0], &label, "10.244.0.0/24").await;
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the node to be initialized", TIMEOUT, || async {
        nodes.get(&node_names[0]).await.ok().filter(initialized)
    })
    .await
    .expect("initialized");
    let addr = running.admin_addr().expect("serving");
    let cert = running.admin_certificate_pem().expect("cert").to_owned();
    let (status, body) = https_get(addr, &cert, "/healthz?verbose").await;
    assert_eq!(status, 200);
    assert!(!body.contains("leaderElection"), "{body}");
    assert!(body.contains("[+]cloud-node-controller ok"), "{body}");
    assert!(
        !body.contains("service-lb-controller"),
        "only the enabled controller runs: {body}"
    );
    assert_eq!(https_get(addr, &cert, "/readyz").await.0, 200);
    assert_eq!(
        lease_holder(&client, &ns, "nole").await,
        None,
        "no lease without leader election"
    );
    shutdown.cancel();
    running.wait().await.expect("clean shutdown");
    delete_nodes(&client, &label).await;
}

#[tokio::test]
async fn a_malformed_selector_is_reported_clearly() {
    let env = TestEnv::shared().await;
    let client = env.client();
    let ns = env.namespace("sel").await;
    let (_cloud, registry) = fake_cloud(&[]);
    let builder = ccm(registry, client.clone());
    let mut args = flags("x", &ns, "sel");
    args.retain(|a| !a.starts_with("--node-selector"));
    args.push("--node-selector=a in (b".to_owned());
    args.push("--leader-elect=false".to_owned());
    let options = builder.parse_args(args).expect("flags");
    let running = builder
        .start(options, CancellationToken::new())
        .await
        .expect("start");
    let err = tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("stops")
        .expect_err("a bad selector stops the CCM");
    assert!(
        err.to_string()
            .starts_with("invalid --node-selector \"a in (b\""),
        "{err}"
    );
}
