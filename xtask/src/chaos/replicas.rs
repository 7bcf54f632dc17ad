//! The CCM replicas of a scenario: each runs as its own Kubernetes user (a client certificate of
//! its own, so the audit log tells them apart), with short leader-election timings, and can be
//! stopped, resumed, killed and restarted.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::bench::support::{self, CcmProcess, CcmSpec, Implementation};

/// `--leader-elect-lease-duration` of every replica.
pub const LEASE_DURATION: Duration = Duration::from_secs(4);
/// `--leader-elect-renew-deadline` of every replica.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(3);
/// `--leader-elect-retry-period` of every replica.
pub const RETRY_PERIOD: Duration = Duration::from_secs(1);

/// How long a replica may take to exit after SIGTERM before it counts as leaked and is killed:
/// its own bound, `--shutdown-timeout` (30 s by default in both CCMs), plus 5 s.
pub const TERM_GRACE: Duration = Duration::from_secs(35);

/// The controllers every replica runs (both CCMs have them).
pub const CONTROLLERS: &str = "cloud-node,service";

/// The leader-election flags (same names in both CCMs) with the scenarios' short timings.
pub fn leader_election_args() -> Vec<String> {
    leader_election_args_with(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
}

/// The leader-election flags with these timings.
pub fn leader_election_args_with(lease: Duration, renew: Duration, retry: Duration) -> Vec<String> {
    let secs = |d: Duration| format!("{}s", d.as_secs());
    vec![
        format!("--leader-elect-lease-duration={}", secs(lease)),
        format!("--leader-elect-renew-deadline={}", secs(renew)),
        format!("--leader-elect-retry-period={}", secs(retry)),
    ]
}

/// A signal a scenario sends to a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Kill at once.
    Kill,
    /// Ask to shut down (the Rust CCM releases the Lease, the Go CCM does not).
    Term,
    /// Freeze (resumed with CONT).
    Stop,
}

impl Signal {
    /// The `kill -s` name.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Kill => "KILL",
            Signal::Term => "TERM",
            Signal::Stop => "STOP",
        }
    }
}

/// One replica: its name, its command line and its current process (if any). Each process it
/// starts (an *incarnation*) authenticates as its own user `<name>.<n>`, so that the audit log
/// tells a restarted replica from its dead predecessor, whose Lease record it must not trust.
#[derive(Debug)]
pub struct Replica {
    /// The name in tables and logs, e.g. `rust-1`.
    pub name: String,
    /// The users of its incarnations so far, in order: `rust-1.1`, `rust-1.2`, ...
    pub users: Vec<String>,
    program: PathBuf,
    spec: CcmSpec,
    log_dir: PathBuf,
    process: Option<CcmProcess>,
    starts: u32,
}

impl Replica {
    /// A replica (not started) of `implementation` running `program` on the fake cloud of
    /// `inventory`, logging into `log_dir`.
    ///
    /// # Errors
    /// If no free port is found for its endpoints.
    pub fn new(
        name: &str,
        implementation: Implementation,
        program: &Path,
        inventory: &Path,
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        let spec = CcmSpec {
            implementation,
            controllers: CONTROLLERS.to_owned(),
            kubeconfig: PathBuf::new(),
            admin_kubeconfig: PathBuf::new(),
            inventory: Some(inventory.to_owned()),
            admin_port: support::free_port()?,
            limits: Some(support::DEFAULT_LIMITS),
            extra: leader_election_args(),
            leader_elect: true,
        };
        Ok(Replica {
            name: name.to_owned(),
            users: Vec::new(),
            program: program.to_owned(),
            spec,
            log_dir: log_dir.to_owned(),
            process: None,
            starts: 0,
        })
    }

    /// The same replica running `controllers` (a `--controllers` value) instead of
    /// [`CONTROLLERS`].
    pub fn with_controllers(mut self, controllers: &'static str) -> Self {
        self.spec.controllers = controllers.to_owned();
        self
    }

    /// The same replica with these leader-election timings instead of the short ones.
    pub fn with_leader_election(
        mut self,
        lease: Duration,
        renew: Duration,
        retry: Duration,
    ) -> Self {
        self.spec.extra = leader_election_args_with(lease, renew, retry);
        self
    }

    /// The user of the next incarnation.
    pub fn next_user(&self) -> String {
        format!("{}.{}", self.name, self.starts + 1)
    }

    /// The user of the current (or last) incarnation.
    pub fn current_user(&self) -> Option<&str> {
        self.users.last().map(String::as_str)
    }

    /// Starts a new process as [`Replica::next_user`], authenticating with `kubeconfig` (which
    /// must be that user's); its log is `<user>.log`.
    ///
    /// # Errors
    /// If it cannot be started.
    pub fn start(&mut self, kubeconfig: &Path) -> anyhow::Result<()> {
        let user = self.next_user();
        self.starts += 1;
        self.spec.kubeconfig = kubeconfig.to_owned();
        // The Go replicas' delegated authentication of /metrics readers uses the same identity.
        self.spec.admin_kubeconfig = kubeconfig.to_owned();
        let log = self.log_dir.join(format!("{user}.log"));
        self.users.push(user);
        // A restarted replica may not get its old port back at once; take a fresh one.
        if self.starts > 1 {
            self.spec.admin_port = support::free_port()?;
        }
        self.process = Some(CcmProcess::start(&self.program, &self.spec, &log)?);
        Ok(())
    }

    /// Whether its process runs (started and not exited).
    pub fn is_running(&mut self) -> bool {
        match &mut self.process {
            Some(process) => matches!(process.exit_status(), Ok(None)),
            None => false,
        }
    }

    /// Sends `signal` to its process (nothing if it is not running).
    ///
    /// # Errors
    /// If the signal cannot be sent.
    pub async fn signal(&mut self, signal: Signal) -> anyhow::Result<()> {
        match &mut self.process {
            Some(process) => process.signal(signal.name()).await,
            None => Ok(()),
        }
    }

    /// Resumes a stopped process.
    ///
    /// # Errors
    /// If the signal cannot be sent.
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        match &mut self.process {
            Some(process) => process.signal("CONT").await,
            None => Ok(()),
        }
    }

    /// Stops its process: CONT (in case it is frozen), TERM, then waits up to [`TERM_GRACE`].
    /// Returns whether it had to be killed (it did not exit on its own: a leak).
    ///
    /// # Errors
    /// If the process cannot be signalled.
    pub async fn shut_down(&mut self) -> anyhow::Result<bool> {
        let Some(mut process) = self.process.take() else {
            return Ok(false);
        };
        if process.exit_status()?.is_some() {
            process.stop().await?;
            return Ok(false);
        }
        process.signal("CONT").await?;
        process.signal("TERM").await?;
        let started = Instant::now();
        let deadline = started + TERM_GRACE;
        let mut leaked = true;
        while Instant::now() < deadline {
            if process.exit_status()?.is_some() {
                leaked = false;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !leaked && started.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "  {} took {:.1} s to exit after SIGTERM",
                self.name,
                started.elapsed().as_secs_f64()
            );
        }
        if leaked {
            eprintln!(
                "  {} did not exit within {} s of SIGTERM; killing it (log: {})",
                self.name,
                TERM_GRACE.as_secs(),
                process.log().display()
            );
        }
        process.stop().await.context("stopping a replica")?;
        Ok(leaked)
    }

    /// Forgets an exited process (after SIGKILL), so that [`Replica::start`] can run a new one.
    ///
    /// # Errors
    /// If the process cannot be reaped.
    pub async fn reap(&mut self) -> anyhow::Result<()> {
        if let Some(process) = self.process.take() {
            process.stop().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_use_short_leader_election_timings_in_go_syntax() {
        assert_eq!(
            leader_election_args(),
            [
                "--leader-elect-lease-duration=4s",
                "--leader-elect-renew-deadline=3s",
                "--leader-elect-retry-period=1s"
            ]
        );
        assert!(RENEW_DEADLINE < LEASE_DURATION);
        assert!(RETRY_PERIOD < RENEW_DEADLINE);
    }

    #[test]
    fn a_replica_runs_with_leader_election_and_its_own_kubeconfig() {
        let mut replica = Replica::new(
            "rust-1",
            Implementation::Rust,
            Path::new("/bin/ccm"),
            Path::new("/k/inventory.yaml"),
            Path::new("/logs"),
        )
        .expect("replica");
        assert_eq!(replica.next_user(), "rust-1.1");
        assert_eq!(replica.current_user(), None);
        replica.spec.kubeconfig = PathBuf::from("/k/rust-1.1.kubeconfig");
        let args = replica.spec.args();
        for expected in [
            "--leader-elect=true",
            "--kubeconfig=/k/rust-1.1.kubeconfig",
            "--controllers=cloud-node,service",
            "--leader-elect-lease-duration=4s",
        ] {
            assert!(
                args.contains(&expected.to_owned()),
                "{expected} in {args:?}"
            );
        }
        assert_eq!(Signal::Stop.name(), "STOP");
        let go_timings = replica.with_leader_election(
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2),
        );
        let args = go_timings.spec.args();
        for expected in [
            "--leader-elect-lease-duration=15s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-retry-period=2s",
        ] {
            assert!(
                args.contains(&expected.to_owned()),
                "{expected} in {args:?}"
            );
        }
        assert!(!args.contains(&"--leader-elect-lease-duration=4s".to_owned()));
    }
}
