//! Tests of the control plane's pieces (arguments, probes, watchdog, lifecycle helpers).

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use super::lifecycle::prepare_dir;
use super::probes::etcd_health_ok;
use super::*;

#[test]
fn apiserver_flags_cover_the_required_settings() {
    let args = apiserver_args(Path::new("/cp"), "http://127.0.0.1:1", 2);
    for expected in [
        "--etcd-servers=http://127.0.0.1:1",
        "--secure-port=2",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        "--authorization-mode=RBAC",
        "--endpoint-reconciler-type=none",
        "--service-cluster-ip-range=10.96.0.0/12",
        "--tls-cert-file=/cp/pki/apiserver.crt",
        "--tls-private-key-file=/cp/pki/apiserver.key",
        "--client-ca-file=/cp/pki/ca.crt",
        "--service-account-key-file=/cp/pki/sa.pub",
        "--service-account-signing-key-file=/cp/pki/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--requestheader-allowed-names=front-proxy-client",
    ] {
        assert!(args.iter().any(|a| a == expected), "missing {expected}");
    }
}

#[test]
fn etcd_flags_use_the_given_ports() {
    let args = etcd_args(Path::new("/cp/etcd-data"), 5, 6);
    assert!(args.contains(&"--listen-client-url=http://127.0.0.1:5".to_owned()));
    assert!(args.contains(&"--listen-peer-url=http://127.0.0.1:6".to_owned()));
    assert!(args.contains(&"--data-dir=/cp/etcd-data".to_owned()));
}

#[test]
fn etcd_health_parsing() {
    assert!(etcd_health_ok(
        "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"health\":\"true\",\"reason\":\"\"}"
    ));
    assert!(!etcd_health_ok(
        "HTTP/1.0 503 Service Unavailable\r\n\r\n{\"health\":\"false\"}"
    ));
    assert!(!etcd_health_ok(
        "HTTP/1.0 200 OK\r\n\r\n{\"health\":\"false\"}"
    ));
    assert!(!etcd_health_ok(""));
}

#[test]
fn port_conflicts_are_recognised() {
    let exited = |tail: &str| ControlPlaneError::NotReady {
        server: "etcd",
        timeout: Duration::from_secs(1),
        log: PathBuf::from("x"),
        tail: tail.to_owned(),
    };
    assert!(is_port_conflict(&exited(
        "listen tcp 127.0.0.1:1: bind: address already in use"
    )));
    assert!(!is_port_conflict(&exited("some other failure")));
    assert!(!is_port_conflict(&ControlPlaneError::NotRunning(
        PathBuf::from("x")
    )));
}

#[test]
fn log_tail_keeps_the_last_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.log");
    let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, text).expect("write");
    let tail = log_tail(&path);
    assert!(tail.starts_with("line 11\n"));
    assert!(tail.ends_with("line 40"));
    assert!(log_tail(&dir.path().join("missing")).contains("cannot read"));
}

#[test]
fn prepare_dir_refuses_non_empty_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fresh = dir.path().join("fresh");
    prepare_dir(&fresh).expect("fresh dir");
    assert!(fresh.join("pki").is_dir());
    assert!(matches!(
        prepare_dir(&fresh),
        Err(ControlPlaneError::DirectoryNotEmpty(_))
    ));
}

#[test]
fn missing_binaries_are_reported_with_the_build_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Binaries::in_dir(dir.path()).verify().expect_err("missing");
    let message = err.to_string();
    assert!(message.contains(BUILD_COMMAND), "{message}");
    assert!(message.contains("kube-apiserver"), "{message}");
}

#[test]
fn stop_detached_without_env_file_is_not_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(matches!(
        stop_detached(dir.path()),
        Err(ControlPlaneError::NotRunning(_))
    ));
}

#[test]
fn process_ownership_check_reads_the_command_line() {
    let me = std::process::id();
    let exe_dir = std::env::current_exe().expect("exe");
    let exe_dir = exe_dir.parent().expect("parent");
    // The test binary's own command line contains its path, which lies inside exe_dir.
    assert!(process_belongs_to(me, exe_dir));
    assert!(!process_belongs_to(me, Path::new("/definitely/not/here")));
    assert!(!process_belongs_to(u32::MAX, exe_dir));
}

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("spawn sleep")
}

/// A watchdog for `dir` that has acknowledged tracking `victim`.
fn watchdog_tracking(dir: &Path, victim: &Child) -> (Child, ChildStdin) {
    use std::io::BufRead as _;
    let (mut watchdog, mut stdin) = spawn_watchdog(dir, Stdio::piped()).expect("watchdog");
    writeln!(stdin, "pid {}", victim.id()).expect("notify");
    stdin.flush().expect("flush");
    let mut stdout = std::io::BufReader::new(watchdog.stdout.take().expect("stdout"));
    let mut ack = String::new();
    stdout.read_line(&mut ack).expect("ack");
    assert_eq!(ack.trim(), format!("ok pid {}", victim.id()));
    // Keep the pipe open: the watchdog acknowledges later lines too.
    watchdog.stdout = Some(stdout.into_inner());
    (watchdog, stdin)
}

fn scratch_dir(base: &tempfile::TempDir) -> PathBuf {
    let dir = base.path().join("cp");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("file"), "x").expect("write");
    dir
}

/// The watchdog kills the processes it was told about and removes the directory once its
/// input closes (what happens when its owner exits or is killed).
#[test]
fn watchdog_cleans_up_when_its_owner_goes_away() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = scratch_dir(&base);
    let mut victim = sleeper();
    let (mut watchdog, stdin) = watchdog_tracking(&dir, &victim);
    drop(stdin);
    assert!(watchdog.wait().expect("watchdog exits").success());
    // Killed by SIGKILL, so no success status.
    assert!(!victim.wait().expect("victim").success());
    assert!(!dir.exists());
}

#[test]
fn watchdog_told_done_leaves_everything_alone() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = scratch_dir(&base);
    let mut victim = sleeper();
    let (mut watchdog, mut stdin) = watchdog_tracking(&dir, &victim);
    writeln!(stdin, "done").expect("done");
    drop(stdin);
    assert!(watchdog.wait().expect("watchdog exits").success());
    assert!(
        victim.try_wait().expect("try_wait").is_none(),
        "victim still runs"
    );
    assert!(dir.exists());
    victim.kill().expect("kill");
    victim.wait().expect("reap");
}

#[test]
fn watchdog_forgets_reaped_processes() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = scratch_dir(&base);
    let mut victim = sleeper();
    let (mut watchdog, mut stdin) = watchdog_tracking(&dir, &victim);
    writeln!(stdin, "forget {}", victim.id()).expect("forget");
    drop(stdin);
    assert!(watchdog.wait().expect("watchdog exits").success());
    assert!(
        victim.try_wait().expect("try_wait").is_none(),
        "victim still runs"
    );
    assert!(!dir.exists());
    victim.kill().expect("kill");
    victim.wait().expect("reap");
}

#[test]
fn watchdog_cleans_up_on_sigterm() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = scratch_dir(&base);
    let mut victim = sleeper();
    let (mut watchdog, _stdin) = watchdog_tracking(&dir, &victim);
    let status = Command::new("sh")
        .args(["-c", "kill -TERM \"$1\"", "sh", &watchdog.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert!(watchdog.wait().expect("watchdog").success());
    assert!(!victim.wait().expect("victim").success());
    assert!(!dir.exists());
}

#[test]
fn watchdog_ignores_interrupts() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = scratch_dir(&base);
    let mut victim = sleeper();
    let (mut watchdog, mut stdin) = watchdog_tracking(&dir, &victim);
    let status = Command::new("sh")
        .args(["-c", "kill -INT \"$1\"", "sh", &watchdog.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    // Still alive and listening: it acknowledges a new line.
    writeln!(stdin, "done").expect("done");
    drop(stdin);
    assert!(watchdog.wait().expect("watchdog").success());
    assert!(victim.try_wait().expect("try_wait").is_none());
    victim.kill().expect("kill");
    victim.wait().expect("reap");
}
