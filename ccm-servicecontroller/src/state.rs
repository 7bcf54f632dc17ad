//! The controller's memory of Services: the last state it saw of each (Go: `serviceCache`, used to delete load
//! balancers of Services deleted without the finalizer), the node set last sent to each load balancer (Go:
//! `lastSyncedNodes`), and a per-Service lock so an ensure and a host update of one load balancer never overlap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Service;
use tokio::sync::OwnedMutexGuard;

use crate::predicates::NodeSet;

#[derive(Default)]
struct Entry {
    service: Option<Arc<Service>>,
    synced: Option<NodeSet>,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Entry {
    fn is_empty(&self) -> bool {
        self.service.is_none() && self.synced.is_none()
    }
}

/// Shared per-Service state. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Tracker {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("services", &self.map().len())
            .finish()
    }
}

/// Holds a Service's lock; removes the Service's entry when nothing is left in it and nobody waits for it.
pub(crate) struct ServiceGuard {
    tracker: Tracker,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for ServiceGuard {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.tracker.map();
        if let Some(entry) = map.get(&self.key)
            && entry.is_empty()
            && Arc::strong_count(&entry.lock) == 1
        {
            map.remove(&self.key);
        }
    }
}

impl Tracker {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for, then hold, the lock of `key`.
    pub(crate) async fn lock(&self, key: &str) -> ServiceGuard {
        let lock = self.map().entry(key.to_owned()).or_default().lock.clone();
        let guard = lock.lock_owned().await;
        ServiceGuard {
            tracker: self.clone(),
            key: key.to_owned(),
            guard: Some(guard),
        }
    }

    /// Hold the lock of `key` if it is free.
    pub(crate) fn try_lock(&self, key: &str) -> Option<ServiceGuard> {
        let lock = self.map().entry(key.to_owned()).or_default().lock.clone();
        let guard = lock.try_lock_owned().ok();
        let held = guard.is_some();
        let out = ServiceGuard {
            tracker: self.clone(),
            key: key.to_owned(),
            guard,
        };
        // A failed attempt still drops through ServiceGuard, which tidies the entry up.
        held.then_some(out)
    }

    /// The last state seen of `key`.
    pub(crate) fn cached(&self, key: &str) -> Option<Arc<Service>> {
        self.map().get(key).and_then(|e| e.service.clone())
    }

    /// Remember `service` as the last state of `key`.
    pub(crate) fn set_cached(&self, key: &str, service: Arc<Service>) {
        self.map().entry(key.to_owned()).or_default().service = Some(service);
    }

    /// Forget `key` (after its load balancer was deleted).
    pub(crate) fn forget(&self, key: &str) {
        if let Some(entry) = self.map().get_mut(key) {
            entry.service = None;
            entry.synced = None;
        }
    }

    /// Whether `key` has a cached state.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.map().get(key).is_some_and(|e| e.service.is_some())
    }

    /// Every cached Service with its key.
    pub(crate) fn services(&self) -> Vec<(String, Arc<Service>)> {
        self.map()
            .iter()
            .filter_map(|(k, e)| e.service.clone().map(|s| (k.clone(), s)))
            .collect()
    }

    /// The node set last sent to the load balancer of `key`.
    pub(crate) fn synced(&self, key: &str) -> Option<NodeSet> {
        self.map().get(key).and_then(|e| e.synced.clone())
    }

    /// Record the node set sent (or about to be sent) to the load balancer of `key`.
    pub(crate) fn set_synced(&self, key: &str, nodes: NodeSet) {
        self.map().entry(key.to_owned()).or_default().synced = Some(nodes);
    }

    /// How many keys have an entry (for tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.map().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn lock_serialises_and_entries_are_tidied() {
        let t = Tracker::default();
        let g = t.lock("ns/a").await;
        assert!(t.try_lock("ns/a").is_none());
        let waiter = {
            let t = t.clone();
            tokio::spawn(async move {
                let _g = t.lock("ns/a").await;
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        drop(g);
        waiter.await.unwrap();
        assert_eq!(t.entries(), 0, "empty entry removed once unlocked");

        let g = t.lock("ns/b").await;
        t.set_cached("ns/b", Arc::new(Service::default()));
        t.set_synced("ns/b", NodeSet::default());
        drop(g);
        assert_eq!(t.entries(), 1);
        assert!(t.contains("ns/b"));
        assert_eq!(t.services().len(), 1);
        assert_eq!(t.synced("ns/b"), Some(NodeSet::default()));
        let g = t.try_lock("ns/b").unwrap();
        t.forget("ns/b");
        assert!(!t.contains("ns/b"));
        assert_eq!(t.synced("ns/b"), None);
        drop(g);
        assert_eq!(t.entries(), 0);
    }
}
