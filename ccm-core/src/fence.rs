//! The leadership fence: no write and no cloud call unless this replica's leadership was confirmed recently.
//!
//! A leader that was frozen (a `SIGSTOP`, a long GC-like stall, a starved VM) longer than its lease resumes with
//! every overdue timer firing at once, before its elector has had a chance to notice that it no longer leads. The
//! fence closes that window: the elector records, on the **monotonic** clock, when it *sent* each acquire or
//! renew request that the API server then accepted, and every mutating Kubernetes request of the controllers, every
//! Event write and every cloud call checks the fence right before it is sent.
//!
//! The fence is open while `now < last_confirmed_sent + valid_for`. The elector passes its renew deadline as
//! `valid_for`: a follower can take the lease over at the earliest `lease_duration` after it observed our last
//! renewal, which it cannot observe before we sent it, and the elector's configuration requires
//! `renew_deadline < lease_duration`; so the fence closes at least `lease_duration - renew_deadline` (5 s with the
//! reference defaults) before any other replica could lead. The monotonic clock keeps running while the process
//! is stopped, so after a freeze the fence is found closed. Once the elector stops leading it
//! [revokes](LeadershipFence::revoke) the fence for good: a late answer to an in-flight renewal cannot reopen it.
//!
//! Without leader election, use [`LeadershipFence::unfenced`]: always open.
//!
//! ```
//! use std::time::Duration;
//! use ccm_core::fence::{FenceClosed, LeadershipFence};
//! use tokio::time::Instant;
//!
//! let fence = LeadershipFence::new();
//! assert_eq!(fence.check(), Err(FenceClosed::NotConfirmed));
//! fence.confirm(Instant::now(), Duration::from_secs(10)); // a renewal sent now was accepted
//! assert!(fence.check().is_ok());
//! fence.revoke(); // leadership lost
//! assert_eq!(fence.check(), Err(FenceClosed::Revoked));
//! ```

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Why the fence is closed: the reason of a refused write or cloud call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FenceClosed {
    /// The lease has not been acquired yet.
    #[error("the lease has not been acquired yet: wait until this replica leads")]
    NotConfirmed,
    /// The last confirmed renewal is too old (the process was stalled, or renewals keep failing).
    #[error(
        "the last accepted lease renewal was sent {elapsed:?} ago, longer than the {valid_for:?} it is trusted for: \
         wait for the next renewal"
    )]
    Expired {
        /// Time since the last accepted renewal was sent.
        elapsed: Duration,
        /// How long a renewal is trusted for (the renew deadline).
        valid_for: Duration,
    },
    /// This replica stopped leading; it never leads again without a restart.
    #[error("this replica stopped leading: it must not act until it is restarted")]
    Revoked,
}

/// Whether `error`, or any error in its source chain, is a refusal by the fence.
///
/// ```
/// use ccm_core::fence::{FenceClosed, is_fenced};
///
/// assert!(is_fenced(&FenceClosed::Revoked));
/// assert!(!is_fenced(&std::io::Error::other("boom")));
/// ```
pub fn is_fenced(error: &(dyn std::error::Error + 'static)) -> bool {
    // `causes` walks from a `CloudError::NotLeader` to its `FenceClosed` reason.
    crate::error::causes(error).any(|err| err.is::<FenceClosed>())
}

/// The state of a fence. Transitions: `Unconfirmed → Confirmed → … → Revoked`; `Unfenced` never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// No leader election: always open.
    Unfenced,
    /// Leader election runs but the lease was never acquired.
    #[default]
    Unconfirmed,
    /// The lease was confirmed by a request sent at `sent`; trusted until `sent + valid_for`.
    Confirmed { sent: Instant, valid_for: Duration },
    /// Leadership was lost: closed for good.
    Revoked,
}

impl State {
    /// The pure decision: may a write be sent at `now`?
    fn check(self, now: Instant) -> Result<(), FenceClosed> {
        match self {
            State::Unfenced => Ok(()),
            State::Unconfirmed => Err(FenceClosed::NotConfirmed),
            State::Revoked => Err(FenceClosed::Revoked),
            State::Confirmed { sent, valid_for } => {
                let elapsed = now.saturating_duration_since(sent);
                if elapsed < valid_for {
                    Ok(())
                } else {
                    Err(FenceClosed::Expired { elapsed, valid_for })
                }
            }
        }
    }

    /// The state after a confirmation of a request sent at `sent`. Never reopens a revoked fence, never moves
    /// the confirmation back in time (an old answer arriving late), and leaves an unfenced fence alone.
    fn confirm(self, sent: Instant, valid_for: Duration) -> State {
        match self {
            State::Unfenced | State::Revoked => self,
            State::Unconfirmed => State::Confirmed { sent, valid_for },
            State::Confirmed { sent: before, .. } if before > sent => self,
            State::Confirmed { .. } => State::Confirmed { sent, valid_for },
        }
    }

    fn revoke(self) -> State {
        match self {
            State::Unfenced => State::Unfenced,
            _ => State::Revoked,
        }
    }
}

/// A shared leadership fence; cheap to clone (all clones are the same fence).
///
/// The elector [confirms](Self::confirm) and [revokes](Self::revoke) it; the Kubernetes client layer and the cloud
/// interception layer ([`crate::intercept::InterceptedProvider::with_fence`]) [check](Self::check) it.
#[derive(Clone, Debug, Default)]
pub struct LeadershipFence {
    state: Arc<Mutex<State>>,
}

impl LeadershipFence {
    /// A fence for a replica that runs leader election: closed until the lease is acquired.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fence that is always open (leader election disabled, `--leader-elect=false`).
    pub fn unfenced() -> Self {
        LeadershipFence {
            state: Arc::new(Mutex::new(State::Unfenced)),
        }
    }

    fn update(&self, f: impl FnOnce(State) -> State) {
        let mut state = self.state.lock();
        *state = f(*state);
    }

    /// Record that a lease write (acquire or renew) **sent** at `sent` was accepted: the fence is open until
    /// `sent + valid_for`. Ignored once revoked, and for a request older than the last one confirmed.
    pub fn confirm(&self, sent: Instant, valid_for: Duration) {
        self.update(|s| s.confirm(sent, valid_for));
    }

    /// Close the fence for good: leadership was lost or given up.
    pub fn revoke(&self) {
        self.update(State::revoke);
    }

    /// Whether a write may be sent now: why not, if the fence is closed.
    pub fn check(&self) -> Result<(), FenceClosed> {
        self.check_at(Instant::now())
    }

    /// Whether a write may be sent at `now`: why not, if the fence is closed.
    pub fn check_at(&self, now: Instant) -> Result<(), FenceClosed> {
        self.state.lock().check(now)
    }

    /// Whether the fence is open now.
    pub fn is_open(&self) -> bool {
        self.check().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl LeadershipFence {
        /// Whether this fence is always open (no leader election).
        fn is_unfenced(&self) -> bool {
            *self.state.lock() == State::Unfenced
        }
    }

    const VALID: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn closed_until_confirmed() {
        let fence = LeadershipFence::new();
        assert_eq!(fence.check(), Err(FenceClosed::NotConfirmed));
        assert!(!fence.is_open());
        assert!(!fence.is_unfenced());
        tokio::time::advance(Duration::from_secs(100)).await;
        assert_eq!(fence.check(), Err(FenceClosed::NotConfirmed));
    }

    #[tokio::test(start_paused = true)]
    async fn open_strictly_before_sent_plus_valid_for() {
        let fence = LeadershipFence::new();
        let sent = Instant::now();
        tokio::time::advance(Duration::from_millis(300)).await; // the answer took 300 ms
        fence.confirm(sent, VALID);
        assert!(fence.is_open());
        tokio::time::advance(VALID - Duration::from_millis(301)).await;
        assert!(fence.is_open(), "1 ms before sent + valid_for");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            fence.check(),
            Err(FenceClosed::Expired {
                elapsed: VALID,
                valid_for: VALID
            }),
            "measured from when the request was sent, not answered"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_keep_it_open_and_a_freeze_closes_it() {
        let fence = LeadershipFence::new();
        for _ in 0..20 {
            fence.confirm(Instant::now(), VALID);
            tokio::time::advance(Duration::from_secs(2)).await;
            assert!(fence.is_open());
        }
        // A stop longer than the renew deadline: every timer fires at once on resume, the fence is closed.
        tokio::time::advance(Duration::from_secs(20)).await;
        let err = fence.check().unwrap_err();
        assert!(
            matches!(err, FenceClosed::Expired { elapsed, .. } if elapsed == Duration::from_secs(22))
        );
        assert!(
            err.to_string().contains("wait for the next renewal"),
            "{err}"
        );
        // The next accepted renewal opens it again (the elector revokes it if it stepped down instead).
        fence.confirm(Instant::now(), VALID);
        assert!(fence.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_answer_to_an_older_request_does_not_move_it_back() {
        let fence = LeadershipFence::new();
        let old = Instant::now();
        tokio::time::advance(Duration::from_secs(4)).await;
        let new = Instant::now();
        fence.confirm(new, VALID);
        fence.confirm(old, VALID);
        assert_eq!(
            *fence.state.lock(),
            State::Confirmed {
                sent: new,
                valid_for: VALID
            }
        );
        assert_eq!(
            fence.check_at(new + VALID - Duration::from_millis(1)),
            Ok(())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn revoked_for_good() {
        let fence = LeadershipFence::new();
        fence.confirm(Instant::now(), VALID);
        let clone = fence.clone();
        clone.revoke();
        assert_eq!(
            fence.check(),
            Err(FenceClosed::Revoked),
            "clones share the state"
        );
        fence.confirm(Instant::now(), VALID);
        assert_eq!(
            fence.check(),
            Err(FenceClosed::Revoked),
            "an in-flight renewal cannot reopen it"
        );
        let never = LeadershipFence::new();
        never.revoke();
        assert_eq!(never.check(), Err(FenceClosed::Revoked));
    }

    #[tokio::test(start_paused = true)]
    async fn unfenced_is_always_open() {
        let fence = LeadershipFence::unfenced();
        assert!(fence.is_unfenced());
        fence.confirm(Instant::now(), Duration::ZERO);
        fence.revoke();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(fence.check(), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_validity_never_opens() {
        let fence = LeadershipFence::new();
        fence.confirm(Instant::now(), Duration::ZERO);
        assert!(matches!(fence.check(), Err(FenceClosed::Expired { .. })));
    }

    #[test]
    fn refusals_are_recognised_through_wrapping() {
        let cloud = crate::CloudError::NotLeader {
            operation: crate::intercept::Operation::UpdateLoadBalancer,
            reason: FenceClosed::Revoked,
        };
        assert!(is_fenced(&cloud));
        let wrapped = crate::CloudError::provider("syncing", cloud);
        assert!(is_fenced(&wrapped));
        assert!(!is_fenced(&crate::CloudError::NotImplemented));
    }
}
