//! Routes of the fake cloud: create, list, delete, naming and pre-seeded routes.

use ccm_core::{CloudProvider, ErrorKind, Route, Routes};
use ccm_provider_fake::{FakeCloud, Operation};
use k8s_openapi::api::core::v1::NodeAddress;

fn routes(cloud: &FakeCloud) -> std::sync::Arc<dyn Routes> {
    CloudProvider::routes(std::sync::Arc::new(cloud.clone())).expect("routes are on")
}

#[tokio::test]
async fn create_names_the_route_from_cluster_and_hint_and_list_returns_it() {
    let cloud = FakeCloud::new();
    let r = routes(&cloud);
    let wanted = Route::new("node-a", "10.244.1.0/24").with_name("ignored");
    r.create_route("kubernetes", "uid-a", &wanted)
        .await
        .unwrap();
    let listed = r.list_routes("kubernetes").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "kubernetes-uid-a-10.244.1.0-24");
    assert_eq!(listed[0].target_node, "node-a");
    assert_eq!(listed[0].destination_cidr, "10.244.1.0/24");
    assert!(!listed[0].blackhole);
    // another cluster sees nothing
    assert!(r.list_routes("other").await.unwrap().is_empty());
    assert_eq!(cloud.routes(), listed);
}

#[tokio::test]
async fn dual_stack_routes_of_one_node_get_distinct_names() {
    let cloud = FakeCloud::new();
    let r = routes(&cloud);
    r.create_route("c1", "uid-a", &Route::new("node-a", "10.244.1.0/24"))
        .await
        .unwrap();
    r.create_route("c1", "uid-a", &Route::new("node-a", "fd00:10:244:1::/64"))
        .await
        .unwrap();
    r.create_route("c1", "", &Route::new("node-b", "10.244.2.0/24"))
        .await
        .unwrap();
    let names: Vec<String> = r
        .list_routes("c1")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(
        names,
        [
            "c1-uid-a-10.244.1.0-24",
            "c1-node-b-10.244.2.0-24",
            "c1-uid-a-fd00-10-244-1---64"
        ]
    );
}

#[tokio::test]
async fn duplicate_create_is_idempotent_but_a_conflicting_target_is_an_error() {
    let cloud = FakeCloud::new();
    let r = routes(&cloud);
    let route = Route::new("node-a", "10.244.1.0/24");
    r.create_route("kubernetes", "uid-a", &route).await.unwrap();
    r.create_route("kubernetes", "uid-a", &route).await.unwrap();
    r.create_route("kubernetes", "other-hint", &route)
        .await
        .unwrap();
    assert_eq!(cloud.routes().len(), 1);
    assert_eq!(cloud.routes()[0].name, "kubernetes-uid-a-10.244.1.0-24");

    let err = r
        .create_route(
            "kubernetes",
            "uid-b",
            &Route::new("node-b", "10.244.1.0/24"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(
        err.to_string().contains("already routed to node node-a"),
        "{err}"
    );
    // unlike Go's fake, an error does not stick: the next good call succeeds
    r.create_route(
        "kubernetes",
        "uid-b",
        &Route::new("node-b", "10.244.2.0/24"),
    )
    .await
    .unwrap();
    assert_eq!(cloud.routes().len(), 2);
}

#[tokio::test]
async fn create_rejects_bad_input() {
    let cloud = FakeCloud::new();
    let r = routes(&cloud);
    let err = r
        .create_route("k", "h", &Route::new("node-a", "10.244.1.0/33"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("\"10.244.1.0/33\" is not a CIDR"),
        "{err}"
    );
    let err = r
        .create_route("k", "h", &Route::new("", "10.244.1.0/24"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no target node"), "{err}");
    assert!(cloud.routes().is_empty());
}

#[tokio::test]
async fn delete_removes_by_cidr_and_a_missing_route_succeeds() {
    let cloud = FakeCloud::new();
    let r = routes(&cloud);
    r.create_route(
        "kubernetes",
        "uid-a",
        &Route::new("node-a", "10.244.1.0/24"),
    )
    .await
    .unwrap();
    r.create_route(
        "kubernetes",
        "uid-b",
        &Route::new("node-b", "10.244.2.0/24"),
    )
    .await
    .unwrap();
    let listed = r.list_routes("kubernetes").await.unwrap();
    r.delete_route("kubernetes", &listed[0]).await.unwrap();
    let left = r.list_routes("kubernetes").await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].target_node, "node-b");
    r.delete_route("kubernetes", &listed[0]).await.unwrap();
    r.delete_route("elsewhere", &listed[1]).await.unwrap();
    assert_eq!(
        cloud.routes().len(),
        1,
        "a delete in another cluster leaves the route alone"
    );
}

#[tokio::test]
async fn node_addresses_are_kept_and_pre_seeded_routes_are_listed() {
    let cloud = FakeCloud::new();
    let r = routes(&cloud);
    let addresses = vec![NodeAddress {
        type_: "InternalIP".into(),
        address: "10.0.0.11".into(),
    }];
    r.create_route(
        "kubernetes",
        "uid-a",
        &Route::new("node-a", "10.244.1.0/24").with_node_addresses(addresses.clone()),
    )
    .await
    .unwrap();
    cloud.insert_route(Route::new("gone", "10.244.9.0/24").with_blackhole(true));
    cloud.insert_route_in(
        "other",
        Route::new("x", "10.245.0.0/24").with_name("custom"),
    );
    let listed = r.list_routes("kubernetes").await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed[0].enable_node_addresses);
    assert_eq!(listed[0].target_node_addresses, addresses);
    assert!(listed[1].blackhole);
    assert_eq!(listed[1].name, "kubernetes-gone-10.244.9.0-24");
    assert_eq!(cloud.routes_in("other")[0].name, "custom");
    assert_eq!(cloud.routes().len(), 3);
    cloud.clear_routes();
    assert!(cloud.routes().is_empty());
}

#[tokio::test]
async fn route_calls_are_logged_with_cluster_and_cidr_targets() {
    let cloud = FakeCloud::new();
    let r = routes(&cloud);
    let route = Route::new("node-a", "10.244.1.0/24");
    r.list_routes("kubernetes").await.unwrap();
    r.create_route("kubernetes", "uid-a", &route).await.unwrap();
    r.delete_route("kubernetes", &route).await.unwrap();
    let log: Vec<(Operation, String)> = cloud
        .calls()
        .into_iter()
        .map(|c| (c.op, c.target))
        .collect();
    assert_eq!(
        log,
        [
            (Operation::ListRoutes, "kubernetes".to_owned()),
            (Operation::CreateRoute, "10.244.1.0/24".to_owned()),
            (Operation::DeleteRoute, "10.244.1.0/24".to_owned()),
        ]
    );
    assert_eq!(
        cloud.call_ops(),
        [
            Operation::ListRoutes,
            Operation::CreateRoute,
            Operation::DeleteRoute
        ]
    );
}
