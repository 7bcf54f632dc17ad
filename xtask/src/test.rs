//! `cargo xtask test`: run the workspace's tests against one shared local control plane.

use std::ffi::OsString;
use std::time::Duration;

use anyhow::bail;
use ccm_testenv::controlplane::Supervision;
use ccm_testenv::envfile;
use clap::Args;

use crate::controlplane::{self, BuildArgs};
use crate::gobuild;
use crate::paths;
use crate::process::{self, Interrupt, Interrupted};

/// The environment variable naming the helm binary for the chart tests (`examples/tests/chart.rs`).
pub const HELM_ENV_VAR: &str = "CCM_HELM";

/// The environment variable naming the Go reference CCM for the flag comparison (`examples/tests/go_flags.rs`).
pub const GO_CCM_ENV_VAR: &str = "CCM_GO_CCM";

/// What `cargo xtask test` (and CI's control-plane step) builds: the control plane, and the Go reference CCM,
/// whose `--help` the Go-flag test compares with the reference CCM's (seconds once kube-apiserver is built).
pub fn build_args() -> BuildArgs {
    BuildArgs {
        go_ccm: true,
        ..BuildArgs::default()
    }
}

/// Default for `--timeout-minutes`.
pub const DEFAULT_TIMEOUT_MINUTES: u64 = 45;

/// Arguments of `cargo xtask test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Skip the doctest run (`cargo test --doc`).
    #[arg(long)]
    pub no_doc: bool,
    /// Kill a `cargo test` run (with all its processes) that takes longer than this, so a
    /// hanging test cannot block CI forever. 0 disables the limit.
    #[arg(long, default_value_t = DEFAULT_TIMEOUT_MINUTES, value_name = "MINUTES")]
    pub timeout_minutes: u64,
    /// Arguments for `cargo test` (e.g. `-p ccm-core`, `-- --nocapture`). `--workspace` is
    /// added unless a package is selected; `--all-targets` unless targets are selected.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CARGO_TEST_ARGS"
    )]
    pub cargo_args: Vec<OsString>,
}

impl Default for TestArgs {
    fn default() -> Self {
        Self {
            no_doc: false,
            timeout_minutes: DEFAULT_TIMEOUT_MINUTES,
            cargo_args: Vec::new(),
        }
    }
}

/// Whether the arguments after `test` start (after xtask's own options) with `--`, i.e. all of
/// the user's arguments are for the test binaries.
pub fn starts_with_separator(after_test: &[OsString]) -> bool {
    let mut args = after_test.iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--") => return true,
            Some("--no-doc") => {}
            Some("--timeout-minutes") => {
                args.next();
            }
            Some(flag) if flag.starts_with("--timeout-minutes=") => {}
            _ => return false,
        }
    }
    false
}

/// Flags of `cargo test` that select targets; with any of them the doctest run is skipped.
const TARGET_FLAGS: &[&str] = &[
    "--lib",
    "--bin",
    "--bins",
    "--example",
    "--examples",
    "--test",
    "--tests",
    "--bench",
    "--benches",
    "--all-targets",
    "--doc",
];

/// The `cargo test` invocations (argument lists after `cargo`) for the given user arguments.
pub fn cargo_test_invocations(user: &[OsString], no_doc: bool) -> Vec<Vec<OsString>> {
    // Only arguments before a `--` are cargo's; the rest go to the test binaries.
    let cargo_part = user
        .iter()
        .take_while(|a| a.as_os_str() != "--")
        .filter_map(|a| a.to_str())
        .collect::<Vec<_>>();
    let selects_package = cargo_part.iter().any(|a| {
        *a == "-p" || *a == "--package" || a.starts_with("--package=") || a.starts_with("-p")
    }) || cargo_part.contains(&"--workspace");
    let selects_targets = cargo_part.iter().any(|a| {
        TARGET_FLAGS
            .iter()
            .any(|f| a == f || a.starts_with(&format!("{f}=")))
    });

    let mut scope: Vec<OsString> = if selects_package {
        Vec::new()
    } else {
        vec!["--workspace".into()]
    };
    // Run every test binary even when one fails, so one run reports all failures.
    if !cargo_part
        .iter()
        .any(|a| *a == "--no-fail-fast" || *a == "--fail-fast")
    {
        scope.push("--no-fail-fast".into());
    }
    let invocation = |extra: &str| {
        let mut args: Vec<OsString> = vec!["test".into()];
        args.extend(scope.iter().cloned());
        if !extra.is_empty() {
            args.push(extra.into());
        }
        args.extend(user.iter().cloned());
        args
    };
    if selects_targets {
        vec![invocation("")]
    } else if no_doc {
        vec![invocation("--all-targets")]
    } else {
        vec![invocation("--all-targets"), invocation("--doc")]
    }
}

/// Runs `cargo xtask test`: builds the binaries if needed, starts a control plane, runs the
/// tests with `CCM_TESTENV` pointing at it, and stops it again, also on failure and Ctrl-C.
///
/// # Errors
/// If the control plane cannot be started, or any test run fails.
pub async fn run(args: &TestArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    controlplane::build(&build_args(), interrupt).await?;
    run_tests(args, interrupt).await
}

/// Like [`run`] without the build step (for `ci`, which builds in its own step).
///
/// # Errors
/// As [`run`].
pub async fn run_tests(args: &TestArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let dir = tempfile_dir()?;
    // Watchdog supervision: even if xtask is killed, the servers and the directory go away.
    let control_plane = controlplane::launch(&dir, Supervision::Watchdog, interrupt).await?;
    let env_path = control_plane.env_file_path();
    let mut failures = Vec::new();
    // The examples' tests run the reference CCM binary; `cargo test` compiles examples only as test harnesses.
    let mut build = process::cargo();
    build.args(["build", "-p", "examples", "--example", "reference-ccm"]);
    if let Err(err) = process::run(build, interrupt, "").await {
        stop_quietly(control_plane);
        return Err(err);
    }
    for invocation in cargo_test_invocations(&args.cargo_args, args.no_doc) {
        let mut command = process::cargo();
        command
            .args(&invocation)
            .env(envfile::ENV_VAR, &env_path)
            .env(
                HELM_ENV_VAR,
                paths::tools_bin_dir().join(gobuild::HELM.name),
            )
            .env(
                GO_CCM_ENV_VAR,
                paths::controlplane_bin_dir().join(gobuild::GO_CCM.name),
            );
        let shown = process::display_command(&command);
        let timeout = match args.timeout_minutes {
            0 => None,
            minutes => Some(Duration::from_secs(minutes.saturating_mul(60))),
        };
        match process::run_group_with_timeout(command, interrupt, timeout).await {
            Ok(status) if status.success() => {}
            Ok(status) => failures.push(format!("`{shown}` failed with {status}")),
            Err(err) if err.is::<Interrupted>() => {
                stop_quietly(control_plane);
                return Err(err);
            }
            Err(err) => failures.push(format!("{err:#}")),
        }
    }
    stop_quietly(control_plane);
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

fn stop_quietly(control_plane: ccm_testenv::controlplane::ControlPlane) {
    match control_plane.stop() {
        Ok(()) => eprintln!("stopped the control plane"),
        Err(err) => eprintln!("warning: failed to clean up the control plane: {err}"),
    }
}

/// A fresh directory for the control plane of a test run (removed when it stops).
fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let base = crate::paths::target_dir().join("controlplane");
    std::fs::create_dir_all(&base)?;
    let dir = base.join(format!("test-run-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn strings(invocations: Vec<Vec<OsString>>) -> Vec<String> {
        invocations
            .into_iter()
            .map(|inv| {
                inv.iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn default_runs_all_targets_and_doctests_of_the_workspace() {
        assert_eq!(
            strings(cargo_test_invocations(&[], false)),
            [
                "test --workspace --no-fail-fast --all-targets",
                "test --workspace --no-fail-fast --doc"
            ]
        );
    }

    #[test]
    fn package_selection_replaces_workspace() {
        assert_eq!(
            strings(cargo_test_invocations(&args(&["-p", "ccm-core"]), false)),
            [
                "test --no-fail-fast --all-targets -p ccm-core",
                "test --no-fail-fast --doc -p ccm-core"
            ]
        );
        assert_eq!(
            strings(cargo_test_invocations(&args(&["--package=x"]), true)),
            ["test --no-fail-fast --all-targets --package=x"]
        );
    }

    #[test]
    fn target_selection_disables_the_doc_run() {
        assert_eq!(
            strings(cargo_test_invocations(&args(&["--test", "api"]), false)),
            ["test --workspace --no-fail-fast --test api"]
        );
    }

    #[test]
    fn leading_separators_are_detected() {
        assert!(starts_with_separator(&args(&["--", "--nocapture"])));
        assert!(starts_with_separator(&args(&["--no-doc", "--"])));
        assert!(starts_with_separator(&args(&[
            "--timeout-minutes",
            "3",
            "--"
        ])));
        assert!(starts_with_separator(&args(&["--timeout-minutes=3", "--"])));
        assert!(!starts_with_separator(&args(&["-p", "x", "--", "y"])));
        assert!(!starts_with_separator(&args(&[])));
    }

    #[test]
    fn an_explicit_fail_fast_choice_is_kept() {
        assert_eq!(
            strings(cargo_test_invocations(&args(&["--fail-fast"]), true)),
            ["test --workspace --all-targets --fail-fast"]
        );
    }

    #[test]
    fn test_binary_arguments_are_passed_through() {
        assert_eq!(
            strings(cargo_test_invocations(
                &args(&["--", "--nocapture", "--lib"]),
                false
            )),
            [
                "test --workspace --no-fail-fast --all-targets -- --nocapture --lib",
                "test --workspace --no-fail-fast --doc -- --nocapture --lib"
            ]
        );
    }
}
