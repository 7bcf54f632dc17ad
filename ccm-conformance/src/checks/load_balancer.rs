//! Clauses about [`LoadBalancer`](ccm_core::LoadBalancer).

use std::collections::BTreeSet;
use std::sync::Arc;

use ccm_core::ErrorKind;
use ccm_core::helpers::{node_name, service_key};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::LoadBalancerInspector;
use crate::context::{Check, Ctx, describe_error, ensure_until_ready, fail, node_names, skip};
use crate::validate::{describe_status, load_balancer_status, status_addresses};

/// Fail unless `get_load_balancer` reports the Service's load balancer as existing, with the addresses of
/// `ensured` (when `ensured` has any).
async fn expect_exists(
    ctx: &Ctx,
    service: &Service,
    ensured: &LoadBalancerStatus,
    after: &str,
) -> Check {
    let key = service_key(service);
    ctx.eventually(|| async {
        match ctx.get(service).await? {
            None => fail(format!(
                "get_load_balancer for service {key} answered \"does not exist\" (None) after {after}"
            )),
            Some(got) => {
                let expected = status_addresses(ensured);
                if !expected.is_empty() && status_addresses(&got) != expected {
                    return fail(format!(
                        "get_load_balancer for service {key} reports {} after {after}, but ensure_load_balancer returned {}",
                        describe_status(&got),
                        describe_status(ensured)
                    ));
                }
                Ok(())
            }
        }
    })
    .await
}

/// Fail unless `get_load_balancer` answers "does not exist".
async fn expect_absent(ctx: &Ctx, service: &Service, after: &str) -> Check {
    let key = service_key(service);
    ctx.eventually(|| async {
        match ctx.get(service).await? {
            None => Ok(()),
            Some(status) => fail(format!(
                "get_load_balancer for service {key} reports {} after {after}; it must answer \"does not exist\" (None)",
                describe_status(&status)
            )),
        }
    })
    .await
}

/// The vendor's inspector, or skip.
fn inspector(ctx: &Ctx) -> Check<Arc<dyn LoadBalancerInspector>> {
    match ctx.inspector.clone() {
        Some(inspector) => Ok(inspector),
        None => skip(
            "no LoadBalancerInspector was given (ConformanceSubject::with_inspector); backends cannot be observed through the provider traits",
        ),
    }
}

/// Fail unless the inspector sees exactly `nodes` behind the Service's load balancer.
async fn expect_backends(
    ctx: &Ctx,
    inspector: &Arc<dyn LoadBalancerInspector>,
    service: &Service,
    nodes: &[Node],
    after: &str,
) -> Check {
    let key = service_key(service);
    let expected: BTreeSet<String> = nodes.iter().map(|n| node_name(n).to_owned()).collect();
    ctx.eventually(|| {
        let inspector = inspector.clone();
        let expected = &expected;
        let key = &key;
        async move {
            let seen = match inspector.backend_nodes(ctx.cluster(), service).await {
                Ok(seen) => seen,
                Err(err) => {
                    return fail(format!(
                        "the LoadBalancerInspector failed to read the backends of service {key}: {err}"
                    ));
                }
            };
            match seen {
                None => fail(format!(
                    "the LoadBalancerInspector finds no load balancer for service {key} after {after}"
                )),
                Some(seen) => {
                    let seen: BTreeSet<String> = seen.into_iter().collect();
                    if &seen == expected {
                        Ok(())
                    } else {
                        fail(format!(
                            "after {after}, the load balancer of service {key} has backends [{}]; expected exactly [{}]",
                            seen.into_iter().collect::<Vec<_>>().join(", "),
                            expected.iter().cloned().collect::<Vec<_>>().join(", ")
                        ))
                    }
                }
            }
        }
    })
    .await
}

/// Two backends or more, or skip.
fn at_least_two_backends(ctx: &Ctx) -> Check<Vec<Node>> {
    let nodes = ctx.backend_nodes();
    if nodes.len() < 2 {
        return skip(format!(
            "needs at least two backend nodes to change the backends, the fixture has {} (set ConformanceFixture::with_backend_nodes)",
            nodes.len()
        ));
    }
    Ok(nodes)
}

/// [`Clause::LoadBalancerEnsureReturnsStatus`](crate::Clause::LoadBalancerEnsureReturnsStatus).
pub(crate) async fn ensure_returns_status(ctx: &Ctx) -> Check {
    let service = ctx.new_service("status");
    let nodes = ctx.backend_nodes();
    let status = ctx.ensure(&service, &nodes).await?;
    load_balancer_status(&status).or_else(|why| {
        fail(format!(
            "ensure_load_balancer for service {} returned {}: {why}",
            service_key(&service),
            describe_status(&status)
        ))
    })
}

/// [`Clause::LoadBalancerEnsureIsIdempotent`](crate::Clause::LoadBalancerEnsureIsIdempotent).
pub(crate) async fn ensure_is_idempotent(ctx: &Ctx) -> Check {
    let service = ctx.new_service("idem");
    let nodes = ctx.backend_nodes();
    let first = ctx.ensure(&service, &nodes).await?;
    let second = ctx.ensure(&service, &nodes).await?;
    if !ccm_core::helpers::load_balancer_status_equal(&first, &second) {
        return fail(format!(
            "ensuring service {} twice with the same nodes returned {} then {}; the second ensure must report the same ingress",
            service_key(&service),
            describe_status(&first),
            describe_status(&second)
        ));
    }
    Ok(())
}

/// [`Clause::LoadBalancerGetReportsEnsured`](crate::Clause::LoadBalancerGetReportsEnsured).
pub(crate) async fn get_reports_ensured(ctx: &Ctx) -> Check {
    let service = ctx.new_service("get");
    let status = ctx.ensure(&service, &ctx.backend_nodes()).await?;
    expect_exists(ctx, &service, &status, "a successful ensure_load_balancer").await
}

/// [`Clause::LoadBalancerGetAbsentIsNone`](crate::Clause::LoadBalancerGetAbsentIsNone).
pub(crate) async fn get_absent_is_none(ctx: &Ctx) -> Check {
    let service = ctx.new_service("absent");
    let lb = ctx.lb()?;
    let key = service_key(&service);
    let what = format!("get_load_balancer for service {key}, which never had a load balancer,");
    match ctx
        .call(&what, lb.get_load_balancer(ctx.cluster(), &service))
        .await?
    {
        Ok(None) => Ok(()),
        Ok(Some(status)) => fail(format!(
            "{what} reports {}; it must answer \"does not exist\" (None)",
            describe_status(&status)
        )),
        Err(err) => fail(format!(
            "{what} failed: {}; it must answer Ok(None) (the service controller asks before deleting, and an error blocks the Service's deletion)",
            describe_error(&err)
        )),
    }
}

/// [`Clause::LoadBalancerDeleteAbsentSucceeds`](crate::Clause::LoadBalancerDeleteAbsentSucceeds).
pub(crate) async fn delete_absent_succeeds(ctx: &Ctx) -> Check {
    let service = ctx.new_service("delabsent");
    let lb = ctx.lb()?;
    let what = format!(
        "ensure_load_balancer_deleted for service {}, which never had a load balancer,",
        service_key(&service)
    );
    match ctx
        .call(
            &what,
            lb.ensure_load_balancer_deleted(ctx.cluster(), &service),
        )
        .await?
    {
        Ok(()) => Ok(()),
        Err(err) => fail(format!(
            "{what} failed: {}; deleting must be idempotent and succeed when there is nothing to delete",
            describe_error(&err)
        )),
    }
}

/// [`Clause::LoadBalancerGetAfterDeleteIsNone`](crate::Clause::LoadBalancerGetAfterDeleteIsNone).
pub(crate) async fn get_after_delete_is_none(ctx: &Ctx) -> Check {
    let service = ctx.new_service("getdel");
    ctx.ensure(&service, &ctx.backend_nodes()).await?;
    ctx.delete(&service).await?;
    expect_absent(ctx, &service, "ensure_load_balancer_deleted").await
}

/// [`Clause::LoadBalancerDeleteIsIdempotent`](crate::Clause::LoadBalancerDeleteIsIdempotent).
pub(crate) async fn delete_is_idempotent(ctx: &Ctx) -> Check {
    let service = ctx.new_service("deltwice");
    ctx.ensure(&service, &ctx.backend_nodes()).await?;
    ctx.delete(&service).await?;
    let lb = ctx.lb()?;
    let what = format!(
        "the second ensure_load_balancer_deleted for service {}",
        service_key(&service)
    );
    match ctx
        .call(
            &what,
            lb.ensure_load_balancer_deleted(ctx.cluster(), &service),
        )
        .await?
    {
        Ok(()) => Ok(()),
        Err(err) => fail(format!(
            "{what} failed: {}; deleting an already deleted load balancer must succeed",
            describe_error(&err)
        )),
    }
}

/// [`Clause::LoadBalancerDeleteNeverImplementedElsewhere`](crate::Clause::LoadBalancerDeleteNeverImplementedElsewhere).
pub(crate) async fn delete_never_implemented_elsewhere(ctx: &Ctx) -> Check {
    let lb = ctx.lb()?;
    let absent = ctx.new_service("ieabsent");
    let present = ctx.new_service("iepresent");
    ctx.ensure(&present, &ctx.backend_nodes()).await?;
    for (service, state) in [(&absent, "absent"), (&present, "existing")] {
        let what = format!(
            "ensure_load_balancer_deleted for service {} (an {state} load balancer)",
            service_key(service)
        );
        let result = ctx
            .call(
                &what,
                lb.ensure_load_balancer_deleted(ctx.cluster(), service),
            )
            .await?;
        if let Err(err) = result
            && err.kind() == ErrorKind::ImplementedElsewhere
        {
            return fail(format!(
                "{what} returned ImplementedElsewhere: {}; the contract forbids it on delete (return Ok when this provider has nothing to delete)",
                describe_error(&err)
            ));
        }
    }
    Ok(())
}

/// [`Clause::LoadBalancerUpdateKeepsLoadBalancer`](crate::Clause::LoadBalancerUpdateKeepsLoadBalancer).
pub(crate) async fn update_keeps_load_balancer(ctx: &Ctx) -> Check {
    let service = ctx.new_service("upd");
    let nodes = ctx.backend_nodes();
    let status = ctx.ensure(&service, &nodes).await?;
    let lb = ctx.lb()?;
    let update_nodes: Vec<Node> = if nodes.len() > 1 {
        nodes[1..].to_vec()
    } else {
        nodes.clone()
    };
    let what = format!(
        "update_load_balancer for service {} with nodes {}",
        service_key(&service),
        node_names(&update_nodes)
    );
    ctx.ok(
        &what,
        lb.update_load_balancer(ctx.cluster(), &service, &update_nodes),
    )
    .await?;
    expect_exists(ctx, &service, &status, "update_load_balancer").await
}

/// [`Clause::LoadBalancerEnsureSetsHosts`](crate::Clause::LoadBalancerEnsureSetsHosts).
pub(crate) async fn ensure_sets_hosts(ctx: &Ctx) -> Check {
    let inspector = inspector(ctx)?;
    let nodes = at_least_two_backends(ctx)?;
    let service = ctx.new_service("ensurehosts");
    ctx.ensure(&service, &nodes).await?;
    let after = format!("ensure_load_balancer with nodes {}", node_names(&nodes));
    expect_backends(ctx, &inspector, &service, &nodes, &after).await?;
    let fewer = &nodes[..1];
    ctx.ensure(&service, fewer).await?;
    let after = format!(
        "a second ensure_load_balancer with nodes {}",
        node_names(fewer)
    );
    expect_backends(ctx, &inspector, &service, fewer, &after).await
}

/// [`Clause::LoadBalancerUpdateReplacesHosts`](crate::Clause::LoadBalancerUpdateReplacesHosts).
pub(crate) async fn update_replaces_hosts(ctx: &Ctx) -> Check {
    let inspector = inspector(ctx)?;
    let nodes = at_least_two_backends(ctx)?;
    let service = ctx.new_service("updhosts");
    let lb = ctx.lb()?;
    // Start with the first two nodes, then move to the rest (or just the second).
    let initial = &nodes[..2];
    ctx.ensure(&service, initial).await?;
    let replacement: &[Node] = if nodes.len() > 2 {
        &nodes[1..]
    } else {
        &nodes[1..2]
    };
    for update in [replacement, &nodes[..1]] {
        let what = format!(
            "update_load_balancer for service {} with nodes {}",
            service_key(&service),
            node_names(update)
        );
        ctx.ok(
            &what,
            lb.update_load_balancer(ctx.cluster(), &service, update),
        )
        .await?;
        expect_backends(ctx, &inspector, &service, update, &what).await?;
    }
    Ok(())
}

/// [`Clause::LoadBalancerServicesAreIsolated`](crate::Clause::LoadBalancerServicesAreIsolated).
pub(crate) async fn services_are_isolated(ctx: &Ctx) -> Check {
    let first = ctx.new_service("isoa");
    let second = ctx.new_service("isob");
    let nodes = ctx.backend_nodes();
    ctx.ensure(&first, &nodes).await?;
    let kept = ctx.ensure(&second, &nodes).await?;
    ctx.delete(&first).await?;
    let after = format!(
        "deleting the load balancer of another service, {}",
        service_key(&first)
    );
    expect_exists(ctx, &second, &kept, &after).await
}

/// [`Clause::LoadBalancerNameIsStable`](crate::Clause::LoadBalancerNameIsStable).
pub(crate) async fn name_is_stable(ctx: &Ctx) -> Check {
    let lb = ctx.lb()?;
    let cluster = ctx.cluster();
    let first = ctx.new_service("name");
    let name = lb.get_load_balancer_name(cluster, &first);
    if name.is_empty() {
        return fail(format!(
            "get_load_balancer_name for service {} is empty",
            service_key(&first)
        ));
    }
    let again = lb.get_load_balancer_name(cluster, &first);
    if again != name {
        return fail(format!(
            "get_load_balancer_name for service {} answered {name:?}, then {again:?}",
            service_key(&first)
        ));
    }
    let other = ctx.new_service("name");
    let other_name = lb.get_load_balancer_name(cluster, &other);
    if other_name == name {
        return fail(format!(
            "get_load_balancer_name is {name:?} for both {} and {}, two Services with different UIDs",
            service_key(&first),
            service_key(&other)
        ));
    }
    Ok(())
}

/// [`Clause::LoadBalancerConcurrentServices`](crate::Clause::LoadBalancerConcurrentServices).
pub(crate) async fn concurrent_services(ctx: &Ctx) -> Check {
    let lb = ctx.lb()?;
    let count = ctx.fixture.concurrency;
    let services: Vec<Service> = (0..count).map(|_| ctx.new_service("conc")).collect();
    let nodes = Arc::new(ctx.backend_nodes());
    let cluster = ctx.cluster().to_owned();
    let (call_timeout, ready_timeout) = (ctx.fixture.call_timeout, ctx.fixture.ready_timeout);

    let ensures = services.iter().cloned().map(|service| {
        let (lb, nodes, cluster) = (lb.clone(), nodes.clone(), cluster.clone());
        tokio::spawn(async move {
            ensure_until_ready(
                lb.as_ref(),
                &cluster,
                &service,
                &nodes,
                call_timeout,
                ready_timeout,
            )
            .await
        })
    });
    let results = futures::future::join_all(ensures).await;
    let mut statuses = Vec::with_capacity(count);
    for (service, joined) in services.iter().zip(results) {
        match joined {
            Ok(Ok(status)) => statuses.push(status),
            Ok(Err(message)) => {
                return fail(format!(
                    "one of {count} concurrent ensures failed: {message}"
                ));
            }
            Err(join) => {
                return fail(format!(
                    "the concurrent ensure of service {} panicked: {join}",
                    service_key(service)
                ));
            }
        }
    }
    for (service, status) in services.iter().zip(&statuses) {
        let after = format!("{count} concurrent ensures");
        expect_exists(ctx, service, status, &after).await?;
    }

    let deletes = services.iter().cloned().map(|service| {
        let (lb, cluster) = (lb.clone(), cluster.clone());
        tokio::spawn(async move {
            let result = tokio::time::timeout(
                call_timeout,
                lb.ensure_load_balancer_deleted(&cluster, &service),
            )
            .await;
            (service, result)
        })
    });
    for joined in futures::future::join_all(deletes).await {
        match joined {
            Ok((_, Ok(Ok(())))) => {}
            Ok((service, Ok(Err(err)))) => {
                return fail(format!(
                    "one of {count} concurrent ensure_load_balancer_deleted calls, for service {}, failed: {}",
                    service_key(&service),
                    describe_error(&err)
                ));
            }
            Ok((service, Err(_))) => {
                return fail(format!(
                    "one of {count} concurrent ensure_load_balancer_deleted calls, for service {}, did not answer within the call timeout",
                    service_key(&service)
                ));
            }
            Err(join) => return fail(format!("a concurrent delete panicked: {join}")),
        }
    }
    for service in &services {
        let after = format!("{count} concurrent deletes");
        expect_absent(ctx, service, &after).await?;
    }
    Ok(())
}
