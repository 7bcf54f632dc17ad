//! Audit logging of the test control plane: the policy kube-apiserver is started with when
//! [`LaunchOptions::audit`](crate::controlplane::LaunchOptions::audit) is set, and a reader for the
//! JSON-lines log it writes.
//!
//! The policy records every successful or failed **mutating** request (`create`, `update`,
//! `patch`, `delete`, `deletecollection`) at `Metadata` level (who, what, when, the answer's
//! code), and writes to `coordination.k8s.io` Leases at `Request` level so that the body, with
//! `spec.holderIdentity`, is in the log. Reads are not logged. Only the `ResponseComplete` (or
//! `Panic`) stage is kept: one line per request.
//!
//! ```no_run
//! let events = ccm_testenv::audit::read_log(std::path::Path::new("logs/audit.log"))?;
//! for event in events.iter().filter(|e| e.succeeded()) {
//!     println!("{} {} {:?}", event.user.username, event.verb, event.object_ref);
//! }
//! # Ok::<(), ccm_testenv::audit::AuditError>(())
//! ```

use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde::Deserialize;

/// File name of the audit policy in the control plane's directory.
pub const POLICY_FILE: &str = "audit-policy.yaml";

/// File name of the audit log in the control plane's `logs` directory.
pub const LOG_FILE: &str = "audit.log";

/// The audit policy (see the module documentation).
pub const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: Request
    verbs: ["create", "update", "patch", "delete"]
    resources:
      - group: coordination.k8s.io
        resources: ["leases"]
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
"#;

/// Failures reading an audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file cannot be read.
    #[error(
        "cannot read the audit log {path}: {source}; was the control plane started with audit logging?"
    )]
    Read {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not an audit event.
    #[error("line {line} of the audit log {path} is not an audit event: {source}")]
    Parse {
        /// The log file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        #[source]
        source: serde_json::Error,
    },
}

/// The kube-apiserver flags that turn audit logging on, with the policy at `policy` and the log at
/// `log` (JSON lines, not rotated before 1 GiB).
pub fn apiserver_args(policy: &Path, log: &Path) -> Vec<String> {
    vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".into(),
        "--audit-log-mode=blocking".into(),
        "--audit-log-maxsize=1024".into(),
    ]
}

/// One audit event (the fields the checks need; others are ignored).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Unique id of the request.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// `ResponseComplete` or `Panic` with the shipped policy.
    pub stage: String,
    /// The Kubernetes verb: `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// The authenticated user.
    pub user: UserInfo,
    /// The client's User-Agent header.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The object the request is about (absent for non-resource requests).
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    /// The answer (absent for a panic).
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    /// When the API server received the request.
    pub request_received_timestamp: MicroTime,
    /// When the stage was reached (the answer was complete).
    pub stage_timestamp: MicroTime,
    /// The request body (only at `Request` level: Lease writes).
    #[serde(default)]
    pub request_object: Option<serde_json::Value>,
}

/// Who made a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo {
    /// The user name (the client certificate's common name).
    #[serde(default)]
    pub username: String,
    /// The groups.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// The object of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// The resource (plural), e.g. `nodes`.
    #[serde(default)]
    pub resource: String,
    /// The namespace (empty for cluster-scoped objects).
    #[serde(default)]
    pub namespace: String,
    /// The name (empty for a create whose name the server generates).
    #[serde(default)]
    pub name: String,
    /// The API group (empty for the core group).
    #[serde(default)]
    pub api_group: String,
    /// The subresource, e.g. `status`.
    #[serde(default)]
    pub subresource: String,
}

/// The status of an answer.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponseStatus {
    /// The HTTP status code.
    #[serde(default)]
    pub code: Option<u16>,
}

impl AuditEvent {
    /// The HTTP status code of the answer, if any.
    pub fn code(&self) -> Option<u16> {
        self.response_status.as_ref().and_then(|s| s.code)
    }

    /// Whether the request succeeded (a 2xx answer).
    pub fn succeeded(&self) -> bool {
        self.code().is_some_and(|c| (200..300).contains(&c))
    }

    /// When the request was received, in microseconds since the Unix epoch.
    pub fn received_micros(&self) -> i64 {
        self.request_received_timestamp.0.as_microsecond()
    }

    /// When the answer was complete, in microseconds since the Unix epoch.
    pub fn completed_micros(&self) -> i64 {
        self.stage_timestamp.0.as_microsecond()
    }

    /// A string field of the request body by JSON pointer, e.g. `/spec/holderIdentity`.
    pub fn request_str(&self, pointer: &str) -> Option<&str> {
        self.request_object.as_ref()?.pointer(pointer)?.as_str()
    }

    /// An integer field of the request body by JSON pointer, e.g. `/spec/leaseDurationSeconds`.
    pub fn request_i64(&self, pointer: &str) -> Option<i64> {
        self.request_object.as_ref()?.pointer(pointer)?.as_i64()
    }
}

/// Parses audit log text (one JSON event per line; blank lines are skipped). `path` names the
/// file in errors.
///
/// A last line without its newline is ignored if it does not parse: the API server may be
/// writing it right now.
///
/// # Errors
/// [`AuditError::Parse`] for a complete line that is not an audit event.
pub fn parse_log(text: &str, path: &Path) -> Result<Vec<AuditEvent>, AuditError> {
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut events = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<AuditEvent>(line) {
            Ok(event) => events.push(event),
            Err(_) if !complete && index + 1 == lines.len() => {}
            Err(source) => {
                return Err(AuditError::Parse {
                    path: path.to_owned(),
                    line: index + 1,
                    source,
                });
            }
        }
    }
    Ok(events)
}

/// Reads and parses an audit log file (see [`parse_log`]).
///
/// # Errors
/// [`AuditError::Read`] if the file cannot be read, [`AuditError::Parse`] for a bad line.
pub fn read_log(path: &Path) -> Result<Vec<AuditEvent>, AuditError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuditError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_log(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE_UPDATE: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager","verb":"update","user":{"username":"replica-1","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"reference-ccm/v0.1.0","objectRef":{"resource":"leases","namespace":"kube-system","name":"cloud-controller-manager","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Lease","spec":{"holderIdentity":"host_1234","leaseDurationSeconds":4}},"requestReceivedTimestamp":"2026-11-23T14:00:00.123456Z","stageTimestamp":"2026-11-23T14:00:00.125000Z","annotations":{"authorization.k8s.io/decision":"allow"}}"#;

    const NODE_PATCH: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/api/v1/nodes/n1/status","verb":"patch","user":{"username":"replica-2"},"objectRef":{"resource":"nodes","name":"n1","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"status":"Failure","code":409},"requestReceivedTimestamp":"2026-11-23T14:00:01.000000Z","stageTimestamp":"2026-11-23T14:00:01.010000Z"}"#;

    #[test]
    fn policy_and_flags_name_the_files() {
        let args = apiserver_args(Path::new("/cp/audit-policy.yaml"), Path::new("/cp/a.log"));
        assert!(args.contains(&"--audit-policy-file=/cp/audit-policy.yaml".to_owned()));
        assert!(args.contains(&"--audit-log-path=/cp/a.log".to_owned()));
        assert!(args.contains(&"--audit-log-format=json".to_owned()));
        assert!(POLICY.contains("level: Request") && POLICY.contains("leases"));
        assert!(POLICY.contains("RequestReceived"));
    }

    #[test]
    fn events_are_parsed_with_their_fields() {
        let text = format!("{LEASE_UPDATE}\n\n{NODE_PATCH}\n");
        let events = parse_log(&text, Path::new("audit.log")).expect("parses");
        assert_eq!(events.len(), 2);
        let lease = &events[0];
        assert_eq!(lease.audit_id, "a1");
        assert_eq!(lease.verb, "update");
        assert_eq!(lease.user.username, "replica-1");
        assert_eq!(lease.user.groups[0], "system:masters");
        assert_eq!(lease.user_agent.as_deref(), Some("reference-ccm/v0.1.0"));
        let object = lease.object_ref.as_ref().expect("object");
        assert_eq!(
            (object.resource.as_str(), object.namespace.as_str()),
            ("leases", "kube-system")
        );
        assert_eq!(object.api_group, "coordination.k8s.io");
        assert!(lease.succeeded());
        assert_eq!(lease.request_str("/spec/holderIdentity"), Some("host_1234"));
        assert_eq!(lease.request_i64("/spec/leaseDurationSeconds"), Some(4));
        assert_eq!(
            lease.completed_micros() - lease.received_micros(),
            125_000 - 123_456
        );

        let patch = &events[1];
        assert_eq!(patch.code(), Some(409));
        assert!(!patch.succeeded());
        assert_eq!(
            patch.object_ref.as_ref().expect("ref").subresource,
            "status"
        );
        assert_eq!(patch.request_str("/spec/holderIdentity"), None);
        assert_eq!(patch.received_micros() - lease.received_micros(), 876_544);
    }

    #[test]
    fn a_partly_written_last_line_is_skipped_but_a_bad_line_is_an_error() {
        let partial = format!("{LEASE_UPDATE}\n{}", &NODE_PATCH[..40]);
        let events = parse_log(&partial, Path::new("audit.log")).expect("parses");
        assert_eq!(events.len(), 1);

        let bad = format!("{LEASE_UPDATE}\nnot json\n{NODE_PATCH}\n");
        let err = parse_log(&bad, Path::new("audit.log")).expect_err("bad line");
        assert!(
            err.to_string()
                .contains("line 2 of the audit log audit.log"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_log_says_what_to_check() {
        let err = read_log(Path::new("/definitely/not/here.log")).expect_err("missing");
        assert!(err.to_string().contains("audit logging"), "{err}");
    }
}
