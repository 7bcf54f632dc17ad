//! The call log and fault injection: what the fake cloud was asked, and how it misbehaves.

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_core::CloudError;
use ccm_core::intercept::Operation;

use crate::random::{Decision, RandomFaults};

/// One call the fake cloud received, in the order received.
///
/// `op` is the [`Operation`] called; `target` is what the call was about: a node name, a providerID, a service
/// key (`namespace/name`), a destination CIDR or a cluster name (the table in [`Operation`]'s documentation says
/// which), or `""` when the call has no subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Call {
    /// The operation, for example [`Operation::EnsureLoadBalancer`] (named `create`).
    pub op: Operation,
    /// What the call was about.
    pub target: String,
}

impl Call {
    /// A call record (handy for `assert_eq!` against [`FakeCloud::calls`](crate::FakeCloud::calls)).
    ///
    /// ```
    /// use ccm_provider_fake::{Call, Operation};
    /// let call = Call::new(Operation::EnsureLoadBalancer, "default/web");
    /// assert_eq!(call.op.as_str(), "create");
    /// ```
    pub fn new(op: Operation, target: impl Into<String>) -> Self {
        Call {
            op,
            target: target.into(),
        }
    }
}

/// A load-balancer call with the backend hosts it carried (the Go fake's `EnsureCalls` / `UpdateCalls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerCall {
    /// [`Operation::EnsureLoadBalancer`] or [`Operation::UpdateLoadBalancer`].
    pub op: Operation,
    /// The service key, `namespace/name`.
    pub service: String,
    /// The node names passed, sorted and without duplicates.
    pub hosts: Vec<String>,
}

/// The error an injected [`Fault`] returns, mapped to a [`CloudError`] of the same kind.
///
/// The conformance suite's fault injector, which wraps any provider, fails calls with the same errors
/// (`ccm_conformance::faults::InjectedError` is this type).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InjectedError {
    /// A provider failure with no well-known kind ([`ccm_core::ErrorKind::Other`]) and this message.
    Other(String),
    /// [`CloudError::InstanceNotFound`].
    InstanceNotFound,
    /// [`CloudError::NotImplemented`].
    NotImplemented,
    /// [`CloudError::ImplementedElsewhere`].
    ImplementedElsewhere,
    /// The retry-after error, [`CloudError::Retry`], with this delay.
    Retry(Duration),
    /// [`CloudError::Throttled`] without a delay.
    Throttled,
    /// [`CloudError::Throttled`] asking the caller to wait this long.
    ThrottledFor(Duration),
    /// [`CloudError::Timeout`]; its `after` is the operation's injected latency (zero if none).
    Timeout,
}

impl InjectedError {
    /// The [`CloudError`] this injected error produces for `op` (with `latency`, the op's injected delay).
    pub fn to_cloud_error(&self, op: Operation, latency: Duration) -> CloudError {
        match self {
            InjectedError::Other(message) => {
                CloudError::provider(format!("injected failure of {op}"), message.clone())
            }
            InjectedError::InstanceNotFound => CloudError::InstanceNotFound,
            InjectedError::NotImplemented => CloudError::NotImplemented,
            InjectedError::ImplementedElsewhere => CloudError::ImplementedElsewhere,
            InjectedError::Retry(after) => {
                CloudError::retry(format!("injected retry-after for {op}"), *after)
            }
            InjectedError::Throttled => CloudError::Throttled {
                message: format!("injected throttling of {op}"),
                retry_after: None,
            },
            InjectedError::ThrottledFor(after) => CloudError::Throttled {
                message: format!("injected throttling of {op}"),
                retry_after: Some(*after),
            },
            InjectedError::Timeout => CloudError::Timeout {
                operation: op,
                after: latency,
            },
        }
    }
}

/// How many calls an injected [`Fault`] fails (also how many calls a conformance fault rule affects:
/// `ccm_conformance::faults::Times` is this type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// The next matching call only.
    Once,
    /// The next `n` matching calls (`N(0)` never fires).
    N(u32),
    /// Every matching call until the fault is cleared ([`FakeCloud::clear_faults`](crate::FakeCloud::clear_faults)).
    Always,
}

/// An error to return from an operation instead of answering, a given number of times.
///
/// ```
/// use std::time::Duration;
/// use ccm_provider_fake::{Fault, InjectedError, Times};
///
/// let fault = Fault::times(InjectedError::Retry(Duration::from_secs(42)), 2);
/// assert_eq!(fault.times, Times::N(2));
/// let fault = Fault { error: InjectedError::Throttled, times: Times::Always };
/// assert_eq!(fault, Fault::always(InjectedError::Throttled));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The error returned.
    pub error: InjectedError,
    /// How many calls fail.
    pub times: Times,
}

impl Fault {
    /// Fail the next matching call.
    pub fn once(error: InjectedError) -> Self {
        Fault {
            error,
            times: Times::Once,
        }
    }
    /// Fail the next `n` matching calls.
    pub fn times(error: InjectedError, n: u32) -> Self {
        Fault {
            error,
            times: Times::N(n),
        }
    }
    /// Fail every matching call.
    pub fn always(error: InjectedError) -> Self {
        Fault {
            error,
            times: Times::Always,
        }
    }
}

/// A fault waiting to fire, possibly limited to one target.
#[derive(Debug, Clone)]
struct Armed {
    target: Option<String>,
    error: InjectedError,
    /// `None` = always.
    remaining: Option<u32>,
}

/// Faults and latencies per operation. Faults of one operation fire in the order injected: the first armed
/// fault that matches the call's target fires and is used up.
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultTable {
    faults: BTreeMap<Operation, Vec<Armed>>,
    latency: BTreeMap<Operation, Duration>,
    default_latency: Duration,
    random: Option<RandomFaults>,
}

impl FaultTable {
    pub(crate) fn inject(&mut self, op: Operation, target: Option<&str>, fault: Fault) {
        let remaining = match fault.times {
            Times::Once => Some(1),
            Times::N(n) => Some(n),
            Times::Always => None,
        };
        if remaining == Some(0) {
            return;
        }
        self.faults.entry(op).or_default().push(Armed {
            target: target.map(str::to_owned),
            error: fault.error,
            remaining,
        });
    }

    /// The error the call `op` on `target` must return, using up one firing of the fault.
    pub(crate) fn fire(&mut self, op: Operation, target: &str) -> Option<InjectedError> {
        let armed = self.faults.get_mut(&op)?;
        let index = armed
            .iter()
            .position(|a| a.target.as_deref().is_none_or(|t| t == target))?;
        let error = armed[index].error.clone();
        if let Some(remaining) = armed[index].remaining.as_mut() {
            *remaining -= 1;
            if *remaining == 0 {
                armed.remove(index);
            }
        }
        if armed.is_empty() {
            self.faults.remove(&op);
        }
        Some(error)
    }

    /// How many armed faults remain for `op` (an `Always` fault counts once).
    pub(crate) fn pending(&self, op: Operation) -> usize {
        self.faults.get(&op).map_or(0, Vec::len)
    }

    pub(crate) fn set_latency(&mut self, op: Operation, latency: Duration) {
        if latency.is_zero() {
            self.latency.remove(&op);
        } else {
            self.latency.insert(op, latency);
        }
    }

    pub(crate) fn set_default_latency(&mut self, latency: Duration) {
        self.default_latency = latency;
    }

    /// The delay before answering `op`: its own latency, or the default one.
    pub(crate) fn latency(&self, op: Operation) -> Duration {
        self.latency
            .get(&op)
            .copied()
            .unwrap_or(self.default_latency)
    }

    /// Replace the random-fault rules (see [`crate::random`]).
    pub(crate) fn set_random(&mut self, random: RandomFaults) {
        self.random = Some(random);
    }

    /// The random part of the fate of a call of `op` arriving at `now`: extra latency and maybe an error.
    pub(crate) fn roll(&mut self, op: Operation, now: tokio::time::Instant) -> Decision {
        self.random
            .as_mut()
            .map_or_else(Decision::default, |random| random.roll(op, now))
    }

    pub(crate) fn clear_faults(&mut self) {
        self.faults.clear();
        self.random = None;
    }

    pub(crate) fn clear_latency(&mut self) {
        self.latency.clear();
        self.default_latency = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::ErrorKind;

    #[test]
    fn once_fires_once() {
        let mut t = FaultTable::default();
        t.inject(
            Operation::EnsureLoadBalancer,
            None,
            Fault::once(InjectedError::Throttled),
        );
        assert_eq!(
            t.fire(Operation::EnsureLoadBalancer, "a/b"),
            Some(InjectedError::Throttled)
        );
        assert_eq!(t.fire(Operation::EnsureLoadBalancer, "a/b"), None);
        assert_eq!(t.pending(Operation::EnsureLoadBalancer), 0);
    }

    #[test]
    fn n_times_then_next_fault_in_order() {
        let mut t = FaultTable::default();
        t.inject(
            Operation::EnsureLoadBalancer,
            None,
            Fault::times(InjectedError::Other("a".into()), 2),
        );
        t.inject(
            Operation::EnsureLoadBalancer,
            None,
            Fault::once(InjectedError::NotImplemented),
        );
        assert_eq!(
            t.fire(Operation::EnsureLoadBalancer, "x"),
            Some(InjectedError::Other("a".into()))
        );
        assert_eq!(
            t.fire(Operation::EnsureLoadBalancer, "x"),
            Some(InjectedError::Other("a".into()))
        );
        assert_eq!(
            t.fire(Operation::EnsureLoadBalancer, "x"),
            Some(InjectedError::NotImplemented)
        );
        assert_eq!(t.fire(Operation::EnsureLoadBalancer, "x"), None);
    }

    #[test]
    fn zero_times_never_fires() {
        let mut t = FaultTable::default();
        t.inject(
            Operation::EnsureLoadBalancer,
            None,
            Fault::times(InjectedError::Throttled, 0),
        );
        assert_eq!(t.fire(Operation::EnsureLoadBalancer, "x"), None);
        assert_eq!(t.pending(Operation::EnsureLoadBalancer), 0);
    }

    #[test]
    fn always_until_cleared_and_only_for_its_op() {
        let mut t = FaultTable::default();
        t.inject(
            Operation::UpdateLoadBalancer,
            None,
            Fault::always(InjectedError::Timeout),
        );
        for _ in 0..5 {
            assert_eq!(
                t.fire(Operation::UpdateLoadBalancer, "x"),
                Some(InjectedError::Timeout)
            );
        }
        assert_eq!(t.fire(Operation::EnsureLoadBalancer, "x"), None);
        t.clear_faults();
        assert_eq!(t.fire(Operation::UpdateLoadBalancer, "x"), None);
    }

    #[test]
    fn targeted_fault_fires_only_for_its_target() {
        let mut t = FaultTable::default();
        t.inject(
            Operation::InstanceExists,
            Some("node-b"),
            Fault::once(InjectedError::Throttled),
        );
        assert_eq!(t.fire(Operation::InstanceExists, "node-a"), None);
        assert_eq!(
            t.fire(Operation::InstanceExists, "node-b"),
            Some(InjectedError::Throttled)
        );
        assert_eq!(t.fire(Operation::InstanceExists, "node-b"), None);
    }

    #[test]
    fn latency_per_op_overrides_default() {
        let mut t = FaultTable::default();
        t.set_default_latency(Duration::from_millis(5));
        t.set_latency(Operation::EnsureLoadBalancer, Duration::from_secs(2));
        assert_eq!(
            t.latency(Operation::EnsureLoadBalancer),
            Duration::from_secs(2)
        );
        assert_eq!(
            t.latency(Operation::UpdateLoadBalancer),
            Duration::from_millis(5)
        );
        t.set_latency(Operation::EnsureLoadBalancer, Duration::ZERO);
        assert_eq!(
            t.latency(Operation::EnsureLoadBalancer),
            Duration::from_millis(5)
        );
        t.clear_latency();
        assert_eq!(t.latency(Operation::UpdateLoadBalancer), Duration::ZERO);
    }

    #[test]
    fn injected_errors_map_to_cloud_error_kinds() {
        let d = Duration::from_secs(3);
        let cases = [
            (InjectedError::Other("boom".into()), ErrorKind::Other),
            (InjectedError::InstanceNotFound, ErrorKind::InstanceNotFound),
            (InjectedError::NotImplemented, ErrorKind::NotImplemented),
            (
                InjectedError::ImplementedElsewhere,
                ErrorKind::ImplementedElsewhere,
            ),
            (InjectedError::Retry(d), ErrorKind::Retry),
            (InjectedError::Throttled, ErrorKind::Throttled),
            (InjectedError::ThrottledFor(d), ErrorKind::Throttled),
            (InjectedError::Timeout, ErrorKind::Timeout),
        ];
        for (injected, kind) in cases {
            assert_eq!(
                injected
                    .to_cloud_error(Operation::EnsureLoadBalancer, d)
                    .kind(),
                kind,
                "{injected:?}"
            );
        }
        let other =
            InjectedError::Other("boom".into()).to_cloud_error(Operation::EnsureLoadBalancer, d);
        assert_eq!(other.to_string(), "injected failure of create: boom");
        assert_eq!(
            InjectedError::Retry(d)
                .to_cloud_error(Operation::EnsureLoadBalancer, d)
                .retry_after(),
            Some(d)
        );
        assert_eq!(
            InjectedError::ThrottledFor(d)
                .to_cloud_error(Operation::ListRoutes, d)
                .retry_after(),
            Some(d)
        );
        let timeout = InjectedError::Timeout.to_cloud_error(Operation::EnsureLoadBalancer, d);
        assert!(
            matches!(timeout, CloudError::Timeout { operation, after } if operation == Operation::EnsureLoadBalancer && after == d)
        );
    }
}
