//! The book of batched initialization, without I/O: which nodes a new batch asks about, and the answers waiting
//! for their nodes' initialization. The time is an argument, so every rule is tested without a clock.

use std::collections::HashMap;
use std::time::Instant;

use ccm_core::helpers::{NodeFields, node_name, node_provider_id};
use ccm_core::{InstanceLookup, names};
use k8s_openapi::api::core::v1::Node;

use super::ANSWER_KEPT_FOR;

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
    let name = node_name(node);
    if limit == 0 || recent(asked, name, now) {
        return Vec::new();
    }
    let others = waiting
        .into_iter()
        .filter(|other| joins(name, *other, asked, now));
    std::iter::once(node).chain(others).take(limit).collect()
}

/// Whether a batch started at `now` for the node `name` asks about `other` too: another node, still waiting for
/// initialization, that no batch asked about recently.
pub(crate) fn joins(
    name: &str,
    other: &impl NodeFields,
    asked: &HashMap<String, Instant>,
    now: Instant,
) -> bool {
    let other_name = other.name();
    other_name != name
        && other.has_taint(names::taints::UNINITIALIZED)
        && !recent(asked, other_name, now)
}

/// Whether a batch asked about `name` within [`ANSWER_KEPT_FOR`] before `now`.
fn recent(asked: &HashMap<String, Instant>, name: &str, now: Instant) -> bool {
    asked
        .get(name)
        .is_some_and(|at| now.saturating_duration_since(*at) < ANSWER_KEPT_FOR)
}

/// A batch's answer for one node, waiting for that node's initialization.
#[derive(Debug)]
struct Waiting {
    provider_id: String,
    at: Instant,
    answer: InstanceLookup,
}

/// What the batches asked about, and the answers not taken yet.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    /// When each node was last part of a batch.
    asked: HashMap<String, Instant>,
    /// Answers not taken yet, by node name.
    answers: HashMap<String, Waiting>,
}

impl Batches {
    /// Forget the questions and answers older than [`ANSWER_KEPT_FOR`] at `now`.
    pub(crate) fn expire(&mut self, now: Instant) {
        self.asked
            .retain(|_, at| now.saturating_duration_since(*at) < ANSWER_KEPT_FOR);
        self.answers
            .retain(|_, w| now.saturating_duration_since(w.at) < ANSWER_KEPT_FOR);
    }

    /// The waiting answer of `node`, taken once, if it was asked about with its current providerID.
    pub(crate) fn take(&mut self, node: &Node) -> Option<InstanceLookup> {
        let waiting = self.answers.remove(node_name(node))?;
        (waiting.provider_id == node_provider_id(node)).then_some(waiting.answer)
    }

    /// Whether a new batch could ask about `node`: batches are on (`limit` > 0) and no batch asked about it since
    /// the last [`expire`](Self::expire) (then it was asked about recently without an answer, so the store need not
    /// be listed).
    pub(crate) fn may_ask(&self, node: &Node, limit: usize) -> bool {
        limit > 0 && !self.asked.contains_key(node_name(node))
    }

    /// Whether a batch started at `now` for `node` would ask about `other` ([`joins`]): to pick the candidates
    /// from the node cache without making a Node of each.
    pub(crate) fn would_join(&self, node: &Node, other: &impl NodeFields, now: Instant) -> bool {
        joins(node_name(node), other, &self.asked, now)
    }

    /// Start a batch at `now`: the nodes [`select_batch`] picks from `waiting`, each marked as asked about.
    pub(crate) fn start<'a>(
        &mut self,
        node: &'a Node,
        waiting: impl IntoIterator<Item = &'a Node>,
        now: Instant,
        limit: usize,
    ) -> Vec<Node> {
        let batch: Vec<Node> = select_batch(node, waiting, &self.asked, now, limit)
            .into_iter()
            .cloned()
            .collect();
        for member in &batch {
            self.asked.insert(node_name(member).to_owned(), now);
        }
        batch
    }

    /// Keep the answers of the batch started at `now`, one per member in order; a failed item keeps nothing (its
    /// node asks on its own).
    pub(crate) fn record<E>(
        &mut self,
        batch: &[Node],
        answers: Vec<Result<InstanceLookup, E>>,
        now: Instant,
    ) {
        for (member, answer) in batch.iter().zip(answers) {
            if let Ok(answer) = answer {
                let waiting = Waiting {
                    provider_id: node_provider_id(member).to_owned(),
                    at: now,
                    answer,
                };
                self.answers.insert(node_name(member).to_owned(), waiting);
            }
        }
    }
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

    #[test]
    fn the_node_comes_first_then_other_waiting_nodes_up_to_the_limit() {
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

    #[test]
    fn nodes_asked_about_recently_are_not_asked_again_until_the_answer_expires() {
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

    #[test]
    fn an_answer_is_taken_once_and_only_for_the_same_provider_id() {
        let mut state = Batches::default();
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
        assert!(state.take(&a).is_none(), "asked with another providerID");
        state.answers.insert(
            "a".into(),
            Waiting {
                provider_id: String::new(),
                at: Instant::now(),
                answer: answer.clone(),
            },
        );
        assert_eq!(state.take(&a), Some(answer));
        assert!(state.take(&a).is_none(), "used once");
        a.metadata.name = Some("b".into());
        assert!(state.take(&a).is_none());
    }

    #[test]
    fn a_batch_marks_its_members_and_keeps_their_answers_until_they_expire() {
        let all: Vec<Node> = vec![node("a", true), node("b", true), node("c", true)];
        let mut batches = Batches::default();
        let start = Instant::now();
        assert!(batches.may_ask(&all[0], 10));
        assert!(!batches.may_ask(&all[0], 0), "0 = off");
        let batch = batches.start(&all[0], &all, start, 10);
        assert_eq!(batch.len(), 3);
        assert!(!batches.may_ask(&all[1], 10), "b is in the batch in flight");
        let skip = |reason: &str| InstanceLookup::skip(reason);
        batches.record(
            &batch,
            vec![Ok(skip("a")), Err("item failed"), Ok(skip("c"))],
            start,
        );
        assert_eq!(batches.take(&all[0]), Some(skip("a")));
        assert!(
            batches.take(&all[1]).is_none(),
            "a failed item keeps nothing"
        );
        batches.expire(start + ANSWER_KEPT_FOR);
        assert!(batches.take(&all[2]).is_none(), "expired");
        assert!(batches.may_ask(&all[1], 10), "b may be asked about again");
    }

    proptest::proptest! {
        #[test]
        fn a_batch_is_the_node_then_waiting_nodes_not_asked_recently(
            waiting in proptest::collection::vec((0u8..12, proptest::bool::ANY, proptest::option::of(0u64..600)), 0..24),
            first in 0u8..12,
            limit in 0usize..8,
        ) {
            let now = Instant::now() + ANSWER_KEPT_FOR;
            let nodes: Vec<Node> = waiting.iter().map(|(n, tainted, _)| node(&n.to_string(), *tainted)).collect();
            let asked: HashMap<String, Instant> = waiting
                .iter()
                .filter_map(|(n, _, secs)| secs.map(|s| (n.to_string(), now - std::time::Duration::from_secs(s))))
                .collect();
            let me = node(&first.to_string(), true);
            let recent = |name: &str| asked.get(name).is_some_and(|at| now.duration_since(*at) < ANSWER_KEPT_FOR);
            let batch = select_batch(&me, &nodes, &asked, now, limit);
            proptest::prop_assert!(batch.len() <= limit);
            if limit == 0 || recent(&first.to_string()) {
                proptest::prop_assert!(batch.is_empty());
            } else {
                proptest::prop_assert_eq!(node_name(batch[0]), first.to_string());
            }
            for other in batch.iter().skip(1) {
                proptest::prop_assert!(node_name(other) != first.to_string());
                proptest::prop_assert!(other.has_taint(names::taints::UNINITIALIZED));
                proptest::prop_assert!(!recent(node_name(other)));
            }
        }
    }
}
