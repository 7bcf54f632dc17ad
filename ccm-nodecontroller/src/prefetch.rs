//! Batched initialization: one bulk metadata call for many nodes waiting for initialization.
//!
//! Go initializes each node with its own `InstanceMetadata` call, so a thousand new nodes (a cluster created at
//! once, a scale-up, a restart of the CCM with a backlog) cost a thousand calls. With a provider that answers
//! bulk calls natively ([`InstancesV2::supports_bulk`](ccm_core::InstancesV2::supports_bulk)), the first
//! worker that needs a node's metadata asks, in one `instance_metadata_bulk` call, about that node and up to
//! [`initialization_batch`](crate::CloudNodeConfig::initialization_batch)` - 1` other nodes that still carry the
//! uninitialized taint; the other workers wait for that call, and each node's initialization then takes its
//! node's answer instead of asking the cloud.
//!
//! An answer is used once, and only within [`ANSWER_KEPT_FOR`] and for the same node name and providerID;
//! otherwise (and for a failed bulk call or item) the node's initialization asks about it alone, as without
//! batches. The runtime turns batches off (setting 0) when `--cloud-instance-cache-ttl` is 0, the operator's way
//! of saying that no cloud answer may be reused.

use std::time::Duration;

use ccm_core::InstanceLookup;
use ccm_core::runtime::informer::NodeStore;
use k8s_openapi::api::core::v1::Node;

use crate::cloud::CloudInstances;
use batches::Batches;

mod batches;

/// Default of [`initialization_batch`](crate::CloudNodeConfig::initialization_batch): the most nodes one batch
/// asks about (EC2 answers them in a few pages; the first node of a batch waits for the whole call).
pub const DEFAULT_INITIALIZATION_BATCH: usize = 500;

/// How long a batch's answer waits for its node's initialization before it is dropped, and how long a node that
/// was part of a batch is not asked about by another batch: the default instance cache TTL.
pub const ANSWER_KEPT_FOR: Duration = ccm_core::cache::DEFAULT_INSTANCE_CACHE_TTL;

/// The node controller workers' shared batches. The lock is held across the batch call, so workers take turns
/// and a worker whose node is in the batch in flight waits for it.
#[derive(Debug, Default)]
pub(crate) struct Prefetcher {
    batches: tokio::sync::Mutex<Batches>,
}

impl Prefetcher {
    /// The metadata of `node` from a batch: taken from an earlier batch if one answered it, otherwise from a new
    /// batch of `node` and other waiting nodes of `store`. `None` when no batch answered it (batches off, the
    /// call or its item failed, or it was asked about recently without an answer): then ask about it alone.
    pub(crate) async fn metadata(
        &self,
        cloud: &CloudInstances,
        node: &Node,
        store: &NodeStore,
        limit: usize,
    ) -> Option<InstanceLookup> {
        let mut batches = self.batches.lock().await;
        let now = tokio::time::Instant::now().into_std();
        batches.expire(now);
        if let Some(answer) = batches.take(node) {
            return Some(answer);
        }
        if !batches.may_ask(node, limit) {
            return None;
        }
        // the candidates, read from the compact cache: only the nodes of the batch are made again
        let mut room = limit.saturating_sub(1);
        let waiting = store.select(|other| {
            let joins = room > 0 && batches.would_join(node, other, now);
            room -= usize::from(joins);
            joins
        });
        let batch = batches.start(node, waiting.iter().map(AsRef::as_ref), now, limit);
        if batch.is_empty() {
            return None;
        }
        match cloud.metadata_bulk(&batch).await {
            Ok(answers) => batches.record(&batch, answers, now),
            Err(err) => {
                tracing::debug!(nodes = batch.len(), error = %err, "batched metadata call failed; each node asks on its own");
            }
        }
        batches.take(node)
    }
}
