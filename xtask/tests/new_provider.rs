//! `cargo xtask new-provider` end to end: the generated crate builds against this workspace and passes the
//! conformance suite in strict mode out of the box, and its binary runs the reference runtime with the provider's
//! own flag. It shares the workspace's target directory (so the SDK and its dependencies are mostly compiled
//! already) and builds offline from the copied Cargo.lock.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's target directory (`CARGO_TARGET_TMPDIR` is its `tmp` subdirectory).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is inside the target directory")
        .to_owned()
}

fn output(command: &mut Command) -> (bool, String) {
    let out = command.output().expect("the command starts");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_generated_provider_passes_strict_conformance_out_of_the_box() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temporary directory");
    let dir = tmp.path().join("demo-cloud");
    let (ok, text) = output(
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["new-provider", "demo-cloud", "--dir"])
            .arg(&dir),
    );
    assert!(ok, "new-provider failed:\n{text}");
    assert!(text.contains("tests/conformance.rs"), "{text}");

    // A second run into the same directory writes nothing.
    let (ok, text) = output(
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["new-provider", "demo-cloud", "--dir"])
            .arg(&dir),
    );
    assert!(!ok && text.contains("is not empty"), "{text}");

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let (ok, text) = output(
        Command::new(&cargo)
            .args(["fmt", "--check"])
            .current_dir(&dir),
    );
    assert!(ok, "the generated crate is not formatted:\n{text}");
    let (ok, text) = output(
        Command::new(&cargo)
            .args(["test", "--offline", "--quiet"])
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", target_dir())
            .env("CCM_CONFORMANCE_STRICT", "1")
            // The workspace builds its dependencies this way too: their artifacts are reused.
            .args([
                "--config",
                "profile.dev.package.serde-saphyr.opt-level=3",
                "--config",
                "profile.dev.package.granit-parser.opt-level=3",
            ]),
    );
    assert!(ok, "cargo test of the generated provider failed:\n{text}");
    assert!(
        text.contains("test load_balancer_update_replaces_hosts ... ok")
            || text.contains("test result: ok"),
        "{text}"
    );
    assert!(!text.contains("SKIPPED"), "{text}");

    let (ok, help) =
        output(Command::new(target_dir().join("debug").join("demo-cloud")).arg("--help"));
    assert!(ok, "{help}");
    assert!(help.contains("--demo-cloud-region"), "{help}");
    assert!(help.contains("DEMO_CLOUD_REGION"), "{help}");
    assert!(help.contains("--cloud-provider"), "{help}");
}
