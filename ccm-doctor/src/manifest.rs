//! Lint mode: check the CCM's Deployment or DaemonSet in a YAML manifest (possibly several documents, or a
//! `kind: List`) without a cluster.
//!
//! ```
//! use ccm_doctor::manifest::{WorkloadFilter, lint_manifest};
//!
//! let yaml = r#"
//! apiVersion: apps/v1
//! kind: Deployment
//! metadata: {name: cloud-controller-manager, namespace: kube-system}
//! spec:
//!   selector: {matchLabels: {k8s-app: cloud-controller-manager}}
//!   template:
//!     metadata: {labels: {k8s-app: cloud-controller-manager}}
//!     spec:
//!       containers: [{name: ccm, image: example/ccm:v1}]
//! "#;
//! let report = lint_manifest(yaml, "ccm.yaml", &WorkloadFilter::default()).unwrap();
//! assert_eq!(report.exit_code(), 2); // it tolerates nothing
//! ```

use std::io::Read as _;
use std::path::Path;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::finding::Finding;
use crate::node_labels::check_node_labels;
use crate::report::Report;
use crate::selector::LabelSelector;
use crate::workload::{Workload, WorkloadError, check_workload};

/// A manifest could not be linted.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read manifest {path}: {source}")]
    Read {
        /// The path (`-` for standard input).
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid YAML.
    #[error("cannot parse manifest {origin} as YAML: {message}")]
    Yaml {
        /// Where the text came from.
        origin: String,
        /// The parser's message (with the location).
        message: String,
    },
    /// A document is not a mapping.
    #[error(
        "document {document} of manifest {origin} is not a Kubernetes object (a mapping with apiVersion and kind)"
    )]
    NotAnObject {
        /// Where the text came from.
        origin: String,
        /// The document's position among the non-empty documents, from 1.
        document: usize,
    },
    /// A Deployment or DaemonSet uses an API version the doctor does not read.
    #[error(
        "{kind} {name} in manifest {origin} has apiVersion {api_version:?}: only apps/v1 is supported (older \
         versions were removed in Kubernetes 1.16)"
    )]
    UnsupportedApiVersion {
        /// Where the text came from.
        origin: String,
        /// The kind.
        kind: String,
        /// The object's name, or `document N`.
        name: String,
        /// The apiVersion found.
        api_version: String,
    },
    /// A Deployment or DaemonSet does not match its schema.
    #[error("{kind} {name} in manifest {origin} is invalid at {path}: {message}")]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// The kind.
        kind: String,
        /// The object's name, or `document N`.
        name: String,
        /// The field path (`.` for the object itself).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A Deployment or DaemonSet lacks what the checks need.
    #[error("in manifest {origin}: {source}")]
    Workload {
        /// Where the text came from.
        origin: String,
        /// What is missing.
        #[source]
        source: WorkloadError,
    },
    /// The manifest holds no Deployment or DaemonSet.
    #[error(
        "manifest {origin} holds no Deployment or DaemonSet (found: {found}); lint the file that deploys the CCM"
    )]
    NoWorkloads {
        /// Where the text came from.
        origin: String,
        /// The kinds found, comma-separated, or `nothing`.
        found: String,
    },
    /// No workload matches `--workload` / `--workload-selector`.
    #[error("no Deployment or DaemonSet in manifest {origin} matches {filter} (found: {found})")]
    NoMatch {
        /// Where the text came from.
        origin: String,
        /// The filter, described.
        filter: String,
        /// The workloads found.
        found: String,
    },
}

/// Which workloads of a manifest to check: by name or by labels (either matches). Empty = all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadFilter {
    /// Keep the workload with this name.
    pub name: Option<String>,
    /// Keep workloads whose labels match.
    pub selector: Option<LabelSelector>,
}

impl WorkloadFilter {
    /// True if nothing is filtered.
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.selector.is_none()
    }

    /// True if `workload` passes the filter.
    pub fn matches(&self, workload: &Workload) -> bool {
        if self.is_empty() {
            return true;
        }
        self.name.as_deref() == Some(workload.name.as_str())
            || self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&workload.labels))
    }

    fn describe(&self) -> String {
        match (&self.name, &self.selector) {
            (Some(n), Some(s)) => format!("name {n} or labels {s}"),
            (Some(n), None) => format!("name {n}"),
            (None, Some(s)) => format!("labels {s}"),
            (None, None) => "anything".to_owned(),
        }
    }
}

fn doc_name(doc: &Value, index: usize) -> String {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("(document {index})"))
}

fn typed<T: DeserializeOwned>(
    doc: Value,
    origin: &str,
    kind: &str,
    name: &str,
) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        ManifestError::Invalid {
            origin: origin.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            path,
            message: e.into_inner().to_string(),
        }
    })
}

fn collect(
    doc: Value,
    index: usize,
    origin: &str,
    workloads: &mut Vec<Workload>,
    kinds: &mut Vec<String>,
) -> Result<(), ManifestError> {
    let Value::Object(map) = &doc else {
        return Err(ManifestError::NotAnObject {
            origin: origin.to_owned(),
            document: index,
        });
    };
    let kind = map
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let api_version = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if kind.is_empty() {
        return Err(ManifestError::NotAnObject {
            origin: origin.to_owned(),
            document: index,
        });
    }
    if kind == "List" || kind.ends_with("List") && map.contains_key("items") {
        if let Some(Value::Array(items)) = map.get("items") {
            for item in items.clone() {
                collect(item, index, origin, workloads, kinds)?;
            }
        }
        return Ok(());
    }
    if !kinds.contains(&kind) {
        kinds.push(kind.clone());
    }
    if kind != "Deployment" && kind != "DaemonSet" {
        return Ok(());
    }
    let name = doc_name(&doc, index);
    if api_version != "apps/v1" {
        return Err(ManifestError::UnsupportedApiVersion {
            origin: origin.to_owned(),
            kind,
            name,
            api_version,
        });
    }
    let workload = if kind == "Deployment" {
        let deployment: Deployment = typed(doc, origin, &kind, &name)?;
        Workload::from_deployment(&deployment)
    } else {
        let daemon_set: DaemonSet = typed(doc, origin, &kind, &name)?;
        Workload::from_daemon_set(&daemon_set)
    }
    .map_err(|source| ManifestError::Workload {
        origin: origin.to_owned(),
        source,
    })?;
    workloads.push(workload);
    Ok(())
}

/// Every Deployment and DaemonSet in `text` (YAML, one or more documents, `kind: List` unpacked), in order.
///
/// # Errors
/// [`ManifestError`] if the YAML does not parse, a document is not an object, or a Deployment or DaemonSet is
/// not a valid `apps/v1` object; [`ManifestError::NoWorkloads`] if there is none.
pub fn parse_workloads(text: &str, origin: &str) -> Result<Vec<Workload>, ManifestError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| ManifestError::Yaml {
        origin: origin.to_owned(),
        message: e.to_string(),
    })?;
    let mut workloads = Vec::new();
    let mut kinds = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        collect(doc, i + 1, origin, &mut workloads, &mut kinds)?;
    }
    if workloads.is_empty() {
        return Err(ManifestError::NoWorkloads {
            origin: origin.to_owned(),
            found: if kinds.is_empty() {
                "nothing".to_owned()
            } else {
                kinds.join(", ")
            },
        });
    }
    Ok(workloads)
}

/// Check the workloads of `text` that pass `filter`.
///
/// # Errors
/// As [`parse_workloads`], and [`ManifestError::NoMatch`] if no workload passes a non-empty filter.
pub fn lint_manifest(
    text: &str,
    origin: &str,
    filter: &WorkloadFilter,
) -> Result<Report, ManifestError> {
    let workloads = parse_workloads(text, origin)?;
    let found = workloads
        .iter()
        .map(|w| format!("{} {}", w.kind.as_str(), w.name))
        .collect::<Vec<_>>()
        .join(", ");
    let selected: Vec<&Workload> = workloads.iter().filter(|w| filter.matches(w)).collect();
    if selected.is_empty() {
        return Err(ManifestError::NoMatch {
            origin: origin.to_owned(),
            filter: filter.describe(),
            found,
        });
    }
    let findings: Vec<Finding> = selected
        .into_iter()
        .flat_map(|w| {
            let mut findings = check_workload(w);
            findings.extend(check_node_labels(w, None));
            findings
        })
        .collect();
    Ok(Report::new(format!("manifest {origin}"), findings))
}

/// Read `path` (`-` = standard input) and [`lint_manifest`] it.
///
/// # Errors
/// [`ManifestError::Read`] if the file cannot be read (or is not UTF-8), else as [`lint_manifest`].
pub fn lint_manifest_file(path: &Path, filter: &WorkloadFilter) -> Result<Report, ManifestError> {
    let origin = path.display().to_string();
    let read_err = |source| ManifestError::Read {
        path: origin.clone(),
        source,
    };
    let text = if origin == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(read_err)?;
        text
    } else {
        std::fs::read_to_string(path).map_err(read_err)?
    };
    lint_manifest(&text, &origin, filter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{CheckId, Severity};
    use crate::workload::WorkloadKind;

    const GOOD: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cloud-controller-manager
  namespace: kube-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: cloud-controller-manager
  namespace: kube-system
  labels:
    k8s-app: cloud-controller-manager
spec:
  selector:
    matchLabels:
      k8s-app: cloud-controller-manager
  template:
    metadata:
      labels:
        k8s-app: cloud-controller-manager
    spec:
      hostNetwork: true
      dnsPolicy: Default
      nodeSelector:
        node-role.kubernetes.io/control-plane: ""
      tolerations:
        - key: node.cloudprovider.kubernetes.io/uninitialized
          value: "true"
          effect: NoSchedule
        - key: node.kubernetes.io/not-ready
          operator: Exists
        - key: node-role.kubernetes.io/control-plane
          operator: Exists
          effect: NoSchedule
        - key: node-role.kubernetes.io/master
          operator: Exists
          effect: NoSchedule
      containers:
        - name: ccm
          image: example/ccm:v1
          args: ["--cloud-provider=fake", "--leader-elect=true"]
---
"#;

    #[test]
    fn a_good_manifest_is_clean() {
        let report = lint_manifest(GOOD, "good.yaml", &WorkloadFilter::default()).unwrap();
        assert_eq!(report.findings(), &[] as &[Finding]);
        assert_eq!(report.exit_code(), 0);
        assert_eq!(report.target(), "manifest good.yaml");
    }

    #[test]
    fn parses_lists_and_several_workloads() {
        let text = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: a, labels: {tier: x}}
    spec:
      replicas: 3
      selector: {matchLabels: {app: a}}
      template:
        metadata: {labels: {app: a}}
        spec: {containers: [{name: c, image: i, args: ["--leader-elect=false"]}]}
---
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: b}
spec:
  selector: {matchLabels: {app: b}}
  template:
    metadata: {labels: {app: b}}
    spec: {containers: [{name: c, image: i}]}
"#;
        let workloads = parse_workloads(text, "t").unwrap();
        let kinds: Vec<(WorkloadKind, &str)> = workloads
            .iter()
            .map(|w| (w.kind, w.name.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (WorkloadKind::Deployment, "a"),
                (WorkloadKind::DaemonSet, "b")
            ]
        );

        let all = lint_manifest(text, "t", &WorkloadFilter::default()).unwrap();
        assert!(all.findings().iter().any(|f| f.objects[0].name == "a"));
        assert!(all.findings().iter().any(|f| f.objects[0].name == "b"));
        let leader = all
            .findings()
            .iter()
            .find(|f| f.check == CheckId::LeaderElectionDisabled)
            .unwrap();
        assert_eq!(leader.severity, Severity::Error);
        assert_eq!(leader.objects[0].name, "a");

        let by_name = WorkloadFilter {
            name: Some("b".into()),
            selector: None,
        };
        let only_b = lint_manifest(text, "t", &by_name).unwrap();
        assert!(only_b.findings().iter().all(|f| f.objects[0].name == "b"));

        let by_label = WorkloadFilter {
            name: None,
            selector: Some("tier=x".parse().unwrap()),
        };
        let only_a = lint_manifest(text, "t", &by_label).unwrap();
        assert!(only_a.findings().iter().all(|f| f.objects[0].name == "a"));

        let none = WorkloadFilter {
            name: Some("zzz".into()),
            selector: None,
        };
        let err = lint_manifest(text, "t", &none).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no Deployment or DaemonSet in manifest t matches name zzz (found: Deployment a, DaemonSet b)"
        );
    }

    #[test]
    fn malformed_yaml_is_a_clear_error() {
        let err = parse_workloads("kind: Deployment\n  bad: [indent\n", "broken.yaml").unwrap_err();
        assert!(matches!(err, ManifestError::Yaml { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("cannot parse manifest broken.yaml as YAML: "),
            "{err}"
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let text = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: ccm}
spec:
  selector: {matchLabels: {app: a}}
  template:
    spec:
      tolerations:
        - key: node.cloudprovider.kubernetes.io/uninitialized
          value: true
      containers: [{name: c, image: i}]
"#;
        let err = parse_workloads(text, "t.yaml").unwrap_err();
        let ManifestError::Invalid {
            path, kind, name, ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(kind, "Deployment");
        assert_eq!(name, "ccm");
        assert_eq!(path, "spec.template.spec.tolerations[0].value");
        assert!(
            err.to_string()
                .contains("Deployment ccm in manifest t.yaml is invalid at"),
            "{err}"
        );
    }

    #[test]
    fn other_bad_documents() {
        let err = parse_workloads("- a\n- b\n", "t").unwrap_err();
        assert!(
            matches!(err, ManifestError::NotAnObject { document: 1, .. }),
            "{err:?}"
        );
        let err = parse_workloads("metadata: {name: x}\n", "t").unwrap_err();
        assert!(matches!(err, ManifestError::NotAnObject { .. }), "{err:?}");
        let err = parse_workloads(
            "apiVersion: extensions/v1beta1\nkind: DaemonSet\nmetadata: {name: old}\n",
            "t",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "DaemonSet old in manifest t has apiVersion \"extensions/v1beta1\": only apps/v1 is supported \
             (older versions were removed in Kubernetes 1.16)"
        );
        let err = parse_workloads(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
            "t",
        )
        .unwrap_err();
        assert!(matches!(err, ManifestError::Workload { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("Deployment x has no spec.template.spec"),
            "{err}"
        );
        let err = parse_workloads(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
            "t",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "manifest t holds no Deployment or DaemonSet (found: ConfigMap); lint the file that deploys the CCM"
        );
        let err = parse_workloads("", "empty.yaml").unwrap_err();
        assert!(err.to_string().contains("(found: nothing)"), "{err}");
        let err = parse_workloads("---\n---\n", "empty.yaml").unwrap_err();
        assert!(matches!(err, ManifestError::NoWorkloads { .. }), "{err:?}");
    }

    #[test]
    fn files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ccm.yaml");
        std::fs::write(&path, GOOD).unwrap();
        let report = lint_manifest_file(&path, &WorkloadFilter::default()).unwrap();
        assert_eq!(report.exit_code(), 0);
        let missing = dir.path().join("missing.yaml");
        let err = lint_manifest_file(&missing, &WorkloadFilter::default()).unwrap_err();
        assert!(matches!(err, ManifestError::Read { .. }));
        assert!(
            err.to_string().starts_with("cannot read manifest "),
            "{err}"
        );
        let binary = dir.path().join("binary.yaml");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
        assert!(matches!(
            lint_manifest_file(&binary, &WorkloadFilter::default()),
            Err(ManifestError::Read { .. })
        ));
    }
}
