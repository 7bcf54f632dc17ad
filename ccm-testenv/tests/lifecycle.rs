//! Starting and stopping control planes directly through `ccm_testenv::controlplane` (what
//! `cargo xtask controlplane start|stop` and `cargo xtask test` do).

use std::path::Path;
use std::time::Duration;

use ccm_testenv::controlplane::{
    self, Binaries, ControlPlane, ControlPlaneError, LaunchOptions, Supervision,
};
use ccm_testenv::envfile::{EnvFile, Pids};
use ccm_testenv::{TestEnv, wait_for};

/// Whether a process is running (present and not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

async fn assert_gone(pids: Pids, dir: &Path) {
    wait_for("the servers to exit", Duration::from_secs(30), || async {
        (!running(pids.etcd) && !running(pids.kube_apiserver)).then_some(())
    })
    .await
    .expect("servers stopped");
    assert!(!dir.exists(), "{} was removed", dir.display());
}

fn options(dir: &Path, supervision: Supervision) -> LaunchOptions {
    LaunchOptions::new(
        Binaries::find().expect("binaries (run `cargo xtask controlplane build`)"),
        dir,
        supervision,
    )
}

async fn assert_serves(env: &EnvFile) {
    let test_env = TestEnv::attach(&env.dir.join(ccm_testenv::envfile::FILE_NAME))
        .expect("attach to the env file");
    let version = test_env
        .client()
        .apiserver_version()
        .await
        .expect("version");
    assert_eq!(version.git_version, "v1.36.2");
}

#[tokio::test]
async fn launch_then_stop_removes_processes_and_directory() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("cp");
    let control_plane = ControlPlane::launch(options(&dir, Supervision::Watchdog))
        .await
        .expect("launch");
    let env = control_plane.env().clone();
    assert!(running(env.pids.etcd) && running(env.pids.kube_apiserver));
    assert!(env.server.starts_with("https://127.0.0.1:"));
    assert!(env.kubeconfig.is_file());
    assert_eq!(control_plane.env_file_path(), dir.join("env.json"));
    assert_eq!(EnvFile::read(&dir.join("env.json")).expect("env file"), env);
    assert_serves(&env).await;

    control_plane.stop().expect("stop");
    assert_gone(env.pids, &dir).await;
}

#[tokio::test]
async fn dropping_a_control_plane_stops_it() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("cp");
    let control_plane = ControlPlane::launch(options(&dir, Supervision::Watchdog))
        .await
        .expect("launch");
    let pids = control_plane.env().pids;
    drop(control_plane);
    assert_gone(pids, &dir).await;
}

/// `detach` + `stop_detached`, as `cargo xtask controlplane start|stop` use them. The test keeps
/// a watchdog (unlike `start`, which uses `Supervision::Detached`), so an interrupted test run
/// cannot leave servers behind.
#[tokio::test]
async fn detached_control_planes_outlive_their_handle_until_stopped() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("cp");
    let control_plane = ControlPlane::launch(options(&dir, Supervision::Watchdog))
        .await
        .expect("launch");
    let env = control_plane.detach();
    assert!(running(env.pids.etcd) && running(env.pids.kube_apiserver));
    assert_serves(&env).await;

    controlplane::stop_detached(&dir).expect("stop");
    assert_gone(env.pids, &dir).await;
    assert!(matches!(
        controlplane::stop_detached(&dir),
        Err(ControlPlaneError::NotRunning(_))
    ));
}

#[tokio::test]
async fn a_non_empty_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("precious"), "data").expect("write");
    let err = ControlPlane::launch(options(dir.path(), Supervision::Watchdog))
        .await
        .expect_err("refused");
    assert!(
        matches!(err, ControlPlaneError::DirectoryNotEmpty(_)),
        "{err}"
    );
    assert!(dir.path().join("precious").exists(), "nothing was removed");
}
