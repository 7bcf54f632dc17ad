//! The watchdog: a small `sh` that kills the servers and removes the directory once the launching process is
//! gone.

use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use super::*;

/// The script of the watchdog process. It reads lines from its stdin: `pid N` adds a process
/// to kill, `forget N` removes one (the owner reaped it), `done` ends it quietly (the owner
/// stopped everything); it acknowledges each line on stdout. At end of input, or on SIGTERM,
/// it kills the recorded processes, waits for them to die and removes the directory `$1`.
/// It runs in its own process group and ignores interrupts and hang-ups: those are for the owner,
/// whose exit closes the pipe.
pub(super) const WATCHDOG_SCRIPT: &str = r#"
dir=$1
pids=
cleanup() {
    for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
    for pid in $pids; do
        n=0
        while [ "$n" -lt 100 ] && [ -e "/proc/$pid" ] && ! grep -q ') Z ' "/proc/$pid/stat" 2>/dev/null; do
            sleep 0.1
            n=$((n + 1))
        done
    done
    rm -rf -- "$dir"
}
trap '' INT HUP QUIT
trap 'cleanup; exit 0' TERM
while IFS= read -r line; do
    case $line in
        "pid "*) pids="$pids ${line#pid }" ;;
        "forget "*)
            kept=
            for pid in $pids; do [ "$pid" = "${line#forget }" ] || kept="$kept $pid"; done
            pids=$kept ;;
        done) exit 0 ;;
    esac
    echo "ok $line"
done
cleanup
"#;

pub(crate) fn spawn_watchdog(
    dir: &Path,
    stdout: Stdio,
) -> Result<(Child, ChildStdin), ControlPlaneError> {
    use std::os::unix::process::CommandExt as _;
    let mut child = Command::new("sh")
        // Own process group: killing the test run's group (Ctrl-C, a CI timeout) must not take
        // the watchdog down with the test process before it has cleaned up.
        .process_group(0)
        .arg("-c")
        .arg(WATCHDOG_SCRIPT)
        .arg("ccm-testenv-watchdog")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .map_err(io_err("start the watchdog process (sh)"))?;
    let stdin = child.stdin.take().ok_or_else(|| {
        io_err("open the watchdog's stdin")(std::io::ErrorKind::BrokenPipe.into())
    })?;
    Ok((child, stdin))
}
