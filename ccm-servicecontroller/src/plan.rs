//! What a sync decides around its I/O, as pure functions: which keys an informer event or a resync queues, which
//! branch a sync takes, when a finalizer patch is read again, and which Event reports a host update. The
//! controller ([`crate::controller`]) fetches, calls these, and writes.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use ccm_core::helpers::{node_name, service_key};
use ccm_core::runtime::events::EventType;
use ccm_core::runtime::informer::InformerEvent;
use ccm_core::{CloudError, names};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::error::Error;
use crate::predicates::{
    ServiceSelector, go_list, loggable_node_names, needs_cleanup,
    node_update_affects_load_balancers, should_enqueue_added, should_enqueue_updated,
};

/// How many times a finalizer patch is retried after a concurrent change of the finalizer list.
pub(crate) const FINALIZER_ATTEMPTS: u32 = 5;

/// The node-sync queue key used when node events were missed: it only triggers a pass.
pub(crate) const RESYNC_NODE_KEY: &str = "";

/// Which branch a sync took (Go: `loadBalancerOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Delete,
    Ensure,
}

/// Which of Go's two load-balancer delete paths a deletion takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeletePath {
    /// The Service needs cleanup or no longer wants a load balancer (Go: the delete branch of
    /// `syncLoadBalancerIfNeeded`): delete only a load balancer that exists, then remove the finalizer; a failure
    /// is reported by the caller's `SyncLoadBalancerFailed`.
    Cleanup,
    /// The Service vanished from the cache without the finalizer, or came back with a new UID (Go:
    /// `processLoadBalancerDelete`): delete from its last state if that wanted a load balancer, without an
    /// existence check or a finalizer; a failure emits `DeleteLoadBalancerFailed`.
    Vanished,
}

impl DeletePath {
    /// Whether there is anything to delete for a Service whose last state `wanted` a load balancer: always on the
    /// cleanup path, on the vanished path only if it wanted one.
    pub(crate) fn applies(self, wanted: bool) -> bool {
        self == DeletePath::Cleanup || wanted
    }

    /// Whether the cloud is asked first if the load balancer exists (cleanup); the vanished path assumes it does.
    pub(crate) fn checks_existence(self) -> bool {
        self == DeletePath::Cleanup
    }

    /// Whether a failed delete emits `DeleteLoadBalancerFailed` (vanished); on the cleanup path the caller's
    /// `SyncLoadBalancerFailed` reports it.
    pub(crate) fn reports_delete_failure(self) -> bool {
        self == DeletePath::Vanished
    }

    /// Whether the cleanup finalizer is removed after the delete (cleanup); a vanished Service has none to remove.
    pub(crate) fn removes_finalizer(self) -> bool {
        self == DeletePath::Cleanup
    }
}

/// An Event to emit about a Service: its type, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) type_: EventType,
    pub(crate) reason: &'static str,
    pub(crate) message: Cow<'static, str>,
}

/// `namespace/name` split in two; anything else is [`Error::InvalidKey`].
pub(crate) fn split_key(key: &str) -> Result<(&str, &str), Error> {
    match key.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns, name))
        }
        _ => Err(Error::InvalidKey(key.to_owned())),
    }
}

/// The `status.loadBalancer` a Service has now (empty without one).
pub(crate) fn current_status(svc: &Service) -> LoadBalancerStatus {
    let status = svc.status.as_ref().and_then(|s| s.load_balancer.clone());
    status.unwrap_or_default()
}

/// `svc` as the cloud should see it once its finalizers are `finalizers` (those the API server returned).
pub(crate) fn with_finalizers(svc: &Service, finalizers: Option<Vec<String>>) -> Service {
    let mut out = svc.clone();
    out.metadata.finalizers = finalizers;
    out
}

/// Whether an ensure's status names at least one ingress point (Go: a non-nil status).
pub(crate) fn has_ingress(status: &LoadBalancerStatus) -> bool {
    status.ingress.as_ref().is_some_and(|i| !i.is_empty())
}

/// What an ensure's answer means: the status to write; `None` when the load balancer is implemented elsewhere
/// (nothing to write); [`Error::EmptyStatus`] for a status without an ingress point; else [`Error::Ensure`].
pub(crate) fn ensured_status(
    answer: Result<LoadBalancerStatus, CloudError>,
) -> Result<Option<LoadBalancerStatus>, Error> {
    match answer {
        Ok(status) if has_ingress(&status) => Ok(Some(status)),
        Ok(_) => Err(Error::EmptyStatus),
        Err(err) if err.is_implemented_elsewhere() => Ok(None),
        Err(err) => Err(Error::Ensure(err)),
    }
}

/// Whether a failed finalizer patch (HTTP `code`) means the finalizer list changed under us: read it again.
pub(crate) fn is_finalizer_conflict(code: Option<u16>) -> bool {
    matches!(code, Some(409 | 422))
}

/// The key a Service event queues, if any: an added Service this controller owns, an update that needs a sync or
/// a cleanup (with `extended` update fields or Go's), and a deleted Service the controller remembers (`tracked`).
/// Go has no delete handler; the SDK queues remembered Services so one deleted without the finalizer still has
/// its load balancer removed.
pub(crate) fn service_event_key(
    selector: &ServiceSelector,
    extended: bool,
    tracked: impl Fn(&str) -> bool,
    event: &InformerEvent<Service>,
) -> Option<String> {
    match event {
        InformerEvent::Added(svc) => should_enqueue_added(selector, svc).then(|| service_key(svc)),
        InformerEvent::Updated { old, new } => {
            should_enqueue_updated(selector, extended, old, new).then(|| service_key(new))
        }
        InformerEvent::Deleted(svc) => Some(service_key(svc)).filter(|key| tracked(key)),
        InformerEvent::Resync => None,
    }
}

/// The node-sync key a node event queues: the node's name for an add, a delete or an update that can affect load
/// balancers, [`RESYNC_NODE_KEY`] for a resync.
pub(crate) fn node_event_key(event: &InformerEvent<Node>) -> Option<String> {
    match event {
        InformerEvent::Added(node) | InformerEvent::Deleted(node) => {
            Some(node_name(node).to_owned())
        }
        InformerEvent::Updated { old, new } => {
            node_update_affects_load_balancers(old, new).then(|| node_name(new).to_owned())
        }
        InformerEvent::Resync => Some(RESYNC_NODE_KEY.to_owned()),
    }
}

/// The keys a resync (or the start) queues: every cached Service the add handler would queue but those in `skip`,
/// and every `remembered` key that is gone from the cache (`cached` says which are there).
pub(crate) fn keys_to_sync(
    selector: &ServiceSelector,
    services: &[Arc<Service>],
    remembered: impl IntoIterator<Item = String>,
    cached: impl Fn(&str) -> bool,
    skip: &HashSet<String>,
) -> Vec<String> {
    let mut keys: Vec<String> = services
        .iter()
        .filter(|svc| should_enqueue_added(selector, svc))
        .map(|svc| service_key(svc))
        .filter(|key| !skip.contains(key))
        .collect();
    keys.extend(remembered.into_iter().filter(|key| !cached(key)));
    keys
}

/// The keys a periodic re-ensure queues: every Service that wants a load balancer and is not being cleaned up,
/// but those already `backing_off` (they are being retried).
pub(crate) fn reensure_keys(
    selector: &ServiceSelector,
    services: &[Arc<Service>],
    backing_off: impl Fn(&str) -> bool,
) -> Vec<String> {
    services
        .iter()
        .filter(|svc| selector.wants_load_balancer(svc) && !needs_cleanup(svc))
        .map(|svc| service_key(svc))
        .filter(|key| !backing_off(key))
        .collect()
}

/// A Normal Event with a fixed message.
const fn normal(reason: &'static str, message: &'static str) -> Note {
    Note {
        type_: EventType::Normal,
        reason,
        message: Cow::Borrowed(message),
    }
}

/// A Warning Event.
fn warning(reason: &'static str, message: String) -> Note {
    Note {
        type_: EventType::Warning,
        reason,
        message: Cow::Owned(message),
    }
}

/// Normal `EnsuringLoadBalancer`, before an ensure.
pub(crate) const ENSURING: Note = normal(
    names::events::ENSURING_LOAD_BALANCER,
    "Ensuring load balancer",
);
/// Normal `EnsuredLoadBalancer`, after an ensure that returned an ingress point.
pub(crate) const ENSURED: Note = normal(
    names::events::ENSURED_LOAD_BALANCER,
    "Ensured load balancer",
);
/// Normal `DeletingLoadBalancer`, before a delete.
pub(crate) const DELETING: Note = normal(
    names::events::DELETING_LOAD_BALANCER,
    "Deleting load balancer",
);
/// Normal `DeletedLoadBalancer`, after a delete (on the cleanup path even when no load balancer existed).
pub(crate) const DELETED: Note = normal(
    names::events::DELETED_LOAD_BALANCER,
    "Deleted load balancer",
);

/// Warning `DeleteLoadBalancerFailed`, when deleting the load balancer of a vanished Service failed.
pub(crate) fn delete_failed(error: &dyn std::fmt::Display) -> Note {
    let message = format!("Error deleting load balancer: {error}");
    warning(names::events::DELETE_LOAD_BALANCER_FAILED, message)
}

/// Warning `SyncLoadBalancerFailed`, when a sync failed.
pub(crate) fn sync_failed(error: &dyn std::fmt::Display) -> Note {
    let message = format!("Error syncing load balancer: {error}");
    warning(names::events::SYNC_LOAD_BALANCER_FAILED, message)
}

/// The Event after a successful host update to `hosts` nodes: `UnAvailableLoadBalancer` without nodes, else
/// `UpdatedLoadBalancer`.
pub(crate) fn hosts_updated(hosts: usize) -> Note {
    if hosts == 0 {
        no_available_nodes()
    } else {
        normal(
            names::events::UPDATED_LOAD_BALANCER,
            "Updated load balancer with new hosts",
        )
    }
}

/// The Warning `UnAvailableLoadBalancer`: a load balancer gets no nodes.
pub(crate) fn no_available_nodes() -> Note {
    let message = "There are no available nodes for LoadBalancer".to_owned();
    warning(names::events::UNAVAILABLE_LOAD_BALANCER, message)
}

/// The Warning `UpdateLoadBalancerFailed` for a failed host update to `nodes` (Go lists at most
/// [`MAX_NODE_NAMES_TO_LOG`](crate::predicates::MAX_NODE_NAMES_TO_LOG) names).
pub(crate) fn hosts_update_failed(nodes: &[Node], error: &dyn std::fmt::Display) -> Note {
    let names = loggable_node_names(nodes.iter().map(node_name));
    let message = format!(
        "Error updating load balancer with new hosts {} [node names limited, total number of nodes: {}], error: {error}",
        go_list(&names),
        nodes.len()
    );
    warning(names::events::UPDATE_LOAD_BALANCER_FAILED, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceSpec;

    fn lb(name: &str) -> Arc<Service> {
        let mut svc = Service {
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        svc.metadata.namespace = Some("ns".into());
        svc.metadata.name = Some(name.into());
        Arc::new(svc)
    }

    fn node(name: &str) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.into());
        node
    }

    #[test]
    fn keys() {
        assert_eq!(split_key("ns/name").unwrap(), ("ns", "name"));
        for bad in ["", "name", "/name", "ns/", "a/b/c"] {
            let err = split_key(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidKey(_)), "{bad}");
        }
    }

    #[test]
    fn the_two_delete_paths_follow_go() {
        let cleanup = DeletePath::Cleanup;
        assert!(cleanup.applies(false) && cleanup.applies(true));
        assert!(cleanup.checks_existence() && cleanup.removes_finalizer());
        assert!(!cleanup.reports_delete_failure());
        let vanished = DeletePath::Vanished;
        assert!(vanished.applies(true) && !vanished.applies(false));
        assert!(!vanished.checks_existence() && !vanished.removes_finalizer());
        assert!(vanished.reports_delete_failure());
    }

    #[test]
    fn an_ensure_answer_maps_to_the_status_to_write() {
        let with_ingress = LoadBalancerStatus {
            ingress: Some(vec![Default::default()]),
        };
        let written = ensured_status(Ok(with_ingress.clone())).unwrap();
        assert_eq!(written, Some(with_ingress));
        let empty = ensured_status(Ok(LoadBalancerStatus::default()));
        assert!(matches!(empty, Err(Error::EmptyStatus)));
        let elsewhere = ensured_status(Err(CloudError::ImplementedElsewhere));
        assert_eq!(elsewhere.unwrap(), None);
        let failed = ensured_status(Err(CloudError::message("boom")));
        assert!(matches!(failed, Err(Error::Ensure(_))));
    }

    #[test]
    fn ingress_presence() {
        assert!(!has_ingress(&LoadBalancerStatus::default()));
        assert!(!has_ingress(&LoadBalancerStatus {
            ingress: Some(vec![])
        }));
        assert!(has_ingress(&LoadBalancerStatus {
            ingress: Some(vec![Default::default()])
        }));
    }

    #[test]
    fn status_and_finalizers_of_a_service() {
        let svc = lb("a");
        assert_eq!(current_status(&svc), LoadBalancerStatus::default());
        let finalized = with_finalizers(&svc, Some(vec!["f".into()]));
        assert_eq!(finalized.metadata.finalizers, Some(vec!["f".to_owned()]));
        assert_eq!(finalized.metadata.name, svc.metadata.name);
    }

    #[test]
    fn only_conflicts_read_the_finalizers_again() {
        assert!(is_finalizer_conflict(Some(409)));
        assert!(is_finalizer_conflict(Some(422)));
        for other in [None, Some(404), Some(500), Some(400)] {
            assert!(!is_finalizer_conflict(other), "{other:?}");
        }
    }

    #[test]
    fn service_events_queue_owned_changed_and_remembered_services() {
        let selector = ServiceSelector::default();
        let key = |event, tracked: bool| service_event_key(&selector, false, |_| tracked, &event);
        let a = lb("a");
        let mut cluster_ip = (*lb("c")).clone();
        cluster_ip.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        let cluster_ip = Arc::new(cluster_ip);
        assert_eq!(
            key(InformerEvent::Added(a.clone()), false),
            Some("ns/a".into())
        );
        assert_eq!(key(InformerEvent::Added(cluster_ip.clone()), false), None);
        let unchanged = InformerEvent::Updated {
            old: a.clone(),
            new: a.clone(),
        };
        assert_eq!(key(unchanged, false), None);
        let to_lb = InformerEvent::Updated {
            old: cluster_ip.clone(),
            new: lb("c"),
        };
        assert_eq!(key(to_lb, false), Some("ns/c".into()));
        assert_eq!(
            key(InformerEvent::Deleted(a.clone()), true),
            Some("ns/a".into())
        );
        assert_eq!(key(InformerEvent::Deleted(a), false), None);
        assert_eq!(key(InformerEvent::Resync, true), None);
    }

    #[test]
    fn node_events_queue_names_and_a_resync_queues_the_resync_key() {
        let n = Arc::new(node("n"));
        assert_eq!(
            node_event_key(&InformerEvent::Added(n.clone())),
            Some("n".into())
        );
        assert_eq!(
            node_event_key(&InformerEvent::Deleted(n.clone())),
            Some("n".into())
        );
        let same = InformerEvent::Updated {
            old: n.clone(),
            new: n.clone(),
        };
        assert_eq!(node_event_key(&same), None);
        let mut excluded = node("n");
        excluded.metadata.labels = Some(
            [(
                names::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS.to_owned(),
                "true".to_owned(),
            )]
            .into(),
        );
        let changed = InformerEvent::Updated {
            old: n,
            new: Arc::new(excluded),
        };
        assert_eq!(node_event_key(&changed), Some("n".into()));
        assert_eq!(
            node_event_key(&InformerEvent::Resync),
            Some(RESYNC_NODE_KEY.into())
        );
    }

    #[test]
    fn resyncs_queue_owned_services_and_vanished_remembered_ones() {
        let selector = ServiceSelector::default();
        let services = [lb("a"), lb("b")];
        let skip: HashSet<String> = ["ns/b".to_owned()].into();
        let remembered = ["ns/a".to_owned(), "ns/gone".to_owned()];
        let cached = |key: &str| key != "ns/gone";
        assert_eq!(
            keys_to_sync(
                &selector,
                &services,
                remembered.clone(),
                cached,
                &HashSet::new()
            ),
            ["ns/a", "ns/b", "ns/gone"]
        );
        assert_eq!(
            keys_to_sync(&selector, &services, remembered, cached, &skip),
            ["ns/a", "ns/gone"]
        );
    }

    #[test]
    fn reensure_skips_services_backing_off_or_being_cleaned_up() {
        let selector = ServiceSelector::default();
        let mut deleting = (*lb("d")).clone();
        deleting.metadata.finalizers = Some(vec![names::finalizers::LOAD_BALANCER_CLEANUP.into()]);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let services = [lb("a"), lb("b"), Arc::new(deleting)];
        assert_eq!(
            reensure_keys(&selector, &services, |key| key == "ns/b"),
            ["ns/a"]
        );
    }

    #[test]
    fn sync_events_follow_go() {
        let events = [ENSURING, ENSURED, DELETING, DELETED];
        let reasons: Vec<_> = events.iter().map(|n| (n.type_, n.reason)).collect();
        let normal = EventType::Normal;
        assert_eq!(
            reasons,
            [
                (normal, "EnsuringLoadBalancer"),
                (normal, "EnsuredLoadBalancer"),
                (normal, "DeletingLoadBalancer"),
                (normal, "DeletedLoadBalancer"),
            ]
        );
        let failed = delete_failed(&"boom");
        assert_eq!(failed.reason, "DeleteLoadBalancerFailed");
        assert_eq!(failed.message, "Error deleting load balancer: boom");
        let failed = sync_failed(&"boom");
        assert_eq!(
            (failed.type_, failed.reason),
            (EventType::Warning, "SyncLoadBalancerFailed")
        );
        assert_eq!(failed.message, "Error syncing load balancer: boom");
    }

    #[test]
    fn host_update_events_follow_go() {
        assert_eq!(hosts_updated(0), no_available_nodes());
        assert_eq!(hosts_updated(0).type_, EventType::Warning);
        let updated = hosts_updated(2);
        assert_eq!(updated.reason, names::events::UPDATED_LOAD_BALANCER);
        assert_eq!(updated.type_, EventType::Normal);
        let failed = hosts_update_failed(&[node("a"), node("b")], &"boom");
        assert_eq!(failed.reason, names::events::UPDATE_LOAD_BALANCER_FAILED);
        assert_eq!(
            failed.message,
            "Error updating load balancer with new hosts [a b] [node names limited, total number of nodes: 2], error: boom"
        );
    }
}
