//! The stable node set a node-sync pass hands to each load balancer, computed from the node cache again only
//! after a node change that can affect load balancers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;

use crate::predicates::{NodeSet, stable_nodes};

/// The stable node set, as a node-sync pass hands it to each load balancer.
pub(crate) type HostList = (Arc<Vec<Arc<Node>>>, Arc<NodeSet>);

/// The last computed stable node set and the node-change generation it was computed at.
#[derive(Default)]
pub(crate) struct Hosts {
    /// Bumped by every node change that is queued for node sync.
    generation: AtomicU64,
    /// The last computation and the generation it was made at.
    computed: Mutex<Option<(u64, HostList)>>,
}

impl Hosts {
    /// A node change was queued for node sync: the next [`current`](Self::current) computes again.
    pub(crate) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The stable node set of `nodes` (the node cache as it is now). It is computed again only when a node change
    /// was queued since the last computation (or when `fresh` is asked for), so a pass can ask for it before each
    /// load balancer: a change that arrives while a pass runs reaches every load balancer the pass has not
    /// updated yet, and the next pass (which the change's key starts) finds those already up to date.
    pub(crate) fn current(&self, fresh: bool, nodes: impl FnOnce() -> Vec<Arc<Node>>) -> HostList {
        let generation = self.generation.load(Ordering::Acquire);
        let mut computed = self.computed.lock();
        if !fresh
            && let Some((at, hosts)) = computed.as_ref()
            && *at == generation
        {
            return hosts.clone();
        }
        let hosts = Arc::new(stable_nodes(&nodes()));
        let set = Arc::new(NodeSet::from_nodes(hosts.iter().map(AsRef::as_ref)));
        *computed = Some((generation, (hosts.clone(), set.clone())));
        (hosts, set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<Arc<Node>> {
        let node = |name: &&str| {
            let mut node = Node::default();
            node.metadata.name = Some((*name).to_owned());
            Arc::new(node)
        };
        names.iter().map(node).collect()
    }

    #[test]
    fn the_set_is_computed_again_only_after_a_change_or_when_fresh() {
        let hosts = Hosts::default();
        let (list, set) = hosts.current(false, || nodes(&["a"]));
        assert_eq!((list.len(), set.len()), (1, 1));
        // No change: the cache is not read.
        let (list, _) = hosts.current(false, || unreachable!("no change since"));
        assert_eq!(list.len(), 1);
        // Fresh: read again.
        let (list, _) = hosts.current(true, || nodes(&["a", "b"]));
        assert_eq!(list.len(), 2);
        // A change: read again on the next call, then kept.
        hosts.changed();
        let (_, set) = hosts.current(false, || nodes(&["c"]));
        assert_eq!(set.names().collect::<Vec<_>>(), ["c"]);
        let (_, set) = hosts.current(false, || unreachable!("no change since"));
        assert_eq!(set.names().collect::<Vec<_>>(), ["c"]);
    }
}
