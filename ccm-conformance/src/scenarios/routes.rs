//! The routes scenario (route controller).

use std::sync::PoisonError;
use std::time::Duration;

use ccm_core::helpers::{ConditionStatus, node_condition_status};
use ccm_core::{Route, names};
use ipnet::IpNet;

use super::world::{NodeShape, World};
use crate::context::{Check, fail, skip};

/// Whether `cidr` lies inside one of `cluster`.
fn within(cidr: &str, cluster: &[IpNet]) -> bool {
    cidr.parse::<IpNet>()
        .is_ok_and(|net| cluster.iter().any(|c| c.contains(&net)))
}

pub(super) async fn routes(world: &World) -> Check {
    let fixture = world.fixture().clone();
    let target = match fixture.route_target.as_ref().or(fixture.running.as_ref()) {
        Some(target) => target.clone(),
        None => return skip("the fixture names no route target or running instance"),
    };
    let cluster_cidrs = ccm_routecontroller::parse_cluster_cidrs(&world.options.cluster_cidr)
        .or_else(|e| fail(format!("the scenario's cluster CIDR is invalid: {e}")))?;
    let cidrs: Vec<String> = fixture.route_cidrs.clone();
    if cidrs.is_empty() {
        return skip("the fixture has no route CIDRs (set ConformanceFixture::with_route_cidrs)");
    }
    if let Some(outside) = cidrs.iter().find(|c| !within(c, &cluster_cidrs)) {
        return fail(format!(
            "the route CIDR {outside} is outside the scenario's cluster CIDR {}; set ScenarioOptions::with_cluster_cidr",
            world.options.cluster_cidr
        ));
    }
    *world
        .route_cidrs
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = cidrs.clone();
    let api = std::sync::Arc::clone(&world.provider)
        .routes()
        .map_or_else(|| fail("CloudProvider::routes() returned None"), Ok)?;
    let cluster = world.route_cluster.clone();
    let pod_cidr = cidrs[0].clone();

    // A stale route inside the cluster CIDR that no Node wants: the controller must delete it.
    let stale = cidrs.get(1).cloned();
    if let Some(stale) = &stale {
        let route = Route::new(target.node_name.clone(), stale.clone());
        let what = format!(
            "a stale route {stale} -> {} to be seeded in cluster {cluster:?}",
            target.node_name
        );
        world
            .wait(&what, || async {
                api.create_route(&cluster, "ccm-conformance-stale", &route)
                    .await
                    .map_err(|e| format!("create_route failed: {e}"))
            })
            .await?;
    }

    let id = world.provider_id(&target).await?;
    let node = world.node(
        &target,
        NodeShape {
            provider_id: Some(&id),
            uninitialized: false,
            ready: true,
            pod_cidr: Some(&pod_cidr),
        },
    );
    world.create_node(&node).await?;
    world.step(format!(
        "created Node {} with pod CIDR {pod_cidr}",
        target.node_name
    ));

    let ctx = world.context(&cluster, None);
    let config = ccm_routecontroller::Config::default()
        .with_cluster_cidr(world.options.cluster_cidr.clone())
        .with_route_reconciliation_period(Duration::from_secs(1));
    let controller = ccm_routecontroller::RouteController::new(&ctx, config)
        .or_else(|e| fail(format!("building the route controller failed: {e}")))?;
    world.start(&ctx, Box::new(controller));

    let name = target.node_name.as_str();
    let describe = |routes: &[Route]| {
        routes
            .iter()
            .map(|r| format!("{} -> {}", r.destination_cidr, r.target_node))
            .collect::<Vec<_>>()
            .join(", ")
    };
    world
        .wait(
            &format!(
                "a route {pod_cidr} -> {name}{}",
                match &stale {
                    Some(s) => format!(" and no route {s}"),
                    None => String::new(),
                }
            ),
            || async {
                let listed = api
                    .list_routes(&cluster)
                    .await
                    .map_err(|e| format!("list_routes failed: {e}"))?;
                let created = listed
                    .iter()
                    .any(|r| r.destination_cidr == pod_cidr && r.target_node == name);
                let stale_left = stale
                    .as_ref()
                    .is_some_and(|s| listed.iter().any(|r| &r.destination_cidr == s));
                if created && !stale_left {
                    Ok(())
                } else {
                    Err(format!("routes [{}]", describe(&listed)))
                }
            },
        )
        .await?;
    let unavailable = names::conditions::NETWORK_UNAVAILABLE;
    world
        .wait(
            &format!(
                "Node {name} to get {unavailable}=False with reason {}",
                names::conditions::REASON_ROUTE_CREATED
            ),
            || async {
                let node = world
                    .get_node(name)
                    .await?
                    .ok_or_else(|| "the Node is gone".to_owned())?;
                let reason = node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == unavailable))
                    .and_then(|c| c.reason.clone());
                match (node_condition_status(&node, unavailable), reason.as_deref()) {
                    (ConditionStatus::False, Some(names::conditions::REASON_ROUTE_CREATED)) => {
                        Ok(())
                    }
                    (status, reason) => Err(format!(
                        "{unavailable} is {status:?} with reason {reason:?}"
                    )),
                }
            },
        )
        .await?;
    world.delete_node(name).await?;
    world.step(format!("deleted Node {name}"));
    world
        .wait(
            &format!("the route {pod_cidr} to be deleted with its Node"),
            || async {
                let listed = api
                    .list_routes(&cluster)
                    .await
                    .map_err(|e| format!("list_routes failed: {e}"))?;
                if listed.iter().any(|r| r.destination_cidr == pod_cidr) {
                    Err(format!("routes [{}]", describe(&listed)))
                } else {
                    Ok(())
                }
            },
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_within_the_cluster_cidr() {
        let cluster = ccm_routecontroller::parse_cluster_cidrs("10.244.0.0/16").unwrap_or_default();
        assert!(within("10.244.250.0/24", &cluster));
        assert!(!within("10.245.0.0/24", &cluster));
        assert!(!within("10.0.0.0/8", &cluster));
        assert!(!within("nope", &cluster));
    }
}
