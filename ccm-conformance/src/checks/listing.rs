//! The clause about [`LoadBalancer::list_load_balancers`](ccm_core::LoadBalancer::list_load_balancers), which a
//! starting service controller uses to skip the ensure of load balancers that match their Services.

use std::collections::HashMap;
use std::collections::HashSet;

use ccm_core::helpers::service_key;
use ccm_core::listing::ObservedLoadBalancer;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service, ServiceStatus};

use crate::context::{Check, Ctx, declared, fail};

/// More pages than a clause's few load balancers can need: a listing that does not end within this many fails.
const MAX_PAGES: usize = 10_000;

/// Every listed load balancer by name; a name on two pages, a repeated page token or an endless listing fails.
async fn list_all(ctx: &Ctx) -> Check<HashMap<String, ObservedLoadBalancer>> {
    let lb = ctx.lb()?;
    let mut all = HashMap::new();
    let mut tokens = HashSet::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let what = match &token {
            None => "list_load_balancers (first page)".to_owned(),
            Some(t) => format!("list_load_balancers (page token {t:?})"),
        };
        let page = ctx
            .ok(&what, lb.list_load_balancers(ctx.cluster(), token.clone()))
            .await?;
        for item in page.items {
            if let Some(earlier) = all.insert(item.name.clone(), item) {
                return fail(format!(
                    "list_load_balancers reported load balancer {:?} twice; each must be on exactly one page",
                    earlier.name
                ));
            }
        }
        match page.next_page {
            None => return Ok(all),
            Some(next) if !tokens.insert(next.clone()) => {
                return fail(format!(
                    "list_load_balancers returned the page token {next:?} twice; the listing would never end"
                ));
            }
            Some(next) => token = Some(next),
        }
    }
    fail(format!(
        "list_load_balancers did not end within {MAX_PAGES} pages"
    ))
}

/// The Service as the controller would hold it after the ensure: its status is what the ensure returned.
fn with_status(service: &Service, status: &LoadBalancerStatus) -> Service {
    let mut out = service.clone();
    out.status = Some(ServiceStatus {
        load_balancer: Some(status.clone()),
        ..Default::default()
    });
    out
}

/// Fail unless the listing reports `service`'s load balancer as ensured with `status` and `nodes`.
fn expect_listed(
    ctx: &Ctx,
    listed: &HashMap<String, ObservedLoadBalancer>,
    service: &Service,
    status: &LoadBalancerStatus,
    nodes: &[Node],
) -> Check {
    let lb = ctx.lb()?;
    let name = lb.get_load_balancer_name(ctx.cluster(), service);
    let key = service_key(service);
    let Some(observed) = listed.get(&name) else {
        return fail(format!(
            "list_load_balancers does not report the load balancer {name:?} of service {key} after its ensure"
        ));
    };
    let node_refs: Vec<&Node> = nodes.iter().collect();
    match observed.drift(&with_status(service, status), &node_refs) {
        None => Ok(()),
        Some(drift) => fail(format!(
            "list_load_balancers reports the load balancer {name:?} of service {key} with a difference in its {} (ports {:?}, backends {:?}, fingerprint {:?}); it must report what the ensure left: the ensured status, the Service's ports, the nodes passed and ccm_core::listing::load_balancer_fingerprint of the Service",
            drift.as_str(),
            observed.ports,
            observed.backends,
            observed.fingerprint,
        )),
    }
}

/// [`Clause::LoadBalancerListingReportsEnsured`](crate::Clause::LoadBalancerListingReportsEnsured).
pub(crate) async fn reports_ensured(ctx: &Ctx) -> Check {
    let lb = ctx.lb()?;
    if !lb.supports_listing() {
        return declared(
            "the provider does not list its load balancers (supports_listing is false); a starting controller ensures every Service, as Go's does",
        );
    }
    let nodes = ctx.backend_nodes();
    let first = ctx.new_service("list");
    let second = ctx.new_service("list");
    let first_status = ctx.ensure(&first, &nodes).await?;
    let second_status = ctx.ensure(&second, &nodes).await?;
    ctx.eventually(|| async {
        let listed = list_all(ctx).await?;
        expect_listed(ctx, &listed, &first, &first_status, &nodes)?;
        expect_listed(ctx, &listed, &second, &second_status, &nodes)
    })
    .await?;

    ctx.delete(&first).await?;
    let gone = lb.get_load_balancer_name(ctx.cluster(), &first);
    ctx.eventually(|| async {
        let listed = list_all(ctx).await?;
        if listed.contains_key(&gone) {
            return fail(format!(
                "list_load_balancers still reports the load balancer {gone:?} of service {} after ensure_load_balancer_deleted",
                service_key(&first)
            ));
        }
        expect_listed(ctx, &listed, &second, &second_status, &nodes)
    })
    .await
}
