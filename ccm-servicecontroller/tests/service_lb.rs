//! The REAL service controller against the REAL kube-apiserver (ccm-testenv) and the fake cloud.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ccm_provider_fake::{FakeCloud, Fault, InjectedError, Operation};
use ccm_servicecontroller::Config;
use ccm_testenv::{services::ingress_ip, wait_for};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::*;

#[tokio::test]
async fn create_adds_finalizer_ingress_and_events() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_node("b").await;
    h.create_lb("web").await;

    let ip = h.wait_ingress("web").await;
    let lb = h
        .fake
        .load_balancer(&h.key("web"))
        .expect("a load balancer");
    assert_eq!(lb.ingress_ip, ip);
    assert_eq!(lb.hosts, h.hosts(&["a", "b"]));
    assert_eq!(lb.cluster, "kubernetes");
    let svc = h.get_service("web").await.unwrap();
    assert!(has_finalizer(&svc), "finalizer added");

    let (ty, note) = h.wait_event("web", "EnsuringLoadBalancer").await;
    assert_eq!(
        (ty.as_str(), note.as_str()),
        ("Normal", "Ensuring load balancer")
    );
    let (ty, note) = h.wait_event("web", "EnsuredLoadBalancer").await;
    assert_eq!(
        (ty.as_str(), note.as_str()),
        ("Normal", "Ensured load balancer")
    );
    // The finalizer was written before the first cloud call.
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancer), 1);
    h.finish().await;
}

#[tokio::test]
async fn no_nodes_warns_but_still_ensures() {
    let h = Harness::start(test_config()).await;
    h.create_lb("lonely").await;
    h.wait_ingress("lonely").await;
    let (ty, note) = h.wait_event("lonely", "UnAvailableLoadBalancer").await;
    assert_eq!(
        (ty.as_str(), note.as_str()),
        ("Warning", "There are no available nodes for LoadBalancer")
    );
    assert!(
        h.fake
            .load_balancer(&h.key("lonely"))
            .unwrap()
            .hosts
            .is_empty()
    );
    h.finish().await;
}

#[tokio::test]
async fn port_change_reensures() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    let ip = h.wait_ingress("web").await;
    h.services()
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"spec": {"ports": [{"name": "web", "port": 8080, "protocol": "TCP"}]}})),
        )
        .await
        .unwrap();
    let key = h.key("web");
    wait_for("port 8080 on the load balancer", TIMEOUT, || async {
        let lb = h.fake.load_balancer(&key)?;
        (lb.ports.iter().map(|p| p.port).collect::<Vec<_>>() == vec![8080]).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancer), 2);
    assert_eq!(
        h.fake.load_balancer(&key).unwrap().ingress_ip,
        ip,
        "same LB"
    );
    // A label change is not a reason to re-ensure.
    h.services()
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    // An annotation change is (Go compares every annotation); it also proves the label change was skipped.
    h.services()
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"metadata": {"annotations": {"example.com/tier": "gold"}}})),
        )
        .await
        .unwrap();
    wait_for("third ensure", TIMEOUT, || async {
        (h.fake.call_count(Operation::EnsureLoadBalancer) >= 3).then_some(())
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancer), 3);
    h.finish().await;
}

#[tokio::test]
async fn switch_to_cluster_ip_deletes_load_balancer() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    h.services()
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"spec": {"type": "ClusterIP"}})),
        )
        .await
        .unwrap();
    h.wait_no_lb("web").await;
    let svc = wait_for("finalizer removed and status cleared", TIMEOUT, || async {
        let svc = h.get_service("web").await?;
        (!has_finalizer(&svc) && ingress_ip(&svc).is_none()).then_some(svc)
    })
    .await
    .unwrap();
    assert_eq!(svc.spec.unwrap().type_.as_deref(), Some("ClusterIP"));
    h.wait_event("web", "DeletingLoadBalancer").await;
    let (ty, note) = h.wait_event("web", "DeletedLoadBalancer").await;
    assert_eq!(
        (ty.as_str(), note.as_str()),
        ("Normal", "Deleted load balancer")
    );
    h.finish().await;
}

/// Go's correlator counts repeats on one Event object: after a Service is ensured, switched to ClusterIP,
/// ensured again and deleted, each of the four reasons is one object with `count: 2`.
#[tokio::test]
async fn repeated_lifecycle_events_are_counted_on_one_object_as_go_does() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    let set_type = |type_: &'static str| {
        let services = h.services();
        async move {
            services
                .patch(
                    "web",
                    &PatchParams::default(),
                    &merge(json!({"spec": {"type": type_}})),
                )
                .await
                .unwrap();
        }
    };
    set_type("ClusterIP").await;
    h.wait_no_lb("web").await;
    h.wait_event("web", "DeletedLoadBalancer").await;
    set_type("LoadBalancer").await;
    h.wait_ingress("web").await;
    h.delete_service("web").await;
    h.wait_service_gone("web").await;
    for reason in [
        "EnsuringLoadBalancer",
        "EnsuredLoadBalancer",
        "DeletingLoadBalancer",
        "DeletedLoadBalancer",
    ] {
        wait_for(&format!("{reason} counted twice"), TIMEOUT, || async {
            let events = h.event_objects("web", reason).await;
            (events.len() == 1 && events[0].count == Some(2)).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    h.finish().await;
}

#[tokio::test]
async fn delete_removes_load_balancer_then_service() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    h.delete_service("web").await;
    h.wait_service_gone("web").await;
    assert!(h.fake.load_balancer(&h.key("web")).is_none());
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancerDeleted), 1);
    h.finish().await;
}

#[tokio::test]
async fn foreign_class_is_untouched() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    let mut foreign = h.lb_service("foreign", 80);
    foreign.spec.as_mut().unwrap().load_balancer_class = Some("example.com/other".into());
    h.create_service(&foreign).await;
    // Created after the foreign one: once it is served, the foreign one has been seen (and skipped).
    h.create_lb("mine").await;
    h.wait_ingress("mine").await;
    h.services()
        .patch(
            "foreign",
            &PatchParams::default(),
            &merge(json!({"metadata": {"annotations": {"poke": "1"}}})),
        )
        .await
        .unwrap();
    h.services()
        .patch(
            "mine",
            &PatchParams::default(),
            &merge(json!({"metadata": {"annotations": {"poke": "1"}}})),
        )
        .await
        .unwrap();
    wait_for("second ensure of mine", TIMEOUT, || async {
        (h.fake.call_count(Operation::EnsureLoadBalancer) == 2).then_some(())
    })
    .await
    .unwrap();
    let svc = h.get_service("foreign").await.unwrap();
    assert!(!has_finalizer(&svc));
    assert_eq!(ingress_ip(&svc), None);
    assert!(h.fake.load_balancer(&h.key("foreign")).is_none());
    let foreign_key = h.key("foreign");
    assert!(
        h.fake.calls().iter().all(|c| c.target != foreign_key),
        "no cloud call for it"
    );
    assert!(h.events("foreign", "EnsuringLoadBalancer").await.is_empty());
    h.finish().await;
}

#[tokio::test]
async fn claimed_class_is_served_and_class_less_left_alone() {
    let config = test_config()
        .with_load_balancer_class(Some("example.com/internal".into()))
        .with_class_less_services(false);
    let h = Harness::start(config).await;
    h.create_node("a").await;
    h.create_lb("classless").await;
    let mut claimed = h.lb_service("claimed", 80);
    claimed.spec.as_mut().unwrap().load_balancer_class = Some("example.com/internal".into());
    h.create_service(&claimed).await;
    h.wait_ingress("claimed").await;
    assert!(has_finalizer(&h.get_service("claimed").await.unwrap()));
    let classless = h.get_service("classless").await.unwrap();
    assert!(!has_finalizer(&classless));
    assert!(h.fake.load_balancer(&h.key("classless")).is_none());
    h.finish().await;
}

#[tokio::test]
async fn node_changes_update_hosts() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_node("b").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    h.wait_hosts("web", &h.hosts(&["a", "b"])).await;

    h.create_node("c").await;
    h.wait_hosts("web", &h.hosts(&["a", "b", "c"])).await;
    let (ty, note) = h.wait_event("web", "UpdatedLoadBalancer").await;
    assert_eq!(
        (ty.as_str(), note.as_str()),
        ("Normal", "Updated load balancer with new hosts")
    );

    h.patch_node(
        "b",
        json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}}}),
    )
    .await;
    h.wait_hosts("web", &h.hosts(&["a", "c"])).await;
    // An unparseable value still excludes; "false" includes again.
    h.patch_node(
        "b",
        json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "maybe"}}}),
    )
    .await;
    h.patch_node(
        "b",
        json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "false"}}}),
    )
    .await;
    h.wait_hosts("web", &h.hosts(&["a", "b", "c"])).await;

    h.delete_node("a").await;
    h.wait_hosts("web", &h.hosts(&["b", "c"])).await;

    // The cluster-autoscaler taint takes a node out right away.
    h.patch_node(
        "c",
        json!({"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]}}),
    )
    .await;
    h.wait_hosts("web", &h.hosts(&["b"])).await;

    // A providerID change is pushed even though the names are the same.
    let updates_before = h.fake.call_count(Operation::UpdateLoadBalancer);
    let node_b = h.node_name("b");
    h.nodes()
        .delete(&node_b, &Default::default())
        .await
        .unwrap();
    wait_for("node b gone", TIMEOUT, || async {
        h.nodes()
            .get_opt(&node_b)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    let mut b2 = h.node("b");
    b2.spec.as_mut().unwrap().provider_id = Some(format!("fake://{node_b}-replacement"));
    h.create_node_from(b2).await;
    wait_for("update after the providerID change", TIMEOUT, || async {
        (h.fake.call_count(Operation::UpdateLoadBalancer) > updates_before).then_some(())
    })
    .await
    .unwrap();
    h.wait_hosts("web", &h.hosts(&["b"])).await;

    // Readiness does not matter.
    let updates = h.fake.call_count(Operation::UpdateLoadBalancer);
    h.nodes()
        .patch_status(
            &node_b,
            &PatchParams::default(),
            &merge(json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})),
        )
        .await
        .unwrap();
    h.create_node("d").await;
    h.wait_hosts("web", &h.hosts(&["b", "d"])).await;
    assert_eq!(
        h.fake.call_count(Operation::UpdateLoadBalancer),
        updates + 1
    );
    assert_eq!(
        h.metric("service_controller_loadbalancer_sync_total"),
        h.fake.call_count(Operation::UpdateLoadBalancer) as f64
    );
    assert!(
        h.metrics()
            .contains("service_controller_nodesync_latency_seconds_count")
    );
    h.finish().await;
}

/// The default, work-conserving batching: a change that finds the node-sync loop idle starts a pass at once;
/// changes that arrive during a pass reach the load balancers that pass has not updated yet, and the next pass
/// updates only the ones it had already done.
#[tokio::test]
async fn node_changes_during_a_pass_fold_into_it_and_the_next_one() {
    let h = Harness::start(test_config()).await;
    h.create_node("seed").await;
    for name in ["a", "b", "c"] {
        h.create_lb(name).await;
    }
    for name in ["a", "b", "c"] {
        h.wait_ingress(name).await;
        h.wait_hosts(name, &h.hosts(&["seed"])).await;
    }
    // Each host update takes 1 s: a pass over the three load balancers takes 3 s.
    h.fake
        .set_latency(Operation::UpdateLoadBalancer, Duration::from_secs(1));
    let before = h.fake.call_count(Operation::UpdateLoadBalancer);
    // A lone node: its pass starts at once.
    let first = Instant::now();
    h.create_node("n0").await;
    tokio::time::timeout(
        TIMEOUT,
        h.fake
            .wait_for_calls(Operation::UpdateLoadBalancer, before + 1),
    )
    .await
    .expect("a host update");
    let reacted = first.elapsed();
    assert!(
        reacted < Duration::from_millis(900),
        "the first host update started {reacted:?} after the node change; no quiet period is expected"
    );
    // Nine more while the first load balancer's update is in flight.
    let more: Vec<String> = (1..10).map(|i| format!("n{i}")).collect();
    futures::future::join_all(more.iter().map(|n| h.create_node(n))).await;
    let mut all = vec!["seed".to_string(), "n0".to_string()];
    all.extend(more);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    for name in ["a", "b", "c"] {
        h.wait_hosts(name, &h.hosts(&all)).await;
    }
    let updates = h.fake.call_count(Operation::UpdateLoadBalancer) - before;
    assert!(
        updates <= 4,
        "{updates} host updates: the load balancers after the first should get every node in the first pass, \
         the next pass only the first one"
    );
    h.finish().await;
}

/// The opt-in quiet period: every change of a burst in one pass.
#[tokio::test]
async fn burst_of_node_changes_is_one_update_per_load_balancer() {
    let config = test_config()
        .with_node_sync_debounce(Duration::from_secs(5))
        .with_node_sync_max_delay(Duration::from_secs(60));
    let h = Harness::start(config).await;
    h.create_node("seed").await;
    for name in ["a", "b", "c"] {
        h.create_lb(name).await;
    }
    for name in ["a", "b", "c"] {
        h.wait_ingress(name).await;
    }
    let before = h.fake.call_count(Operation::UpdateLoadBalancer);
    let mut expected = vec!["seed".to_string()];
    for i in 0..10 {
        let short = format!("n{i}");
        h.create_node(&short).await;
        expected.push(short);
    }
    let shorts: Vec<&str> = expected.iter().map(String::as_str).collect();
    for name in ["a", "b", "c"] {
        h.wait_hosts(name, &h.hosts(&shorts)).await;
    }
    assert_eq!(
        h.fake.call_count(Operation::UpdateLoadBalancer) - before,
        3,
        "one host update per load balancer for the whole burst"
    );
    h.finish().await;
}

#[tokio::test]
async fn cloud_errors_are_retried_until_the_service_converges() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.fake.inject(
        Operation::EnsureLoadBalancer,
        Fault::times(InjectedError::Other("the cloud is down".into()), 3),
    );
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancer), 4);
    let (ty, note) = h.wait_event("web", "SyncLoadBalancerFailed").await;
    assert_eq!(ty, "Warning");
    assert!(
        note.starts_with("Error syncing load balancer: failed to ensure load balancer: "),
        "{note}"
    );
    assert!(note.contains("the cloud is down"), "{note}");

    // Deletion errors are retried too.
    h.fake.inject(
        Operation::EnsureLoadBalancerDeleted,
        Fault::times(InjectedError::Other("still down".into()), 2),
    );
    h.delete_service("web").await;
    h.wait_service_gone("web").await;
    assert!(h.fake.load_balancer(&h.key("web")).is_none());
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancerDeleted), 3);
    // On the finalizer path a failed delete is reported as a failed sync, never as DeleteLoadBalancerFailed (Go).
    // Events are written in order: once DeletedLoadBalancer is there, so is every earlier one.
    h.wait_event("web", "DeletedLoadBalancer").await;
    let failures = h.events("web", "SyncLoadBalancerFailed").await;
    assert!(
        failures.iter().any(|(_, note)| note
            .starts_with("Error syncing load balancer: failed to delete load balancer: ")
            && note.contains("still down")),
        "{failures:?}"
    );
    assert!(h.events("web", "DeleteLoadBalancerFailed").await.is_empty());
    h.finish().await;
}

#[tokio::test]
async fn retry_after_is_honoured_exactly_not_backed_off() {
    // A long backoff: if the retry-after were treated as an ordinary error the test would time out.
    let config =
        test_config().with_retry_backoff(Duration::from_secs(60), Duration::from_secs(300));
    let h = Harness::start(config).await;
    h.create_node("a").await;
    h.fake.inject(
        Operation::EnsureLoadBalancer,
        Fault::times(InjectedError::Retry(Duration::from_secs(2)), 2),
    );
    let started = Instant::now();
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(4),
        "two 2 s waits, took {took:?}"
    );
    assert!(
        took < Duration::from_secs(20),
        "no exponential backoff, took {took:?}"
    );
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancer), 3);
    h.finish().await;
}

#[tokio::test]
async fn empty_status_from_ensure_is_an_error() {
    let fake = FakeCloud::new();
    let provider = BentCloud::empty_status(fake.clone(), 2).provider();
    let h = Harness::start_with(test_config(), fake, provider).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    let (ty, note) = h.wait_event("web", "SyncLoadBalancerFailed").await;
    assert_eq!(ty, "Warning");
    assert!(
        note.starts_with(
            "Error syncing load balancer: service status returned by EnsureLoadBalancer is nil"
        ),
        "{note}"
    );
    h.wait_ingress("web").await;
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancer), 3);
    // The Event is written in the background, after the status: wait for it, then count it.
    h.wait_event("web", "EnsuredLoadBalancer").await;
    assert_eq!(h.events("web", "EnsuredLoadBalancer").await.len(), 1);
    h.finish().await;
}

#[tokio::test]
async fn implemented_elsewhere_keeps_finalizer_and_writes_no_status() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.fake.inject(
        Operation::EnsureLoadBalancer,
        Fault::always(InjectedError::ImplementedElsewhere),
    );
    h.create_lb("web").await;
    let key = h.key("web");
    wait_for("ensure called", TIMEOUT, || async {
        (h.fake.call_count(Operation::EnsureLoadBalancer) >= 1).then_some(())
    })
    .await
    .unwrap();
    let svc = wait_for("finalizer", TIMEOUT, || async {
        let svc = h.get_service("web").await?;
        has_finalizer(&svc).then_some(svc)
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ingress_ip(&svc), None);
    assert_eq!(
        h.fake.call_count(Operation::EnsureLoadBalancer),
        1,
        "success: not retried"
    );
    assert!(h.events("web", "EnsuredLoadBalancer").await.is_empty());
    assert!(h.events("web", "SyncLoadBalancerFailed").await.is_empty());
    assert!(h.fake.load_balancer(&key).is_none());
    h.fake.clear_faults();
    h.finish().await;
}

#[tokio::test]
async fn failed_host_update_falls_back_to_ensure() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    h.fake.inject(
        Operation::UpdateLoadBalancer,
        Fault::once(InjectedError::Other("backend pool locked".into())),
    );
    h.create_node("b").await;
    let (ty, note) = h.wait_event("web", "UpdateLoadBalancerFailed").await;
    assert_eq!(ty, "Warning");
    let expected = format!(
        "Error updating load balancer with new hosts [{} {}] [node names limited, total number of nodes: 2], error: ",
        h.node_name("a"),
        h.node_name("b")
    );
    assert!(note.starts_with(&expected), "{note}");
    // The Service is re-ensured through the service queue with the new hosts.
    h.wait_hosts("web", &h.hosts(&["a", "b"])).await;
    wait_for("a second ensure", TIMEOUT, || async {
        (h.fake.call_count(Operation::EnsureLoadBalancer) >= 2).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(h.metric("service_controller_nodesync_error_total"), 1.0);
    h.finish().await;
}

#[tokio::test]
async fn host_update_of_a_vanished_load_balancer_is_not_an_error() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    // The load balancer disappears in the cloud; the update fails, GetLoadBalancer says it is absent.
    assert!(h.fake.remove_load_balancer(&h.key("web")));
    h.fake.inject(
        Operation::UpdateLoadBalancer,
        Fault::once(InjectedError::Other("no such load balancer".into())),
    );
    h.create_node("b").await;
    wait_for("the update attempt", TIMEOUT, || async {
        (h.fake.call_count(Operation::UpdateLoadBalancer) >= 1).then_some(())
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(h.events("web", "UpdateLoadBalancerFailed").await.is_empty());
    assert_eq!(h.metric("service_controller_nodesync_error_total"), 0.0);
    h.finish().await;
}

#[tokio::test]
async fn service_deleted_without_finalizer_is_cleaned_up_from_the_cache() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    // Someone strips the finalizer, then deletes the Service: it is gone at once.
    h.services()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(json_patch_remove_finalizers()).unwrap()),
        )
        .await
        .unwrap();
    h.delete_service("web").await;
    h.wait_service_gone("web").await;
    h.wait_no_lb("web").await;
    h.finish().await;
}

#[tokio::test]
async fn failed_delete_of_a_service_gone_without_finalizer_warns_and_is_retried() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    h.services()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(json_patch_remove_finalizers()).unwrap()),
        )
        .await
        .unwrap();
    h.fake.inject(
        Operation::EnsureLoadBalancerDeleted,
        Fault::once(InjectedError::Other("cloud api down".into())),
    );
    h.delete_service("web").await;
    h.wait_service_gone("web").await;
    h.wait_no_lb("web").await;
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancerDeleted), 2);
    // Go's processLoadBalancerDelete: no existence check, DeletingLoadBalancer before each attempt, the Warning
    // DeleteLoadBalancerFailed for the failed one, DeletedLoadBalancer after the one that worked.
    assert_eq!(h.fake.call_count(Operation::GetLoadBalancer), 0);
    h.wait_event("web", "DeletedLoadBalancer").await;
    let (ty, note) = h.wait_event("web", "DeleteLoadBalancerFailed").await;
    assert_eq!(ty, "Warning");
    assert!(
        note.starts_with("Error deleting load balancer: ") && note.contains("cloud api down"),
        "{note}"
    );
    let deleting = h.event_objects("web", "DeletingLoadBalancer").await;
    assert_eq!(deleting.len(), 1, "one aggregated object");
    assert_eq!(deleting[0].count, Some(2), "one per attempt");
    h.finish().await;
}

#[tokio::test]
async fn recreated_service_replaces_the_old_load_balancer() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    let old_ip = h.wait_ingress("web").await;
    let old_uid = h.get_service("web").await.unwrap().metadata.uid;
    h.services()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(json_patch_remove_finalizers()).unwrap()),
        )
        .await
        .unwrap();
    // Keep the single worker busy on another Service, so the deletion and the re-creation of "web" are both
    // seen before "web" is synced again: the sync finds a new UID and deletes the old load balancer first.
    h.fake
        .set_latency(Operation::EnsureLoadBalancer, Duration::from_secs(2));
    h.create_lb("blocker").await;
    wait_for("the blocker's ensure started", TIMEOUT, || async {
        (h.fake.call_count(Operation::EnsureLoadBalancer) >= 2).then_some(())
    })
    .await
    .unwrap();
    h.delete_service("web").await;
    h.wait_service_gone("web").await;
    h.create_lb("web").await;
    let new_ip = h.wait_ingress("web").await;
    h.fake.clear_latency();
    assert_ne!(h.get_service("web").await.unwrap().metadata.uid, old_uid);
    assert_eq!(
        h.fake.call_count(Operation::EnsureLoadBalancerDeleted),
        1,
        "the old load balancer was deleted once"
    );
    assert_ne!(new_ip, old_ip, "a new load balancer");
    assert!(h.fake.load_balancer(&h.key("web")).is_some());
    h.wait_event("web", "DeletingLoadBalancer").await;
    h.finish().await;
}

#[tokio::test]
async fn periodic_reensure_repairs_drift() {
    let config = test_config().with_periodic_reensure(Some(Duration::from_secs(1)));
    let h = Harness::start(config).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    assert!(h.fake.set_load_balancer_hosts(&h.key("web"), vec![]));
    h.wait_hosts("web", &h.hosts(&["a"])).await;
    h.finish().await;
}

#[tokio::test]
async fn without_periodic_reensure_drift_stays() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    assert!(h.fake.set_load_balancer_hosts(&h.key("web"), vec![]));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        h.fake
            .load_balancer(&h.key("web"))
            .unwrap()
            .hosts
            .is_empty(),
        "Go behaviour by default"
    );
    assert_eq!(h.fake.call_count(Operation::EnsureLoadBalancer), 1);
    h.finish().await;
}

#[tokio::test]
async fn restart_mid_way_leaks_nothing() {
    let mut h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.fake
        .set_latency(Operation::EnsureLoadBalancer, Duration::from_millis(200));
    let names: Vec<String> = (0..8).map(|i| format!("svc-{i}")).collect();
    for name in &names {
        h.create_lb(name).await;
    }
    // Stop while some are still being created.
    h.wait_ingress(&names[0]).await;
    h.stop_controller().await;
    h.fake.clear_latency();

    // While the CCM is down: delete half of the Services (those with the finalizer wait for it) and change one.
    for name in &names[..4] {
        h.delete_service(name).await;
    }
    h.services()
        .patch(
            "svc-5",
            &PatchParams::default(),
            &merge(json!({"spec": {"type": "ClusterIP"}})),
        )
        .await
        .unwrap();

    h.start_controller(test_config()).await;
    for name in &names[..4] {
        h.wait_service_gone(name).await;
    }
    for name in [&names[4], &names[6], &names[7]] {
        h.wait_ingress(name).await;
    }
    wait_for("svc-5 cleaned up", TIMEOUT, || async {
        let svc = h.get_service("svc-5").await?;
        (!has_finalizer(&svc) && h.fake.load_balancer(&h.key("svc-5")).is_none()).then_some(())
    })
    .await
    .unwrap();
    let prefix = format!("{}/", h.ns);
    let ours = |fake: &FakeCloud| {
        fake.load_balancers()
            .into_iter()
            .filter(|lb| lb.service.starts_with(&prefix))
            .count()
    };
    assert_eq!(ours(&h.fake), 3);
    let fake = h.fake.clone();
    h.finish().await;
    assert_eq!(ours(&fake), 0, "no load balancer leaked");
}

#[tokio::test]
async fn metrics_and_queue_names() {
    let h = Harness::start(test_config()).await;
    h.create_node("a").await;
    h.create_lb("web").await;
    h.wait_ingress("web").await;
    h.create_node("b").await;
    h.wait_hosts("web", &h.hosts(&["a", "b"])).await;
    let text = h.metrics();
    for needle in [
        "service_controller_loadbalancer_sync_total 1",
        "service_controller_nodesync_error_total 0",
        "service_controller_update_loadbalancer_host_latency_seconds_count 1",
        "workqueue_adds_total{name=\"service\"}",
        "workqueue_adds_total{name=\"node\"}",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    h.finish().await;
}

#[tokio::test]
async fn unsupported_provider_is_skipped_by_the_descriptor() {
    use ccm_core::runtime::controller::ControllerContext;
    use ccm_core::runtime::informer::{InformerScope, SharedInformers};
    use ccm_core::runtime::metrics::SharedRegistry;
    use ccm_provider_fake::Capability;

    let env = ccm_testenv::TestEnv::shared().await;
    let client = env.client();
    let fake = FakeCloud::new();
    fake.set_capability(Capability::LoadBalancer, false);
    let informers = SharedInformers::new(client.clone(), &InformerScope::all());
    let ctx = ControllerContext::new(
        client,
        Arc::new(fake),
        informers,
        SharedRegistry::new(),
        "kubernetes",
    );
    let d = ccm_servicecontroller::descriptor(Config::default());
    assert!((d.init)(&ctx).expect("not an error").is_none());
    let err = ccm_servicecontroller::ServiceController::new(&ctx, Config::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("does not support external load balancers"),
        "{err}"
    );
    let bad = ccm_servicecontroller::descriptor(Config::default().with_concurrent_service_syncs(0));
    assert!((bad.init)(&ctx).is_err(), "invalid config is an error");
}

#[tokio::test]
async fn finalizer_is_stored_before_the_cloud_is_called() {
    use std::sync::atomic::Ordering;

    let env = ccm_testenv::TestEnv::shared().await;
    let fake = FakeCloud::new();
    let cloud = BentCloud::checking_order(fake.clone(), env.client());
    let provider = cloud.provider();
    let h = Harness::start_with(test_config(), fake, provider).await;
    h.create_node("a").await;
    for name in ["one", "two", "three"] {
        h.create_lb(name).await;
    }
    for name in ["one", "two", "three"] {
        h.wait_ingress(name).await;
    }
    assert_eq!(cloud.ensures.load(Ordering::SeqCst), 3);
    assert_eq!(cloud.ensures_without_finalizer.load(Ordering::SeqCst), 0);
    h.finish().await;
}
