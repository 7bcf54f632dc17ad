//! The reference CCM binary rejects bad input with a clear message and a non-zero exit code before it starts
//! anything (it is pointed at a kubeconfig that does not exist, so it could not start anyway).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `target/<profile>/examples/reference-ccm`, next to this test binary's `deps` directory. `cargo xtask test`
/// builds it before running the tests (`cargo test --all-targets` compiles examples only as test harnesses).
fn reference_ccm() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps")
        .join("examples")
        .join("reference-ccm");
    assert!(
        binary.is_file(),
        "{} is missing; build it with `cargo build -p examples --example reference-ccm` (cargo xtask test does)",
        binary.display()
    );
    binary
}

fn run(args: &[&str]) -> (i32, String, Duration) {
    let started = Instant::now();
    let Output { status, stderr, .. } = Command::new(reference_ccm())
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run reference-ccm");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stderr).into_owned(),
        started.elapsed(),
    )
}

fn rejected(args: &[&str], message: &str) {
    let mut argv = args.to_vec();
    argv.push("--kubeconfig=/nonexistent/kubeconfig");
    let (code, stderr, took) = run(&argv);
    assert_ne!(code, 0, "{args:?} must fail; stderr:\n{stderr}");
    assert!(
        stderr.contains(message),
        "{args:?}: expected {message:?} in:\n{stderr}"
    );
    assert!(
        !stderr.contains("starting"),
        "{args:?} started something:\n{stderr}"
    );
    assert!(took < Duration::from_secs(10), "{args:?} took {took:?}");
}

#[test]
fn unknown_flags() {
    rejected(
        &["--cloud-provider=fake", "--no-such-flag"],
        "unexpected argument '--no-such-flag'",
    );
}

#[test]
fn invalid_durations() {
    rejected(
        &["--cloud-provider=fake", "--node-monitor-period=5minutes"],
        "invalid duration \"5minutes\"",
    );
    rejected(
        &["--cloud-provider=fake", "--leader-elect-lease-duration=15"],
        "missing unit",
    );
}

#[test]
fn unknown_controller_names() {
    rejected(
        &["--cloud-provider=fake", "--controllers=*,-route,firewall"],
        "\"firewall\" is not in the list of known controllers",
    );
}

#[test]
fn an_empty_cloud_provider() {
    rejected(&[], "--cloud-provider cannot be empty");
    rejected(&["--cloud-provider="], "--cloud-provider cannot be empty");
}

#[test]
fn unreadable_and_invalid_config_files() {
    rejected(
        &["--cloud-provider=fake", "--config=/nonexistent/ccm.yaml"],
        "cannot read config file /nonexistent/ccm.yaml",
    );
    let dir = std::env::temp_dir().join(format!("reference-ccm-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("ccm.yaml");
    std::fs::write(&path, "cloudProvider: fake\nnodeMonitorPeriod: soon\n").expect("write");
    let flag = format!("--config={}", path.display());
    rejected(
        &[&flag],
        &format!("invalid config file {}: nodeMonitorPeriod:", path.display()),
    );
    std::fs::write(&path, "cloudProvider: fake\nkubeApiQPS: 5\n").expect("write");
    rejected(&[&flag], "unknown key \"kubeApiQPS\"");
    // the vendor's section (`fake:`) is checked as strictly, and its errors name it
    std::fs::write(
        &path,
        "cloudProvider: fake\nfake:\n  instanceLables: {a: b}\n",
    )
    .expect("write");
    rejected(
        &[&flag],
        "unknown key \"instanceLables\" in section \"fake\"",
    );
    let (code, _, _) = run(&[&flag, "--kubeconfig=/nonexistent/kubeconfig"]);
    assert_eq!(
        code, 1,
        "a bad config file exits 1, like the runtime's own keys"
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn bad_vendor_flags_are_usage_errors() {
    let (code, stderr, _) = run(&["--cloud-provider=fake", "--fake-default-instance-type"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--fake-default-instance-type"), "{stderr}");
    rejected(
        &["--cloud-provider=fake", "--fake-no-such-flag=1"],
        "unexpected argument '--fake-no-such-flag'",
    );
}

#[test]
fn an_unreadable_cloud_config_fails_before_serving() {
    let (code, stderr, _) = run(&[
        "--cloud-provider=fake",
        "--cloud-config=/nonexistent/inventory.yaml",
        "--kubeconfig=/nonexistent/kubeconfig",
    ]);
    assert_ne!(code, 0, "{stderr}");
    // the kubeconfig is checked first; both are reported by name
    assert!(stderr.contains("/nonexistent/"), "{stderr}");
}

#[test]
fn help_exits_zero_and_lists_the_vendor_flags_under_their_heading() {
    let Output { status, stdout, .. } = Command::new(reference_ccm())
        .arg("--help")
        .output()
        .expect("run reference-ccm");
    assert_eq!(status.code(), Some(0));
    let help = String::from_utf8_lossy(&stdout);
    let heading = help
        .find("Fake cloud (vendor flags):")
        .unwrap_or_else(|| panic!("no vendor heading in:\n{help}"));
    assert!(
        help[heading..].contains("--fake-default-instance-type"),
        "{help}"
    );
    assert!(help.contains("FAKE_DEFAULT_INSTANCE_TYPE"), "{help}");
}
