//! The adaptive rate: how fast the cloud accepts calls right now, learnt from its answers (AIMD).
//!
//! [`AdaptiveRate`] is a pure state machine (every method takes the current time, so tests need no clock): the
//! budget ([`RateLimitInterceptor`](super::RateLimitInterceptor)) feeds it each call's outcome and asks for tokens.
//!
//! - **Open** (no limit) while the cloud accepts every call: no call waits.
//! - **Decrease.** A congestion signal (the cloud answered [`Throttled`](crate::CloudError::Throttled), or a
//!   call [timed out](crate::CloudError::Timeout)) means the cloud's quota bucket is empty at that moment. From
//!   then on, while the signals keep coming (at most [`window`](AimdConfig::window) apart), the cloud accepts
//!   calls exactly at its quota rate, so the calls it accepted since that first signal, per second, measure the
//!   quota ("the probe"). After [`min_sample`](AimdConfig::min_sample) of probe the limit is set to
//!   [`decrease`](AimdConfig::decrease) × that rate, and a new probe starts. The first signal (no probe yet)
//!   cuts at once, to [`decrease`](AimdConfig::decrease) × the calls accepted in the last
//!   [`window`](AimdConfig::window), divided by the whole window: a burst the cloud allowed is spread over it
//!   rather than taken for its rate. With fewer than [`min_accepted`](AimdConfig::min_accepted) accepted calls to
//!   measure from (the cloud asked us to wait, say) a cut halves the limit instead
//!   ([`max_cut`](AimdConfig::max_cut)). A cut never raises the limit nor sets it below
//!   [`min_rate`](AimdConfig::min_rate), and two cuts are at least [`min_sample`](AimdConfig::min_sample) apart:
//!   the answers of calls already in flight do not cut again.
//! - **Increase.** Once [`settle`](AimdConfig::settle) has passed since the last signal, and only while calls are
//!   waiting for the limit, it grows: after the first cut from open it doubles every second
//!   ([`slow_start`](AimdConfig::slow_start): that first cut may be far too low, since it guessed); after any
//!   other cut it grows linearly, by [`increase_fraction`](AimdConfig::increase_fraction) of the limit that cut
//!   set per second (at least [`min_increase`](AimdConfig::min_increase) calls/s per second).
//! - **Reopen.** After [`reopen_after`](AimdConfig::reopen_after) without a signal the limit is removed.
//!
//! ```
//! use std::time::Duration;
//! use ccm_core::budget::adaptive::{AdaptiveRate, AimdConfig};
//! use tokio::time::Instant;
//!
//! let t0 = Instant::now();
//! let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
//! assert_eq!(rate.limit(), None, "open until the cloud pushes back");
//! // the cloud accepted 100 calls in the last second, then throttled one
//! for i in 0..100 {
//!     rate.on_accepted(t0 + Duration::from_millis(10 * i));
//! }
//! assert!(rate.on_congestion(t0 + Duration::from_secs(1)));
//! let limit = rate.limit().unwrap();
//! assert!((89.0..91.0).contains(&limit), "0.9 x the 100 calls/s accepted: {limit}");
//! // it keeps throttling: 10 calls accepted over the next 250 ms measure a quota of 40/s
//! for i in 0..10 {
//!     rate.on_accepted(t0 + Duration::from_millis(1001 + 25 * i));
//!     rate.on_congestion(t0 + Duration::from_millis(1010 + 25 * i));
//! }
//! assert!(rate.on_congestion(t0 + Duration::from_millis(1250)));
//! assert!((35.0..37.0).contains(&rate.limit().unwrap()));
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Tokens within this of a whole token count as one (float rounding of refills at timer ticks).
pub(crate) const EPSILON: f64 = 1e-6;

/// How long until `tokens`, refilled at `rate` per second, make a whole token (zero if they do).
pub(crate) fn token_wait(tokens: f64, rate: f64) -> Duration {
    if tokens >= 1.0 - EPSILON {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64((1.0 - tokens) / rate).unwrap_or(Duration::MAX)
}

/// Tuning of [`AdaptiveRate`]. `Default` gives the values the runtime uses.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AimdConfig {
    /// A cut sets the limit to this fraction of the rate the cloud accepted (default 0.9).
    pub decrease: f64,
    /// With fewer than [`min_accepted`](AimdConfig::min_accepted) accepted calls to measure from, a cut
    /// multiplies the limit by this instead (default 0.5: halves it).
    pub max_cut: f64,
    /// The fewest accepted calls a rate is measured from (default 5).
    pub min_accepted: u64,
    /// The lowest limit, calls per second (default 1).
    pub min_rate: f64,
    /// Growth after a cut other than the first from open, per second, as a fraction of the limit that cut set
    /// (default 0.05).
    pub increase_fraction: f64,
    /// The least linear growth, calls per second per second (default 1).
    pub min_increase: f64,
    /// Growth factor per second after the first cut from open (default 2: doubles every second).
    pub slow_start: f64,
    /// The window the first cut of a probe measures over, and the longest gap between the signals of one probe
    /// (default 1 s).
    pub window: Duration,
    /// The shortest probe, and the shortest time between two cuts (default 250 ms).
    pub min_sample: Duration,
    /// The limit does not grow until this long after the last signal (default 1 s).
    pub settle: Duration,
    /// The limit is removed after this long without a signal (default 30 s).
    pub reopen_after: Duration,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            decrease: 0.9,
            max_cut: 0.5,
            min_accepted: 5,
            min_rate: 1.0,
            increase_fraction: 0.05,
            min_increase: 1.0,
            slow_start: 2.0,
            window: Duration::from_secs(1),
            min_sample: Duration::from_millis(250),
            settle: Duration::from_secs(1),
            reopen_after: Duration::from_secs(30),
        }
    }
}

/// Counts of events in 1 ms slots over a bounded window (at most about a thousand slots for a 1 s window,
/// whatever the rate).
#[derive(Debug, Clone)]
struct RecentCount {
    origin: Instant,
    slots: VecDeque<(u64, u64)>,
    keep: u64,
}

const SLOT_NANOS: u128 = 1_000_000;

impl RecentCount {
    fn new(origin: Instant, window: Duration) -> Self {
        RecentCount {
            origin,
            slots: VecDeque::new(),
            keep: u64::try_from(window.as_nanos() / SLOT_NANOS)
                .unwrap_or(u64::MAX)
                .saturating_add(1),
        }
    }

    fn slot(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos() / SLOT_NANOS)
            .unwrap_or(u64::MAX)
    }

    fn add(&mut self, now: Instant) {
        let slot = self.slot(now);
        match self.slots.back_mut() {
            Some((last, count)) if *last >= slot => *count += 1,
            _ => self.slots.push_back((slot, 1)),
        }
        let oldest = slot.saturating_sub(self.keep);
        while self.slots.front().is_some_and(|(s, _)| *s < oldest) {
            self.slots.pop_front();
        }
    }

    /// Events after `from`: in the slots after the one holding it (events in the same millisecond as `from`
    /// may have come before it, and are left out).
    fn since(&self, from: Instant) -> u64 {
        // `None` (before the origin) is below every slot
        let first = (from >= self.origin).then(|| self.slot(from));
        let after = self.slots.iter().filter(|(s, _)| Some(*s) > first);
        after.map(|(_, c)| c).sum()
    }
}

/// How the limit grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Growth {
    /// After the first cut from open: multiplicative.
    SlowStart,
    /// After any other cut: linear.
    Linear,
}

/// The adaptive rate limit (see the [module documentation](self)). Not synchronised.
#[derive(Debug, Clone)]
pub struct AdaptiveRate {
    config: AimdConfig,
    /// `None`: open.
    limit: Option<f64>,
    growth: Growth,
    step: f64,
    tokens: f64,
    updated: Instant,
    accepted: RecentCount,
    probe_start: Option<Instant>,
    last_signal: Option<Instant>,
    last_cut: Option<Instant>,
    pressure: bool,
}

impl AdaptiveRate {
    /// Open (no limit), at `now`.
    pub fn new(config: AimdConfig, now: Instant) -> Self {
        AdaptiveRate {
            accepted: RecentCount::new(now, config.window),
            config,
            limit: None,
            growth: Growth::SlowStart,
            step: 0.0,
            tokens: 0.0,
            updated: now,
            probe_start: None,
            last_signal: None,
            last_cut: None,
            pressure: false,
        }
    }

    /// The current limit in calls per second, `None` while open. Call [`advance`](Self::advance) first for the
    /// value at a given time.
    pub fn limit(&self) -> Option<f64> {
        self.limit
    }

    fn burst(limit: f64) -> f64 {
        // 20 ms worth of calls: smooth pacing, and fast rates are not held back by 1 ms timer ticks.
        (limit / 50.0).max(1.0)
    }

    /// Let time pass until `now`: refill tokens, grow the limit (while under pressure, after `settle`), and
    /// reopen after `reopen_after` without a signal. Time going backwards is ignored.
    pub fn advance(&mut self, now: Instant) {
        let now = now.max(self.updated);
        let from = self.updated;
        self.updated = now;
        let (Some(limit), Some(last_signal)) = (self.limit, self.last_signal) else {
            return;
        };
        if now.saturating_duration_since(last_signal) >= self.config.reopen_after {
            self.limit = None;
            self.probe_start = None;
            self.tokens = 0.0;
            return;
        }
        let grow_from = (last_signal + self.config.settle).clamp(from, now);
        // tokens at the old limit until growth starts, then at the growing limit (its integral)
        let mut tokens = limit * grow_from.saturating_duration_since(from).as_secs_f64();
        let secs = now.saturating_duration_since(grow_from).as_secs_f64();
        let grown = if self.pressure && secs > 0.0 {
            match self.growth {
                Growth::SlowStart => {
                    let ln = self.config.slow_start.max(1.0).ln();
                    let factor = (ln * secs).exp();
                    tokens += if ln > 0.0 {
                        limit * (factor - 1.0) / ln
                    } else {
                        limit * secs
                    };
                    limit * factor
                }
                Growth::Linear => {
                    tokens += limit * secs + 0.5 * self.step * secs * secs;
                    limit + self.step * secs
                }
            }
        } else {
            tokens += limit * secs;
            limit
        };
        self.limit = Some(grown);
        self.tokens = (self.tokens + tokens).min(Self::burst(grown));
    }

    /// Say whether calls are waiting for the limit from `now` on: the limit grows only while they are.
    pub fn set_pressure(&mut self, now: Instant, pressure: bool) {
        self.advance(now);
        self.pressure = pressure;
    }

    /// True if a call may go at `now` (always while open).
    pub fn ready(&mut self, now: Instant) -> bool {
        self.advance(now);
        self.limit.is_none() || self.tokens >= 1.0 - EPSILON
    }

    /// Take the token of a call that goes at `now` (nothing while open).
    pub fn take(&mut self, now: Instant) {
        self.advance(now);
        if self.limit.is_some() {
            self.tokens -= 1.0;
        }
    }

    /// How long from `now` until a call may go at the current limit (zero while open or with a token there).
    pub fn wait(&mut self, now: Instant) -> Duration {
        self.advance(now);
        self.limit
            .map_or(Duration::ZERO, |limit| token_wait(self.tokens, limit))
    }

    /// The cloud accepted a call at `now` (any answer but a congestion signal).
    pub fn on_accepted(&mut self, now: Instant) {
        self.advance(now);
        self.accepted.add(now);
    }

    /// The cloud throttled a call (or a call timed out) at `now`. Returns true if the limit was lowered.
    pub fn on_congestion(&mut self, now: Instant) -> bool {
        self.advance(now);
        let config = &self.config;
        let previous = self.last_signal.replace(now);
        let continuous =
            previous.is_some_and(|p| now.saturating_duration_since(p) <= config.window);
        if !continuous {
            self.probe_start = None;
        }
        if self
            .last_cut
            .is_some_and(|cut| now.saturating_duration_since(cut) < config.min_sample)
        {
            // an answer to a call sent before the last cut; it may start the next probe
            self.probe_start.get_or_insert(now);
            return false;
        }
        let (accepted, secs) = match self.probe_start {
            Some(start) => {
                let secs = now.saturating_duration_since(start);
                if secs < config.min_sample {
                    return false;
                }
                // a probe longer than the window measures its last window
                let secs = secs.min(config.window);
                (self.accepted.since(now - secs), secs.as_secs_f64())
            }
            None => {
                self.probe_start = Some(now);
                let from = now.checked_sub(config.window).unwrap_or(now);
                (self.accepted.since(from), config.window.as_secs_f64())
            }
        };
        let target = match self.limit {
            Some(current) if accepted < config.min_accepted => current * config.max_cut,
            _ => config.decrease * accepted as f64 / secs,
        }
        .max(config.min_rate);
        match self.limit {
            Some(current) if target >= current => return false,
            Some(_) => self.growth = Growth::Linear,
            None => {
                self.growth = Growth::SlowStart;
                self.tokens = 0.0;
            }
        }
        self.step = (config.increase_fraction * target).max(config.min_increase);
        self.tokens = self.tokens.min(Self::burst(target));
        self.limit = Some(target);
        self.last_cut = Some(now);
        self.probe_start = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// `n` accepted calls spread evenly over the `over` before `end` (in the middle of equal shares).
    fn accept(rate: &mut AdaptiveRate, end: Instant, n: u64, over: Duration) {
        let start = end - over;
        for i in 0..n {
            rate.on_accepted(start + over.mul_f64((i as f64 + 0.5) / n as f64));
        }
    }

    fn limit(rate: &AdaptiveRate) -> f64 {
        rate.limit().expect("limited")
    }

    /// A rate that was cut to about `target` from a steady flow at `target / 0.9` (so growth is linear).
    fn cut_to(target: f64, t0: Instant) -> (AdaptiveRate, Instant) {
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        let first = t0 + secs(5);
        accept(
            &mut rate,
            first,
            (2.0 * target / 0.9).round() as u64,
            secs(1),
        );
        assert!(rate.on_congestion(first));
        // a probe at the same rate: linear growth from here
        let cut = first + ms(250);
        accept(&mut rate, cut, (target / 0.9 / 4.0).round() as u64, ms(250));
        rate.on_congestion(first + ms(125));
        assert!(rate.on_congestion(cut));
        (rate, cut)
    }

    #[test]
    fn open_until_the_first_signal_and_never_waits() {
        let t0 = Instant::now();
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        for i in 0..10_000 {
            let now = t0 + Duration::from_micros(i);
            assert!(rate.ready(now));
            rate.take(now);
            rate.on_accepted(now);
        }
        assert_eq!(rate.limit(), None);
        assert_eq!(rate.wait(t0 + ms(10)), Duration::ZERO);
    }

    #[test]
    fn the_first_cut_spreads_what_was_accepted_over_the_window() {
        let t0 = Instant::now();
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        let now = t0 + secs(10);
        // a burst of 100 calls accepted within 50 ms counts as 100 calls in the 1 s window, not 2,000/s
        accept(&mut rate, now, 100, ms(50));
        assert!(rate.on_congestion(now));
        assert!((limit(&rate) - 90.0).abs() < 0.01, "{}", limit(&rate));
        // after a cut from open the next call waits for a whole token
        assert!(!rate.ready(now));
        let wait = rate.wait(now);
        assert!(wait > ms(10) && wait < ms(12), "{wait:?}");
        // a signal before any call: nothing was accepted, the floor applies
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        assert!(rate.on_congestion(t0));
        assert_eq!(limit(&rate), 1.0);
    }

    #[test]
    fn a_probe_measures_the_quota_while_signals_continue() {
        let t0 = Instant::now();
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        let start = t0 + secs(5);
        // the cloud's burst: 300 calls accepted in the second before the first rejection
        accept(&mut rate, start, 300, secs(1));
        assert!(rate.on_congestion(start));
        assert!((limit(&rate) - 270.0).abs() < 0.01);
        // the cloud now accepts its quota, 50/s, and rejects the rest; answers within min_sample of the cut
        // do not cut again
        accept(&mut rate, start + ms(200), 10, ms(200));
        assert!(!rate.on_congestion(start + ms(200)));
        accept(&mut rate, start + ms(300), 5, ms(100));
        assert!(rate.on_congestion(start + ms(300)));
        // 15 accepted in 300 ms: 50/s, so 45/s, not inflated by the burst
        assert!((limit(&rate) - 45.0).abs() < 2.0, "{}", limit(&rate));
        // the next probe starts at that cut; the same rate again changes nothing
        accept(&mut rate, start + ms(700), 20, ms(400));
        rate.on_congestion(start + ms(500));
        assert!(!rate.on_congestion(start + ms(700)));
    }

    #[test]
    fn a_gap_in_the_signals_ends_the_probe() {
        let (mut rate, cut) = cut_to(45.0, Instant::now());
        // no signals for 3 s (30/s accepted, then 50/s in the last second), then one: that is the first
        // signal of a new probe, measured over the window (50/s), not over the 3 s since the last probe began
        // (36.7/s)
        accept(&mut rate, cut + secs(2), 60, secs(2));
        accept(&mut rate, cut + secs(3), 50, secs(1));
        assert!(rate.on_congestion(cut + secs(3)));
        assert!((limit(&rate) - 45.0).abs() < 1.0, "{}", limit(&rate));
    }

    #[test]
    fn without_enough_answers_a_cut_halves_and_never_goes_below_the_floor() {
        let t0 = Instant::now();
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        let now = t0 + secs(5);
        accept(&mut rate, now, 100, secs(1));
        assert!(rate.on_congestion(now));
        assert!((limit(&rate) - 90.0).abs() < 0.01);
        // the cloud accepts nothing any more (a long retry-after, say): the limit halves per cut
        rate.on_congestion(now + ms(150));
        assert!(rate.on_congestion(now + ms(300)));
        assert!((limit(&rate) - 45.0).abs() < 0.01, "{}", limit(&rate));
        let mut at = now + ms(300);
        for _ in 0..20 {
            at += ms(300);
            rate.on_congestion(at);
        }
        assert_eq!(limit(&rate), 1.0);
    }

    #[test]
    fn paces_at_the_limit() {
        let t0 = Instant::now();
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        accept(&mut rate, t0 + secs(2), 20, secs(1));
        assert!(rate.on_congestion(t0 + secs(2)));
        assert!((limit(&rate) - 18.0).abs() < 0.01);
        // no pressure: the limit stays; calls go 1/18 s apart
        let mut now = t0 + secs(2);
        let mut sent = 0;
        while now < t0 + secs(3) {
            if rate.ready(now) {
                rate.take(now);
                sent += 1;
            }
            now += ms(1);
        }
        assert!((17..=19).contains(&sent), "{sent}");
        assert!((limit(&rate) - 18.0).abs() < 0.01);
    }

    #[test]
    fn after_the_first_cut_from_open_it_doubles_every_second_under_pressure() {
        let t0 = Instant::now();
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        accept(&mut rate, t0 + secs(2), 20, secs(1));
        assert!(rate.on_congestion(t0 + secs(2)));
        rate.set_pressure(t0 + secs(2), true);
        rate.advance(t0 + secs(3));
        assert!((limit(&rate) - 18.0).abs() < 1e-9, "settling");
        rate.advance(t0 + secs(5));
        assert!((limit(&rate) - 72.0).abs() < 1e-6, "{}", limit(&rate));
        // the tokens of those two seconds, 18 x 3 / ln 2 = 77.9, are capped at the burst (20 ms worth)
        assert!(rate.ready(t0 + secs(5)));
        for _ in 0..((72.0_f64 / 50.0).ceil() as usize).max(1) {
            rate.take(t0 + secs(5));
        }
        assert!(!rate.ready(t0 + secs(5)));
    }

    #[test]
    fn after_a_measured_cut_it_grows_linearly_after_settle_only_under_pressure() {
        let (mut rate, cut) = cut_to(90.0, Instant::now());
        let l0 = limit(&rate);
        assert!((l0 - 90.0).abs() < 3.0, "{l0}");
        // no pressure: no growth
        rate.advance(cut + secs(5));
        assert_eq!(limit(&rate), l0);
        // pressure from 5 s on (settled): +5 % of l0 per second
        rate.set_pressure(cut + secs(5), true);
        rate.advance(cut + secs(9));
        assert!((limit(&rate) - l0 * 1.2).abs() < 1e-6, "{}", limit(&rate));
        // growth stops with the pressure
        rate.set_pressure(cut + secs(10), false);
        let l1 = limit(&rate);
        assert!((l1 - l0 * 1.25).abs() < 1e-6);
        rate.advance(cut + secs(12));
        assert_eq!(limit(&rate), l1);
    }

    #[test]
    fn linear_growth_waits_for_settle_and_is_at_least_min_increase() {
        let (mut rate, cut) = cut_to(9.0, Instant::now());
        let l0 = limit(&rate);
        rate.set_pressure(cut, true);
        rate.advance(cut + ms(999));
        assert_eq!(limit(&rate), l0, "settling");
        rate.advance(cut + ms(3000));
        // 5 % of 9 is 0.45: the floor of 1 call/s per second applies
        assert!((limit(&rate) - (l0 + 2.0)).abs() < 1e-6, "{}", limit(&rate));
    }

    #[test]
    fn reopens_after_a_quiet_period() {
        let t0 = Instant::now();
        let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
        accept(&mut rate, t0 + secs(2), 100, secs(1));
        assert!(rate.on_congestion(t0 + secs(2)));
        rate.advance(t0 + secs(31));
        assert!(rate.limit().is_some());
        rate.advance(t0 + secs(32));
        assert_eq!(rate.limit(), None);
        assert!(rate.ready(t0 + secs(32)));
        // a new episode starts from what was accepted in the window
        let now = t0 + secs(40);
        accept(&mut rate, now, 30, secs(1));
        assert!(rate.on_congestion(now));
        assert!((limit(&rate) - 27.0).abs() < 0.01, "{}", limit(&rate));
    }

    #[test]
    fn time_going_backwards_is_ignored() {
        let t0 = Instant::now();
        let later = t0 + secs(10);
        let mut rate = AdaptiveRate::new(AimdConfig::default(), later);
        assert!(rate.on_congestion(later));
        rate.advance(t0);
        rate.on_accepted(t0);
        assert!(!rate.on_congestion(t0), "within min_sample of the cut");
        assert_eq!(limit(&rate), 1.0);
    }

    /// A simulated cloud quota (a token bucket that rejects beyond it) against unbounded demand paced only by
    /// the adaptive rate, for two minutes: rejections stay under 5 % and the accepted rate close to the quota.
    #[test]
    fn against_a_quota_rejections_are_rare_and_throughput_is_near_the_quota() {
        for (quota, burst) in [(50.0, 100.0), (50.0, 50.0), (10.0, 10.0), (500.0, 50.0)] {
            let t0 = Instant::now();
            let mut rate = AdaptiveRate::new(AimdConfig::default(), t0);
            let mut cloud_tokens: f64 = burst;
            let (mut accepted, mut rejected) = (0u64, 0u64);
            let step = Duration::from_micros(500);
            let mut now = t0;
            let end = t0 + secs(120);
            rate.set_pressure(t0, true);
            while now < end {
                cloud_tokens = (cloud_tokens + quota * step.as_secs_f64()).min(burst);
                // send whenever the limit allows (at most 20 per step: 40,000/s)
                for _ in 0..20 {
                    if !rate.ready(now) {
                        break;
                    }
                    rate.take(now);
                    if cloud_tokens >= 1.0 {
                        cloud_tokens -= 1.0;
                        accepted += 1;
                        rate.on_accepted(now);
                    } else {
                        rejected += 1;
                        rate.on_congestion(now);
                    }
                }
                now += step;
            }
            let total = (accepted + rejected) as f64;
            let ideal = quota * 120.0 + burst;
            assert!(
                rejected as f64 <= 0.05 * total,
                "quota {quota}/{burst}: {rejected} of {total} calls rejected"
            );
            assert!(
                accepted as f64 >= ideal / 1.2,
                "quota {quota}/{burst}: {accepted} accepted, ideal {ideal}"
            );
        }
    }
}
