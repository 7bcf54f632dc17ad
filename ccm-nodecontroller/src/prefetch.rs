//! Batched initialization: one bulk metadata call for many nodes waiting for initialization.
//!
//! Go initializes each node with its own `InstanceMetadata` call, so a thousand new nodes (a cluster created at
//! once, a scale-up, a restart of the CCM with a backlog) cost a thousand calls. With a provider that answers
//! bulk calls natively ([`InstancesV2::supports_bulk`](ccm_core::InstancesV2::supports_bulk)), the first
//! worker that needs a node's metadata asks, in one `instance_metadata_bulk` call, about that node and up to
//! [`initialization_batch`](crate::CloudNodeConfig::initialization_batch)` - 1` other nodes that still carry the
//! uninitialized taint. The answers wait for those nodes' own initialization, which takes its node's answer
//! instead of asking the cloud. The other workers wait for the batch call instead of asking on their own, which
//! is what makes it one call.
//!
//! An answer is used once, and only within [`ANSWER_KEPT_FOR`] and for the same node name and providerID;
//! otherwise (and for a failed bulk call or item) the node's initialization asks about it alone, as without
//! batches. Batches are off when the setting is 0; the runtime sets 0 when `--cloud-instance-cache-ttl` is 0,
//! the operator's way of saying that no cloud answer may be reused.

use std::collections::HashMap;
use std::time::Duration;

use ccm_core::helpers::{node_has_taint, node_name, node_provider_id};
use ccm_core::runtime::informer::Store;
use ccm_core::{InstanceLookup, names};
use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;

use crate::cloud::CloudInstances;

/// Default of [`initialization_batch`](crate::CloudNodeConfig::initialization_batch): the most nodes one batch
/// asks about (EC2 answers them in a few pages; the first node of a batch waits for the whole call).
pub const DEFAULT_INITIALIZATION_BATCH: usize = 500;

/// How long a batch's answer waits for its node's initialization before it is dropped, and how long a node that
/// was part of a batch is not asked about by another batch: the default instance cache TTL.
pub const ANSWER_KEPT_FOR: Duration = ccm_core::cache::DEFAULT_INSTANCE_CACHE_TTL;

/// The nodes one batch asks about: `node` first, then up to `limit - 1` other nodes still waiting for
/// initialization that no batch asked about within [`ANSWER_KEPT_FOR`] (`asked` holds when each was asked about).
/// Empty when `limit` is 0 or `node` itself was asked about recently (its answer, if any, is waiting already).
pub(crate) fn select_batch<'a>(
    node: &'a Node,
    waiting: impl IntoIterator<Item = &'a Node>,
    asked: &HashMap<String, Instant>,
    now: Instant,
    limit: usize,
) -> Vec<&'a Node> {
    let recent = |name: &str| {
        asked
            .get(name)
            .is_some_and(|at| now.saturating_duration_since(*at) < ANSWER_KEPT_FOR)
    };
    let name = node_name(node);
    if limit == 0 || recent(name) {
        return Vec::new();
    }
    let others = waiting.into_iter().filter(|other| {
        let other_name = node_name(other);
        other_name != name
            && node_has_taint(other, names::taints::UNINITIALIZED)
            && !recent(other_name)
    });
    std::iter::once(node).chain(others).take(limit).collect()
}

/// A batch's answer for one node, waiting for that node's initialization.
#[derive(Debug)]
struct Waiting {
    provider_id: String,
    at: Instant,
    answer: InstanceLookup,
}

#[derive(Debug, Default)]
struct State {
    /// When each node was last part of a batch.
    asked: HashMap<String, Instant>,
    /// Answers not taken yet, by node name.
    answers: HashMap<String, Waiting>,
}

/// The node controller workers' shared batches. The lock is held across the batch call, so workers take turns
/// and a worker whose node is in the batch in flight waits for it.
#[derive(Debug, Default)]
pub(crate) struct Prefetcher {
    state: tokio::sync::Mutex<State>,
}

impl Prefetcher {
    /// The metadata of `node` from a batch: taken from an earlier batch if one answered it, otherwise from a new
    /// batch of `node` and other waiting nodes of `store`. `None` when no batch answered it (batches off, the
    /// call or its item failed, or it was asked about recently without an answer): then ask about it alone.
    pub(crate) async fn metadata(
        &self,
        cloud: &CloudInstances,
        node: &Node,
        store: &Store<Node>,
        limit: usize,
    ) -> Option<InstanceLookup> {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        state
            .asked
            .retain(|_, at| now.saturating_duration_since(*at) < ANSWER_KEPT_FOR);
        state
            .answers
            .retain(|_, w| now.saturating_duration_since(w.at) < ANSWER_KEPT_FOR);
        if let Some(answer) = take(&mut state, node) {
            return Some(answer);
        }
        if limit == 0 || state.asked.contains_key(node_name(node)) {
            // Off, or asked about within ANSWER_KEPT_FOR without an answer: no need to list the store.
            return None;
        }
        let waiting = store.list();
        let batch: Vec<Node> = select_batch(
            node,
            waiting.iter().map(AsRef::as_ref),
            &state.asked,
            now,
            limit,
        )
        .into_iter()
        .cloned()
        .collect();
        if batch.is_empty() {
            return None;
        }
        for member in &batch {
            state.asked.insert(node_name(member).to_owned(), now);
        }
        match cloud.metadata_bulk(&batch).await {
            Ok(answers) => {
                for (member, answer) in batch.iter().zip(answers) {
                    if let Ok(answer) = answer {
                        state.answers.insert(
                            node_name(member).to_owned(),
                            Waiting {
                                provider_id: node_provider_id(member).to_owned(),
                                at: now,
                                answer,
                            },
                        );
                    }
                }
            }
            Err(err) => {
                tracing::debug!(nodes = batch.len(), error = %err, "batched metadata call failed; each node asks on its own");
            }
        }
        take(&mut state, node)
    }
}

/// The waiting answer of `node`, if it was asked about with its current providerID.
fn take(state: &mut State, node: &Node) -> Option<InstanceLookup> {
    let waiting = state.answers.remove(node_name(node))?;
    (waiting.provider_id == node_provider_id(node)).then_some(waiting.answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use kube::api::ObjectMeta;

    fn node(name: &str, waiting: bool) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: waiting.then(|| {
                    vec![Taint {
                        key: names::taints::UNINITIALIZED.to_owned(),
                        value: Some("true".to_owned()),
                        effect: "NoSchedule".to_owned(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn names_of(batch: &[&Node]) -> Vec<String> {
        batch.iter().map(|n| node_name(n).to_owned()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn the_node_comes_first_then_other_waiting_nodes_up_to_the_limit() {
        let all: Vec<Node> = vec![
            node("a", true),
            node("ready", false),
            node("b", true),
            node("c", true),
            node("d", true),
        ];
        let now = Instant::now();
        let none = HashMap::new();
        let batch = select_batch(&all[2], &all, &none, now, 3);
        assert_eq!(names_of(&batch), ["b", "a", "c"]);
        let everyone = select_batch(&all[0], &all, &none, now, 100);
        assert_eq!(
            names_of(&everyone),
            ["a", "b", "c", "d"],
            "never an initialized node"
        );
        assert!(
            select_batch(&all[0], &all, &none, now, 0).is_empty(),
            "0 = off"
        );
        assert_eq!(names_of(&select_batch(&all[0], &all, &none, now, 1)), ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn nodes_asked_about_recently_are_not_asked_again_until_the_answer_expires() {
        let all: Vec<Node> = vec![node("a", true), node("b", true), node("c", true)];
        let start = Instant::now();
        let asked: HashMap<String, Instant> =
            [("a".to_owned(), start), ("b".to_owned(), start)].into();
        assert!(
            select_batch(&all[0], &all, &asked, start, 10).is_empty(),
            "a was in a batch already"
        );
        assert_eq!(
            names_of(&select_batch(&all[2], &all, &asked, start, 10)),
            ["c"]
        );
        let later = start + ANSWER_KEPT_FOR;
        assert_eq!(
            names_of(&select_batch(&all[2], &all, &asked, later, 10)),
            ["c", "a", "b"],
            "once their answers expired they may be asked about again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_taken_once_and_only_for_the_same_provider_id() {
        let mut state = State::default();
        let answer = InstanceLookup::Skip {
            reason: "test".into(),
        };
        let mut a = node("a", true);
        for provider_id in ["", "fake://a"] {
            state.answers.insert(
                "a".into(),
                Waiting {
                    provider_id: provider_id.into(),
                    at: Instant::now(),
                    answer: answer.clone(),
                },
            );
        }
        assert!(
            take(&mut state, &a).is_none(),
            "asked with another providerID"
        );
        state.answers.insert(
            "a".into(),
            Waiting {
                provider_id: String::new(),
                at: Instant::now(),
                answer: answer.clone(),
            },
        );
        assert_eq!(take(&mut state, &a), Some(answer));
        assert!(take(&mut state, &a).is_none(), "used once");
        a.metadata.name = Some("b".into());
        assert!(take(&mut state, &a).is_none());
    }
}
