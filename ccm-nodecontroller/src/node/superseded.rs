//! The resource versions of a node that the controller's own writes superseded. A cached node still at one of
//! them is older than our own write: the watch has not caught up yet, and the event for the newer version will
//! queue the node again. Skipping it saves a cloud call and a doomed patch.

use std::collections::HashMap;

use ccm_core::helpers::node_name;
use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;

/// Per node initialized by this controller, the resourceVersions its writes superseded.
#[derive(Debug, Default)]
pub(crate) struct Superseded(Mutex<HashMap<String, Vec<String>>>);

impl Superseded {
    /// Our writes to the node `name` replaced `versions`.
    pub(crate) fn record(&self, name: &str, versions: Vec<String>) {
        self.0.lock().insert(name.to_owned(), versions);
    }

    /// Forget the node `name` (it is gone).
    pub(crate) fn forget(&self, name: &str) {
        self.0.lock().remove(name);
    }

    /// True if the cached node is a version our own writes already replaced; forgets the record once the cache
    /// has moved past it.
    pub(crate) fn is_stale(&self, node: &Node) -> bool {
        let mut superseded = self.0.lock();
        let name = node_name(node);
        let Some(versions) = superseded.get(name) else {
            return false;
        };
        let stale = node
            .metadata
            .resource_version
            .as_ref()
            .is_some_and(|rv| versions.contains(rv));
        if !stale {
            superseded.remove(name);
        }
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, version: &str) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.metadata.resource_version = Some(version.to_owned());
        node
    }

    #[test]
    fn a_superseded_version_is_stale_until_the_cache_moves_past_it() {
        let superseded = Superseded::default();
        assert!(!superseded.is_stale(&node("a", "1")), "nothing recorded");
        superseded.record("a", vec!["1".into(), "2".into()]);
        assert!(superseded.is_stale(&node("a", "1")));
        assert!(superseded.is_stale(&node("a", "2")));
        assert!(
            !superseded.is_stale(&node("a", "3")),
            "the cache moved past our writes"
        );
        assert!(
            !superseded.is_stale(&node("a", "1")),
            "and the record is forgotten"
        );
        superseded.record("b", vec!["1".into()]);
        superseded.forget("b");
        assert!(!superseded.is_stale(&node("b", "1")));
    }
}
