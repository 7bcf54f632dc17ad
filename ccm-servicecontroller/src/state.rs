//! The controller's memory of Services: the last state it saw of each (Go: `serviceCache`, used to delete load
//! balancers of Services deleted without the finalizer), the node set last sent to each load balancer (Go:
//! `lastSyncedNodes`). The per-Service lock is [`crate::locks`].

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use parking_lot::Mutex;

use crate::predicates::NodeSet;

#[derive(Default)]
struct Entry {
    service: Option<Arc<Service>>,
    synced: Option<NodeSet>,
}

/// Shared per-Service memory. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Tracker {
    map: Arc<Mutex<HashMap<String, Entry>>>,
}

impl Tracker {
    /// The last state seen of `key`.
    pub(crate) fn cached(&self, key: &str) -> Option<Arc<Service>> {
        self.map.lock().get(key).and_then(|e| e.service.clone())
    }

    /// Remember `service` as the last state of `key`.
    pub(crate) fn set_cached(&self, key: &str, service: Arc<Service>) {
        self.map.lock().entry(key.to_owned()).or_default().service = Some(service);
    }

    /// Forget `key` (after its load balancer was deleted).
    pub(crate) fn forget(&self, key: &str) {
        self.map.lock().remove(key);
    }

    /// Whether `key` has a cached state.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.map
            .lock()
            .get(key)
            .is_some_and(|e| e.service.is_some())
    }

    /// Every cached Service with its key.
    pub(crate) fn services(&self) -> Vec<(String, Arc<Service>)> {
        self.map
            .lock()
            .iter()
            .filter_map(|(k, e)| e.service.clone().map(|s| (k.clone(), s)))
            .collect()
    }

    /// The node set last sent to the load balancer of `key`.
    pub(crate) fn synced(&self, key: &str) -> Option<NodeSet> {
        self.map.lock().get(key).and_then(|e| e.synced.clone())
    }

    /// Record the node set sent (or about to be sent) to the load balancer of `key`.
    pub(crate) fn set_synced(&self, key: &str, nodes: NodeSet) {
        self.map.lock().entry(key.to_owned()).or_default().synced = Some(nodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Tracker {
        fn entries(&self) -> usize {
            self.map.lock().len()
        }
    }

    #[test]
    fn services_are_remembered_until_forgotten() {
        let t = Tracker::default();
        t.set_cached("ns/b", Arc::new(Service::default()));
        t.set_synced("ns/b", NodeSet::default());
        assert_eq!(t.entries(), 1);
        assert!(t.contains("ns/b"));
        assert_eq!(t.services().len(), 1);
        assert_eq!(t.synced("ns/b"), Some(NodeSet::default()));
        t.forget("ns/b");
        assert!(!t.contains("ns/b"));
        assert_eq!(t.synced("ns/b"), None);
        assert_eq!(t.entries(), 0);
    }
}
