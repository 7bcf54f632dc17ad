//! The cloud emulator of the tests: moto, an emulator of the AWS EC2 and ELBv2 APIs that the official AWS SDK
//! talks to unchanged, next to the control plane.
//!
//! [`Emulator::start`] installs the pinned [`MOTO_VERSION`] of `moto[server]` from PyPI into a virtual
//! environment under the target directory (`<target>/emulator/moto-<version>`, once per machine; the machine's
//! `python3` with its `venv` module is the only prerequisite), starts it on a free loopback port, waits until it
//! answers HTTP, and hands the process to a watchdog (the control plane's) that kills it and removes its directory
//! when the test process exits, even when it is killed. [`Emulator::shared`] is the one emulator of a test binary,
//! as [`TestEnv::shared`](crate::TestEnv::shared) is its control plane.
//!
//! A client reaches it through the standard AWS configuration: [`Emulator::aws_env`] lists the variables
//! (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials of any value) to give a CCM process.
//!
//! ```no_run
//! use ccm_testenv::emulator::Emulator;
//!
//! let moto = Emulator::shared().expect("the emulator starts");
//! println!("EC2 and ELBv2 answer at {}", moto.endpoint_url());
//! moto.reset().expect("the emulator forgets every resource");
//! ```

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::controlplane::{kill_and_reap, log_tail, spawn_watchdog};
use crate::ports::pick_free_ports;

/// The version of `moto[server]` the tests run (pinned: the emulator's answers are part of the tests).
pub const MOTO_VERSION: &str = "5.1.18";

/// Overrides where the emulator's virtual environment is installed (default: `<target>/emulator`).
pub const DIR_ENV_VAR: &str = "CCM_EMULATOR_DIR";

/// The region the emulator's clients use ([`Emulator::aws_env`]).
pub const REGION: &str = "us-east-1";

/// How long the emulator may take to answer after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Failures of the emulator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmulatorError {
    /// The machine's `python3` is missing or has no `venv` module.
    #[error(
        "cannot create a python virtual environment for the emulator ({command}): {detail}; install python3 with \
         its venv module (Debian: apt-get install python3-venv)"
    )]
    Python {
        /// The command that failed.
        command: String,
        /// Its error or output.
        detail: String,
    },
    /// `pip install` of the pinned moto failed.
    #[error(
        "cannot install moto[server]=={version} from PyPI into {dir}: {detail}; check that PyPI is reachable (or \
         set {DIR_ENV_VAR} to a directory holding an installed environment)"
    )]
    Install {
        /// The pinned version.
        version: &'static str,
        /// The environment's directory.
        dir: PathBuf,
        /// pip's output.
        detail: String,
    },
    /// A file or process operation failed.
    #[error("failed to {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The emulator did not answer in time.
    #[error(
        "the emulator did not answer on {endpoint} within {after:?}; its log ends with:\n{log}"
    )]
    NotReady {
        /// Where it was asked.
        endpoint: String,
        /// The time limit.
        after: Duration,
        /// The end of its log.
        log: String,
    },
    /// The emulator answered a control request with an error.
    #[error("the emulator refused {request}: {answer}")]
    Refused {
        /// The request.
        request: String,
        /// Its status line.
        answer: String,
    },
    /// The control plane's helpers (the watchdog) failed.
    #[error(transparent)]
    ControlPlane(#[from] crate::controlplane::ControlPlaneError),
}

fn io_err(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> EmulatorError {
    let action = action.into();
    move |source| EmulatorError::Io { action, source }
}

/// A running emulator; dropping it stops the process and removes its directory.
#[derive(Debug)]
pub struct Emulator {
    port: u16,
    child: Option<Child>,
    watchdog: Option<(Child, ChildStdin)>,
    dir: PathBuf,
}

impl Emulator {
    /// The emulator of this test binary, started on first use (and installed if needed); it stops when the
    /// process exits (its watchdog sees the pipe close).
    ///
    /// # Errors
    /// The first start's error, as text, on every call.
    pub fn shared() -> Result<&'static Emulator, String> {
        static SHARED: OnceLock<Result<Emulator, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| Emulator::start().map_err(|err| err.to_string()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Install (if needed) and start a private emulator on a free loopback port; blocks until it answers.
    ///
    /// # Errors
    /// See [`EmulatorError`]: no python3, no PyPI, the server does not come up.
    pub fn start() -> Result<Emulator, EmulatorError> {
        Emulator::start_with_env(&[])
    }

    /// Like [`start`](Self::start), with extra environment variables for the emulator process, such as moto's
    /// `INITIAL_NO_AUTH_ACTION_COUNT=0`, which makes it check credentials and refuse unknown ones as AWS does
    /// (`AuthFailure`, `InvalidClientTokenId`).
    ///
    /// # Errors
    /// See [`EmulatorError`].
    pub fn start_with_env(env: &[(&str, &str)]) -> Result<Emulator, EmulatorError> {
        let venv = ensure_installed()?;
        let dir = tempfile::Builder::new()
            .prefix("ccm-emulator-")
            .tempdir()
            .map_err(io_err("create the emulator's directory"))?
            .keep();
        let mut watchdog = Some(spawn_watchdog(&dir, Stdio::null())?);
        let log = dir.join("moto.log");
        let mut last = None;
        // Another process may take the free port before the server binds it: try a few.
        for _ in 0..3 {
            let port = pick_free_ports(1).map_err(io_err("pick a free port"))?[0];
            let args = vec![
                "-m".to_owned(),
                "moto.server".to_owned(),
                "-H".to_owned(),
                "127.0.0.1".to_owned(),
                "-p".to_owned(),
                port.to_string(),
            ];
            let mut child = spawn(&venv.join("bin").join("python"), &args, env, &log)?;
            if let Some((_, stdin)) = &mut watchdog {
                writeln!(stdin, "pid {}", child.id()).map_err(io_err("notify the watchdog"))?;
            }
            match wait_ready(port, &mut child) {
                Ok(()) => {
                    tracing::info!(port, version = MOTO_VERSION, "cloud emulator ready");
                    return Ok(Emulator {
                        port,
                        child: Some(child),
                        watchdog,
                        dir,
                    });
                }
                Err(()) => {
                    kill_and_reap(child);
                    last = Some(port);
                }
            }
        }
        let endpoint = format!("http://127.0.0.1:{}", last.unwrap_or_default());
        let log = log_tail(&log);
        let emulator = Emulator {
            port: 0,
            child: None,
            watchdog,
            dir,
        };
        drop(emulator);
        Err(EmulatorError::NotReady {
            endpoint,
            after: READY_TIMEOUT,
            log,
        })
    }

    /// The emulator's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The endpoint every AWS service answers at: `http://127.0.0.1:<port>`.
    pub fn endpoint_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The standard AWS environment pointing a process at the emulator: `AWS_ENDPOINT_URL`, `AWS_REGION`
    /// ([`REGION`]), `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (any values are accepted), and
    /// `AWS_EC2_METADATA_DISABLED` (no instance metadata service is asked).
    pub fn aws_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint_url()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ]
    }

    /// Forget every resource of every account and region (moto's `POST /moto-api/reset`).
    ///
    /// # Errors
    /// When the emulator does not answer or refuses.
    pub fn reset(&self) -> Result<(), EmulatorError> {
        let answer = http_request(self.port, "POST", "/moto-api/reset")
            .map_err(io_err("reset the emulator"))?;
        if answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200") {
            Ok(())
        } else {
            Err(EmulatorError::Refused {
                request: "POST /moto-api/reset".to_owned(),
                answer: answer.lines().next().unwrap_or_default().to_owned(),
            })
        }
    }

    /// How many AWS API requests the emulator has answered so far (each is one `POST /` in its log; its own
    /// control requests are not counted).
    pub fn requests(&self) -> usize {
        std::fs::read_to_string(self.dir.join("moto.log"))
            .map(|log| {
                log.lines()
                    .filter(|l| l.contains("POST / HTTP/1.1"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// The emulator's log so far (its last lines), for test failure messages.
    pub fn log_tail(&self) -> String {
        log_tail(&self.dir.join("moto.log"))
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let pid = child.id();
            kill_and_reap(child);
            if let Some((_, stdin)) = &mut self.watchdog {
                let _ = writeln!(stdin, "forget {pid}");
            }
        }
        if let Some((mut watchdog, mut stdin)) = self.watchdog.take() {
            // The server is stopped: the watchdog only removes the directory (end of input).
            let _ = stdin.flush();
            drop(stdin);
            let _ = watchdog.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where the emulator's environments live: `$CCM_EMULATOR_DIR`, else `<target>/emulator`, the target directory
/// being `$CARGO_TARGET_DIR` or the ancestor of the running executable holding cargo's `CACHEDIR.TAG`, else the
/// workspace's `target`.
pub fn install_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(DIR_ENV_VAR) {
        return PathBuf::from(dir);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Path::new(&target).join("emulator");
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(target) = exe
            .ancestors()
            .skip(1)
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
    {
        return target.join("emulator");
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("emulator")
}

/// The virtual environment of the pinned moto, installed from PyPI if it is not there yet; its directory.
///
/// Safe to call from several processes at once: each installs into a directory of its own and the first to
/// finish renames it into place (a virtual environment run as `<dir>/bin/python -m ...` does not depend on its
/// path).
///
/// # Errors
/// See [`EmulatorError::Python`] and [`EmulatorError::Install`].
pub fn ensure_installed() -> Result<PathBuf, EmulatorError> {
    let root = install_root();
    let venv = root.join(format!("moto-{MOTO_VERSION}"));
    if venv.join("installed").is_file() {
        return Ok(venv);
    }
    std::fs::create_dir_all(&root).map_err(io_err(format!("create {}", root.display())))?;
    let partial = root.join(format!(
        "moto-{MOTO_VERSION}.partial-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&partial);
    tracing::info!(dir = %venv.display(), version = MOTO_VERSION, "installing the cloud emulator");
    run(
        Command::new("python3").arg("-m").arg("venv").arg(&partial),
        |detail| EmulatorError::Python {
            command: format!("python3 -m venv {}", partial.display()),
            detail,
        },
    )?;
    run(
        Command::new(partial.join("bin").join("python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .arg(format!("moto[server]=={MOTO_VERSION}")),
        |detail| EmulatorError::Install {
            version: MOTO_VERSION,
            dir: partial.clone(),
            detail,
        },
    )?;
    std::fs::write(partial.join("installed"), MOTO_VERSION).map_err(io_err(format!(
        "write {}",
        partial.join("installed").display()
    )))?;
    if std::fs::rename(&partial, &venv).is_err() {
        // Another process finished first (or an unfinished copy is in the way): keep the complete one.
        if venv.join("installed").is_file() {
            let _ = std::fs::remove_dir_all(&partial);
        } else {
            let _ = std::fs::remove_dir_all(&venv);
            std::fs::rename(&partial, &venv).map_err(io_err(format!(
                "move the emulator's environment into {}",
                venv.display()
            )))?;
        }
    }
    Ok(venv)
}

/// Start the emulator with its output in `log`, in its own process group (a Ctrl-C meant for the tests does not
/// stop it behind the watchdog's back).
fn spawn(
    python: &Path,
    args: &[String],
    env: &[(&str, &str)],
    log: &Path,
) -> Result<Child, EmulatorError> {
    use std::os::unix::process::CommandExt as _;
    let out = std::fs::File::create(log).map_err(io_err(format!("create {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(io_err(format!("open {}", log.display())))?;
    Command::new(python)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(io_err(format!("start {}", python.display())))
}

fn run(
    command: &mut Command,
    error: impl FnOnce(String) -> EmulatorError,
) -> Result<(), EmulatorError> {
    match command.stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            Err(error(format!(
                "{} (exit {})",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                out.status
            )))
        }
        Err(err) => Err(error(err.to_string())),
    }
}

/// Polls the emulator until it answers HTTP; `Err` if it exits or does not answer in time.
fn wait_ready(port: u16, child: &mut Child) -> Result<(), ()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return Err(());
        }
        if let Ok(answer) = http_request(port, "GET", "/moto-api/")
            && answer.starts_with("HTTP/")
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(())
}

/// One HTTP/1.0 request without a body; the whole answer.
fn http_request(port: u16, method: &str, path: &str) -> std::io::Result<String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_follows_the_override() {
        // Only the pure part: the override wins over everything else.
        let root = install_root();
        assert!(root.ends_with("emulator") || std::env::var_os(DIR_ENV_VAR).is_some());
    }

    #[test]
    fn a_closed_port_is_not_ready() {
        let port = pick_free_ports(1).expect("port")[0];
        assert!(http_request(port, "GET", "/").is_err());
    }
}
