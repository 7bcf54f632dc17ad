//! The budget's state machine: which waiting call goes next, and when.
//!
//! Pure and clock-injected (every method takes the current time); [`RateLimitInterceptor`](super::RateLimitInterceptor)
//! is the thin async layer around it. A call needs, at the moment it goes:
//!
//! - a token of the hard cap (`--cloud-api-qps`/`--cloud-api-burst`), if one is set;
//! - a token of its operation's bucket (`--cloud-api-operation-limit`), if it has one;
//! - a token of the [adaptive rate](super::adaptive), if it is on and limiting;
//! - no hold on its operation class: after the cloud throttled a call with a retry-after, no call of the same
//!   class (the [`Capability`] the operation belongs to: instances, load balancers, routes, ...) goes before that
//!   time.
//!
//! Waiting calls are served as [`CallPriority`] says; one blocked only by something of its own (its class's hold
//! or its operation's bucket) does not block the calls behind it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::adaptive::{AdaptiveRate, AimdConfig, EPSILON, token_wait};
use super::{CallPriority, CloudBudget};
use crate::intercept::{Capability, Operation};
use crate::runtime::ratelimit::TokenBucket;

/// The longest retry-after honoured: a hold never lasts longer than this.
pub(crate) const MAX_HOLD: Duration = Duration::from_secs(60);

/// What the cloud's answer to a call says about the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The cloud took the call (whatever it answered).
    Accepted,
    /// The cloud throttled the call (or it timed out): slow down, and hold the class for `retry_after`.
    Congested {
        /// How long the cloud asked us to wait, if it said.
        retry_after: Option<Duration>,
    },
}

/// A call that may go now, and how long it waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) id: u64,
    pub(crate) waited: Duration,
}

#[derive(Debug, Clone)]
struct Waiter {
    id: u64,
    operation: Operation,
    arrived: Instant,
}

/// The operation class a retry-after holds.
type Class = Option<Capability>;

/// The budget's state (see the [module documentation](self)).
#[derive(Debug)]
pub(crate) struct Scheduler {
    cap: Option<TokenBucket>,
    operations: HashMap<Operation, TokenBucket>,
    adaptive: Option<AdaptiveRate>,
    holds: HashMap<Class, Instant>,
    queues: [VecDeque<Waiter>; 3],
    next_id: u64,
    shut_down: bool,
    abandoned: BTreeMap<Operation, usize>,
}

fn has_token(bucket: &mut TokenBucket, now: Instant) -> bool {
    bucket.tokens(now) >= 1.0 - EPSILON
}

impl Scheduler {
    /// The state for a valid `budget` at `now`; `aimd` is the adaptive rate's tuning when `budget.adaptive`.
    pub(crate) fn new(budget: &CloudBudget, aimd: AimdConfig, now: Instant) -> Self {
        let cap = budget
            .is_limited()
            .then(|| TokenBucket::new(budget.qps, budget.burst, now));
        let operations = budget
            .operations
            .iter()
            .filter(|(_, b)| b.qps > 0.0)
            .filter_map(|(name, b)| {
                Some((
                    Operation::from_name(name)?,
                    TokenBucket::new(b.qps, b.burst, now),
                ))
            })
            .collect();
        Scheduler {
            cap,
            operations,
            adaptive: budget.adaptive.then(|| AdaptiveRate::new(aimd, now)),
            holds: HashMap::new(),
            queues: Default::default(),
            next_id: 0,
            shut_down: false,
            abandoned: BTreeMap::new(),
        }
    }

    /// A call of `operation` at `priority` arrives at `now`: it joins its queue, and every call that may go now
    /// is granted. Returns the new call's id and the grants (which include it if it goes at once); `None` after
    /// [`shut_down`](Self::shut_down).
    pub(crate) fn arrive(
        &mut self,
        operation: Operation,
        priority: CallPriority,
        now: Instant,
    ) -> Option<(u64, Vec<Grant>)> {
        if self.shut_down {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.queues[priority.index()].push_back(Waiter {
            id,
            operation,
            arrived: now,
        });
        Some((id, self.dispatch(now)))
    }

    fn provider_ready(&mut self, now: Instant) -> bool {
        self.cap.as_mut().is_none_or(|b| has_token(b, now))
            && self.adaptive.as_mut().is_none_or(|a| a.ready(now))
    }

    /// The first waiting call, by priority then arrival, that nothing of its own blocks at `now`.
    fn first_eligible(&mut self, now: Instant) -> Option<(usize, usize)> {
        for (p, queue) in self.queues.iter().enumerate() {
            for (i, waiter) in queue.iter().enumerate() {
                let held = self.holds.get(&waiter.operation.capability());
                let blocked = held.is_some_and(|until| *until > now)
                    || self
                        .operations
                        .get_mut(&waiter.operation)
                        .is_some_and(|bucket| !has_token(bucket, now));
                if !blocked {
                    return Some((p, i));
                }
            }
        }
        None
    }

    /// Grant every waiting call that may go at `now`, in order.
    pub(crate) fn dispatch(&mut self, now: Instant) -> Vec<Grant> {
        self.holds.retain(|_, until| *until > now);
        let mut grants = Vec::new();
        while self.provider_ready(now) {
            let Some((p, i)) = self.first_eligible(now) else {
                break;
            };
            let Some(waiter) = self.queues[p].remove(i) else {
                break;
            };
            // `reserve` takes the token even if float rounding left a hair less than one
            if let Some(cap) = &mut self.cap {
                cap.reserve(now);
            }
            if let Some(bucket) = self.operations.get_mut(&waiter.operation) {
                bucket.reserve(now);
            }
            if let Some(adaptive) = &mut self.adaptive {
                adaptive.take(now);
            }
            grants.push(Grant {
                id: waiter.id,
                waited: now.saturating_duration_since(waiter.arrived),
            });
        }
        let pressure = self.waiting_total() > 0;
        if let Some(adaptive) = &mut self.adaptive {
            adaptive.set_pressure(now, pressure);
        }
        grants
    }

    /// When the next waiting call may go, if any waits: the time to call [`dispatch`](Self::dispatch) again
    /// (at the current rates; a change of state may make it earlier).
    pub(crate) fn next_wakeup(&mut self, now: Instant) -> Option<Instant> {
        if self.waiting_total() == 0 {
            return None;
        }
        let mut provider = now;
        if let Some(cap) = &mut self.cap {
            provider = provider.max(now + token_wait(cap.tokens(now), cap.qps()));
        }
        if let Some(adaptive) = &mut self.adaptive {
            provider = provider.max(now + adaptive.wait(now));
        }
        let mut best: Option<Instant> = None;
        for waiter in self.queues.iter().flatten() {
            let mut at = now;
            if let Some(until) = self.holds.get(&waiter.operation.capability()) {
                at = at.max(*until);
            }
            if let Some(bucket) = self.operations.get_mut(&waiter.operation) {
                at = at.max(now + token_wait(bucket.tokens(now), bucket.qps()));
            }
            best = Some(best.map_or(at, |b| b.min(at)));
            if at <= provider {
                break;
            }
        }
        best.map(|b| b.max(provider))
    }

    /// The call `id` stopped waiting (its caller gave up); `abandoned` counts it for the shutdown summary.
    /// Returns false if it was not waiting (already granted, or unknown).
    pub(crate) fn cancel(&mut self, id: u64, operation: Operation, abandoned: bool) -> bool {
        for queue in &mut self.queues {
            if let Some(i) = queue.iter().position(|w| w.id == id) {
                queue.remove(i);
                if abandoned {
                    *self.abandoned.entry(operation).or_default() += 1;
                }
                return true;
            }
        }
        false
    }

    /// Stop: every waiting call is abandoned (their ids are returned) and no call is admitted any more.
    pub(crate) fn shut_down(&mut self) -> Vec<u64> {
        self.shut_down = true;
        let mut ids = Vec::new();
        for queue in &mut self.queues {
            for waiter in queue.drain(..) {
                *self.abandoned.entry(waiter.operation).or_default() += 1;
                ids.push(waiter.id);
            }
        }
        ids
    }

    /// The calls abandoned so far, by operation, and forget them (for the one summary line at shutdown).
    pub(crate) fn take_abandoned(&mut self) -> BTreeMap<Operation, usize> {
        std::mem::take(&mut self.abandoned)
    }

    /// Learn from the cloud's answer to a call of `operation` at `now`. Returns true if the adaptive rate was
    /// lowered.
    pub(crate) fn on_outcome(
        &mut self,
        operation: Operation,
        outcome: Outcome,
        now: Instant,
    ) -> bool {
        let Some(adaptive) = &mut self.adaptive else {
            return false;
        };
        match outcome {
            Outcome::Accepted => {
                adaptive.on_accepted(now);
                false
            }
            Outcome::Congested { retry_after } => {
                if let Some(after) = retry_after.filter(|d| !d.is_zero()) {
                    let until = now + after.min(MAX_HOLD);
                    let hold = self.holds.entry(operation.capability()).or_insert(until);
                    *hold = (*hold).max(until);
                }
                adaptive.on_congestion(now)
            }
        }
    }

    /// The rate calls may go at now, calls per second: the lower of the hard cap and the adaptive limit; `None`
    /// if neither limits.
    pub(crate) fn rate(&mut self, now: Instant) -> Option<f64> {
        let adaptive = self.adaptive_limit(now);
        let cap = self.cap.as_ref().map(TokenBucket::qps);
        cap.into_iter().chain(adaptive).reduce(f64::min)
    }

    /// The adaptive limit alone (`None` while open or off).
    pub(crate) fn adaptive_limit(&mut self, now: Instant) -> Option<f64> {
        self.adaptive.as_mut().and_then(|a| {
            a.advance(now);
            a.limit()
        })
    }

    /// Calls waiting, per priority (in [`CallPriority::ALL`] order).
    pub(crate) fn waiting(&self) -> [usize; 3] {
        [0, 1, 2].map(|p| self.queues[p].len())
    }

    fn waiting_total(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intercept::Operation as Op;

    impl Scheduler {
        /// True once [`shut_down`](Self::shut_down) was called.
        pub(crate) fn is_shut_down(&self) -> bool {
            self.shut_down
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn ids(grants: &[Grant]) -> Vec<u64> {
        grants.iter().map(|g| g.id).collect()
    }

    fn capped(qps: f64, burst: u32) -> CloudBudget {
        CloudBudget::default().with_qps(qps).with_burst(burst)
    }

    /// Throttle once so the adaptive rate limits at about `rate` calls/s (from `rate / 0.9` accepted in the
    /// last second).
    fn limit_adaptive(s: &mut Scheduler, now: Instant, rate: f64) {
        let accepted = (rate / 0.9).round() as u64;
        for i in 0..accepted {
            let at = now - Duration::from_secs(1)
                + Duration::from_secs(1).mul_f64((i as f64 + 0.5) / accepted as f64);
            s.on_outcome(Op::InstanceExists, Outcome::Accepted, at);
        }
        assert!(s.on_outcome(
            Op::InstanceExists,
            Outcome::Congested { retry_after: None },
            now
        ));
    }

    #[test]
    fn open_and_uncapped_grants_everything_at_once() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&CloudBudget::default(), AimdConfig::default(), t0);
        for i in 0..1000 {
            let (id, grants) = s
                .arrive(Op::InstanceMetadata, CallPriority::Low, t0)
                .unwrap();
            assert_eq!(ids(&grants), [i]);
            assert_eq!(id, i);
        }
        assert_eq!(s.next_wakeup(t0), None);
        assert_eq!(s.rate(t0), None);
    }

    #[test]
    fn hard_cap_paces_calls_after_the_burst() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&capped(10.0, 2), AimdConfig::default(), t0);
        let mut granted = Vec::new();
        for _ in 0..5 {
            granted.extend(ids(&s
                .arrive(Op::InstanceExists, CallPriority::Normal, t0)
                .unwrap()
                .1));
        }
        assert_eq!(granted, [0, 1]);
        assert_eq!(s.waiting(), [0, 3, 0]);
        assert_eq!(s.next_wakeup(t0), Some(t0 + ms(100)));
        assert!(s.dispatch(t0 + ms(99)).is_empty());
        let g = s.dispatch(t0 + ms(100));
        assert_eq!(ids(&g), [2]);
        assert_eq!(g[0].waited, ms(100));
        assert_eq!(s.next_wakeup(t0 + ms(100)), Some(t0 + ms(200)));
        assert_eq!(ids(&s.dispatch(t0 + ms(300))), [3, 4]);
        assert_eq!(s.next_wakeup(t0 + ms(300)), None);
        assert_eq!(s.rate(t0), Some(10.0));
    }

    #[test]
    fn strict_priority_then_arrival_order() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&capped(10.0, 1), AimdConfig::default(), t0);
        // the burst goes to the first caller; the others queue
        assert_eq!(
            ids(&s
                .arrive(Op::InstanceExists, CallPriority::Low, t0)
                .unwrap()
                .1),
            [0]
        );
        for (op, p) in [
            (Op::InstanceExists, CallPriority::Low),        // 1
            (Op::InstanceShutdown, CallPriority::Low),      // 2
            (Op::UpdateLoadBalancer, CallPriority::Normal), // 3
            (Op::InstanceMetadata, CallPriority::High),     // 4
            (Op::ListRoutes, CallPriority::Normal),         // 5
            (Op::InstanceMetadata, CallPriority::High),     // 6
        ] {
            assert!(s.arrive(op, p, t0).unwrap().1.is_empty());
        }
        assert_eq!(s.waiting(), [2, 2, 2]);
        let mut order = Vec::new();
        let mut now = t0;
        while let Some(at) = s.next_wakeup(now) {
            now = at;
            order.extend(ids(&s.dispatch(now)));
            // a new High call arriving while Low calls wait goes before all of them
            if order.len() == 3 {
                assert!(
                    s.arrive(Op::InstanceMetadata, CallPriority::High, now)
                        .unwrap()
                        .1
                        .is_empty()
                );
            }
        }
        assert_eq!(order, [4, 6, 3, 7, 5, 1, 2]);
        assert_eq!(now, t0 + ms(700));
    }

    #[test]
    fn a_call_blocked_by_its_operation_limit_does_not_block_others() {
        let t0 = Instant::now();
        let budget = capped(100.0, 100).with_operation(Op::ListRoutes, 1.0, 1);
        let mut s = Scheduler::new(&budget, AimdConfig::default(), t0);
        assert_eq!(
            ids(&s.arrive(Op::ListRoutes, CallPriority::High, t0).unwrap().1),
            [0]
        );
        assert!(
            s.arrive(Op::ListRoutes, CallPriority::High, t0)
                .unwrap()
                .1
                .is_empty()
        );
        // a Low call of another operation goes at once, past the waiting High one
        assert_eq!(
            ids(&s
                .arrive(Op::InstanceExists, CallPriority::Low, t0)
                .unwrap()
                .1),
            [2]
        );
        assert_eq!(s.next_wakeup(t0), Some(t0 + Duration::from_secs(1)));
        assert_eq!(ids(&s.dispatch(t0 + Duration::from_secs(1))), [1]);
    }

    #[test]
    fn retry_after_holds_the_class_only() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&CloudBudget::default(), AimdConfig::default(), t0);
        // the very first call is throttled: nothing was accepted, so the limit drops to its floor (1/s), and
        // the instance calls are held for 5 s
        s.on_outcome(
            Op::InstanceExists,
            Outcome::Congested {
                retry_after: Some(secs(5)),
            },
            t0,
        );
        let t1 = t0 + secs(1);
        assert!(
            s.arrive(Op::InstanceMetadata, CallPriority::High, t1)
                .unwrap()
                .1
                .is_empty()
        );
        // another class takes the token the held call cannot use
        assert_eq!(
            ids(&s.arrive(Op::ListRoutes, CallPriority::Low, t1).unwrap().1),
            [1]
        );
        assert_eq!(s.next_wakeup(t1), Some(t0 + secs(5)));
        assert!(s.dispatch(t0 + secs(5) - ms(1)).is_empty());
        assert_eq!(ids(&s.dispatch(t0 + secs(5))), [0]);
        // a longer retry-after extends the hold, a shorter one does not shorten it; huge ones are capped
        let t2 = t0 + secs(10);
        for after in [secs(2), ms(10)] {
            s.on_outcome(
                Op::InstanceShutdown,
                Outcome::Congested {
                    retry_after: Some(after),
                },
                t2,
            );
        }
        assert!(
            s.arrive(Op::InstanceExists, CallPriority::High, t2)
                .unwrap()
                .1
                .is_empty()
        );
        assert_eq!(s.next_wakeup(t2), Some(t2 + secs(2)));
        s.on_outcome(
            Op::InstanceShutdown,
            Outcome::Congested {
                retry_after: Some(secs(86_400)),
            },
            t2,
        );
        assert_eq!(s.next_wakeup(t2), Some(t2 + MAX_HOLD));
    }

    #[test]
    fn the_adaptive_rate_paces_waiting_calls_in_priority_order() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut s = Scheduler::new(
            &CloudBudget::default(),
            AimdConfig::default(),
            t0 - Duration::from_secs(10),
        );
        limit_adaptive(&mut s, t0, 10.0);
        let rate = s.rate(t0).unwrap();
        assert!((rate - 10.0).abs() < 0.5, "{rate}");
        for i in 0..10 {
            let p = if i % 2 == 0 {
                CallPriority::Low
            } else {
                CallPriority::High
            };
            assert!(s.arrive(Op::InstanceExists, p, t0).unwrap().1.is_empty());
        }
        let mut order = Vec::new();
        let mut now = t0;
        while let Some(at) = s.next_wakeup(now) {
            now = at;
            order.extend(ids(&s.dispatch(now)));
        }
        assert_eq!(order, [1, 3, 5, 7, 9, 0, 2, 4, 6, 8]);
        // ten calls at the limit, one every 1/rate s (growing only after the 1 s settle)
        let took = now - t0;
        let want = Duration::from_secs_f64(10.0 / rate);
        assert!(took.abs_diff(want) < ms(2), "{took:?}, want {want:?}");
    }

    #[test]
    fn without_adaptive_throttling_changes_nothing() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&CloudBudget::unlimited(), AimdConfig::default(), t0);
        assert!(!s.on_outcome(
            Op::InstanceExists,
            Outcome::Congested {
                retry_after: Some(Duration::from_secs(5))
            },
            t0
        ));
        assert_eq!(
            ids(&s
                .arrive(Op::InstanceExists, CallPriority::Low, t0)
                .unwrap()
                .1),
            [0]
        );
        assert_eq!(s.rate(t0), None);
        assert_eq!(s.adaptive_limit(t0), None);
    }

    #[test]
    fn the_effective_rate_is_the_lower_limit() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut s = Scheduler::new(
            &capped(45.0, 40),
            AimdConfig::default(),
            t0 - Duration::from_secs(10),
        );
        assert_eq!(s.rate(t0), Some(45.0));
        limit_adaptive(&mut s, t0, 20.0);
        let rate = s.rate(t0).unwrap();
        assert!((rate - 20.0).abs() < 0.5, "{rate}");
        assert_eq!(s.adaptive_limit(t0), Some(rate));
    }

    #[test]
    fn cancel_and_shutdown_count_abandoned_calls_by_operation() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&capped(1.0, 1), AimdConfig::default(), t0);
        s.arrive(Op::InstanceExists, CallPriority::Low, t0).unwrap();
        let (a, _) = s.arrive(Op::InstanceExists, CallPriority::Low, t0).unwrap();
        let (b, _) = s
            .arrive(Op::InstanceShutdown, CallPriority::Low, t0)
            .unwrap();
        let (c, _) = s
            .arrive(Op::InstanceMetadata, CallPriority::High, t0)
            .unwrap();
        let (d, _) = s.arrive(Op::InstanceExists, CallPriority::Low, t0).unwrap();
        // a caller that gives up before shutdown is not counted
        assert!(s.cancel(a, Op::InstanceExists, false));
        assert!(!s.cancel(a, Op::InstanceExists, false), "gone already");
        assert!(s.cancel(b, Op::InstanceShutdown, true));
        let mut drained = s.shut_down();
        drained.sort_unstable();
        assert_eq!(drained, [c, d]);
        assert!(s.is_shut_down());
        assert!(
            s.arrive(Op::InstanceExists, CallPriority::High, t0)
                .is_none()
        );
        let abandoned = s.take_abandoned();
        assert_eq!(
            abandoned.into_iter().collect::<Vec<_>>(),
            [
                (Op::InstanceExists, 1),
                (Op::InstanceShutdown, 1),
                (Op::InstanceMetadata, 1)
            ]
            .into_iter()
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect::<Vec<_>>()
        );
        assert!(s.take_abandoned().is_empty());
        assert_eq!(s.next_wakeup(t0), None);
    }

    /// The whole loop against a simulated cloud quota: 50 requests/s, burst 100. 1,000 High calls from 10
    /// workers plus 200 Low calls from 10 sweep workers, each worker sending its next call as soon as the last
    /// one was answered (a throttled call is retried after the cloud's retry-after). Initialization finishes
    /// within 1.2x of the ideal, throttling stays under 5 %, and no High call waits behind a Low one.
    #[test]
    fn a_thousand_initializations_against_a_quota() {
        #[derive(Clone, Copy)]
        struct Worker {
            priority: CallPriority,
            left: u32,
            /// waiting since (id), or idle until
            waiting: Option<u64>,
            idle_until: Instant,
        }
        let t0 = Instant::now();
        let mut s = Scheduler::new(&CloudBudget::default(), AimdConfig::default(), t0);
        let (quota, burst) = (50.0, 100.0);
        let mut cloud_tokens: f64 = burst;
        let mut workers: Vec<Worker> = (0..20)
            .map(|i| Worker {
                priority: if i < 10 {
                    CallPriority::High
                } else {
                    CallPriority::Low
                },
                left: if i < 10 { 100 } else { 20 },
                waiting: None,
                idle_until: t0,
            })
            .collect();
        let (mut accepted, mut throttled) = (0u32, 0u32);
        let mut high_done_at = None;
        let mut low_granted_while_high_waits = 0;
        let step = ms(1);
        let mut now = t0;
        let mut last = t0;
        while workers.iter().any(|w| w.left > 0) && now < t0 + Duration::from_secs(120) {
            cloud_tokens = (cloud_tokens + quota * (now - last).as_secs_f64()).min(burst);
            last = now;
            let mut grants = Vec::new();
            for w in workers.iter_mut() {
                if w.left > 0 && w.waiting.is_none() && w.idle_until <= now {
                    let (id, granted) = s.arrive(Op::InstanceMetadata, w.priority, now).unwrap();
                    w.waiting = Some(id);
                    grants.extend(granted);
                }
            }
            grants.extend(s.dispatch(now));
            let high_waiting = s.waiting()[0] > 0;
            for g in grants {
                let w = workers
                    .iter_mut()
                    .find(|w| w.waiting == Some(g.id))
                    .unwrap();
                w.waiting = None;
                if w.priority == CallPriority::Low && high_waiting {
                    low_granted_while_high_waits += 1;
                }
                if cloud_tokens >= 1.0 {
                    cloud_tokens -= 1.0;
                    accepted += 1;
                    w.left -= 1;
                    s.on_outcome(Op::InstanceMetadata, Outcome::Accepted, now);
                } else {
                    throttled += 1;
                    let retry_after = Duration::from_secs_f64((1.0 - cloud_tokens) / quota);
                    w.idle_until = now + retry_after;
                    s.on_outcome(
                        Op::InstanceMetadata,
                        Outcome::Congested {
                            retry_after: Some(retry_after),
                        },
                        now,
                    );
                }
            }
            if high_done_at.is_none()
                && workers
                    .iter()
                    .filter(|w| w.priority == CallPriority::High)
                    .all(|w| w.left == 0)
            {
                high_done_at = Some(now);
            }
            now += step;
        }
        let high_done = high_done_at.expect("initialization finished") - t0;
        let ideal = Duration::from_secs_f64(1000.0 / quota);
        let total = accepted + throttled;
        assert!(
            f64::from(throttled) <= 0.05 * f64::from(total),
            "{throttled} of {total} calls throttled"
        );
        assert!(
            high_done <= ideal.mul_f64(1.2),
            "initialization took {high_done:?}, ideal {ideal:?}"
        );
        assert_eq!(low_granted_while_high_waits, 0);
        assert_eq!(accepted, 1200);
        eprintln!(
            "initialization {high_done:?} (ideal {ideal:?}), {throttled} of {total} calls throttled"
        );
    }
}
