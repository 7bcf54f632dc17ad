//! What the doctor reports: [`Finding`]s, each with a [`Severity`], a stable [`CheckId`], the objects involved
//! and the fix.

use std::fmt;

use serde::Serialize;

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; does not change the exit status.
    Info,
    /// Against the recommendations, or a problem that may resolve itself; exit status 1.
    Warning,
    /// The cluster is stuck or will get stuck; exit status 2.
    Error,
}

impl Severity {
    /// The lower-case name (`info`, `warning`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! check_ids {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// The stable identifier of each check (the `check` field of the JSON output). See `docs/doctor.md`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum CheckId {
            $($(#[$doc])* $variant,)*
        }

        impl CheckId {
            /// Every check, in report order.
            pub const ALL: &'static [CheckId] = &[$(CheckId::$variant,)*];

            /// The kebab-case name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(CheckId::$variant => $name,)*
                }
            }
        }
    };
}

check_ids! {
    /// A node has carried the uninitialized taint for at least the threshold.
    NodeUninitializedTooLong => "node-uninitialized-too-long",
    /// A node carries the uninitialized taint, for less than the threshold so far.
    NodeWaitingForInitialization => "node-waiting-for-initialization",
    /// A node has neither a providerID nor the uninitialized taint.
    NodeWithoutProviderId => "node-without-provider-id",
    /// Nodes are uninitialized and not ready while no CNI pod runs on them.
    CniCcmDeadlock => "cni-ccm-deadlock",
    /// Nodes are uninitialized and not ready, and no CNI pod was found at all.
    CniNotFound => "cni-not-found",
    /// A CCM pod cannot be scheduled because of taints it does not tolerate.
    CcmPodUntoleratedTaint => "ccm-pod-untolerated-taint",
    /// A CCM pod cannot be scheduled for another reason.
    CcmPodUnschedulable => "ccm-pod-unschedulable",
    /// No CCM Deployment or DaemonSet was found.
    CcmWorkloadNotFound => "ccm-workload-not-found",
    /// The CCM workload has zero replicas.
    WorkloadScaledToZero => "workload-scaled-to-zero",
    /// The CCM workload does not tolerate the uninitialized taint.
    MissingUninitializedToleration => "missing-uninitialized-toleration",
    /// The CCM workload does not tolerate the not-ready taint.
    MissingNotReadyToleration => "missing-not-ready-toleration",
    /// The CCM Deployment does not tolerate the unreachable taint.
    MissingUnreachableToleration => "missing-unreachable-toleration",
    /// The CCM workload does not tolerate the control-plane taint.
    MissingControlPlaneToleration => "missing-control-plane-toleration",
    /// The CCM workload does not tolerate the legacy master taint.
    MissingMasterToleration => "missing-master-toleration",
    /// The CCM workload does not use the host network.
    NoHostNetwork => "no-host-network",
    /// The CCM workload is not placed on control-plane nodes.
    NoControlPlanePlacement => "no-control-plane-placement",
    /// No current node satisfies the CCM workload's node selection and taints (live mode).
    NoNodeFitsPlacement => "no-node-fits-placement",
    /// The CCM workload's node selection relies on a label Kubernetes no longer sets on nodes.
    RemovedNodeLabel => "removed-node-label",
    /// The CCM workload's node selection uses a deprecated beta label that has a GA replacement.
    DeprecatedNodeLabel => "deprecated-node-label",
    /// The CCM Deployment runs several replicas without pod anti-affinity or spreading.
    NoAntiAffinity => "no-anti-affinity",
    /// Leader election is off while several replicas may run.
    LeaderElectionDisabled => "leader-election-disabled",
    /// The leader Lease is missing while leader election is on.
    LeaseMissing => "lease-missing",
    /// The leader Lease has not been renewed within its duration.
    LeaseNotRenewed => "lease-not-renewed",
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CheckId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// An object a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// The kind (`Node`, `Pod`, `Deployment`, `DaemonSet`, `Lease`).
    pub kind: String,
    /// The namespace, for namespaced objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// What about this object matters (for example `waiting 5m12s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ObjectRef {
    /// A reference to `kind` `namespace/name` (or `name` for cluster-scoped kinds).
    pub fn new(kind: &str, namespace: Option<&str>, name: &str) -> Self {
        ObjectRef {
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            detail: None,
        }
    }

    /// Add a detail.
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name)?,
            None => write!(f, "{} {}", self.kind, self.name)?,
        }
        if let Some(detail) = &self.detail {
            write!(f, " ({detail})")?;
        }
        Ok(())
    }
}

/// One problem (or observation) with its fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Which check produced it.
    pub check: CheckId,
    /// How bad it is.
    pub severity: Severity,
    /// What was found.
    pub message: String,
    /// The objects involved.
    pub objects: Vec<ObjectRef>,
    /// How to fix it.
    pub fix: String,
}

impl Finding {
    /// A finding with no objects yet.
    pub fn new(
        check: CheckId,
        severity: Severity,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding {
            check,
            severity,
            message: message.into(),
            objects: Vec::new(),
            fix: fix.into(),
        }
    }

    /// Add objects.
    #[must_use]
    pub fn with_objects(mut self, objects: impl IntoIterator<Item = ObjectRef>) -> Self {
        self.objects.extend(objects);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_are_ordered() {
        assert!(Severity::Info < Severity::Warning);
        assert!(Severity::Warning < Severity::Error);
        assert_eq!(Severity::Warning.to_string(), "warning");
        assert_eq!(
            serde_json::to_value(Severity::Error).unwrap(),
            serde_json::json!("error")
        );
    }

    #[test]
    fn check_ids_are_unique_kebab_case() {
        let mut names: Vec<&str> = CheckId::ALL.iter().map(|c| c.as_str()).collect();
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        );
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CheckId::ALL.len());
        assert_eq!(
            serde_json::to_value(CheckId::LeaseMissing).unwrap(),
            serde_json::json!("lease-missing")
        );
    }

    #[test]
    fn object_refs_display_and_serialize() {
        let pod = ObjectRef::new("Pod", Some("kube-system"), "ccm-1").with_detail("Pending");
        assert_eq!(pod.to_string(), "Pod kube-system/ccm-1 (Pending)");
        let node = ObjectRef::new("Node", None, "n1");
        assert_eq!(node.to_string(), "Node n1");
        assert_eq!(
            serde_json::to_value(&node).unwrap(),
            serde_json::json!({"kind": "Node", "name": "n1"})
        );
    }
}
