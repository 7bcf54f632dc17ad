//! Running child processes with their output streamed, and Ctrl-C handling.
//!
//! xtask installs a Ctrl-C handler at start-up ([`Interrupt::install`]). A Ctrl-C in the
//! terminal reaches the running child (same process group), which stops; xtask then notices the
//! interrupt, cleans up (e.g. stops the control plane) and exits with status 130.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio_util::sync::CancellationToken;

/// Exit status used after a Ctrl-C (128 + SIGINT).
pub const INTERRUPTED_EXIT_CODE: u8 = 130;

/// How long a child may take to exit after Ctrl-C before it is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// Error returned when the user interrupted a task.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted by Ctrl-C")
    }
}

impl std::error::Error for Interrupted {}

/// Cancellation on Ctrl-C.
#[derive(Debug, Clone)]
pub struct Interrupt {
    token: CancellationToken,
}

impl Interrupt {
    /// Installs the Ctrl-C handler; from now on SIGINT no longer kills xtask.
    pub fn install() -> Self {
        let token = CancellationToken::new();
        let trigger = token.clone();
        tokio::spawn(async move {
            loop {
                if tokio::signal::ctrl_c().await.is_err() {
                    return;
                }
                eprintln!("\nxtask: interrupted, cleaning up...");
                trigger.cancel();
            }
        });
        Self { token }
    }

    /// An interrupt that never fires (for tests).
    #[cfg(test)]
    pub fn never() -> Self {
        Self {
            token: CancellationToken::new(),
        }
    }

    /// Whether Ctrl-C was pressed.
    pub fn is_interrupted(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Fails with [`Interrupted`] if Ctrl-C was pressed.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.is_interrupted() {
            return Err(Interrupted.into());
        }
        Ok(())
    }

    /// Resolves when Ctrl-C is pressed.
    pub async fn interrupted(&self) {
        self.token.cancelled().await;
    }
}

/// Renders a command line for display.
pub fn display_command(command: &tokio::process::Command) -> String {
    let std = command.as_std();
    let mut parts = vec![std.get_program().to_string_lossy().into_owned()];
    parts.extend(std.get_args().map(|a| {
        let arg = a.to_string_lossy();
        if arg.is_empty() || arg.contains(char::is_whitespace) {
            format!("'{arg}'")
        } else {
            arg.into_owned()
        }
    }));
    parts.join(" ")
}

/// Runs `command` with inherited stdin/stdout/stderr and returns its exit status.
///
/// # Errors
/// If the program cannot be started (`missing_hint` is added to the error when it is not
/// found), or [`Interrupted`] if Ctrl-C was pressed while it ran.
pub async fn run_status(
    mut command: tokio::process::Command,
    interrupt: &Interrupt,
    missing_hint: &str,
) -> anyhow::Result<ExitStatus> {
    interrupt.check()?;
    let shown = display_command(&command);
    eprintln!("+ {shown}");
    command.kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            bail!("cannot run `{shown}`: program not found. {missing_hint}")
        }
        Err(err) => return Err(err).with_context(|| format!("cannot run `{shown}`")),
    };
    tokio::select! {
        status = child.wait() => {
            let status = status.with_context(|| format!("waiting for `{shown}`"))?;
            // A child killed by the same Ctrl-C may exit before the handler runs.
            if interrupt.is_interrupted() {
                return Err(Interrupted.into());
            }
            Ok(status)
        }
        () = interrupt.interrupted() => {
            // The child got the same SIGINT; give it a moment to exit, then kill it.
            if tokio::time::timeout(INTERRUPT_GRACE, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
            Err(Interrupted.into())
        }
    }
}

/// Sends `signal` (e.g. `INT`, `KILL`) to every process of process group `pgid`.
/// Sends `signal` (a `kill -s` name) to every process of the group `pgid`; a group that is gone is no error.
pub fn signal_group(pgid: u32, signal: &str) {
    let result = std::process::Command::new("sh")
        .args(["-c", "kill -s \"$1\" -- -\"$2\" 2>/dev/null", "sh"])
        .arg(signal)
        .arg(pgid.to_string())
        .status();
    if let Err(err) = result {
        eprintln!("xtask: cannot send SIG{signal} to process group {pgid}: {err}");
    }
}

/// Runs `command` in a process group of its own, so that it and everything it starts (cargo,
/// test binaries) can be stopped together, and returns its exit status.
///
/// On Ctrl-C the group gets SIGINT, then SIGKILL once the leader exited or a grace period
/// passed (processes that ignore SIGINT do not survive).
/// When `timeout` (if any) passes first, the group gets SIGKILL and an error says so: a hanging
/// test cannot eat a whole CI run.
///
/// # Errors
/// If the program cannot be started, on timeout, or [`Interrupted`] on Ctrl-C.
pub async fn run_group_with_timeout(
    mut command: tokio::process::Command,
    interrupt: &Interrupt,
    timeout: Option<Duration>,
) -> anyhow::Result<ExitStatus> {
    interrupt.check()?;
    let shown = display_command(&command);
    eprintln!("+ {shown}");
    command.process_group(0).kill_on_drop(true);
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot run `{shown}`"))?;
    let pgid = child
        .id()
        .with_context(|| format!("`{shown}` exited before its process id was read"))?;
    tokio::select! {
        status = child.wait() => {
            let status = status.with_context(|| format!("waiting for `{shown}`"))?;
            if interrupt.is_interrupted() {
                return Err(Interrupted.into());
            }
            Ok(status)
        }
        () = interrupt.interrupted() => {
            signal_group(pgid, "INT");
            let _ = tokio::time::timeout(INTERRUPT_GRACE, child.wait()).await;
            // Whatever is left (the leader, or stragglers that ignore SIGINT) is killed.
            signal_group(pgid, "KILL");
            let _ = child.wait().await;
            Err(Interrupted.into())
        }
        limit = expire(timeout) => {
            signal_group(pgid, "KILL");
            let _ = child.wait().await;
            bail!(
                "`{shown}` did not finish within {} and was killed with its process group \
                 (a hanging test? libtest prints \"has been running for over 60 seconds\" for it)",
                seconds(limit)
            )
        }
    }
}

/// Resolves with `timeout` once it has passed; never without one.
async fn expire(timeout: Option<Duration>) -> Duration {
    match timeout {
        Some(limit) => {
            tokio::time::sleep(limit).await;
            limit
        }
        None => std::future::pending().await,
    }
}

/// Runs `command` and fails unless it exits successfully.
///
/// # Errors
/// As [`run_status`], and when the command exits unsuccessfully.
pub async fn run(
    command: tokio::process::Command,
    interrupt: &Interrupt,
    missing_hint: &str,
) -> anyhow::Result<()> {
    let shown = display_command(&command);
    let status = run_status(command, interrupt, missing_hint).await?;
    if !status.success() {
        bail!("`{shown}` failed with {status}");
    }
    Ok(())
}

/// The cargo executable running xtask (`$CARGO`), or `cargo`.
pub fn cargo() -> tokio::process::Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = tokio::process::Command::new(program);
    command.current_dir(crate::paths::workspace_root());
    command
}

/// Formats a duration as seconds with one decimal, e.g. `12.3 s`.
pub fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

/// Measures how long something takes.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    /// Starts measuring.
    pub fn start() -> Self {
        Self(Instant::now())
    }

    /// Time since [`Stopwatch::start`].
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_displayed_with_quoting() {
        let mut command = tokio::process::Command::new("cargo");
        command.args(["test", "--workspace", "", "a b"]);
        assert_eq!(display_command(&command), "cargo test --workspace '' 'a b'");
    }

    #[test]
    fn seconds_have_one_decimal() {
        assert_eq!(seconds(Duration::from_millis(12_345)), "12.3 s");
        assert_eq!(seconds(Duration::ZERO), "0.0 s");
    }

    #[tokio::test]
    async fn statuses_and_missing_programs() {
        let interrupt = Interrupt::never();
        let ok = tokio::process::Command::new("true");
        assert!(run(ok, &interrupt, "").await.is_ok());
        let failing = tokio::process::Command::new("false");
        let err = run(failing, &interrupt, "").await.expect_err("false fails");
        assert!(err.to_string().contains("`false` failed"), "{err}");
        let missing = tokio::process::Command::new("definitely-not-a-program-xyz");
        let err = run(missing, &interrupt, "install it")
            .await
            .expect_err("missing");
        assert!(err.to_string().contains("install it"), "{err}");
    }

    #[tokio::test]
    async fn interrupted_before_start_runs_nothing() {
        let interrupt = Interrupt::never();
        interrupt.token.cancel();
        let err = run(tokio::process::Command::new("true"), &interrupt, "")
            .await
            .expect_err("interrupted");
        assert!(err.is::<Interrupted>());
    }

    fn group_exists(pgid: u32) -> bool {
        std::process::Command::new("sh")
            .args(["-c", "kill -s 0 -- -\"$1\" 2>/dev/null", "sh"])
            .arg(pgid.to_string())
            .status()
            .is_ok_and(|s| s.success())
    }

    async fn wait_group_gone(pgid: u32, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        while group_exists(pgid) {
            assert!(
                std::time::Instant::now() < deadline,
                "process group {pgid} survived"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A shell that records its pid (= the process group id) in a file and starts a grandchild.
    fn group_leader(pid_file: &std::path::Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("sh");
        command
            .args(["-c", "echo $$ > \"$1\"; sleep 600 & wait", "sh"])
            .arg(pid_file);
        command
    }

    fn read_pgid(pid_file: &std::path::Path) -> u32 {
        std::fs::read_to_string(pid_file)
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }

    #[tokio::test]
    async fn a_timed_out_group_is_killed_with_its_children() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pid_file = dir.path().join("pid");
        let interrupt = Interrupt::never();
        let err = run_group_with_timeout(
            group_leader(&pid_file),
            &interrupt,
            Some(Duration::from_millis(500)),
        )
        .await
        .expect_err("times out");
        assert!(
            err.to_string().contains("did not finish within 0.5 s"),
            "{err}"
        );
        // The grandchild was killed too (it disappears once it is reaped).
        wait_group_gone(read_pgid(&pid_file), Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn group_runs_report_the_exit_status() {
        let interrupt = Interrupt::never();
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", "exit 3"]);
        let status = run_group_with_timeout(command, &interrupt, None)
            .await
            .expect("runs");
        assert_eq!(status.code(), Some(3));
    }

    /// On Ctrl-C the group is stopped (by SIGINT, or by SIGKILL after the grace period when the
    /// environment makes the processes ignore SIGINT).
    #[tokio::test]
    async fn an_interrupted_group_is_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pid_file = dir.path().join("pid");
        let interrupt = Interrupt::never();
        let trigger = interrupt.token.clone();
        let cancel = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            trigger.cancel();
        });
        let err = run_group_with_timeout(
            group_leader(&pid_file),
            &interrupt,
            Some(Duration::from_secs(600)),
        )
        .await
        .expect_err("interrupted");
        cancel.await.expect("trigger");
        assert!(err.is::<Interrupted>());
        wait_group_gone(
            read_pgid(&pid_file),
            INTERRUPT_GRACE + Duration::from_secs(5),
        )
        .await;
    }

    /// An interrupt that did not reach the child (e.g. SIGINT sent to xtask alone): the child is
    /// killed after the grace period. The clock is paused, so the grace passes instantly.
    #[tokio::test(start_paused = true)]
    async fn interrupt_while_running_kills_the_child_after_the_grace() {
        let interrupt = Interrupt::never();
        let mut sleep = tokio::process::Command::new("sleep");
        sleep.arg("600");
        let trigger = interrupt.token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            trigger.cancel();
        });
        let err = run(sleep, &interrupt, "").await.expect_err("interrupted");
        assert!(err.is::<Interrupted>());
    }
}
