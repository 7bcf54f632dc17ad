//! A private control plane must not outlive the test process that started it, even when that
//! process is killed with SIGKILL (no destructor runs): the watchdog notices its pipe closing,
//! kills the servers and removes the directory.
//!
//! This binary has its own `main` (`harness = false`): run normally it is the test, and it runs
//! itself again as the child that starts the control plane.

use std::io::BufRead as _;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use ccm_testenv::envfile::{self, EnvFile};

/// Set in the child's environment.
const CHILD_VAR: &str = "CCM_TESTENV_EXIT_CLEANUP_CHILD";

fn main() -> ExitCode {
    if std::env::var_os(CHILD_VAR).is_some() {
        return child();
    }
    println!("\nrunning 1 test");
    match parent() {
        Ok(()) => {
            println!("test private_control_plane_dies_with_its_process ... ok\n");
            println!("test result: ok. 1 passed; 0 failed");
            ExitCode::SUCCESS
        }
        Err(message) => {
            println!("test private_control_plane_dies_with_its_process ... FAILED\n");
            println!("{message}\n");
            println!("test result: FAILED. 0 passed; 1 failed");
            ExitCode::FAILURE
        }
    }
}

/// Starts a private control plane, prints its env file path and waits to be killed.
fn child() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("child: cannot build a runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let env = match runtime.block_on(ccm_testenv::TestEnv::try_shared()) {
        Ok(env) => env,
        Err(err) => {
            eprintln!("child: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", env.env_file_path().display());
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

fn parent() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut child = Command::new(exe)
        .env(CHILD_VAR, "1")
        // Force a private control plane even under `cargo xtask test`.
        .env_remove(envfile::ENV_VAR)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning the child: {e}"))?;
    let stdout = child.stdout.take().ok_or("no child stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("reading the child's output: {e}"))?;
    if line.trim().is_empty() {
        let status = child.wait().map_err(|e| e.to_string())?;
        return Err(format!(
            "the child did not start a control plane ({status}); see its stderr above"
        ));
    }
    let env = EnvFile::read(std::path::Path::new(line.trim())).map_err(|e| e.to_string())?;
    if !running(env.pids.etcd) || !running(env.pids.kube_apiserver) {
        return Err(format!("servers not running after start: {:?}", env.pids));
    }

    // SIGKILL: no destructor, no exit handler runs in the child.
    child
        .kill()
        .map_err(|e| format!("killing the child: {e}"))?;
    child
        .wait()
        .map_err(|e| format!("reaping the child: {e}"))?;

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let alive: Vec<u32> = [env.pids.etcd, env.pids.kube_apiserver]
            .into_iter()
            .filter(|pid| running(*pid))
            .collect();
        if alive.is_empty() && !env.dir.exists() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "30 s after the child was killed: servers still running {alive:?}, directory {} \
                 exists: {}",
                env.dir.display(),
                env.dir.exists()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
