//! A [`Report`]: the findings of one run, rendered for people ([`Report::render_text`]) or tools
//! ([`Report::render_json`]), with the exit status ([`Report::exit_code`]).

use std::fmt::Write as _;
use std::process::ExitCode;

use serde::Serialize;

use crate::finding::{Finding, Severity};

/// Exit status when every finding is informational (or there are none).
pub const EXIT_HEALTHY: u8 = 0;
/// Exit status when the worst finding is a warning.
pub const EXIT_WARNINGS: u8 = 1;
/// Exit status when there is at least one error.
pub const EXIT_ERRORS: u8 = 2;
/// Exit status when the doctor itself could not run (unreachable cluster, unreadable manifest, bad flags).
pub const EXIT_DOCTOR_FAILED: u8 = 3;

/// How many findings of each severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Summary {
    /// Errors.
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// Informational findings.
    pub info: usize,
}

/// The findings of one run of the doctor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    target: String,
    findings: Vec<Finding>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonReport<'a> {
    target: &'a str,
    status: &'static str,
    exit_code: u8,
    summary: Summary,
    findings: &'a [Finding],
}

impl Report {
    /// A report on `target` (a cluster URL or a manifest path). Findings are ordered by severity, worst first;
    /// within a severity they keep the order of the checks.
    ///
    /// ```
    /// use ccm_doctor::{CheckId, Finding, Report, Severity};
    ///
    /// let report = Report::new(
    ///     "deploy/ccm.yaml",
    ///     vec![Finding::new(CheckId::NoHostNetwork, Severity::Warning, "no host network", "set hostNetwork: true")],
    /// );
    /// assert_eq!(report.exit_code(), 1);
    /// assert!(report.render_text().contains("no-host-network"));
    /// ```
    pub fn new(target: impl Into<String>, mut findings: Vec<Finding>) -> Self {
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        Report {
            target: target.into(),
            findings,
        }
    }

    /// What was examined.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The findings, worst first.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The worst severity, if there are findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// Counts per severity.
    pub fn summary(&self) -> Summary {
        let mut summary = Summary::default();
        for f in &self.findings {
            match f.severity {
                Severity::Error => summary.errors += 1,
                Severity::Warning => summary.warnings += 1,
                Severity::Info => summary.info += 1,
            }
        }
        summary
    }

    /// 0 (healthy, or only informational findings), 1 (warnings), 2 (errors).
    pub fn exit_code(&self) -> u8 {
        match self.worst() {
            Some(Severity::Error) => EXIT_ERRORS,
            Some(Severity::Warning) => EXIT_WARNINGS,
            Some(Severity::Info) | None => EXIT_HEALTHY,
        }
    }

    /// [`Report::exit_code`] as a process exit code.
    pub fn process_exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit_code())
    }

    fn status(&self) -> &'static str {
        match self.worst() {
            Some(Severity::Error) => "error",
            Some(Severity::Warning) => "warning",
            Some(Severity::Info) | None => "healthy",
        }
    }

    /// The report for people: one block per finding, then a summary line.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "ccm doctor: {}", self.target);
        if self.findings.is_empty() {
            let _ = writeln!(out, "\nno problems found");
        }
        for finding in &self.findings {
            let label = match finding.severity {
                Severity::Error => "ERROR",
                Severity::Warning => "WARNING",
                Severity::Info => "INFO",
            };
            let _ = writeln!(out, "\n{label} [{}] {}", finding.check, finding.message);
            for object in &finding.objects {
                let _ = writeln!(out, "    - {object}");
            }
            let _ = writeln!(out, "    fix: {}", finding.fix);
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "\n{} error(s), {} warning(s), {} info: {}",
            s.errors,
            s.warnings,
            s.info,
            self.status()
        );
        out
    }

    /// The report for tools: `{"target", "status", "exitCode", "summary": {"errors", "warnings", "info"},
    /// "findings": [{"check", "severity", "message", "objects": [{"kind", "namespace"?, "name", "detail"?}],
    /// "fix"}]}`.
    pub fn render_json(&self) -> String {
        let report = JsonReport {
            target: &self.target,
            status: self.status(),
            exit_code: self.exit_code(),
            summary: self.summary(),
            findings: &self.findings,
        };
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string_pretty(&report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{CheckId, ObjectRef};

    fn finding(check: CheckId, severity: Severity) -> Finding {
        Finding::new(check, severity, format!("{check} message"), "the fix")
            .with_objects([ObjectRef::new("Node", None, "n1").with_detail("waiting 5m0s")])
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Report::new("t", vec![]).exit_code(), 0);
        assert_eq!(
            Report::new(
                "t",
                vec![finding(
                    CheckId::NodeWaitingForInitialization,
                    Severity::Info
                )]
            )
            .exit_code(),
            0
        );
        assert_eq!(
            Report::new(
                "t",
                vec![
                    finding(CheckId::NoHostNetwork, Severity::Warning),
                    finding(CheckId::NodeWaitingForInitialization, Severity::Info)
                ]
            )
            .exit_code(),
            1
        );
        assert_eq!(
            Report::new(
                "t",
                vec![
                    finding(CheckId::NoHostNetwork, Severity::Warning),
                    finding(CheckId::LeaseMissing, Severity::Error)
                ]
            )
            .exit_code(),
            2
        );
    }

    #[test]
    fn findings_are_sorted_worst_first_and_stable() {
        let report = Report::new(
            "t",
            vec![
                finding(CheckId::NodeWaitingForInitialization, Severity::Info),
                finding(CheckId::NoHostNetwork, Severity::Warning),
                finding(CheckId::NodeUninitializedTooLong, Severity::Error),
                finding(CheckId::NoControlPlanePlacement, Severity::Warning),
                finding(CheckId::LeaseMissing, Severity::Error),
            ],
        );
        let order: Vec<CheckId> = report.findings().iter().map(|f| f.check).collect();
        assert_eq!(
            order,
            vec![
                CheckId::NodeUninitializedTooLong,
                CheckId::LeaseMissing,
                CheckId::NoHostNetwork,
                CheckId::NoControlPlanePlacement,
                CheckId::NodeWaitingForInitialization,
            ]
        );
        assert_eq!(
            report.summary(),
            Summary {
                errors: 2,
                warnings: 2,
                info: 1
            }
        );
    }

    #[test]
    fn text_rendering() {
        let healthy = Report::new("https://cluster", vec![]).render_text();
        assert_eq!(
            healthy,
            "ccm doctor: https://cluster\n\nno problems found\n\n0 error(s), 0 warning(s), 0 info: healthy\n"
        );
        let text = Report::new(
            "x.yaml",
            vec![finding(CheckId::NodeUninitializedTooLong, Severity::Error)],
        )
        .render_text();
        assert_eq!(
            text,
            "ccm doctor: x.yaml\n\nERROR [node-uninitialized-too-long] node-uninitialized-too-long message\n    \
             - Node n1 (waiting 5m0s)\n    fix: the fix\n\n1 error(s), 0 warning(s), 0 info: error\n"
        );
    }

    #[test]
    fn json_rendering() {
        let report = Report::new(
            "x.yaml",
            vec![
                finding(CheckId::NoHostNetwork, Severity::Warning),
                Finding::new(CheckId::LeaseMissing, Severity::Error, "m", "f").with_objects([
                    ObjectRef::new("Lease", Some("kube-system"), "cloud-controller-manager"),
                ]),
            ],
        );
        let value: serde_json::Value = serde_json::from_str(&report.render_json()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "target": "x.yaml",
                "status": "error",
                "exitCode": 2,
                "summary": {"errors": 1, "warnings": 1, "info": 0},
                "findings": [
                    {
                        "check": "lease-missing",
                        "severity": "error",
                        "message": "m",
                        "objects": [{"kind": "Lease", "namespace": "kube-system", "name": "cloud-controller-manager"}],
                        "fix": "f"
                    },
                    {
                        "check": "no-host-network",
                        "severity": "warning",
                        "message": "no-host-network message",
                        "objects": [{"kind": "Node", "name": "n1", "detail": "waiting 5m0s"}],
                        "fix": "the fix"
                    }
                ]
            })
        );
    }
}
