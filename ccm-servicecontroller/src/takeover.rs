//! Takeover: what a starting controller (a new leader, a restarted CCM) learns from the provider's listing of its
//! load balancers, so that only the Services whose load balancer is missing or differs are ensured
//! (docs/service-controller.md, "Takeover"). Go ensures every Service at start.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ccm_core::helpers::{has_load_balancer_finalizer, service_key};
use ccm_core::listing::{Drift, ObservedLoadBalancer};
use k8s_openapi::api::core::v1::{Node, Service};

use crate::config::Takeover;
use crate::predicates::{ServiceSelector, needs_cleanup};

/// What the controller does with each Service at start.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TakeoverPlan {
    /// Services whose load balancer exists and matches: not ensured, remembered as synced with the current nodes.
    pub steady: Vec<String>,
    /// Services that want a load balancer but must be ensured, with the first difference found.
    pub ensure: Vec<(String, Drift)>,
}

/// Whether the start compares the listing with the Services: with [`Takeover::Compare`] and a provider that lists
/// its load balancers; otherwise every Service is ensured, as in Go.
pub(crate) fn compares(takeover: Takeover, supports_listing: bool) -> bool {
    takeover == Takeover::Compare && supports_listing
}

impl TakeoverPlan {
    /// The steady Services among `services`, with their keys: the controller remembers them as synced.
    pub(crate) fn steady_services(&self, services: &[Arc<Service>]) -> Vec<(String, Arc<Service>)> {
        let by_key: HashMap<String, &Arc<Service>> =
            services.iter().map(|s| (service_key(s), s)).collect();
        let steady = self.steady.iter();
        steady
            .filter_map(|key| by_key.get(key).map(|svc| (key.clone(), Arc::clone(svc))))
            .collect()
    }

    /// How many Services each difference sent to an ensure, for the log.
    pub fn drift_counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for (_, drift) in &self.ensure {
            *counts.entry(drift.as_str()).or_default() += 1;
        }
        counts
    }
}

/// The start-up comparison, fed one page of the listing at a time, so that the controller holds one page of
/// load balancers (with their backends) at once, never the whole listing.
///
/// A Service is steady only if it wants a load balancer, is not being cleaned up, already carries the cleanup
/// finalizer (an ensure would add it), and its load balancer (found by `name_of`) is listed without
/// [`drift`](ObservedLoadBalancer::drift) against `hosts`. Services that want no load balancer are left out: the
/// caller queues them as before.
pub struct Comparison<'a> {
    /// The Services still waiting for their load balancer, by load-balancer name.
    waiting: HashMap<String, &'a Arc<Service>>,
    hosts: &'a [&'a Node],
    plan: TakeoverPlan,
    /// Load balancers listed so far, and those of them that no Service owns.
    listed: usize,
    without_service: usize,
}

impl<'a> Comparison<'a> {
    /// A comparison of the Services this controller owns among `services`.
    pub fn new(
        selector: &ServiceSelector,
        services: &'a [Arc<Service>],
        name_of: &dyn Fn(&Service) -> String,
        hosts: &'a [&'a Node],
    ) -> Self {
        let waiting = services
            .iter()
            .filter(|svc| selector.wants_load_balancer(svc) && !needs_cleanup(svc))
            .map(|svc| (name_of(svc), svc))
            .collect();
        Comparison {
            waiting,
            hosts,
            plan: TakeoverPlan::default(),
            listed: 0,
            without_service: 0,
        }
    }

    /// Compare one page of the listing.
    pub fn page(&mut self, items: Vec<ObservedLoadBalancer>) {
        for lb in items {
            self.listed += 1;
            let Some(svc) = self.waiting.remove(&lb.name) else {
                self.without_service += 1;
                continue;
            };
            // Without the finalizer the sync has an API write to do anyway; a configuration drift says "ensure".
            let verdict = if has_load_balancer_finalizer(svc) {
                lb.drift(svc, self.hosts)
            } else {
                Some(Drift::Configuration)
            };
            let key = service_key(svc);
            match verdict {
                None => self.plan.steady.push(key),
                Some(drift) => self.plan.ensure.push((key, drift)),
            }
        }
    }

    /// How many load balancers were listed, and how many of them no Service owns.
    pub fn listed(&self) -> (usize, usize) {
        (self.listed, self.without_service)
    }

    /// The plan: every Service whose load balancer was not listed is [`Drift::Missing`]. Both lists are sorted.
    pub fn finish(mut self) -> TakeoverPlan {
        let missing = self
            .waiting
            .values()
            .map(|svc| (service_key(svc), Drift::Missing));
        self.plan.ensure.extend(missing);
        self.plan.steady.sort();
        self.plan.ensure.sort_by(|a, b| a.0.cmp(&b.0));
        self.plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::listing::{ObservedPort, load_balancer_fingerprint};
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, ServicePort, ServiceSpec, ServiceStatus,
    };

    fn status() -> LoadBalancerStatus {
        LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some("203.0.113.1".into()),
                ..Default::default()
            }]),
        }
    }

    fn lb_service(name: &str) -> Service {
        let mut svc = Service::default();
        svc.metadata.namespace = Some("default".into());
        svc.metadata.name = Some(name.into());
        svc.metadata.uid = Some(format!("uid-{name}"));
        svc.metadata.finalizers = Some(vec![
            ccm_core::names::finalizers::LOAD_BALANCER_CLEANUP.into(),
        ]);
        svc.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                node_port: Some(30080),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        svc.status = Some(ServiceStatus {
            load_balancer: Some(status()),
            ..Default::default()
        });
        svc
    }

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n
    }

    fn listed(svc: &Service) -> ObservedLoadBalancer {
        ObservedLoadBalancer::new(name_of(svc), status())
            .with_ports(vec![ObservedPort::new("TCP", 80, Some(30080))])
            .with_backends(["a"])
            .with_fingerprint(load_balancer_fingerprint(svc))
    }

    fn name_of(svc: &Service) -> String {
        format!("lb-{}", svc.metadata.name.as_deref().unwrap_or_default())
    }

    #[test]
    fn only_compare_with_a_listing_provider_compares() {
        assert!(compares(Takeover::Compare, true));
        assert!(!compares(Takeover::Compare, false));
        assert!(!compares(Takeover::EnsureAll, true));
    }

    #[test]
    fn only_listed_matching_finalized_services_are_steady() {
        let steady = lb_service("steady");
        let missing = lb_service("missing");
        let mut no_finalizer = lb_service("no-finalizer");
        let moved = lb_service("moved");
        let mut deleting = lb_service("deleting");
        let mut cluster_ip = lb_service("cluster-ip");
        let observed = vec![
            listed(&steady),
            listed(&no_finalizer),
            listed(&moved).with_backends(["b"]),
            listed(&deleting),
            ObservedLoadBalancer::new("someone-else", status()),
        ];
        no_finalizer.metadata.finalizers = None;
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        cluster_ip.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        cluster_ip.metadata.finalizers = None;
        let services: Vec<Arc<Service>> =
            [steady, missing, no_finalizer, moved, deleting, cluster_ip]
                .into_iter()
                .map(Arc::new)
                .collect();
        let a = node("a");
        let hosts = [&a];
        let mut comparison =
            Comparison::new(&ServiceSelector::default(), &services, &name_of, &hosts);
        let mut pages = observed.into_iter();
        comparison.page(pages.by_ref().take(2).collect());
        comparison.page(pages.collect());
        assert_eq!(
            comparison.listed(),
            (5, 2),
            "deleting's and someone else's have no steady Service"
        );
        let plan = comparison.finish();
        assert_eq!(plan.steady, ["default/steady"]);
        assert_eq!(
            plan.ensure,
            [
                ("default/missing".to_owned(), Drift::Missing),
                ("default/moved".to_owned(), Drift::Backends),
                ("default/no-finalizer".to_owned(), Drift::Configuration),
            ]
        );
        assert_eq!(plan.drift_counts()["missing"], 1);
        let steady: Vec<String> = plan
            .steady_services(&services)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(steady, ["default/steady"]);
    }
}
