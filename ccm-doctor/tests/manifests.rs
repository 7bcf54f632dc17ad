//! Lint mode on the repository's generated deployment manifests (`deploy/`, written by `cargo xtask manifests`
//! from ccm-app's deploy module): they follow every recommendation, so the doctor finds nothing.

use std::path::PathBuf;

use ccm_doctor::manifest::{WorkloadFilter, lint_manifest, lint_manifest_file, parse_workloads};
use ccm_doctor::{CheckId, WorkloadKind};

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
