//! Lint mode on the repository's generated deployment manifests (`deploy/`, written by `cargo xtask manifests`
//! from ccm-app's deploy module): they follow every recommendation, so the doctor finds nothing. And on three
//! real vendors' CCM manifests (`tests/fixtures/vendors/`, the fields the doctor reads, each citing its source):
//! two select nodes by a label Kubernetes no longer sets, which leaves them Pending forever on a current cluster.

use std::path::PathBuf;

use ccm_doctor::manifest::{WorkloadFilter, lint_manifest, lint_manifest_file, parse_workloads};
use ccm_doctor::{CheckId, Severity, WorkloadKind};

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

#[test]
fn the_generated_deployment_lints_clean() {
    let path = deploy_dir().join("deployment.yaml");
    let report = lint_manifest_file(&path, &WorkloadFilter::default()).unwrap();
    assert_eq!(report.findings(), &[], "{}", report.render_text());
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn every_generated_file_parses_and_only_the_deployment_is_checked() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() > 1, "{files:?}");
    let all: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n");
    let workloads = parse_workloads(&all, "deploy/*.yaml").unwrap();
    let found: Vec<(WorkloadKind, &str)> = workloads
        .iter()
        .map(|w| (w.kind, w.name.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![(WorkloadKind::Deployment, "cloud-controller-manager")]
    );
    assert!(workloads[0].leader_election());
    let report = lint_manifest(&all, "deploy/*.yaml", &WorkloadFilter::default()).unwrap();
    assert_eq!(report.findings(), &[], "{}", report.render_text());
}

#[test]
fn breaking_the_generated_deployment_is_caught() {
    let text = std::fs::read_to_string(deploy_dir().join("deployment.yaml")).unwrap();
    // Drop the uninitialized toleration and turn leader election off with two replicas.
    let broken = text
        .replace(
            "key: node.cloudprovider.kubernetes.io/uninitialized",
            "key: example.com/other",
        )
        .replace("--leader-elect=true", "--leader-elect=false");
    assert_ne!(
        broken, text,
        "the generated manifest changed shape; update this test"
    );
    let report = lint_manifest(&broken, "broken.yaml", &WorkloadFilter::default()).unwrap();
    let checks: Vec<CheckId> = report.findings().iter().map(|f| f.check).collect();
    assert_eq!(
        checks,
        vec![
            CheckId::MissingUninitializedToleration,
            CheckId::LeaderElectionDisabled
        ],
        "{}",
        report.render_text()
    );
    assert_eq!(report.exit_code(), 2);
}

fn vendor(name: &str) -> ccm_doctor::Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/vendors")
        .join(name);
    lint_manifest_file(&path, &WorkloadFilter::default()).unwrap()
}

fn checks(report: &ccm_doctor::Report) -> Vec<(CheckId, Severity)> {
    report
        .findings()
        .iter()
        .map(|f| (f.check, f.severity))
        .collect()
}

#[test]
fn vendor_daemon_sets_on_the_master_label_never_schedule_on_a_current_cluster() {
    for (file, name) in [
        ("aws.yaml", "aws-cloud-controller-manager"),
        ("openstack.yaml", "openstack-cloud-controller-manager"),
    ] {
        let report = vendor(file);
        assert_eq!(
            checks(&report),
            vec![
                (CheckId::MissingNotReadyToleration, Severity::Error),
                (CheckId::MissingControlPlaneToleration, Severity::Error),
                (CheckId::RemovedNodeLabel, Severity::Error),
            ],
            "{}",
            report.render_text()
        );
        assert_eq!(report.exit_code(), 2);
        let removed = &report.findings()[2];
        assert!(
            removed.message.starts_with(&format!(
                "DaemonSet {name} can only run on nodes labelled node-role.kubernetes.io/master (nodeSelector)"
            )),
            "{}",
            removed.message
        );
        assert!(
            removed.message.contains("Kubernetes 1.24"),
            "{}",
            removed.message
        );
        assert!(
            removed
                .fix
                .contains("nodeSelector {node-role.kubernetes.io/control-plane: \"\"}"),
            "{}",
            removed.fix
        );
    }
}

#[test]
fn the_vendor_deployment_without_node_selection_has_no_label_finding() {
    let report = vendor("hetzner.yaml");
    assert_eq!(
        checks(&report),
        vec![
            (CheckId::MissingNotReadyToleration, Severity::Error),
            (CheckId::MissingUnreachableToleration, Severity::Warning),
            (CheckId::NoHostNetwork, Severity::Warning),
            (CheckId::NoControlPlanePlacement, Severity::Warning),
        ],
        "{}",
        report.render_text()
    );
}

#[test]
fn fixing_the_label_clears_the_finding() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vendors/aws.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let fixed = text.replace(
        "nodeSelector: {node-role.kubernetes.io/master: \"\"}",
        "nodeSelector: {node-role.kubernetes.io/control-plane: \"\"}",
    );
    assert_ne!(fixed, text);
    let report = lint_manifest(&fixed, "aws-fixed.yaml", &WorkloadFilter::default()).unwrap();
    assert!(
        !checks(&report)
            .iter()
            .any(|(c, _)| *c == CheckId::RemovedNodeLabel),
        "{}",
        report.render_text()
    );
}
