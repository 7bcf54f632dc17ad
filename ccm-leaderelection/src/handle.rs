//! What a running election hands back: state, step-down notification, health.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use ccm_core::fence::LeadershipFence;

use crate::Error;

/// The name of the health check, as in client-go's `HealthzAdaptor` (`/healthz/leaderElection`).
pub const HEALTH_CHECK_NAME: &str = "leaderElection";

/// This replica's view of the election, published through a [`watch`] channel.
///
/// The life cycle is `Unknown → Following* → Leading → Stopped`, or `… → Stopped` without ever
/// leading. An elector never returns to `Leading` after it stopped leading: build and run a new
/// one (the reference CCM exits the process instead).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderState {
    /// Nothing observed yet (the first read has not completed).
    Unknown,
    /// Another replica holds an unexpired lease.
    Following {
        /// The holder's identity.
        holder: String,
    },
    /// This replica holds the lease and may act as leader.
    Leading,
    /// The election loop has ended for `reason`; this replica does not lead.
    Stopped {
        /// Why it ended.
        reason: StepDownReason,
    },
}

impl LeaderState {
    /// Whether this state allows acting as leader.
    pub fn is_leading(&self) -> bool {
        matches!(self, Self::Leading)
    }
}

/// Why an elector stopped leading (or stopped before it ever led).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StepDownReason {
    /// The lease could not be renewed within the renew deadline (API errors, timeouts or
    /// conflicts); the lease is left to expire, it is not released.
    #[error("failed to renew the lease within the renew deadline")]
    RenewDeadlineExceeded,
    /// A read of the Lease showed another holder: somebody else took over.
    #[error("the lease is now held by {holder:?}")]
    HolderChanged {
        /// The new holder, empty if the lease was cleared.
        holder: String,
    },
    /// The cancellation token was cancelled (graceful shutdown); the lease was released
    /// afterwards if release-on-cancel is enabled.
    #[error("leader election was cancelled")]
    Cancelled,
    /// The election task was aborted or panicked.
    #[error("the leader election task was aborted")]
    Aborted,
}

/// A cheap, clonable health check implementing client-go's `HealthzAdaptor` rule: it fails only
/// when this replica believes it leads but its last successful renewal is older than the lease
/// duration plus a tolerance (20 s by default, as in the reference CCM). This catches an election
/// loop that is stuck; a follower is always healthy.
///
/// ```no_run
/// # async fn doc(handle: ccm_leaderelection::LeaderHandle) {
/// let health = handle.health();
/// // in the admin server's /healthz handler:
/// match health.check() {
///     Ok(()) => { /* ok */ }
///     Err(err) => eprintln!("[-]{} failed: {err}", health.name()),
/// }
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct LeaderHealth {
    lease: String,
    limit: Duration,
    /// `Some(instant of the last successful acquire/renew)` while leading, shared by the clones.
    last_renewal: Arc<Mutex<Option<Instant>>>,
}

impl LeaderHealth {
    pub(crate) fn new(lease: String, lease_duration: Duration, tolerance: Duration) -> Self {
        Self {
            lease,
            limit: lease_duration.saturating_add(tolerance),
            last_renewal: Arc::default(),
        }
    }

    /// The check's name, [`HEALTH_CHECK_NAME`].
    pub fn name(&self) -> &'static str {
        HEALTH_CHECK_NAME
    }

    /// Runs the check.
    ///
    /// # Errors
    ///
    /// [`Error::RenewalOverdue`] if this replica leads and has not renewed for longer than the
    /// lease duration plus the tolerance.
    pub fn check(&self) -> Result<(), Error> {
        let elapsed = self.last_renewal.lock().map(|at| at.elapsed());
        match elapsed {
            Some(elapsed) if elapsed > self.limit => Err(Error::RenewalOverdue {
                lease: self.lease.clone(),
                elapsed,
                limit: self.limit,
            }),
            _ => Ok(()),
        }
    }

    /// `check().is_ok()`.
    pub fn is_healthy(&self) -> bool {
        self.check().is_ok()
    }

    pub(crate) fn renewed(&self, at: Instant) {
        *self.last_renewal.lock() = Some(at);
    }

    pub(crate) fn not_leading(&self) {
        *self.last_renewal.lock() = None;
    }
}

/// The handle of a running election, returned by [`LeaderElector::run`](crate::LeaderElector::run).
///
/// Dropping the handle does not stop the election; cancel the token passed to `run` for that.
#[derive(Debug)]
pub struct LeaderHandle {
    pub(crate) identity: String,
    pub(crate) state: watch::Receiver<LeaderState>,
    pub(crate) health: LeaderHealth,
    pub(crate) fence: LeadershipFence,
    pub(crate) task: JoinHandle<StepDownReason>,
}

impl LeaderHandle {
    /// This replica's holder identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// A receiver of the election state; `borrow()` gives the current value, `changed()` waits
    /// for the next one.
    pub fn state(&self) -> watch::Receiver<LeaderState> {
        self.state.clone()
    }

    /// Whether this replica currently leads.
    pub fn is_leading(&self) -> bool {
        self.state.borrow().is_leading()
    }

    /// Waits until this replica leads.
    ///
    /// # Errors
    ///
    /// The reason the election stopped if it ended before this replica became leader (e.g.
    /// [`StepDownReason::Cancelled`]).
    pub async fn wait_leading(&self) -> Result<(), StepDownReason> {
        let done =
            |s: &LeaderState| matches!(s, LeaderState::Leading | LeaderState::Stopped { .. });
        match self.state.clone().wait_for(done).await.as_deref() {
            Ok(LeaderState::Leading) => Ok(()),
            Ok(LeaderState::Stopped { reason }) => Err(reason.clone()),
            _ => Err(StepDownReason::Aborted),
        }
    }

    /// Waits until the election has stopped and returns why: after leading, this resolves as
    /// soon as leadership is lost (before any release of the lease), so that leader-only work can
    /// be stopped at once. A follower resolves when it is cancelled.
    pub async fn lost(&self) -> StepDownReason {
        let stopped = |s: &LeaderState| matches!(s, LeaderState::Stopped { .. });
        match self.state.clone().wait_for(stopped).await.as_deref() {
            Ok(LeaderState::Stopped { reason }) => reason.clone(),
            _ => StepDownReason::Aborted,
        }
    }

    /// The leadership fence this elector confirms and revokes (see [`ccm_core::fence`]): open only while the
    /// last accepted renewal was sent less than the renew deadline ago, closed for good once leadership is lost.
    pub fn fence(&self) -> LeadershipFence {
        self.fence.clone()
    }

    /// The health check for the admin server.
    pub fn health(&self) -> LeaderHealth {
        self.health.clone()
    }

    /// Stops the election task immediately, without releasing the lease (it expires after the
    /// lease duration), like a crash or `SIGKILL`. Prefer cancelling the token.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Waits for the election task to finish (after cancellation this includes the release of
    /// the lease) and returns why it stopped.
    ///
    /// # Errors
    ///
    /// [`Error::Task`] if the task panicked or was aborted.
    pub async fn join(self) -> Result<StepDownReason, Error> {
        self.task.await.map_err(Error::Task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn health_follows_the_healthz_adaptor_rule() {
        let health = LeaderHealth::new(
            "kube-system/ccm".into(),
            Duration::from_secs(15),
            Duration::from_secs(20),
        );
        assert_eq!(health.name(), "leaderElection");
        assert!(health.is_healthy(), "a follower is healthy");
        health.renewed(Instant::now());
        tokio::time::advance(Duration::from_secs(35)).await;
        assert!(
            health.is_healthy(),
            "exactly lease + tolerance is still healthy"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        let err = health.check().unwrap_err();
        assert!(matches!(err, Error::RenewalOverdue { .. }));
        assert!(
            err.to_string()
                .starts_with("failed election to renew leadership on lease kube-system/ccm"),
            "{err}"
        );
        health.renewed(Instant::now());
        assert!(health.is_healthy());
        tokio::time::advance(Duration::from_secs(100)).await;
        health.not_leading();
        assert!(health.is_healthy(), "no longer leading: healthy again");
    }

    #[test]
    fn reasons_display() {
        assert_eq!(
            StepDownReason::HolderChanged { holder: "b".into() }.to_string(),
            "the lease is now held by \"b\""
        );
        assert!(LeaderState::Leading.is_leading());
        assert!(!LeaderState::Following { holder: "b".into() }.is_leading());
    }
}
