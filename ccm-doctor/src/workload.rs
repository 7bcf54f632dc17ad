//! The CCM workload (a Deployment or a DaemonSet) and the checks of its pod template against the
//! recommendations of "The Cloud Controller Manager Chicken and Egg Problem": tolerate the uninitialized,
//! not-ready, unreachable and control-plane taints, use the host network, run on control-plane nodes, spread
//! replicas, and keep leader election on when more than one replica can run.
//!
//! The same checks serve the live doctor and the manifest linter.

use std::collections::BTreeMap;

use ccm_core::names::taints;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sLabelSelector;

use crate::finding::{CheckId, Finding, ObjectRef, Severity};
use crate::inspect::{NO_EXECUTE, NO_SCHEDULE, leader_election_enabled, tolerates, tolerations_of};

/// Deployment or DaemonSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` DaemonSet.
    DaemonSet,
}

impl WorkloadKind {
    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::DaemonSet => "DaemonSet",
        }
    }
}

/// How many pods a workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// A Deployment's `spec.replicas` (1 when unset).
    Fixed(i32),
    /// A DaemonSet: one per matching node; `desired` is `status.desiredNumberScheduled` when known (live).
    PerNode {
        /// How many pods the DaemonSet controller wants, if it has reported it.
        desired: Option<i32>,
    },
}

/// A workload could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// `metadata.name` is missing.
    #[error("a {kind} has no metadata.name: every workload needs a name")]
    MissingName {
        /// The kind.
        kind: &'static str,
    },
    /// The pod template has no spec.
    #[error("{kind} {name} has no spec.template.spec: the pod template needs containers")]
    MissingPodSpec {
        /// The kind.
        kind: &'static str,
        /// The name.
        name: String,
    },
}

/// The parts of a Deployment or DaemonSet the checks read.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The kind.
    pub kind: WorkloadKind,
    /// The namespace, if known.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// The workload's own labels.
    pub labels: BTreeMap<String, String>,
    /// The pod selector.
    pub selector: Option<K8sLabelSelector>,
    /// How many pods it runs.
    pub replicas: Replicas,
    /// The pod template's spec.
    pub pod_spec: PodSpec,
}

fn template_spec(
    kind: WorkloadKind,
    name: &str,
    template: &PodTemplateSpec,
) -> Result<PodSpec, WorkloadError> {
    template
        .spec
        .clone()
        .ok_or_else(|| WorkloadError::MissingPodSpec {
            kind: kind.as_str(),
            name: name.to_owned(),
        })
}

/// `status.desiredNumberScheduled` if the DaemonSet controller has reconciled the current spec
/// (`status.observedGeneration >= metadata.generation`); the API server fills a new DaemonSet's status with zeros.
fn reconciled_desired(daemon_set: &DaemonSet) -> Option<i32> {
    let status = daemon_set.status.as_ref()?;
    let observed = status.observed_generation?;
    let generation = daemon_set.metadata.generation.unwrap_or(0);
    (observed >= generation).then_some(status.desired_number_scheduled)
}

impl Workload {
    /// Read a Deployment.
    ///
    /// # Errors
    /// [`WorkloadError`] if it has no name or no pod template spec.
    pub fn from_deployment(deployment: &Deployment) -> Result<Self, WorkloadError> {
        let kind = WorkloadKind::Deployment;
        let name = deployment
            .metadata
            .name
            .clone()
            .ok_or(WorkloadError::MissingName {
                kind: kind.as_str(),
            })?;
        let spec = deployment
            .spec
            .as_ref()
            .ok_or_else(|| WorkloadError::MissingPodSpec {
                kind: kind.as_str(),
                name: name.clone(),
            })?;
        Ok(Workload {
            kind,
            namespace: deployment.metadata.namespace.clone(),
            labels: deployment.metadata.labels.clone().unwrap_or_default(),
            selector: Some(spec.selector.clone()),
            replicas: Replicas::Fixed(spec.replicas.unwrap_or(1)),
            pod_spec: template_spec(kind, &name, &spec.template)?,
            name,
        })
    }

    /// Read a DaemonSet.
    ///
    /// # Errors
    /// [`WorkloadError`] if it has no name or no pod template spec.
    pub fn from_daemon_set(daemon_set: &DaemonSet) -> Result<Self, WorkloadError> {
        let kind = WorkloadKind::DaemonSet;
        let name = daemon_set
            .metadata
            .name
            .clone()
            .ok_or(WorkloadError::MissingName {
                kind: kind.as_str(),
            })?;
        let spec = daemon_set
            .spec
            .as_ref()
            .ok_or_else(|| WorkloadError::MissingPodSpec {
                kind: kind.as_str(),
                name: name.clone(),
            })?;
        Ok(Workload {
            kind,
            namespace: daemon_set.metadata.namespace.clone(),
            labels: daemon_set.metadata.labels.clone().unwrap_or_default(),
            selector: Some(spec.selector.clone()),
            replicas: Replicas::PerNode {
                desired: reconciled_desired(daemon_set),
            },
            pod_spec: template_spec(kind, &name, &spec.template)?,
            name,
        })
    }

    /// A reference to the workload for findings.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(self.kind.as_str(), self.namespace.as_deref(), &self.name)
    }

    /// True if more than one pod can run at once: a Deployment with `replicas > 1`, or a DaemonSet that wants
    /// more than one pod or whose count is unknown (a manifest, or a DaemonSet not yet reconciled).
    pub fn may_run_several(&self) -> bool {
        match self.replicas {
            Replicas::Fixed(n) => n > 1,
            Replicas::PerNode { desired } => desired.is_none_or(|d| d > 1),
        }
    }

    /// True if leader election is on in the pod template (Go's default).
    pub fn leader_election(&self) -> bool {
        leader_election_enabled(&self.pod_spec)
    }
}

/// True if the pod spec asks for control-plane nodes: a `nodeSelector` on the control-plane (or legacy master)
/// role label, or a required or preferred node-affinity term on it with `Exists` or `In`.
pub fn targets_control_plane(spec: &PodSpec) -> bool {
    let is_role = |key: &str| key == taints::CONTROL_PLANE || key == taints::MASTER;
    if spec
        .node_selector
        .as_ref()
        .is_some_and(|sel| sel.keys().any(|k| is_role(k)))
    {
        return true;
    }
    let Some(node_affinity) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
    else {
        return false;
    };
    let required = node_affinity
        .required_during_scheduling_ignored_during_execution
        .iter()
        .flat_map(|r| r.node_selector_terms.iter());
    let preferred = node_affinity
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
        .map(|p| &p.preference);
    required.chain(preferred).any(|term| {
        term.match_expressions
            .iter()
            .flatten()
            .any(|e| is_role(&e.key) && (e.operator == "Exists" || e.operator == "In"))
    })
}

/// True if replicas are kept apart: any pod anti-affinity term, or a topology spread constraint.
pub fn spreads_replicas(spec: &PodSpec) -> bool {
    let anti = spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .is_some_and(|pa| {
            pa.required_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|r| !r.is_empty())
                || pa
                    .preferred_during_scheduling_ignored_during_execution
                    .as_ref()
                    .is_some_and(|p| !p.is_empty())
        });
    anti || spec
        .topology_spread_constraints
        .as_ref()
        .is_some_and(|t| !t.is_empty())
}

const UNINITIALIZED_TOLERATION_YAML: &str =
    "{key: node.cloudprovider.kubernetes.io/uninitialized, value: \"true\", effect: NoSchedule}";

/// Check one workload's pod template against the recommendations. Findings are in a fixed order.
pub fn check_workload(workload: &Workload) -> Vec<Finding> {
    let mut findings = Vec::new();
    let spec = &workload.pod_spec;
    let tolerations = tolerations_of(spec);
    let what = format!("{} {}", workload.kind.as_str(), workload.name);
    let obj = || vec![workload.object_ref()];
    let is_deployment = workload.kind == WorkloadKind::Deployment;

    match workload.replicas {
        Replicas::Fixed(0) => findings.push(
            Finding::new(
                CheckId::WorkloadScaledToZero,
                Severity::Warning,
                format!("{what} has 0 replicas: no CCM runs, so no node gets initialized"),
                "scale it up (replicas: 1, or more with leader election)",
            )
            .with_objects(obj()),
        ),
        Replicas::PerNode { desired: Some(0) } => findings.push(
            Finding::new(
                CheckId::WorkloadScaledToZero,
                Severity::Warning,
                format!(
                    "{what} runs on no node: its node selector or affinity matches no node it can be scheduled \
                     on, so no CCM runs"
                ),
                format!(
                    "check its nodeSelector and affinity against the nodes' labels (control-plane nodes carry \
                     {})",
                    taints::CONTROL_PLANE
                ),
            )
            .with_objects(obj()),
        ),
        _ => {}
    }

    if !tolerates(tolerations, taints::UNINITIALIZED, "true", NO_SCHEDULE) {
        findings.push(
            Finding::new(
                CheckId::MissingUninitializedToleration,
                Severity::Error,
                format!(
                    "{what} does not tolerate the {} taint: on a new cluster every node carries it until the \
                     CCM removes it, so the CCM can never be scheduled",
                    taints::UNINITIALIZED
                ),
                format!("add the toleration {UNINITIALIZED_TOLERATION_YAML} to the pod template"),
            )
            .with_objects(obj()),
        );
    }

    let not_ready_no_schedule = tolerates(tolerations, taints::NOT_READY, "", NO_SCHEDULE);
    let not_ready_no_execute = tolerates(tolerations, taints::NOT_READY, "", NO_EXECUTE);
    if !not_ready_no_schedule {
        findings.push(
            Finding::new(
                CheckId::MissingNotReadyToleration,
                Severity::Error,
                format!(
                    "{what} does not tolerate the {}:NoSchedule taint: nodes stay not ready until the CNI runs, \
                     and a CNI that needs the CCM then waits for it forever",
                    taints::NOT_READY
                ),
                format!(
                    "add the tolerations {{key: {nr}, operator: Exists, effect: NoSchedule}} and {{key: {nr}, \
                     operator: Exists, effect: NoExecute}}",
                    nr = taints::NOT_READY
                ),
            )
            .with_objects(obj()),
        );
    } else if is_deployment && !not_ready_no_execute {
        // DaemonSet pods get this toleration from the DaemonSet controller.
        findings.push(
            Finding::new(
                CheckId::MissingNotReadyToleration,
                Severity::Warning,
                format!(
                    "{what} does not tolerate the {}:NoExecute taint: its pods are evicted 300s after their \
                     node becomes not ready",
                    taints::NOT_READY
                ),
                format!(
                    "add the toleration {{key: {}, operator: Exists, effect: NoExecute}}",
                    taints::NOT_READY
                ),
            )
            .with_objects(obj()),
        );
    }

    if is_deployment && !tolerates(tolerations, taints::UNREACHABLE, "", NO_EXECUTE) {
        findings.push(
            Finding::new(
                CheckId::MissingUnreachableToleration,
                Severity::Warning,
                format!(
                    "{what} does not tolerate the {}:NoExecute taint: its pods are evicted 300s after their \
                     node becomes unreachable",
                    taints::UNREACHABLE
                ),
                format!(
                    "add the toleration {{key: {}, operator: Exists, effect: NoExecute}}",
                    taints::UNREACHABLE
                ),
            )
            .with_objects(obj()),
        );
    }

    let on_control_plane = targets_control_plane(spec);
    let tolerates_control_plane = tolerates(tolerations, taints::CONTROL_PLANE, "", NO_SCHEDULE);
    if !tolerates_control_plane {
        let (severity, why) = if on_control_plane {
            (
                Severity::Error,
                "it asks for control-plane nodes, which carry this taint, so it cannot be scheduled",
            )
        } else {
            (
                Severity::Warning,
                "it cannot run on control-plane nodes, often the only nodes of a new cluster",
            )
        };
        findings.push(
            Finding::new(
                CheckId::MissingControlPlaneToleration,
                severity,
                format!(
                    "{what} does not tolerate the {}:NoSchedule taint: {why}",
                    taints::CONTROL_PLANE
                ),
                format!(
                    "add the toleration {{key: {}, operator: Exists, effect: NoSchedule}}",
                    taints::CONTROL_PLANE
                ),
            )
            .with_objects(obj()),
        );
    } else if !tolerates(tolerations, taints::MASTER, "", NO_SCHEDULE) {
        findings.push(
            Finding::new(
                CheckId::MissingMasterToleration,
                Severity::Info,
                format!(
                    "{what} does not tolerate the legacy {}:NoSchedule taint, which clusters set up before \
                     Kubernetes 1.24 may still carry",
                    taints::MASTER
                ),
                format!(
                    "on such clusters add the toleration {{key: {}, operator: Exists, effect: NoSchedule}}",
                    taints::MASTER
                ),
            )
            .with_objects(obj()),
        );
    }

    if spec.host_network != Some(true) {
        findings.push(
            Finding::new(
                CheckId::NoHostNetwork,
                Severity::Warning,
                format!(
                    "{what} does not use the host network: its pods need the CNI, and a CNI that needs the CCM \
                     (node addresses, pod CIDR routes) then waits for it forever"
                ),
                "set hostNetwork: true (with dnsPolicy: Default or ClusterFirstWithHostNet)",
            )
            .with_objects(obj()),
        );
    }

    if !on_control_plane {
        findings.push(
            Finding::new(
                CheckId::NoControlPlanePlacement,
                Severity::Warning,
                format!(
                    "{what} is not placed on control-plane nodes: it may land on (and depend on) worker nodes \
                     that it has to initialize itself"
                ),
                format!(
                    "add nodeSelector {{{}: \"\"}} (or a required node affinity on that label)",
                    taints::CONTROL_PLANE
                ),
            )
            .with_objects(obj()),
        );
    }

    if is_deployment && workload.may_run_several() && !spreads_replicas(spec) {
        findings.push(
            Finding::new(
                CheckId::NoAntiAffinity,
                Severity::Warning,
                format!(
                    "{what} runs several replicas without pod anti-affinity or topology spread: they may all \
                     land on one node and fail together"
                ),
                "add a podAntiAffinity term on the pod's labels with topologyKey kubernetes.io/hostname",
            )
            .with_objects(obj()),
        );
    }

    if !workload.leader_election() {
        let several = workload.may_run_several();
        let single_daemon = workload.replicas == Replicas::PerNode { desired: Some(1) };
        if several || single_daemon {
            let (severity, why) = if several {
                (
                    Severity::Error,
                    "several replicas run the controllers at once and fight over nodes, routes and load \
                     balancers",
                )
            } else {
                (
                    Severity::Warning,
                    "it runs one pod today, but a second control-plane node will start a second, \
                     uncoordinated CCM",
                )
            };
            findings.push(
                Finding::new(
                    CheckId::LeaderElectionDisabled,
                    severity,
                    format!("{what} runs with --leader-elect=false: {why}"),
                    "remove --leader-elect=false (leader election is on by default)",
                )
                .with_objects(obj()),
            );
        }
    }

    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DaemonSetSpec, DaemonSetStatus, DeploymentSpec};
    use k8s_openapi::api::core::v1::{
        Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        PodAffinityTerm, PodAntiAffinity, PreferredSchedulingTerm, Toleration,
        TopologySpreadConstraint, WeightedPodAffinityTerm,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn toleration(key: &str, effect: Option<&str>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: effect.map(Into::into),
            ..Default::default()
        }
    }

    /// A spec following every recommendation.
    pub(crate) fn good_spec() -> PodSpec {
        PodSpec {
            host_network: Some(true),
            node_selector: Some(BTreeMap::from([(
                taints::CONTROL_PLANE.to_owned(),
                String::new(),
            )])),
            tolerations: Some(vec![
                Toleration {
                    key: Some(taints::UNINITIALIZED.into()),
                    value: Some("true".into()),
                    effect: Some("NoSchedule".into()),
                    ..Default::default()
                },
                toleration(taints::NOT_READY, Some("NoSchedule")),
                toleration(taints::NOT_READY, Some("NoExecute")),
                toleration(taints::UNREACHABLE, Some("NoExecute")),
                toleration(taints::CONTROL_PLANE, Some("NoSchedule")),
                toleration(taints::MASTER, Some("NoSchedule")),
            ]),
            affinity: Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            topology_key: "kubernetes.io/hostname".into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            containers: vec![Container {
                name: "ccm".into(),
                args: Some(vec!["--cloud-provider=fake".into()]),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn deployment(replicas: Option<i32>, spec: PodSpec) -> Workload {
        let d = Deployment {
            metadata: ObjectMeta {
                name: Some("ccm".into()),
                namespace: Some("kube-system".into()),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas,
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(spec),
                },
                ..Default::default()
            }),
            status: None,
        };
        Workload::from_deployment(&d).unwrap()
    }

    fn daemon_set(desired: Option<i32>, spec: PodSpec) -> Workload {
        let d = DaemonSet {
            metadata: ObjectMeta {
                name: Some("ccm".into()),
                namespace: Some("kube-system".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(spec),
                },
                ..Default::default()
            }),
            status: desired.map(|d| DaemonSetStatus {
                desired_number_scheduled: d,
                observed_generation: Some(1),
                ..Default::default()
            }),
        };
        Workload::from_daemon_set(&d).unwrap()
    }

    fn ids(findings: &[Finding]) -> Vec<(CheckId, Severity)> {
        findings.iter().map(|f| (f.check, f.severity)).collect()
    }

    fn without(spec: &PodSpec, key: &str, effect: &str) -> PodSpec {
        let mut s = spec.clone();
        s.tolerations
            .as_mut()
            .unwrap()
            .retain(|t| !(t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect)));
        s
    }

    #[test]
    fn a_good_workload_has_no_findings() {
        assert!(check_workload(&deployment(Some(3), good_spec())).is_empty());
        assert!(check_workload(&deployment(None, good_spec())).is_empty());
        assert!(check_workload(&daemon_set(None, good_spec())).is_empty());
        assert!(check_workload(&daemon_set(Some(3), good_spec())).is_empty());
    }

    #[test]
    fn a_wildcard_toleration_tolerates_everything() {
        let mut spec = good_spec();
        spec.tolerations = Some(vec![Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
        assert!(check_workload(&deployment(Some(2), spec)).is_empty());
    }

    #[test]
    fn an_empty_workload_breaks_every_rule() {
        let spec = PodSpec {
            containers: vec![Container {
                name: "ccm".into(),
                args: Some(vec!["--leader-elect=false".into()]),
                ..Default::default()
            }],
            ..Default::default()
        };
        let findings = check_workload(&deployment(Some(3), spec.clone()));
        assert_eq!(
            ids(&findings),
            vec![
                (CheckId::MissingUninitializedToleration, Severity::Error),
                (CheckId::MissingNotReadyToleration, Severity::Error),
                (CheckId::MissingUnreachableToleration, Severity::Warning),
                (CheckId::MissingControlPlaneToleration, Severity::Warning),
                (CheckId::NoHostNetwork, Severity::Warning),
                (CheckId::NoControlPlanePlacement, Severity::Warning),
                (CheckId::NoAntiAffinity, Severity::Warning),
                (CheckId::LeaderElectionDisabled, Severity::Error),
            ]
        );
        for f in &findings {
            assert_eq!(
                f.objects,
                vec![ObjectRef::new("Deployment", Some("kube-system"), "ccm")]
            );
            assert!(!f.fix.is_empty());
        }
        assert!(findings[0].message.contains(taints::UNINITIALIZED));
        assert!(findings[0].fix.contains(taints::UNINITIALIZED));

        // A DaemonSet gets the NoExecute tolerations from its controller and needs no anti-affinity.
        let findings = check_workload(&daemon_set(None, spec));
        assert_eq!(
            ids(&findings),
            vec![
                (CheckId::MissingUninitializedToleration, Severity::Error),
                (CheckId::MissingNotReadyToleration, Severity::Error),
                (CheckId::MissingControlPlaneToleration, Severity::Warning),
                (CheckId::NoHostNetwork, Severity::Warning),
                (CheckId::NoControlPlanePlacement, Severity::Warning),
                (CheckId::LeaderElectionDisabled, Severity::Error),
            ]
        );
    }

    #[test]
    fn tolerations_one_by_one() {
        let good = good_spec();
        let only = |spec: PodSpec| ids(&check_workload(&deployment(Some(2), spec)));
        assert_eq!(
            only(without(&good, taints::UNINITIALIZED, "NoSchedule")),
            vec![(CheckId::MissingUninitializedToleration, Severity::Error)]
        );
        assert_eq!(
            only(without(&good, taints::NOT_READY, "NoSchedule")),
            vec![(CheckId::MissingNotReadyToleration, Severity::Error)]
        );
        assert_eq!(
            only(without(&good, taints::NOT_READY, "NoExecute")),
            vec![(CheckId::MissingNotReadyToleration, Severity::Warning)]
        );
        assert_eq!(
            ids(&check_workload(&daemon_set(
                Some(2),
                without(&good, taints::NOT_READY, "NoExecute")
            ))),
            vec![]
        );
        assert_eq!(
            only(without(&good, taints::UNREACHABLE, "NoExecute")),
            vec![(CheckId::MissingUnreachableToleration, Severity::Warning)]
        );
        // Asking for control-plane nodes without tolerating them cannot schedule.
        assert_eq!(
            only(without(&good, taints::CONTROL_PLANE, "NoSchedule")),
            vec![(CheckId::MissingControlPlaneToleration, Severity::Error)]
        );
        assert_eq!(
            only(without(&good, taints::MASTER, "NoSchedule")),
            vec![(CheckId::MissingMasterToleration, Severity::Info)]
        );
        // The uninitialized toleration must match the value "true".
        let mut wrong_value = good.clone();
        wrong_value.tolerations.as_mut().unwrap()[0].value = Some("false".into());
        assert_eq!(
            only(wrong_value),
            vec![(CheckId::MissingUninitializedToleration, Severity::Error)]
        );
        // An effect-less toleration covers both effects.
        let mut any_effect = without(
            &without(&good, taints::NOT_READY, "NoSchedule"),
            taints::NOT_READY,
            "NoExecute",
        );
        any_effect
            .tolerations
            .as_mut()
            .unwrap()
            .push(toleration(taints::NOT_READY, None));
        assert_eq!(only(any_effect), vec![]);
    }

    #[test]
    fn placement_and_network() {
        let good = good_spec();
        let mut no_host = good.clone();
        no_host.host_network = Some(false);
        assert_eq!(
            ids(&check_workload(&deployment(Some(2), no_host))),
            vec![(CheckId::NoHostNetwork, Severity::Warning)]
        );

        let mut no_selector = good.clone();
        no_selector.node_selector = None;
        assert_eq!(
            ids(&check_workload(&deployment(Some(2), no_selector.clone()))),
            vec![(CheckId::NoControlPlanePlacement, Severity::Warning)]
        );

        let term = |key: &str, op: &str| NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: None,
            }]),
            match_fields: None,
        };
        let mut required = no_selector.clone();
        required.affinity.as_mut().unwrap().node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![term(taints::MASTER, "Exists")],
            }),
            ..Default::default()
        });
        assert!(targets_control_plane(&required));
        assert!(check_workload(&deployment(Some(2), required)).is_empty());

        let mut preferred = no_selector.clone();
        preferred.affinity.as_mut().unwrap().node_affinity = Some(NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                PreferredSchedulingTerm {
                    weight: 1,
                    preference: term(taints::CONTROL_PLANE, "In"),
                },
            ]),
            ..Default::default()
        });
        assert!(targets_control_plane(&preferred));

        let mut avoid = no_selector;
        avoid.affinity.as_mut().unwrap().node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![term(taints::CONTROL_PLANE, "DoesNotExist")],
            }),
            ..Default::default()
        });
        assert!(!targets_control_plane(&avoid));
    }

    #[test]
    fn spreading() {
        let mut spec = good_spec();
        spec.affinity = None;
        assert_eq!(
            ids(&check_workload(&deployment(Some(2), spec.clone()))),
            vec![(CheckId::NoAntiAffinity, Severity::Warning)]
        );
        // One replica needs no spreading.
        assert!(check_workload(&deployment(Some(1), spec.clone())).is_empty());
        // Preferred anti-affinity counts.
        let mut preferred = spec.clone();
        preferred.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    WeightedPodAffinityTerm {
                        weight: 100,
                        pod_affinity_term: PodAffinityTerm {
                            topology_key: "kubernetes.io/hostname".into(),
                            ..Default::default()
                        },
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(check_workload(&deployment(Some(2), preferred)).is_empty());
        // So does a topology spread constraint.
        let mut spread = spec.clone();
        spread.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "kubernetes.io/hostname".into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            ..Default::default()
        }]);
        assert!(check_workload(&deployment(Some(2), spread)).is_empty());
        // An empty anti-affinity does not.
        let mut empty = spec;
        empty.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity::default()),
            ..Default::default()
        });
        assert!(!spreads_replicas(&empty));
    }

    #[test]
    fn leader_election_and_replicas() {
        let mut off = good_spec();
        off.containers[0].args = Some(vec!["--leader-elect=false".into()]);
        assert!(check_workload(&deployment(Some(1), off.clone())).is_empty());
        assert!(check_workload(&deployment(None, off.clone())).is_empty());
        assert_eq!(
            ids(&check_workload(&deployment(Some(2), off.clone()))),
            vec![(CheckId::LeaderElectionDisabled, Severity::Error)]
        );
        assert_eq!(
            ids(&check_workload(&daemon_set(None, off.clone()))),
            vec![(CheckId::LeaderElectionDisabled, Severity::Error)]
        );
        assert_eq!(
            ids(&check_workload(&daemon_set(Some(2), off.clone()))),
            vec![(CheckId::LeaderElectionDisabled, Severity::Error)]
        );
        assert_eq!(
            ids(&check_workload(&daemon_set(Some(1), off.clone()))),
            vec![(CheckId::LeaderElectionDisabled, Severity::Warning)]
        );
        assert_eq!(
            ids(&check_workload(&deployment(Some(0), off.clone()))),
            vec![(CheckId::WorkloadScaledToZero, Severity::Warning)]
        );
        assert_eq!(
            ids(&check_workload(&daemon_set(Some(0), off))),
            vec![(CheckId::WorkloadScaledToZero, Severity::Warning)]
        );
    }

    #[test]
    fn daemon_set_counts_only_when_reconciled() {
        let mut ds = DaemonSet {
            metadata: ObjectMeta {
                name: Some("ccm".into()),
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(good_spec()),
                },
                ..Default::default()
            }),
            // What the API server writes on create: zeros, nothing observed.
            status: Some(DaemonSetStatus::default()),
        };
        let desired = |ds: &DaemonSet| Workload::from_daemon_set(ds).unwrap().replicas;
        assert_eq!(desired(&ds), Replicas::PerNode { desired: None });
        ds.status.as_mut().unwrap().observed_generation = Some(1);
        ds.status.as_mut().unwrap().desired_number_scheduled = 3;
        assert_eq!(desired(&ds), Replicas::PerNode { desired: None });
        ds.status.as_mut().unwrap().observed_generation = Some(2);
        assert_eq!(desired(&ds), Replicas::PerNode { desired: Some(3) });
        ds.status = None;
        assert_eq!(desired(&ds), Replicas::PerNode { desired: None });
    }

    #[test]
    fn unreadable_workloads() {
        let no_name = Deployment::default();
        assert_eq!(
            Workload::from_deployment(&no_name),
            Err(WorkloadError::MissingName { kind: "Deployment" })
        );
        let mut no_spec = Deployment::default();
        no_spec.metadata.name = Some("x".into());
        assert!(matches!(
            Workload::from_deployment(&no_spec),
            Err(WorkloadError::MissingPodSpec { .. })
        ));
        let mut no_template_spec = DaemonSet::default();
        no_template_spec.metadata.name = Some("x".into());
        no_template_spec.spec = Some(DaemonSetSpec::default());
        let err = Workload::from_daemon_set(&no_template_spec).unwrap_err();
        assert_eq!(
            err.to_string(),
            "DaemonSet x has no spec.template.spec: the pod template needs containers"
        );
    }
}
