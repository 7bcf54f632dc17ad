//! Load balancers of the fake cloud: ensure, update, get, delete, IP allocation and the call log.

mod common;

use ccm_core::{CloudProvider, ErrorKind, LoadBalancer};
use ccm_provider_fake::{FakeCloud, FakePort, LoadBalancerCall, Operation};
use common::{nodes, service};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, ServiceSpec};

fn lb(cloud: &FakeCloud) -> std::sync::Arc<dyn LoadBalancer> {
    CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone())).expect("load balancers are on")
}

fn ingress_ip(status: &LoadBalancerStatus) -> String {
    let ingress = status.ingress.as_ref().expect("an ingress list");
    assert_eq!(ingress.len(), 1);
    ingress[0].ip.clone().expect("an ingress IP")
}

#[tokio::test]
async fn ensure_creates_with_sorted_node_names_ports_and_the_first_pool_ip() {
    let cloud = FakeCloud::new();
    let svc = service("default", "web", &[80, 443]);
    let status = lb(&cloud)
        .ensure_load_balancer("kubernetes", &svc, &nodes(&["n2", "n1", "n3", "n1"]))
        .await
        .unwrap();
    assert_eq!(ingress_ip(&status), "203.0.113.1");
    let ports = status.ingress.as_ref().unwrap()[0].ports.clone().unwrap();
    assert_eq!(
        ports
            .iter()
            .map(|p| (p.port, p.protocol.as_str()))
            .collect::<Vec<_>>(),
        [(80, "TCP"), (443, "TCP")]
    );

    let stored = cloud
        .load_balancer("default/web")
        .expect("stored by service key");
    assert_eq!(stored.service, "default/web");
    assert_eq!(stored.cluster, "kubernetes");
    assert_eq!(stored.hosts, ["n1", "n2", "n3"]);
    assert_eq!(stored.name, "a0000defaultwebuid");
    assert_eq!(
        stored.ports[0],
        FakePort {
            name: String::new(),
            protocol: "TCP".into(),
            port: 80,
            node_port: Some(30080)
        }
    );
    assert_eq!(stored.source_ranges, ["0.0.0.0/0"]);
    assert_eq!(stored.health_check, None);
    assert_eq!(stored.status(), status);
    assert_eq!(cloud.load_balancers().len(), 1);
}

#[tokio::test]
async fn ensure_is_idempotent_and_keeps_the_ip_while_other_services_get_the_next_ones() {
    let cloud = FakeCloud::new();
    let lbs = lb(&cloud);
    let web = service("default", "web", &[80]);
    let api = service("prod", "api", &[8080]);
    let first = lbs
        .ensure_load_balancer("kubernetes", &web, &nodes(&["n1"]))
        .await
        .unwrap();
    let second = lbs
        .ensure_load_balancer("kubernetes", &api, &nodes(&["n1"]))
        .await
        .unwrap();
    assert_eq!(ingress_ip(&first), "203.0.113.1");
    assert_eq!(ingress_ip(&second), "203.0.113.2");

    // ensuring again (new nodes, new ports) keeps the IP and replaces hosts and ports
    let mut web2 = service("default", "web", &[81]);
    web2.metadata.uid = web.metadata.uid.clone();
    let again = lbs
        .ensure_load_balancer("kubernetes", &web2, &nodes(&["n3", "n2"]))
        .await
        .unwrap();
    assert_eq!(ingress_ip(&again), "203.0.113.1");
    let stored = cloud.load_balancer("default/web").unwrap();
    assert_eq!(stored.hosts, ["n2", "n3"]);
    assert_eq!(
        stored.ports.iter().map(|p| p.port).collect::<Vec<_>>(),
        [81]
    );
    assert_eq!(cloud.load_balancers().len(), 2);

    // a deleted IP is not handed out again at once: allocation goes on in order
    lbs.ensure_load_balancer_deleted("kubernetes", &web)
        .await
        .unwrap();
    let third = lbs
        .ensure_load_balancer("kubernetes", &service("x", "y", &[1]), &[])
        .await
        .unwrap();
    assert_eq!(ingress_ip(&third), "203.0.113.3");
    let back = lbs
        .ensure_load_balancer("kubernetes", &web, &[])
        .await
        .unwrap();
    assert_eq!(ingress_ip(&back), "203.0.113.4");
}

#[tokio::test]
async fn ensure_without_ports_or_nodes_still_works() {
    let cloud = FakeCloud::new();
    let svc = service("default", "bare", &[]);
    let status = lb(&cloud)
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert_eq!(ingress_ip(&status), "203.0.113.1");
    assert_eq!(status.ingress.as_ref().unwrap()[0].ports, None);
    let stored = cloud.load_balancer("default/bare").unwrap();
    assert!(stored.ports.is_empty());
    assert!(stored.hosts.is_empty());
}

#[tokio::test]
async fn update_replaces_hosts_and_fails_for_a_missing_load_balancer() {
    let cloud = FakeCloud::new();
    let lbs = lb(&cloud);
    let svc = service("default", "web", &[80]);
    let err = lbs
        .update_load_balancer("kubernetes", &svc, &nodes(&["n1"]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(err.to_string().contains("ensure it first"), "{err}");

    lbs.ensure_load_balancer("kubernetes", &svc, &nodes(&["n1", "n2"]))
        .await
        .unwrap();
    lbs.update_load_balancer("kubernetes", &svc, &nodes(&["n3"]))
        .await
        .unwrap();
    assert_eq!(cloud.load_balancer("default/web").unwrap().hosts, ["n3"]);
    lbs.update_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert!(cloud.load_balancer("default/web").unwrap().hosts.is_empty());
    assert_eq!(
        cloud.load_balancer_calls(),
        vec![
            LoadBalancerCall {
                op: Operation::UpdateLoadBalancer,
                service: "default/web".into(),
                hosts: vec!["n1".into()]
            },
            LoadBalancerCall {
                op: Operation::EnsureLoadBalancer,
                service: "default/web".into(),
                hosts: vec!["n1".into(), "n2".into()]
            },
            LoadBalancerCall {
                op: Operation::UpdateLoadBalancer,
                service: "default/web".into(),
                hosts: vec!["n3".into()]
            },
            LoadBalancerCall {
                op: Operation::UpdateLoadBalancer,
                service: "default/web".into(),
                hosts: vec![]
            },
        ]
    );
}

#[tokio::test]
async fn get_reports_existence_and_delete_is_idempotent() {
    let cloud = FakeCloud::new();
    let lbs = lb(&cloud);
    let svc = service("default", "web", &[80]);
    assert_eq!(
        lbs.get_load_balancer("kubernetes", &svc).await.unwrap(),
        None
    );
    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();

    let status = lbs
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert_eq!(
        lbs.get_load_balancer("kubernetes", &svc).await.unwrap(),
        Some(status)
    );
    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert_eq!(
        lbs.get_load_balancer("kubernetes", &svc).await.unwrap(),
        None
    );
    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert!(cloud.load_balancers().is_empty());
}

#[tokio::test]
async fn drift_behind_the_controllers_back() {
    let cloud = FakeCloud::new();
    let lbs = lb(&cloud);
    let svc = service("default", "web", &[80]);
    lbs.ensure_load_balancer("kubernetes", &svc, &nodes(&["n1"]))
        .await
        .unwrap();
    assert!(cloud.set_load_balancer_hosts("default/web", vec!["z".into(), "a".into()]));
    assert_eq!(
        cloud.load_balancer("default/web").unwrap().hosts,
        ["a", "z"]
    );
    assert!(!cloud.set_load_balancer_hosts("default/none", vec![]));
    assert!(cloud.remove_load_balancer("default/web"));
    assert!(!cloud.remove_load_balancer("default/web"));
    assert_eq!(
        lbs.get_load_balancer("kubernetes", &svc).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn requested_load_balancer_ip_is_honoured_and_checked() {
    let cloud = FakeCloud::new();
    let lbs = lb(&cloud);
    let mut svc = service("default", "static", &[80]);
    svc.spec.as_mut().unwrap().load_balancer_ip = Some("198.51.100.7".into());
    let status = lbs
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert_eq!(ingress_ip(&status), "198.51.100.7");

    let mut clash = service("default", "clash", &[80]);
    clash.spec.as_mut().unwrap().load_balancer_ip = Some("198.51.100.7".into());
    let err = lbs
        .ensure_load_balancer("kubernetes", &clash, &[])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("already used by the load balancer of service default/static"),
        "{err}"
    );

    let mut bad = service("default", "bad", &[80]);
    bad.spec.as_mut().unwrap().load_balancer_ip = Some("not-an-ip".into());
    let err = lbs
        .ensure_load_balancer("kubernetes", &bad, &[])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("\"not-an-ip\" is not an IP address"),
        "{err}"
    );
    assert!(cloud.load_balancer("default/bad").is_none());
}

#[tokio::test]
async fn source_ranges_health_check_ip_mode_and_invalid_ranges() {
    let cloud = FakeCloud::new();
    cloud.set_ip_mode(Some("Proxy"));
    let lbs = lb(&cloud);
    let mut svc = service("default", "local", &[80]);
    {
        let spec: &mut ServiceSpec = svc.spec.as_mut().unwrap();
        spec.load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()]);
        spec.external_traffic_policy = Some("Local".into());
        spec.health_check_node_port = Some(31000);
    }
    let status = lbs
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert_eq!(
        status.ingress.as_ref().unwrap()[0].ip_mode.as_deref(),
        Some("Proxy")
    );
    let stored = cloud.load_balancer("default/local").unwrap();
    assert_eq!(stored.source_ranges, ["10.0.0.0/8"]);
    assert_eq!(stored.health_check, Some(("/healthz".to_owned(), 31000)));

    let mut bad = service("default", "bad-range", &[80]);
    bad.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec!["10.0.0.0/99".into()]);
    let err = lbs
        .ensure_load_balancer("kubernetes", &bad, &[])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("ensuring load balancer for service default/bad-range"),
        "{err}"
    );
}

#[tokio::test]
async fn pool_can_be_changed_and_exhaustion_is_a_clear_error() {
    let cloud = FakeCloud::new();
    cloud.set_load_balancer_ip_pool("10.9.0.0/30".parse().unwrap());
    let lbs = lb(&cloud);
    let a = lbs
        .ensure_load_balancer("k", &service("d", "a", &[1]), &[])
        .await
        .unwrap();
    let b = lbs
        .ensure_load_balancer("k", &service("d", "b", &[1]), &[])
        .await
        .unwrap();
    assert_eq!(
        (ingress_ip(&a), ingress_ip(&b)),
        ("10.9.0.1".into(), "10.9.0.2".into())
    );
    let err = lbs
        .ensure_load_balancer("k", &service("d", "c", &[1]), &[])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no free address left in the load balancer IP pool 10.9.0.0/30"),
        "{err}"
    );
    // freeing one makes room again
    lbs.ensure_load_balancer_deleted("k", &service("d", "a", &[1]))
        .await
        .unwrap();
    let c = lbs
        .ensure_load_balancer("k", &service("d", "c", &[1]), &[])
        .await
        .unwrap();
    assert_eq!(ingress_ip(&c), "10.9.0.1");
}

#[tokio::test]
async fn load_balancer_names() {
    let cloud = FakeCloud::new();
    let lbs = lb(&cloud);
    let with_uid = service("default", "web", &[80]);
    assert_eq!(
        lbs.get_load_balancer_name("kubernetes", &with_uid),
        "a0000defaultwebuid"
    );
    let mut without_uid = service("default", "web", &[80]);
    without_uid.metadata.uid = None;
    assert_eq!(
        lbs.get_load_balancer_name("kubernetes", &without_uid),
        "kubernetes-default-web"
    );
}

#[tokio::test]
async fn load_balancer_calls_are_logged_with_the_service_key() {
    let cloud = FakeCloud::new();
    let lbs = lb(&cloud);
    let svc = service("shop", "web", &[80]);
    lbs.get_load_balancer("kubernetes", &svc).await.unwrap();
    lbs.ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    lbs.update_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    lbs.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert_eq!(
        cloud.call_ops(),
        [
            Operation::GetLoadBalancer,
            Operation::EnsureLoadBalancer,
            Operation::UpdateLoadBalancer,
            Operation::EnsureLoadBalancerDeleted
        ]
    );
    assert_eq!(
        cloud.call_ops(),
        [
            Operation::GetLoadBalancer,
            Operation::EnsureLoadBalancer,
            Operation::UpdateLoadBalancer,
            Operation::EnsureLoadBalancerDeleted
        ]
    );
    assert!(cloud.calls().iter().all(|c| c.target == "shop/web"));
    assert_eq!(
        cloud.call_targets(Operation::EnsureLoadBalancer),
        ["shop/web"]
    );
    cloud.clear_calls();
    assert!(cloud.calls().is_empty());
    assert!(cloud.load_balancer_calls().is_empty());
}
