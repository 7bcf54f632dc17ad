//! The error-kind clauses, one per capability: an error keeps its [`ErrorKind`] through the provider and
//! after the controllers wrap it. The errors are the natural `InstanceNotFound` of an unknown instance, and the
//! cloud's own errors armed by the vendor's [`ErrorInjector`](crate::ErrorInjector).

use std::fmt;
use std::future::Future;

use ccm_core::intercept::Operation;
use ccm_core::{CloudError, ErrorKind, error_kind};

use crate::checks::instances::provider_id;
use crate::checks::instances_v2::{Lookup, describe_node};
use crate::context::{Check, Ctx, describe_error, fail, skip};

/// A foreign error type wrapping a provider error, as a controller's own error enum does.
#[derive(Debug)]
struct ControllerError(CloudError);

impl fmt::Display for ControllerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("syncing node")
    }
}

impl std::error::Error for ControllerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// The verdict on an error `what` returned where the kind `expected` was due: the kind as returned, and
/// after two contexts and a controller's error type around it.
pub(crate) fn judge_kind(what: &str, err: CloudError, expected: ErrorKind) -> Result<(), String> {
    let shown = describe_error(&err);
    if err.kind() != expected {
        return Err(format!(
            "{what} failed with {shown}: CloudError::kind() must be {}; the controllers act on the kind, never on the text. Return the matching CloudError (or keep it as the source: CloudError::context, or your error type's source()) instead of describing it in text",
            expected.as_str()
        ));
    }
    let wrapped = ControllerError(
        err.context("looking up the instance")
            .context("cloud node lifecycle"),
    );
    let after = error_kind(&wrapped);
    if after != expected {
        return Err(format!(
            "{what} failed with {shown}, but after wrapping it in two contexts and a controller error its kind is {}",
            after.as_str()
        ));
    }
    Ok(())
}

fn check_kind(what: &str, err: CloudError, expected: ErrorKind) -> Check {
    judge_kind(what, err, expected).or_else(fail)
}

/// Arm the injector for `operation` to fail with the cloud's `kind`, make the call, and check the error's
/// kind. `Ok(false)`: the injector has no such error, nothing was checked.
async fn probe<T, Fut>(
    ctx: &Ctx,
    operation: Operation,
    kind: ErrorKind,
    what: &str,
    call: impl FnOnce() -> Fut,
) -> Check<bool>
where
    Fut: Future<Output = Result<T, CloudError>>,
{
    let Some(injector) = &ctx.injector else {
        return Ok(false);
    };
    match injector.fail_next(operation, kind).await {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(err) => {
            return fail(format!(
                "the error injector could not arm the cloud's {} error for {operation}: {err}",
                kind.as_str()
            ));
        }
    }
    match ctx.call(what, call()).await? {
        Ok(_) => fail(format!(
            "{what} succeeded although the cloud was armed to fail it with its {} error: the provider must hand the cloud's errors on (if it answered from a cache, arm the call it makes)",
            kind.as_str()
        )),
        Err(err) => check_kind(what, err, kind).map(|()| true),
    }
}

/// The skip of a clause whose every check needs an injector that is missing or armed nothing.
fn nothing_injected<T>(ctx: &Ctx, operations: &str) -> Check<T> {
    if ctx.injector.is_none() {
        skip(format!(
            "needs an ErrorInjector to make the cloud fail {operations} (ConformanceSubject::with_error_injector)"
        ))
    } else {
        skip(format!(
            "the ErrorInjector armed none of the errors the clause asks for ({operations})"
        ))
    }
}

/// [`Clause::ErrorsInstancesV2KindSurvivesWrapping`](crate::Clause::ErrorsInstancesV2KindSurvivesWrapping).
pub(crate) async fn instances_v2(ctx: &Ctx) -> Check {
    let v2 = ctx.v2()?;
    let unknown = ctx.unknown().node();
    let what = format!(
        "instance_metadata of the unknown {}",
        describe_node(&unknown)
    );
    match ctx.call(&what, v2.instance_metadata(&unknown)).await? {
        Err(err) => check_kind(&what, err, ErrorKind::InstanceNotFound)?,
        Ok(answer) => {
            let answered = match Lookup::from_answer(answer) {
                Lookup::Found(_) => "metadata".to_owned(),
                Lookup::Skip(skip) => skip,
            };
            return fail(format!(
                "{what} answered {answered} instead of failing, so there is no error whose kind could be checked (see instances-v2/unknown-instance-metadata-not-found)"
            ));
        }
    }
    if ctx.injector.is_none() {
        return Ok(());
    }
    let node = ctx.running()?.node();
    let shown = describe_node(&node);
    let exists = format!("instance_exists of the running {shown}");
    let metadata = format!("instance_metadata of the running {shown}");
    let shutdown = format!("instance_shutdown of the running {shown}");
    for kind in [ErrorKind::Throttled] {
        probe(ctx, Operation::InstanceExists, kind, &exists, || {
            v2.instance_exists(&node)
        })
        .await?;
    }
    for kind in [ErrorKind::InstanceNotFound, ErrorKind::Throttled] {
        probe(ctx, Operation::InstanceMetadata, kind, &metadata, || {
            v2.instance_metadata(&node)
        })
        .await?;
    }
    for kind in [ErrorKind::NotImplemented, ErrorKind::Throttled] {
        probe(ctx, Operation::InstanceShutdown, kind, &shutdown, || {
            v2.instance_shutdown(&node)
        })
        .await?;
    }
    Ok(())
}

/// [`Clause::ErrorsInstancesKindSurvivesWrapping`](crate::Clause::ErrorsInstancesKindSurvivesWrapping).
pub(crate) async fn instances(ctx: &Ctx) -> Check {
    let v1 = ctx.v1()?;
    let unknown = ctx.unknown();
    let what = format!("instance_id of the unknown node {}", unknown.node_name);
    match ctx.call(&what, v1.instance_id(&unknown.node_name)).await? {
        Ok(id) => {
            return fail(format!(
                "{what} returned {id:?}, so there is no error whose kind could be checked (see instances/unknown-instance-not-found)"
            ));
        }
        Err(err) => check_kind(&what, err, ErrorKind::InstanceNotFound)?,
    }
    if ctx.injector.is_none() {
        return Ok(());
    }
    let running = ctx.running()?;
    let pid = provider_id(ctx, &running, "running").await?;
    let exists = format!("instance_exists_by_provider_id of {pid}");
    let shutdown = format!("instance_shutdown_by_provider_id of {pid}");
    let addresses = format!("node_addresses_by_provider_id of {pid}");
    let id = format!("instance_id of the running node {}", running.node_name);
    probe(
        ctx,
        Operation::InstanceExistsByProviderId,
        ErrorKind::Throttled,
        &exists,
        || v1.instance_exists_by_provider_id(&pid),
    )
    .await?;
    probe(
        ctx,
        Operation::InstanceShutdownByProviderId,
        ErrorKind::NotImplemented,
        &shutdown,
        || v1.instance_shutdown_by_provider_id(&pid),
    )
    .await?;
    probe(
        ctx,
        Operation::NodeAddressesByProviderId,
        ErrorKind::Throttled,
        &addresses,
        || v1.node_addresses_by_provider_id(&pid),
    )
    .await?;
    probe(
        ctx,
        Operation::InstanceId,
        ErrorKind::Throttled,
        &id,
        || v1.instance_id(&running.node_name),
    )
    .await?;
    Ok(())
}

/// [`Clause::ErrorsLoadBalancerKindSurvivesWrapping`](crate::Clause::ErrorsLoadBalancerKindSurvivesWrapping).
pub(crate) async fn load_balancer(ctx: &Ctx) -> Check {
    let lb = ctx.lb()?;
    let cluster = ctx.cluster();
    let service = ctx.new_service("errors");
    let key = ccm_core::helpers::service_key(&service);
    let nodes = ctx.backend_nodes();
    let get = format!("get_load_balancer for service {key}");
    let ensure = format!("ensure_load_balancer for service {key}");
    let update = format!("update_load_balancer for service {key}");
    let delete = format!("ensure_load_balancer_deleted for service {key}");
    let mut checked = false;
    checked |= probe(
        ctx,
        Operation::GetLoadBalancer,
        ErrorKind::Throttled,
        &get,
        || lb.get_load_balancer(cluster, &service),
    )
    .await?;
    for kind in [ErrorKind::Retry, ErrorKind::Throttled] {
        checked |= probe(ctx, Operation::EnsureLoadBalancer, kind, &ensure, || {
            lb.ensure_load_balancer(cluster, &service, &nodes)
        })
        .await?;
    }
    checked |= probe(
        ctx,
        Operation::UpdateLoadBalancer,
        ErrorKind::Throttled,
        &update,
        || lb.update_load_balancer(cluster, &service, &nodes),
    )
    .await?;
    checked |= probe(
        ctx,
        Operation::EnsureLoadBalancerDeleted,
        ErrorKind::Throttled,
        &delete,
        || lb.ensure_load_balancer_deleted(cluster, &service),
    )
    .await?;
    if lb.supports_listing() {
        let list = format!("list_load_balancers for cluster {cluster}");
        checked |= probe(
            ctx,
            Operation::ListLoadBalancers,
            ErrorKind::Throttled,
            &list,
            || lb.list_load_balancers(cluster, None),
        )
        .await?;
    }
    if !checked {
        return nothing_injected(ctx, "get, ensure, update and delete");
    }
    Ok(())
}

/// [`Clause::ErrorsRoutesKindSurvivesWrapping`](crate::Clause::ErrorsRoutesKindSurvivesWrapping).
pub(crate) async fn routes(ctx: &Ctx) -> Check {
    let api = ctx.routes()?;
    let target = ctx.route_target()?;
    let Some(cidr) = ctx.fixture.route_cidrs.first() else {
        return skip("needs a route CIDR (set ConformanceFixture::with_route_cidrs)");
    };
    let cluster = ctx.cluster();
    let route = ctx.new_route(cluster, &target, cidr);
    let list = format!("list_routes({cluster:?})");
    let create = format!("create_route({cluster:?}) to {cidr}");
    let delete = format!("delete_route({cluster:?}) to {cidr}");
    let mut checked = false;
    checked |= probe(
        ctx,
        Operation::ListRoutes,
        ErrorKind::Throttled,
        &list,
        || api.list_routes(cluster),
    )
    .await?;
    checked |= probe(
        ctx,
        Operation::CreateRoute,
        ErrorKind::Throttled,
        &create,
        || api.create_route(cluster, ctx.run_id(), &route),
    )
    .await?;
    checked |= probe(
        ctx,
        Operation::DeleteRoute,
        ErrorKind::Throttled,
        &delete,
        || api.delete_route(cluster, &route),
    )
    .await?;
    if !checked {
        return nothing_injected(ctx, "list, create and delete");
    }
    Ok(())
}

/// [`Clause::ErrorsZonesKindSurvivesWrapping`](crate::Clause::ErrorsZonesKindSurvivesWrapping).
pub(crate) async fn zones(ctx: &Ctx) -> Check {
    let zones = ctx.zones()?;
    let running = ctx.running()?;
    let name = running.node_name.as_str();
    let by_name = format!("get_zone_by_node_name({name:?})");
    let mut checked = false;
    if let Some(pid) = &running.provider_id {
        let by_id = format!("get_zone_by_provider_id({pid:?})");
        for kind in [ErrorKind::InstanceNotFound, ErrorKind::Throttled] {
            checked |= probe(ctx, Operation::GetZoneByProviderId, kind, &by_id, || {
                zones.get_zone_by_provider_id(pid)
            })
            .await?;
        }
    }
    checked |= probe(
        ctx,
        Operation::GetZoneByNodeName,
        ErrorKind::InstanceNotFound,
        &by_name,
        || zones.get_zone_by_node_name(name),
    )
    .await?;
    if !checked {
        return nothing_injected(ctx, "the zone lookups");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_judged_as_returned_and_after_wrapping() {
        assert_eq!(
            judge_kind(
                "instance_id",
                CloudError::InstanceNotFound.context("describing i-1"),
                ErrorKind::InstanceNotFound
            ),
            Ok(())
        );
        let text = judge_kind(
            "instance_id",
            CloudError::message("instance i-1 not found"),
            ErrorKind::InstanceNotFound,
        )
        .unwrap_err();
        assert!(
            text.starts_with("instance_id failed with \"")
                && text.contains("(kind other): CloudError::kind() must be instance_not_found"),
            "{text}"
        );
        let lost = judge_kind(
            "list_routes",
            CloudError::provider(
                "listing routes",
                std::io::Error::other("429 too many requests"),
            ),
            ErrorKind::Throttled,
        )
        .unwrap_err();
        assert!(
            lost.contains("(kind other): CloudError::kind() must be throttled"),
            "{lost}"
        );
    }
}
