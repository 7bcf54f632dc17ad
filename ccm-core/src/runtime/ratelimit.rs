//! The one token bucket of the workspace (`golang.org/x/time/rate` semantics), used by the work queue's overall
//! limiter, the cloud-call budget, the Kubernetes client's `--kube-api-qps` limiter and the Event writer.
//!
//! The bucket holds up to `burst` tokens and refills at `qps` tokens per second. It can be used two ways:
//!
//! - [`TokenBucket::reserve`]: take a token now even if there is none, and wait for it (the balance may go
//!   negative, a debt later callers pay). Callers are served in order; this is how client-go's limiter works.
//! - [`TokenBucket::try_take`]: take a token only if one is available right now without debt. A caller that
//!   only ever uses `try_take` never delays a caller that uses `reserve`: this is how lower-priority traffic
//!   (Events) shares a budget with the writes a controller needs.
//!
//! ```
//! use std::time::Duration;
//! use ccm_core::runtime::ratelimit::TokenBucket;
//! use tokio::time::Instant;
//!
//! let start = Instant::now();
//! let mut bucket = TokenBucket::new(10.0, 2, start);
//! assert_eq!(bucket.reserve(start), Duration::ZERO);
//! assert_eq!(bucket.reserve(start), Duration::ZERO);
//! // The third call in the same instant waits 100 ms for its token...
//! assert_eq!(bucket.reserve(start), Duration::from_millis(100));
//! // ...and a low-priority caller gets nothing until the debt is paid and a whole token is back.
//! assert_eq!(bucket.try_take(start), Err(Duration::from_millis(200)));
//! assert_eq!(bucket.try_take(start + Duration::from_millis(200)), Ok(()));
//! ```

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket, pure (every method takes the current time, so tests drive it without a clock) and not
/// synchronised: wrap it in a `Mutex` to share it.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket refilled at `qps` tokens per second (at least one token per ~31 years), holding at most
    /// `burst` tokens (at least 1).
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: if qps.is_finite() && qps > 0.0 {
                qps
            } else {
                1e-9
            },
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// The refill rate in tokens per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
    }

    /// Tokens available at `now` (negative while reservations are outstanding).
    pub fn tokens(&mut self, now: Instant) -> f64 {
        self.refill(now);
        self.tokens
    }

    /// Take one token at `now` and return how long to wait before using it (zero if one was available).
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            self.secs(-self.tokens)
        }
    }

    /// Take one token only if a whole one is available at `now`; otherwise take nothing and return how long
    /// until one would be, if nobody else takes tokens meanwhile.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(self.secs(1.0 - self.tokens))
        }
    }

    fn secs(&self, tokens: f64) -> Duration {
        Duration::try_from_secs_f64(tokens / self.qps).unwrap_or(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl TokenBucket {
        fn burst(&self) -> u32 {
            self.burst as u32
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_then_paced_reservations_in_order() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 3, t0);
        let waits: Vec<_> = (0..6).map(|_| b.reserve(t0)).collect();
        assert_eq!(waits, [ms(0), ms(0), ms(0), ms(100), ms(200), ms(300)]);
        // After the debt is paid the bucket refills up to `burst`, never beyond.
        assert!((b.tokens(t0 + Duration::from_secs(100)) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn try_take_never_goes_into_debt() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(20.0, 1, t0);
        assert_eq!(b.try_take(t0), Ok(()));
        assert_eq!(b.try_take(t0), Err(ms(50)));
        assert!(
            b.tokens(t0).abs() < 1e-9,
            "a refused try_take takes nothing"
        );
        assert_eq!(b.try_take(t0 + ms(50)), Ok(()));
    }

    #[test]
    fn low_priority_waits_while_reservations_keep_the_bucket_in_debt() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 1, t0);
        // A controller keeps one request outstanding every 100 ms: the bucket never holds a whole token.
        for step in 0..50u64 {
            let now = t0 + ms(step * 100);
            b.reserve(now);
            assert!(b.try_take(now).is_err(), "step {step}");
        }
        // When the controller goes idle, the low-priority caller gets a token.
        assert_eq!(b.try_take(t0 + Duration::from_secs(6)), Ok(()));
    }

    #[test]
    fn time_going_backwards_is_ignored_and_bad_rates_do_not_panic() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(1);
        let mut b = TokenBucket::new(1.0, 1, later);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert_eq!(b.reserve(t0), Duration::from_secs(1));
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut b = TokenBucket::new(qps, 0, t0);
            assert_eq!(b.burst(), 1);
            assert_eq!(b.reserve(t0), Duration::ZERO);
            assert!(b.reserve(t0) > Duration::from_secs(1_000_000));
        }
    }
}
