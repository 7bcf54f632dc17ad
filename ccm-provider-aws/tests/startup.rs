//! `aws-ccm` stops at start with a clear message and a non-zero exit, not a crash loop of panics, when its AWS
//! configuration is missing or bad, the endpoint does not answer, or AWS refuses the credentials. It runs against
//! the real kube-apiserver, so only the AWS side can fail.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use ccm_testenv::TestEnv;
use ccm_testenv::emulator::{Emulator, REGION};

/// Run `aws-ccm` with the test control plane's kubeconfig, `args` and `env` (and no AWS variables of the
/// machine); its exit code and standard error.
fn run(kubeconfig: &std::path::Path, args: &[&str], env: &[(&str, String)]) -> (i32, String) {
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_aws-ccm"));
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args([
            "--leader-elect=false",
            "--secure-port=0",
            "--cluster-name=startup",
        ])
        .args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("AWS_") {
            command.env_remove(key);
        }
    }
    command
        .env("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/aws-credentials",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().expect("run aws-ccm");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "aws-ccm took {:?} to give up:\n{stderr}",
        started.elapsed()
    );
    (out.status.code().unwrap_or(-1), stderr)
}

fn fails_with(result: (i32, String), wanted: &[&str]) {
    let (code, stderr) = result;
    assert_ne!(code, 0, "aws-ccm must fail; stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "aws-ccm panicked:\n{stderr}");
    for text in wanted {
        assert!(stderr.contains(text), "expected {text:?} in:\n{stderr}");
    }
}

fn emulator_env(endpoint: String) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", REGION.to_owned()),
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
    ]
}

#[tokio::test]
async fn a_missing_region_is_named() {
    let env = TestEnv::shared().await;
    let mut vars = emulator_env(support::moto().endpoint_url());
    vars.retain(|(k, _)| *k != "AWS_REGION");
    fails_with(
        run(env.kubeconfig_path(), &[], &vars),
        &["no AWS region is configured", "AWS_REGION"],
    );
}

#[tokio::test]
async fn an_empty_cluster_id_is_named() {
    let env = TestEnv::shared().await;
    let vars = emulator_env(support::moto().endpoint_url());
    fails_with(
        run(env.kubeconfig_path(), &["--aws-cluster-id="], &vars),
        &["cluster ID is empty", "--aws-cluster-id"],
    );
}

#[tokio::test]
async fn a_bad_flag_value_is_named() {
    let env = TestEnv::shared().await;
    let vars = emulator_env(support::moto().endpoint_url());
    fails_with(
        run(
            env.kubeconfig_path(),
            &["--aws-bulk-lookups=sometimes"],
            &vars,
        ),
        &["--aws-bulk-lookups"],
    );
}

#[tokio::test]
async fn a_missing_cloud_config_file_is_named() {
    let env = TestEnv::shared().await;
    let vars = emulator_env(support::moto().endpoint_url());
    fails_with(
        run(
            env.kubeconfig_path(),
            &["--cloud-config=/nonexistent/aws.conf"],
            &vars,
        ),
        &["/nonexistent/aws.conf"],
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_is_named() {
    let env = TestEnv::shared().await;
    let port = ccm_testenv::ports::pick_free_ports(1).expect("port")[0];
    let vars = emulator_env(format!("http://127.0.0.1:{port}"));
    fails_with(
        run(env.kubeconfig_path(), &[], &vars),
        &[
            "cannot use the AWS EC2 API",
            "no answer from AWS",
            "AWS_ENDPOINT_URL",
        ],
    );
}

#[tokio::test]
async fn rejected_credentials_are_named_with_the_aws_code() {
    let env = TestEnv::shared().await;
    // An emulator that checks credentials as AWS does: unknown keys are refused.
    let strict = tokio::task::spawn_blocking(|| {
        Emulator::start_with_env(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")])
    })
    .await
    .expect("join")
    .expect("a credential-checking emulator starts");
    let vars = emulator_env(strict.endpoint_url());
    fails_with(
        run(env.kubeconfig_path(), &[], &vars),
        &[
            "cannot use the AWS EC2 API",
            "AuthFailure",
            "AWS_ACCESS_KEY_ID",
        ],
    );
}
