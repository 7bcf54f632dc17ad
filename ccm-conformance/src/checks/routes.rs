//! Clauses about [`Routes`](ccm_core::Routes).

use std::collections::BTreeSet;

use ccm_core::Route;

use crate::context::{Check, Ctx, describe_error, fail, skip};
use crate::fixture::InstanceRef;

fn describe_routes(routes: &[Route]) -> String {
    let shown: Vec<String> = routes
        .iter()
        .map(|r| format!("{} -> {}", r.destination_cidr, r.target_node))
        .collect();
    format!("[{}]", shown.join(", "))
}

/// `list_routes(cluster)`, which must succeed.
async fn list(ctx: &Ctx, cluster: &str) -> Check<Vec<Route>> {
    let routes = ctx.routes()?;
    ctx.ok(
        &format!("list_routes({cluster:?})"),
        routes.list_routes(cluster),
    )
    .await
}

/// The fixture's CIDRs (at least `n`), checked to be free in the cluster.
async fn free_cidrs(ctx: &Ctx, n: usize) -> Check<Vec<String>> {
    let cidrs = &ctx.fixture.route_cidrs;
    if cidrs.len() < n {
        return skip(format!(
            "needs {n} route CIDRs, the fixture has {} (set ConformanceFixture::with_route_cidrs)",
            cidrs.len()
        ));
    }
    let cluster = ctx.cluster();
    let taken: BTreeSet<String> = list(ctx, cluster)
        .await?
        .into_iter()
        .map(|r| r.destination_cidr)
        .collect();
    if let Some(busy) = cidrs.iter().find(|c| taken.contains(*c)) {
        return fail(format!(
            "the fixture's route CIDR {busy} already has a route in cluster {cluster:?} before the clause runs; pick free CIDRs (ConformanceFixture::with_route_cidrs) or remove the leftover route"
        ));
    }
    Ok(cidrs.clone())
}

/// Create a route as the route controller does (name hint = a node UID).
async fn create(ctx: &Ctx, cluster: &str, target: &InstanceRef, cidr: &str) -> Check<Route> {
    let routes = ctx.routes()?;
    let route = ctx.new_route(cluster, target, cidr);
    let hint = uuid::Uuid::new_v4().to_string();
    let what = format!(
        "create_route({cluster:?}, name hint {hint}, {cidr} -> {})",
        target.node_name
    );
    ctx.ok(&what, routes.create_route(cluster, &hint, &route))
        .await?;
    Ok(route)
}

/// Wait until the route to `cidr` is listed with the right target; return the listed route.
async fn expect_listed(ctx: &Ctx, cluster: &str, target: &str, cidr: &str) -> Check<Route> {
    ctx.eventually(|| async {
        let listed = list(ctx, cluster).await?;
        match listed.iter().find(|r| r.destination_cidr == cidr) {
            None => fail(format!(
                "after create_route for {cidr} -> {target}, list_routes({cluster:?}) does not list it: {}",
                describe_routes(&listed)
            )),
            Some(route) if route.target_node != target => fail(format!(
                "after create_route for {cidr} -> {target}, list_routes({cluster:?}) lists it with target node {:?}",
                route.target_node
            )),
            Some(route) => Ok(route.clone()),
        }
    })
    .await
}

/// Wait until no route to `cidr` is listed.
async fn expect_unlisted(ctx: &Ctx, cluster: &str, cidr: &str, after: &str) -> Check {
    ctx.eventually(|| async {
        let listed = list(ctx, cluster).await?;
        if listed.iter().any(|r| r.destination_cidr == cidr) {
            return fail(format!(
                "after {after}, list_routes({cluster:?}) still lists a route to {cidr}: {}",
                describe_routes(&listed)
            ));
        }
        Ok(())
    })
    .await
}

async fn delete(ctx: &Ctx, cluster: &str, route: &Route) -> Check {
    let routes = ctx.routes()?;
    let what = format!(
        "delete_route({cluster:?}, {} -> {})",
        route.destination_cidr, route.target_node
    );
    ctx.ok(&what, routes.delete_route(cluster, route)).await
}

/// [`Clause::RoutesCreateListDeleteRoundTrip`](crate::Clause::RoutesCreateListDeleteRoundTrip).
pub(crate) async fn round_trip(ctx: &Ctx) -> Check {
    let target = ctx.route_target()?;
    let cidr = free_cidrs(ctx, 1).await?.swap_remove(0);
    let cluster = ctx.cluster();
    create(ctx, cluster, &target, &cidr).await?;
    let listed = expect_listed(ctx, cluster, &target.node_name, &cidr).await?;
    delete(ctx, cluster, &listed).await?;
    expect_unlisted(ctx, cluster, &cidr, "delete_route").await
}

/// [`Clause::RoutesDeleteMissingSucceeds`](crate::Clause::RoutesDeleteMissingSucceeds).
pub(crate) async fn delete_missing_succeeds(ctx: &Ctx) -> Check {
    let target = ctx.route_target()?;
    let cidr = free_cidrs(ctx, 1).await?.swap_remove(0);
    let routes = ctx.routes()?;
    let cluster = ctx.cluster();
    let route = Route::new(target.node_name.clone(), cidr.clone())
        .with_name(format!("ccm-conformance-missing-{}", ctx.run_id()));
    let what = format!("delete_route({cluster:?}) of a route to {cidr} that does not exist");
    match ctx
        .call(&what, routes.delete_route(cluster, &route))
        .await?
    {
        Ok(()) => Ok(()),
        Err(err) => fail(format!(
            "{what} failed: {}; deleting a route that is already gone must succeed",
            describe_error(&err)
        )),
    }
}

/// [`Clause::RoutesScopedToCluster`](crate::Clause::RoutesScopedToCluster).
pub(crate) async fn scoped_to_cluster(ctx: &Ctx) -> Check {
    let target = ctx.route_target()?;
    let cidr = free_cidrs(ctx, 1).await?.swap_remove(0);
    let (cluster, other) = (ctx.cluster(), ctx.fixture.other_cluster_name.as_str());
    if cluster == other {
        return skip("the fixture's cluster name and other cluster name are the same");
    }
    create(ctx, cluster, &target, &cidr).await?;
    let route = expect_listed(ctx, cluster, &target.node_name, &cidr).await?;
    let listed = list(ctx, other).await?;
    if listed.iter().any(|r| r.destination_cidr == cidr) {
        return fail(format!(
            "list_routes({other:?}) lists the route to {cidr} created for cluster {cluster:?}: {}; the route controller of {other:?} would delete it",
            describe_routes(&listed)
        ));
    }
    delete(ctx, cluster, &route).await
}

/// [`Clause::RoutesConcurrentCreates`](crate::Clause::RoutesConcurrentCreates).
pub(crate) async fn concurrent_creates(ctx: &Ctx) -> Check {
    let target = ctx.route_target()?;
    let cidrs = free_cidrs(ctx, 2).await?;
    let routes = ctx.routes()?;
    let cluster = ctx.cluster().to_owned();
    let limit = ctx.fixture.call_timeout;
    let creates = cidrs.iter().map(|cidr| {
        let route = ctx.new_route(&cluster, &target, cidr);
        let (routes, cluster) = (routes.clone(), cluster.clone());
        tokio::spawn(async move {
            let hint = uuid::Uuid::new_v4().to_string();
            let result =
                tokio::time::timeout(limit, routes.create_route(&cluster, &hint, &route)).await;
            (route.destination_cidr, result)
        })
    });
    for joined in futures::future::join_all(creates).await {
        match joined {
            Ok((_, Ok(Ok(())))) => {}
            Ok((cidr, Ok(Err(err)))) => {
                return fail(format!(
                    "one of {} concurrent create_route calls, for {cidr}, failed: {}",
                    cidrs.len(),
                    describe_error(&err)
                ));
            }
            Ok((cidr, Err(_))) => {
                return fail(format!(
                    "one of {} concurrent create_route calls, for {cidr}, did not answer within the call timeout",
                    cidrs.len()
                ));
            }
            Err(join) => return fail(format!("a concurrent create_route panicked: {join}")),
        }
    }
    let mut listed = Vec::with_capacity(cidrs.len());
    for cidr in &cidrs {
        listed.push(expect_listed(ctx, &cluster, &target.node_name, cidr).await?);
    }
    for route in &listed {
        delete(ctx, &cluster, route).await?;
    }
    for cidr in &cidrs {
        expect_unlisted(ctx, &cluster, cidr, "deleting every route").await?;
    }
    Ok(())
}
