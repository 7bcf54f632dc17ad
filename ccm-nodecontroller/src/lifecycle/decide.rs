//! The lifecycle controller's decisions: which nodes it owns, and what to do next for one node given what the
//! cloud answered so far. Pure functions, no I/O.

use ccm_core::helpers::{ConditionStatus, NodeFields};
use ccm_core::{ErrorKind, names};
use k8s_openapi::api::core::v1::{Node, Taint};
use strum::{Display, EnumString, IntoStaticStr};

use super::Config;
use crate::patch::{self, shutdown_taint};

/// Which nodes the lifecycle controller may taint, untaint and delete. Written and parsed (`Display`, `FromStr`)
/// with its flag spelling, [`as_str`](Self::as_str).
///
/// ```
/// use ccm_nodecontroller::NodeOwnership;
/// assert_eq!("all-nodes".parse::<NodeOwnership>().unwrap(), NodeOwnership::AllNodes);
/// assert_eq!(NodeOwnership::ProviderIdPrefix.to_string(), "provider-id-prefix");
/// assert!("mine".parse::<NodeOwnership>().is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, IntoStaticStr, Display, EnumString)]
#[strum(serialize_all = "kebab-case")]
#[strum(parse_err_ty = ParseNodeOwnershipError, parse_err_fn = unknown_ownership)]
#[non_exhaustive]
pub enum NodeOwnership {
    /// Only nodes whose `spec.providerID` starts with `<provider name>://` (the default). Not a node with an
    /// **empty** providerID: with InstancesV2 the cloud node controller never initializes one, so it was not set up
    /// by this CCM (another CCM's, a bare-metal or virtual-kubelet node, a kubelet without
    /// `--cloud-provider=external`), and a lookup by name could match an unrelated instance. The only cost: the
    /// nodes of a V1 provider without `instance_id` have no providerID, so no lifecycle handling (Go cannot check
    /// them either: its providerID lookup fails for them every time).
    #[default]
    ProviderIdPrefix,
    /// Every node, as in Go (the reference has no ownership rule).
    AllNodes,
}

impl NodeOwnership {
    /// The flag spelling: `provider-id-prefix` or `all-nodes`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// An unknown [`NodeOwnership`] spelling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown node ownership {0:?}: use provider-id-prefix (the default) or all-nodes (the Go behaviour)"
)]
pub struct ParseNodeOwnershipError(pub String);

/// The error of an unknown spelling, for the derived `FromStr`.
fn unknown_ownership(spelling: &str) -> ParseNodeOwnershipError {
    ParseNodeOwnershipError(spelling.to_owned())
}

/// Why a node is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The node belongs to another provider (or has no providerID), see [`NodeOwnership`].
    NotOwned,
    /// The node still carries the uninitialized taint.
    Initializing,
}

/// The next thing to do for one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleAction {
    /// Leave the node alone.
    Skip(SkipReason),
    /// Nothing to do (Ready without the taint, a failed or negative check, or the taint already there).
    Nothing,
    /// Ready: remove the shutdown taint (no cloud call).
    RemoveShutdownTaint,
    /// Ask the cloud whether the instance exists.
    CheckExists,
    /// Ask the cloud whether the instance is shut down.
    CheckShutdown,
    /// The instance is gone: delete the Node.
    Delete,
    /// The instance is shut down: add the shutdown taint.
    AddShutdownTaint,
}

/// What the cloud answered so far about one node: `None` = not asked yet, `Some(Err(kind))` = the call failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    /// The existence check.
    pub exists: Option<Result<bool, ErrorKind>>,
    /// The shutdown check.
    pub shutdown: Option<Result<bool, ErrorKind>>,
}

/// True if this controller may act on the node.
///
/// ```
/// use ccm_nodecontroller::lifecycle::is_owned;
/// use ccm_nodecontroller::NodeOwnership;
/// use k8s_openapi::api::core::v1::{Node, NodeSpec};
///
/// let node = |id: &str| Node { spec: Some(NodeSpec { provider_id: Some(id.into()), ..Default::default() }), ..Default::default() };
/// assert!(is_owned(&node("fake://a"), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(!is_owned(&node("other://a"), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(!is_owned(&node("fakeish://a"), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(!is_owned(&Node::default(), NodeOwnership::ProviderIdPrefix, "fake"));
/// assert!(is_owned(&Node::default(), NodeOwnership::AllNodes, "fake"));
/// ```
pub fn is_owned(node: &impl NodeFields, ownership: NodeOwnership, provider_name: &str) -> bool {
    match ownership {
        NodeOwnership::AllNodes => true,
        NodeOwnership::ProviderIdPrefix => node
            .provider_id()
            .strip_prefix(provider_name)
            .is_some_and(|rest| rest.starts_with("://")),
    }
}

/// The lifecycle decision for one node, given what the cloud answered so far (Go: one iteration of
/// `MonitorNodes`, plus the ownership and initialization rules). Call it again after each check it asks for.
///
/// - not owned, or (when protected) still initializing → [`LifecycleAction::Skip`];
/// - Ready → remove the shutdown taint if present, never a cloud call;
/// - NotReady or Unknown → check existence; gone → delete; a failed check → nothing (never "gone");
/// - exists → check shutdown; shut down → add the taint unless it is already there; a failed or negative check
///   → nothing (the taint is never removed while the node is not Ready).
pub fn decide(
    node: &impl NodeFields,
    config: &Config,
    provider_name: &str,
    probe: &Probe,
) -> LifecycleAction {
    if !is_owned(node, config.ownership, provider_name) {
        return LifecycleAction::Skip(SkipReason::NotOwned);
    }
    if node.condition_status(names::conditions::READY) == ConditionStatus::True {
        // every Ready node, every period: no allocation (`without_matching_taint` only when there is one)
        let shut_down = node
            .taints()
            .iter()
            .any(|t| t.key == names::taints::SHUTDOWN && t.effect == patch::NO_SCHEDULE);
        return if shut_down {
            LifecycleAction::RemoveShutdownTaint
        } else {
            LifecycleAction::Nothing
        };
    }
    if config.protect_initializing_nodes && node.has_taint(names::taints::UNINITIALIZED) {
        return LifecycleAction::Skip(SkipReason::Initializing);
    }
    match probe.exists {
        None => LifecycleAction::CheckExists,
        Some(Err(_)) => LifecycleAction::Nothing,
        Some(Ok(false)) => LifecycleAction::Delete,
        Some(Ok(true)) => match probe.shutdown {
            None => LifecycleAction::CheckShutdown,
            Some(Ok(true)) if patch::taints_with(node.taints(), &shutdown_taint()).is_some() => {
                LifecycleAction::AddShutdownTaint
            }
            Some(_) => LifecycleAction::Nothing,
        },
    }
}

/// Whether the pass must look at the node at all: most nodes are Ready and untainted, which is decided without
/// a task or a probe for each.
pub(crate) fn needs_attention(
    node: &impl NodeFields,
    config: &Config,
    provider_name: &str,
) -> bool {
    let action = decide(node, config, provider_name, &Probe::default());
    !matches!(action, LifecycleAction::Nothing | LifecycleAction::Skip(_))
}

/// The indexes of the `nodes` whose next step, given their `probes` so far, is `step` (the nodes one bulk call
/// asks about).
pub(crate) fn asking<N: AsRef<Node>>(
    nodes: &[N],
    probes: &[Probe],
    config: &Config,
    provider_name: &str,
    step: LifecycleAction,
) -> Vec<usize> {
    let next = |i: usize| decide(nodes[i].as_ref(), config, provider_name, &probes[i]);
    (0..nodes.len()).filter(|&i| next(i) == step).collect()
}

/// The log line of a failed check of `step` ([`LifecycleAction::CheckExists`], else the shutdown check).
pub(crate) fn check_failed(step: LifecycleAction) -> &'static str {
    match step {
        LifecycleAction::CheckExists => {
            "error checking if node exists; will check again next period"
        }
        _ => "error checking if node is shut down",
    }
}

impl Probe {
    /// Record the answer to `step` ([`LifecycleAction::CheckExists`], else the shutdown check).
    pub(crate) fn record(&mut self, step: LifecycleAction, answer: Result<bool, ErrorKind>) {
        match step {
            LifecycleAction::CheckExists => self.exists = Some(answer),
            _ => self.shutdown = Some(answer),
        }
    }
}

/// The taints of `node` without the shutdown taint, only while the node is still Ready (re-checked on every
/// re-read); `None` when there is nothing to remove.
pub(crate) fn without_shutdown_taint_if_ready(node: &Node) -> Option<Vec<Taint>> {
    let ready = node.condition_status(names::conditions::READY) == ConditionStatus::True;
    ready
        .then(|| patch::without_matching_taint(node, &shutdown_taint()))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::NO_SCHEDULE;
    use crate::patch::tests::taint;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint};
    use std::time::Duration;

    fn node(provider_id: &str, ready: Option<&str>, taints: Vec<Taint>) -> Node {
        Node {
            spec: Some(NodeSpec {
                provider_id: (!provider_id.is_empty()).then(|| provider_id.to_owned()),
                taints: Some(taints),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: ready.map(|s| {
                    vec![NodeCondition {
                        type_: "Ready".into(),
                        status: s.into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn probe(
        exists: Option<Result<bool, ErrorKind>>,
        shutdown: Option<Result<bool, ErrorKind>>,
    ) -> Probe {
        Probe { exists, shutdown }
    }

    fn go() -> Config {
        Config::default()
            .with_ownership(NodeOwnership::AllNodes)
            .with_protect_initializing_nodes(false)
    }

    use LifecycleAction as A;

    #[test]
    fn go_table_nodes_deleted() {
        // Go Test_NodesDeleted (V1 and V2 rows give the same decisions).
        let cfg = go();
        let not_ready = node("fake://n", Some("False"), vec![]);
        let unknown = node("fake://n", Some("Unknown"), vec![]);
        let ready = node("fake://n", Some("True"), vec![]);
        // "node is not ready and does not exist"
        assert_eq!(
            decide(&not_ready, &cfg, "fake", &Probe::default()),
            A::CheckExists
        );
        assert_eq!(
            decide(&not_ready, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Delete
        );
        // "node is not ready and provider returns err"
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Err(ErrorKind::Other)), None)
            ),
            A::Nothing
        );
        // "node is not ready but still exists"
        assert_eq!(
            decide(&not_ready, &cfg, "fake", &probe(Some(Ok(true)), None)),
            A::CheckShutdown
        );
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // "node ready condition is unknown, node doesn't exist" / "... exists"
        assert_eq!(
            decide(&unknown, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Delete
        );
        assert_eq!(
            decide(
                &unknown,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // A missing Ready condition counts as Unknown.
        assert_eq!(
            decide(
                &node("fake://n", None, vec![]),
                &cfg,
                "fake",
                &Probe::default()
            ),
            A::CheckExists
        );
        // "node is ready, but provider said it is deleted": never asked.
        assert_eq!(decide(&ready, &cfg, "fake", &Probe::default()), A::Nothing);
        assert_eq!(
            decide(&ready, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Nothing
        );
    }

    #[test]
    fn go_table_nodes_shutdown() {
        // Go Test_NodesShutdown.
        let cfg = go();
        let not_ready = node("fake://n", Some("False"), vec![]);
        // "node is not ready and was shutdown, but exists" (also with an empty providerID under AllNodes)
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::AddShutdownTaint
        );
        let empty_id = node("", Some("False"), vec![]);
        assert_eq!(
            decide(
                &empty_id,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::AddShutdownTaint
        );
        // "node with non-existing providerID gets deleted" / "InstanceID returning InstanceNotFound gets deleted"
        assert_eq!(
            decide(&empty_id, &cfg, "fake", &probe(Some(Ok(false)), None)),
            A::Delete
        );
        // "node with error when getting providerID does not have shutdown taint"
        assert_eq!(
            decide(
                &empty_id,
                &cfg,
                "fake",
                &probe(Some(Err(ErrorKind::Other)), None)
            ),
            A::Nothing
        );
        // "node is not ready, but there is error checking if node is shutdown"
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Err(ErrorKind::Timeout)))
            ),
            A::Nothing
        );
        // "node is not ready and is not shutdown"
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // "node is ready but provider says it's shutdown": no cloud call, no taint.
        let ready = node("fake://n", Some("True"), vec![]);
        assert_eq!(
            decide(&ready, &cfg, "fake", &probe(None, Some(Ok(true)))),
            A::Nothing
        );
        // "node is shutdown but provider says it does not exist": deleted, no taint.
        assert_eq!(
            decide(
                &not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(false)), Some(Ok(true)))
            ),
            A::Delete
        );
    }

    #[test]
    fn shutdown_taint_added_once_and_removed_only_when_ready() {
        let cfg = Config::default();
        let tainted_not_ready = node("fake://n", Some("False"), vec![shutdown_taint()]);
        // Already tainted: no write.
        assert_eq!(
            decide(
                &tainted_not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::Nothing
        );
        // Not shut down any more but still NotReady: the taint stays.
        assert_eq!(
            decide(
                &tainted_not_ready,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(false)))
            ),
            A::Nothing
        );
        // Ready: removed without asking the cloud.
        let tainted_ready = node("fake://n", Some("True"), vec![shutdown_taint()]);
        assert_eq!(
            decide(&tainted_ready, &cfg, "fake", &Probe::default()),
            A::RemoveShutdownTaint
        );
        // Another effect with the same key is not ours.
        let other_effect = node(
            "fake://n",
            Some("True"),
            vec![taint(names::taints::SHUTDOWN, None, "NoExecute")],
        );
        assert_eq!(
            decide(&other_effect, &cfg, "fake", &Probe::default()),
            A::Nothing
        );
        // A shutdown taint with a value is normalised (Go: AddOrUpdateTaint).
        let valued = node(
            "fake://n",
            Some("False"),
            vec![taint(names::taints::SHUTDOWN, Some("x"), NO_SCHEDULE)],
        );
        assert_eq!(
            decide(
                &valued,
                &cfg,
                "fake",
                &probe(Some(Ok(true)), Some(Ok(true)))
            ),
            A::AddShutdownTaint
        );
    }

    #[test]
    fn ownership_rules() {
        let cfg = Config::default();
        for id in ["other://n", "", "fakeish://n", "fake:/n", "FAKE://n"] {
            let n = node(id, Some("False"), vec![]);
            assert_eq!(
                decide(&n, &cfg, "fake", &Probe::default()),
                A::Skip(SkipReason::NotOwned),
                "{id:?}"
            );
            // Even a Ready foreign node with our taint key is left alone.
            let n = node(id, Some("True"), vec![shutdown_taint()]);
            assert_eq!(
                decide(&n, &cfg, "fake", &Probe::default()),
                A::Skip(SkipReason::NotOwned),
                "{id:?}"
            );
        }
        let all = cfg.clone().with_ownership(NodeOwnership::AllNodes);
        assert_eq!(
            decide(
                &node("other://n", Some("False"), vec![]),
                &all,
                "fake",
                &Probe::default()
            ),
            A::CheckExists
        );
    }

    #[test]
    fn initializing_nodes_are_protected() {
        let uninit = taint(names::taints::UNINITIALIZED, Some("true"), NO_SCHEDULE);
        let n = node("fake://n", Some("False"), vec![uninit.clone()]);
        assert_eq!(
            decide(&n, &Config::default(), "fake", &Probe::default()),
            A::Skip(SkipReason::Initializing)
        );
        assert_eq!(decide(&n, &go(), "fake", &Probe::default()), A::CheckExists);
        // A Ready initializing node still loses a stale shutdown taint (no cloud call either way).
        let ready = node("fake://n", Some("True"), vec![uninit, shutdown_taint()]);
        assert_eq!(
            decide(&ready, &Config::default(), "fake", &Probe::default()),
            A::RemoveShutdownTaint
        );
    }

    #[test]
    fn existence_errors_are_never_gone() {
        let n = node("fake://n", Some("False"), vec![]);
        for kind in [
            ErrorKind::Other,
            ErrorKind::Timeout,
            ErrorKind::Throttled,
            ErrorKind::InstanceNotFound,
            ErrorKind::NotImplemented,
        ] {
            assert_eq!(
                decide(
                    &n,
                    &Config::default(),
                    "fake",
                    &probe(Some(Err(kind)), None)
                ),
                A::Nothing,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn config_validation() {
        assert!(Config::default().validate().is_ok());
        assert!(Config::default().with_concurrency(0).validate().is_err());
        assert!(
            Config::default()
                .with_node_monitor_period(Duration::ZERO)
                .validate()
                .is_err()
        );
        assert!(
            Config::default()
                .with_cloud_call_timeout(Duration::ZERO)
                .validate()
                .is_err()
        );
    }

    #[test]
    fn probes_record_answers_and_bulk_calls_ask_the_nodes_at_that_step() {
        let mut probe = Probe::default();
        probe.record(LifecycleAction::CheckExists, Ok(true));
        probe.record(LifecycleAction::CheckShutdown, Err(ErrorKind::Other));
        assert_eq!(probe.exists, Some(Ok(true)));
        assert_eq!(probe.shutdown, Some(Err(ErrorKind::Other)));
        let config = go();
        let nodes = [
            std::sync::Arc::new(node("fake://a", Some("False"), vec![])),
            std::sync::Arc::new(node("fake://b", Some("True"), vec![])),
        ];
        let attention: Vec<bool> = nodes
            .iter()
            .map(|n| needs_attention(n, &config, "fake"))
            .collect();
        assert_eq!(
            attention,
            [true, false],
            "only the NotReady node needs a look"
        );
        let probes = [Probe::default(); 2];
        let exists = LifecycleAction::CheckExists;
        assert_eq!(asking(&nodes, &probes, &config, "fake", exists), [0]);
    }

    #[test]
    fn a_failed_check_is_logged_with_what_was_asked() {
        assert!(check_failed(LifecycleAction::CheckExists).contains("exists"));
        assert!(check_failed(LifecycleAction::CheckShutdown).contains("shut down"));
    }
}
