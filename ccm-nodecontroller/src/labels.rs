//! Node labels: the cloud labels written at initialization, the provider's additional labels, and the beta → GA
//! label copy done on initialized nodes. Every function here is pure.
//!
//! ```
//! use std::collections::BTreeMap;
//! use ccm_core::InstanceMetadata;
//! use ccm_nodecontroller::labels::plan_cloud_labels;
//!
//! let meta = InstanceMetadata::new("fake://n1").with_zone("z1").with_label("example.com/rack", "r7");
//! let plan = plan_cloud_labels(&BTreeMap::new(), &meta);
//! assert_eq!(plan.set["topology.kubernetes.io/zone"], "z1");
//! assert_eq!(plan.set["failure-domain.beta.kubernetes.io/zone"], "z1");
//! assert_eq!(plan.set["example.com/rack"], "r7");
//! ```

use std::collections::BTreeMap;

use ccm_core::InstanceMetadata;
use ccm_core::names::labels;
use ccm_core::syntax::{self, LabelKeyError};

/// The (beta, GA) label pairs: written together at initialization, and reconciled beta → GA afterwards.
pub const BETA_GA_PAIRS: [(&str, &str); 3] = [
    (labels::FAILURE_DOMAIN_BETA_ZONE, labels::TOPOLOGY_ZONE),
    (labels::FAILURE_DOMAIN_BETA_REGION, labels::TOPOLOGY_REGION),
    (labels::INSTANCE_TYPE_BETA, labels::INSTANCE_TYPE),
];

/// Why an additional label from the provider was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiscardReason {
    /// The key is in a Kubernetes namespace (matches `(^|\.)(kubernetes|k8s)\.io/`).
    KubernetesNamespace,
    /// The node already has this key with another value (existing labels are never overwritten).
    AlreadyPresent {
        /// The value on the node.
        existing: String,
    },
    /// The key or value is not a valid Kubernetes label (the API server would reject the whole write).
    Invalid(String),
}

/// An additional label that was not applied, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscardedLabel {
    /// The label key.
    pub key: String,
    /// The value the provider asked for.
    pub value: String,
    /// Why it was dropped.
    pub reason: DiscardReason,
}

/// The labels to write when a node is initialized.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelPlan {
    /// Labels to set (only those whose value differs from the node's).
    pub set: BTreeMap<String, String>,
    /// Additional labels that were dropped (for logging).
    pub discarded: Vec<DiscardedLabel>,
}

/// True if the key is in a Kubernetes-reserved namespace: the Go regex `(^|\.)(kubernetes|k8s)\.io/`.
///
/// ```
/// use ccm_nodecontroller::labels::is_kubernetes_namespaced;
/// assert!(is_kubernetes_namespaced("kubernetes.io/arch"));
/// assert!(is_kubernetes_namespaced("node.kubernetes.io/foo"));
/// assert!(is_kubernetes_namespaced("k8s.io/x"));
/// assert!(!is_kubernetes_namespaced("example.com/kubernetes.io"));
/// assert!(!is_kubernetes_namespaced("mykubernetes.io/x"));
/// ```
pub fn is_kubernetes_namespaced(key: &str) -> bool {
    ["kubernetes.io/", "k8s.io/"].iter().any(|needle| {
        key.match_indices(needle)
            .any(|(at, _)| at == 0 || key.as_bytes()[at - 1] == b'.')
    })
}

/// Check a label key and value against the API server's rules: the key is `[prefix/]name` with a DNS subdomain
/// prefix and a name of at most 63 characters (alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric);
/// the value is empty or follows the name rules.
///
/// ```
/// use ccm_nodecontroller::labels::validate_label;
/// assert!(validate_label("example.com/rack", "r-7").is_ok());
/// assert!(validate_label("example.com/rack", "has space").is_err());
/// assert!(validate_label("Example.com/rack", "x").is_err());
/// ```
pub fn validate_label(key: &str, value: &str) -> Result<(), String> {
    match syntax::label_key(key) {
        Err(LabelKeyError::Prefix(_)) => Err(format!(
            "label key {key:?}: the prefix must be a lower-case DNS subdomain"
        )),
        Err(LabelKeyError::Name(_)) => Err(format!(
            "label key {key:?}: the name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        )),
        Ok(()) if syntax::label_value(value).is_err() => Err(format!(
            "label {key:?}: the value {value:?} must be empty or 1-63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        )),
        Ok(()) => Ok(()),
    }
}

/// The labels initialization writes, given the node's current labels and the cloud's metadata (Go:
/// `getNodeModifiersFromCloudProvider`): the GA and beta labels ([`BETA_GA_PAIRS`]) of a non-empty zone, region
/// and instance type (overwritten), then the additional labels, except keys in a Kubernetes namespace and keys
/// the node already has (never overwritten). Unlike Go, additional labels the API server would reject are dropped
/// too (with a reason), so one bad label from a provider cannot block the node's initialization forever. Only
/// labels whose value differs from the node's are in [`LabelPlan::set`].
pub fn plan_cloud_labels(current: &BTreeMap<String, String>, meta: &InstanceMetadata) -> LabelPlan {
    let mut desired: BTreeMap<String, String> = BTreeMap::new();
    let values = [&meta.zone, &meta.region, &meta.instance_type];
    for ((beta, ga), value) in BETA_GA_PAIRS.into_iter().zip(values) {
        if !value.is_empty() {
            desired.insert(beta.to_owned(), value.clone());
            desired.insert(ga.to_owned(), value.clone());
        }
    }
    let mut discarded = Vec::new();
    for (key, value) in &meta.additional_labels {
        let reason = if is_kubernetes_namespaced(key) {
            Some(DiscardReason::KubernetesNamespace)
        } else if let Some(existing) = current.get(key) {
            // Go warns only when the value differs; an equal value needs no write either way.
            (existing != value).then(|| DiscardReason::AlreadyPresent {
                existing: existing.clone(),
            })
        } else if let Err(why) = validate_label(key, value) {
            Some(DiscardReason::Invalid(why))
        } else {
            desired.insert(key.clone(), value.clone());
            None
        };
        if let Some(reason) = reason {
            discarded.push(DiscardedLabel {
                key: key.clone(),
                value: value.clone(),
                reason,
            });
        }
    }
    desired.retain(|k, v| current.get(k) != Some(v));
    LabelPlan {
        set: desired,
        discarded,
    }
}

/// The GA labels to set on an initialized node (Go: `reconcileNodeLabels`): for each (beta, GA) pair, if the
/// beta label exists and the GA label is missing or different, the GA label gets the beta value. Empty when
/// nothing needs writing.
///
/// ```
/// use std::collections::BTreeMap;
/// use ccm_nodecontroller::labels::reconcile_beta_to_ga;
/// let labels = BTreeMap::from([("failure-domain.beta.kubernetes.io/zone".to_string(), "z1".to_string())]);
/// assert_eq!(reconcile_beta_to_ga(&labels)["topology.kubernetes.io/zone"], "z1");
/// ```
pub fn reconcile_beta_to_ga(current: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    BETA_GA_PAIRS
        .iter()
        .filter_map(|(beta, ga)| {
            let value = current.get(*beta)?;
            (current.get(*ga) != Some(value)).then(|| ((*ga).to_owned(), value.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn namespace_regex_equivalent() {
        let cases = [
            ("kubernetes.io/hostname", true),
            ("k8s.io/foo", true),
            ("node.kubernetes.io/instance-type", true),
            ("topology.k8s.io/x", true),
            ("a.b.kubernetes.io/x", true),
            ("kubernetes.io", false),
            ("xkubernetes.io/x", false),
            ("xk8s.io/x", false),
            ("example.com/kubernetes", false),
            ("example.com/label", false),
            ("kubernetes-io/x", false),
            ("plain", false),
            ("", false),
        ];
        for (key, want) in cases {
            assert_eq!(is_kubernetes_namespaced(key), want, "{key}");
        }
    }

    #[test]
    fn label_validation() {
        for (k, v) in [
            ("a", ""),
            ("a", "b"),
            ("example.com/a_b.c-d", "V1.2_x-y"),
            ("x/y", &"v".repeat(63)),
        ] {
            assert!(validate_label(k, v).is_ok(), "{k}={v}");
        }
        for (k, v) in [
            ("", "x"),
            ("/a", "x"),
            ("a/", "x"),
            ("-a", "x"),
            ("a-", "x"),
            ("Ex.com/a", "x"),
            ("ex..com/a", "x"),
            ("ex.com/a/b", "x"),
            ("a", "-x"),
            ("a", "x y"),
            ("a", &"v".repeat(64)),
            (&"k".repeat(64), "x"),
        ] {
            assert!(validate_label(k, v).is_err(), "{k}={v}");
        }
    }

    #[test]
    fn topology_and_type_labels_overwrite() {
        // Go: "zone/region topology labels added" and "[instanceV2] zone/region topology labels added".
        let meta = InstanceMetadata::new("fake://n")
            .with_instance_type("m1.large")
            .with_zone("us-west-1a")
            .with_region("us-west");
        let current = map(&[
            (labels::TOPOLOGY_ZONE, "old"),
            (labels::INSTANCE_TYPE_BETA, "m1.large"),
        ]);
        let plan = plan_cloud_labels(&current, &meta);
        assert_eq!(
            plan.set,
            map(&[
                (labels::INSTANCE_TYPE, "m1.large"),
                (labels::FAILURE_DOMAIN_BETA_ZONE, "us-west-1a"),
                (labels::TOPOLOGY_ZONE, "us-west-1a"),
                (labels::FAILURE_DOMAIN_BETA_REGION, "us-west"),
                (labels::TOPOLOGY_REGION, "us-west"),
            ])
        );
        assert!(plan.discarded.is_empty());
    }

    #[test]
    fn empty_values_set_nothing() {
        let plan = plan_cloud_labels(&BTreeMap::new(), &InstanceMetadata::new("fake://n"));
        assert_eq!(plan, LabelPlan::default());
        let only_region = InstanceMetadata::new("").with_region("r");
        assert_eq!(
            plan_cloud_labels(&BTreeMap::new(), &only_region).set,
            map(&[
                (labels::FAILURE_DOMAIN_BETA_REGION, "r"),
                (labels::TOPOLOGY_REGION, "r")
            ])
        );
    }

    #[test]
    fn additional_labels_applied() {
        // Go: "[instanceV2] provided additional labels".
        let meta = InstanceMetadata::new("fake://n")
            .with_label("topology.k8s.cloud/node-pool", "np-1")
            .with_label("example.com/rack", "r7");
        let plan = plan_cloud_labels(&BTreeMap::new(), &meta);
        assert_eq!(
            plan.set,
            map(&[
                ("topology.k8s.cloud/node-pool", "np-1"),
                ("example.com/rack", "r7")
            ])
        );
    }

    #[test]
    fn additional_labels_discarded() {
        // Go: "[instanceV2] provided additional labels with labels to discard".
        let meta = InstanceMetadata::new("fake://n")
            .with_label("node.kubernetes.io/custom", "x")
            .with_label("k8s.io/custom", "x")
            .with_label("example.com/existing", "new")
            .with_label("example.com/same", "v")
            .with_label("example.com/bad", "has space")
            .with_label("example.com/ok", "yes");
        let current = map(&[("example.com/existing", "old"), ("example.com/same", "v")]);
        let plan = plan_cloud_labels(&current, &meta);
        assert_eq!(plan.set, map(&[("example.com/ok", "yes")]));
        let reasons: BTreeMap<_, _> = plan
            .discarded
            .iter()
            .map(|d| (d.key.as_str(), d.reason.clone()))
            .collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert_eq!(
            reasons["node.kubernetes.io/custom"],
            DiscardReason::KubernetesNamespace
        );
        assert_eq!(reasons["k8s.io/custom"], DiscardReason::KubernetesNamespace);
        assert_eq!(
            reasons["example.com/existing"],
            DiscardReason::AlreadyPresent {
                existing: "old".into()
            }
        );
        assert!(matches!(
            reasons["example.com/bad"],
            DiscardReason::Invalid(_)
        ));
    }

    #[test]
    fn additional_labels_cannot_override_topology() {
        // A provider cannot sneak a different zone in through additional labels: the key is reserved.
        let meta = InstanceMetadata::new("fake://n")
            .with_zone("z1")
            .with_label(labels::TOPOLOGY_ZONE, "evil");
        let plan = plan_cloud_labels(&BTreeMap::new(), &meta);
        assert_eq!(plan.set[labels::TOPOLOGY_ZONE], "z1");
        assert_eq!(plan.discarded.len(), 1);
    }

    #[test]
    fn beta_to_ga_table() {
        // Go: Test_reconcileNodeLabels.
        let requires = map(&[
            (labels::FAILURE_DOMAIN_BETA_ZONE, "foo"),
            (labels::FAILURE_DOMAIN_BETA_REGION, "bar"),
            (labels::INSTANCE_TYPE_BETA, "the-best-type"),
        ]);
        assert_eq!(
            reconcile_beta_to_ga(&requires),
            map(&[
                (labels::TOPOLOGY_ZONE, "foo"),
                (labels::TOPOLOGY_REGION, "bar"),
                (labels::INSTANCE_TYPE, "the-best-type"),
            ])
        );
        let mut done = requires.clone();
        done.extend(reconcile_beta_to_ga(&requires));
        assert!(
            reconcile_beta_to_ga(&done).is_empty(),
            "doesn't require reconcile"
        );
        let mut different = done.clone();
        different.insert(labels::TOPOLOGY_ZONE.into(), "blah".into());
        different.insert(labels::INSTANCE_TYPE.into(), "old".into());
        assert_eq!(
            reconcile_beta_to_ga(&different),
            map(&[
                (labels::TOPOLOGY_ZONE, "foo"),
                (labels::INSTANCE_TYPE, "the-best-type")
            ])
        );
        // GA without beta: nothing (the beta label is the source of truth).
        assert!(reconcile_beta_to_ga(&map(&[(labels::TOPOLOGY_ZONE, "z")])).is_empty());
        assert!(reconcile_beta_to_ga(&BTreeMap::new()).is_empty());
    }
}
