//! The reference CCM binary rejects bad input with a clear message and a non-zero exit code before it starts
//! anything (it is pointed at a kubeconfig that does not exist, so it could not start anyway); a webhook
//! certificate that does not load stops it at start (against the real API server).

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
fn bad_webhook_and_serving_flags() {
    for (args, message) in [
        (
            &["--webhooks=*,-nope"][..],
            "invalid --webhooks: \"nope\" is not in the list of known webhooks (known webhooks: load-balancer-type)",
        ),
        (
            &["--webhook-secure-port=10258"],
            "invalid --webhook-secure-port: 10258 cannot be the same value as --secure-port",
        ),
        (
            &["--webhook-tls-cert-file=/etc/tls.crt"],
            "invalid --webhook-tls-cert-file: --webhook-tls-cert-file and --webhook-tls-private-key-file must be \
             given together",
        ),
        (
            &["--webhook-tls-min-version=VersionTLS11"],
            "invalid --webhook-tls-min-version: VersionTLS11 is not supported",
        ),
        (
            &["--webhook-tls-cipher-suites=TLS_NOPE"],
            "invalid --webhook-tls-cipher-suites: unknown cipher suite \"TLS_NOPE\"",
        ),
        (
            &["--webhook-tls-curve-preferences=29,25"],
            "invalid --webhook-tls-curve-preferences: 25 (P-521) is not implemented by rustls",
        ),
        (
            &["--tls-curve-preferences=X25519"],
            "invalid --tls-curve-preferences: \"X25519\" is not a number",
        ),
        (
            &["--webhook-tls-sni-cert-key=only.crt"],
            "invalid --webhook-tls-sni-cert-key: \"only.crt\": expected a certificate and a key file",
        ),
        (
            &["--tls-sni-cert-key=a.crt,a.key:foo.*.com"],
            "invalid --tls-sni-cert-key: \"a.crt,a.key:foo.*.com\": a wildcard name must be",
        ),
        (
            &["--http2-max-streams-per-connection=-1"],
            "--http2-max-streams-per-connection must not be negative, got -1",
        ),
        (
            &["--log-json-info-buffer-size=lots"],
            "invalid --log-json-info-buffer-size: \"lots\" is not a size",
        ),
        (
            &[
                "--enable-leader-migration",
                "--leader-migration-config=/nonexistent/lm.yaml",
            ],
            "invalid --leader-migration-config: cannot read /nonexistent/lm.yaml",
        ),
    ] {
        let mut argv = vec!["--cloud-provider=fake"];
        argv.extend_from_slice(args);
        rejected(&argv, message);
    }
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

/// A webhook certificate that does not load stops the binary at start with exit code 1 and the file's name (it
/// reaches a real API server first, so the failure is the certificate's).
#[tokio::test]
async fn a_bad_webhook_certificate_stops_the_binary_at_start() {
    let env = ccm_testenv::TestEnv::shared().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, "not a certificate").expect("write");
    std::fs::write(&key, "not a key").expect("write");
    let output = std::process::Command::new(reference_ccm())
        .args([
            "--cloud-provider=fake".to_owned(),
            format!("--kubeconfig={}", env.kubeconfig_path().display()),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
            "--controllers=".to_owned(),
            "--webhooks=*".to_owned(),
            "--webhook-bind-address=127.0.0.1".to_owned(),
            "--webhook-secure-port=10299".to_owned(),
            format!("--webhook-tls-cert-file={}", cert.display()),
            format!("--webhook-tls-private-key-file={}", key.display()),
        ])
        .output()
        .expect("run reference-ccm");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "webhook port: cannot load certificate from {}: no PEM certificate found",
            cert.display()
        )),
        "{stderr}"
    );
}
