//! Random faults: an error probability and a latency distribution (base ± jitter) per operation, optionally
//! limited to a time window after the cloud's start, drawn from a seeded generator so that a run can be
//! repeated. They are part of the [`FaultTable`](crate::fault::FaultTable): one fault mechanism, whose
//! injected errors are [`InjectedError`]s like those of the counted faults.

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_core::intercept::Operation;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng as _};

use crate::fault::InjectedError;

/// One random-fault rule: which operations it affects, when, and how.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RandomFault {
    /// The operations affected; `None` = every operation.
    pub(crate) operations: Option<BTreeSet<Operation>>,
    /// The chance (0 to 1) that a call fails with `error`.
    pub(crate) error_probability: f64,
    /// The error a failing call returns.
    pub(crate) error: InjectedError,
    /// The mean added delay.
    pub(crate) latency: Duration,
    /// The added delay is uniform in `latency ± jitter` (`jitter <= latency`).
    pub(crate) jitter: Duration,
    /// The rule applies from this long after the cloud's start ...
    pub(crate) start_after: Duration,
    /// ... until this long after it (`None` = for ever).
    pub(crate) stop_after: Option<Duration>,
}

impl RandomFault {
    /// Whether the rule applies to a call of `op` arriving `elapsed` after the cloud's start (the window is
    /// half-open: `start_after <= elapsed < stop_after`).
    pub(crate) fn applies(&self, op: Operation, elapsed: Duration) -> bool {
        let in_window =
            elapsed >= self.start_after && self.stop_after.is_none_or(|stop| elapsed < stop);
        in_window && self.operations.as_ref().is_none_or(|ops| ops.contains(&op))
    }
}

/// What the random rules decided for one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Decision {
    /// Delay added to the operation's fixed latency.
    pub(crate) latency: Duration,
    /// The error to return (after the delay), if any.
    pub(crate) error: Option<InjectedError>,
}

/// Decide the fate of a call of `op` arriving `elapsed` after the start: every applicable rule, in order,
/// adds a delay drawn uniformly from `latency ± jitter` and may fail the call with its probability; the first
/// failing rule's error wins. Each applicable rule draws the same numbers whatever the outcome, so the
/// sequence of decisions depends only on the seed and the sequence of calls.
pub(crate) fn decide(
    rules: &[RandomFault],
    op: Operation,
    elapsed: Duration,
    rng: &mut impl Rng,
) -> Decision {
    let mut decision = Decision::default();
    for rule in rules.iter().filter(|r| r.applies(op, elapsed)) {
        let spread = u64::try_from(rule.jitter.as_nanos()).unwrap_or(u64::MAX);
        let offset = rng.random_range(0..=spread.saturating_mul(2));
        let low = rule.latency.saturating_sub(rule.jitter);
        decision.latency += low + Duration::from_nanos(offset);
        let fails = rng.random_bool(rule.error_probability.clamp(0.0, 1.0));
        if fails && decision.error.is_none() {
            decision.error = Some(rule.error.clone());
        }
    }
    decision
}

/// The random rules with their generator and the instant the window is measured from.
#[derive(Debug, Clone)]
pub(crate) struct RandomFaults {
    rules: Vec<RandomFault>,
    rng: StdRng,
    started: tokio::time::Instant,
}

impl RandomFaults {
    /// Rules drawn from `seed`, with windows measured from `started`.
    pub(crate) fn new(rules: Vec<RandomFault>, seed: u64, started: tokio::time::Instant) -> Self {
        RandomFaults {
            rules,
            rng: StdRng::seed_from_u64(seed),
            started,
        }
    }

    /// The decision for a call of `op` arriving at `now`.
    pub(crate) fn roll(&mut self, op: Operation, now: tokio::time::Instant) -> Decision {
        let elapsed = now.saturating_duration_since(self.started);
        decide(&self.rules, op, elapsed, &mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> RandomFault {
        RandomFault {
            operations: None,
            error_probability: 0.0,
            error: InjectedError::Other("random".into()),
            latency: Duration::ZERO,
            jitter: Duration::ZERO,
            start_after: Duration::ZERO,
            stop_after: None,
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn window_is_half_open_and_operations_filter() {
        let r = RandomFault {
            operations: Some([Operation::EnsureLoadBalancer].into()),
            start_after: secs(10),
            stop_after: Some(secs(70)),
            ..rule()
        };
        assert!(!r.applies(Operation::EnsureLoadBalancer, secs(9)));
        assert!(r.applies(Operation::EnsureLoadBalancer, secs(10)));
        assert!(r.applies(Operation::EnsureLoadBalancer, Duration::from_millis(69_999)));
        assert!(!r.applies(Operation::EnsureLoadBalancer, secs(70)));
        assert!(!r.applies(Operation::InstanceExists, secs(20)));
        let all = rule();
        for op in Operation::ALL {
            assert!(all.applies(op, secs(1_000_000)), "{op}");
        }
    }

    #[test]
    fn certain_and_impossible_errors() {
        let mut rng = StdRng::seed_from_u64(1);
        let never = rule();
        let always = RandomFault {
            error_probability: 1.0,
            error: InjectedError::Throttled,
            ..rule()
        };
        for _ in 0..100 {
            assert_eq!(
                decide(
                    std::slice::from_ref(&never),
                    Operation::ListRoutes,
                    secs(0),
                    &mut rng
                ),
                Decision::default()
            );
            assert_eq!(
                decide(
                    std::slice::from_ref(&always),
                    Operation::ListRoutes,
                    secs(0),
                    &mut rng
                )
                .error,
                Some(InjectedError::Throttled)
            );
        }
    }

    #[test]
    fn error_rate_and_latency_follow_the_distribution() {
        let r = RandomFault {
            error_probability: 0.3,
            latency: Duration::from_millis(200),
            jitter: Duration::from_millis(150),
            ..rule()
        };
        let mut rng = StdRng::seed_from_u64(42);
        let n = 10_000;
        let decisions: Vec<Decision> = (0..n)
            .map(|_| {
                decide(
                    std::slice::from_ref(&r),
                    Operation::CreateRoute,
                    secs(5),
                    &mut rng,
                )
            })
            .collect();
        let errors = decisions.iter().filter(|d| d.error.is_some()).count();
        assert!((2_700..3_300).contains(&errors), "{errors} errors of {n}");
        let min = decisions.iter().map(|d| d.latency).min().unwrap();
        let max = decisions.iter().map(|d| d.latency).max().unwrap();
        assert!(
            min >= Duration::from_millis(50) && min < Duration::from_millis(60),
            "{min:?}"
        );
        assert!(
            max <= Duration::from_millis(350) && max > Duration::from_millis(340),
            "{max:?}"
        );
        let mean = decisions.iter().map(|d| d.latency).sum::<Duration>() / n;
        assert!(
            mean > Duration::from_millis(195) && mean < Duration::from_millis(205),
            "{mean:?}"
        );
    }

    #[test]
    fn outside_the_window_nothing_is_drawn_or_added() {
        let r = RandomFault {
            error_probability: 1.0,
            latency: secs(1),
            stop_after: Some(secs(60)),
            ..rule()
        };
        let mut rng = StdRng::seed_from_u64(3);
        assert_eq!(
            decide(
                std::slice::from_ref(&r),
                Operation::ListRoutes,
                secs(60),
                &mut rng
            ),
            Decision::default()
        );
        let d = decide(
            std::slice::from_ref(&r),
            Operation::ListRoutes,
            secs(59),
            &mut rng,
        );
        assert_eq!(d.latency, secs(1));
        assert!(d.error.is_some());
    }

    #[test]
    fn rules_add_latency_and_the_first_error_wins() {
        let first = RandomFault {
            error_probability: 1.0,
            error: InjectedError::Timeout,
            latency: secs(1),
            ..rule()
        };
        let second = RandomFault {
            error_probability: 1.0,
            error: InjectedError::Throttled,
            latency: secs(2),
            ..rule()
        };
        let mut rng = StdRng::seed_from_u64(9);
        let d = decide(&[first, second], Operation::ListRoutes, secs(0), &mut rng);
        assert_eq!(d.latency, secs(3));
        assert_eq!(d.error, Some(InjectedError::Timeout));
    }

    #[test]
    fn the_same_seed_repeats_the_same_decisions() {
        let r = RandomFault {
            error_probability: 0.5,
            latency: Duration::from_millis(100),
            jitter: Duration::from_millis(100),
            ..rule()
        };
        let run = |seed: u64| {
            let started = tokio::time::Instant::now();
            let mut faults = RandomFaults::new(vec![r.clone()], seed, started);
            (0..50)
                .map(|_| faults.roll(Operation::InstanceExists, started))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
