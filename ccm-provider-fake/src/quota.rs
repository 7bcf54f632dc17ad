//! An API quota like a real cloud's: a token bucket of requests per second, checked when a call arrives.
//!
//! A call that finds the bucket empty is rejected at once with [`CloudError::Throttled`] (carrying the time until
//! the next token as its retry-after hint) and counted, so a test can show that a CCM stays inside its quota
//! ([`FakeCloud::throttled_count`](crate::FakeCloud::throttled_count) stays 0) or does not.

use std::time::Duration;

use ccm_core::CloudError;
use ccm_core::intercept::Operation;
use ccm_core::runtime::ratelimit::TokenBucket;
use tokio::time::Instant;

/// An invalid quota.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QuotaError {
    /// The rate is zero, negative or not a number.
    #[error(
        "fake cloud quota: requests per second must be a finite number greater than 0, got {0}; \
         call clear_quota to remove the quota instead"
    )]
    InvalidRate(f64),
    /// A burst of zero would reject every call.
    #[error("fake cloud quota: the burst must be at least 1 request")]
    ZeroBurst,
}

/// A token bucket (the workspace's one [`TokenBucket`]): `burst` requests at once, refilled at `rate` per
/// second; full when created. A call only takes a token that is there (no debt), as a cloud's quota works.
#[derive(Debug, Clone)]
pub(crate) struct Quota {
    rate: f64,
    burst: u32,
    bucket: TokenBucket,
}

impl Quota {
    /// A full bucket.
    pub(crate) fn new(rate: f64, burst: u32) -> Result<Quota, QuotaError> {
        if !rate.is_finite() || rate <= 0.0 {
            return Err(QuotaError::InvalidRate(rate));
        }
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        Ok(Quota {
            rate,
            burst,
            bucket: TokenBucket::new(rate, burst, Instant::now()),
        })
    }

    /// Take a token for a call arriving now, or say how long until one is available.
    pub(crate) fn try_take(&mut self) -> Result<(), Duration> {
        self.try_take_at(Instant::now())
    }

    fn try_take_at(&mut self, now: Instant) -> Result<(), Duration> {
        self.bucket.try_take(now)
    }

    /// The error a rejected call of `op` returns.
    pub(crate) fn error(&self, op: Operation, retry_after: Duration) -> CloudError {
        CloudError::Throttled {
            message: format!(
                "fake cloud quota of {} requests per second (burst {}) exceeded by {op}",
                self.rate, self.burst
            ),
            retry_after: Some(retry_after),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_quotas_are_errors() {
        assert_eq!(
            Quota::new(0.0, 1).unwrap_err(),
            QuotaError::InvalidRate(0.0)
        );
        assert!(matches!(
            Quota::new(f64::NAN, 1),
            Err(QuotaError::InvalidRate(_))
        ));
        assert!(matches!(
            Quota::new(-3.0, 1),
            Err(QuotaError::InvalidRate(_))
        ));
        assert_eq!(Quota::new(1.0, 0).unwrap_err(), QuotaError::ZeroBurst);
        assert!(
            QuotaError::InvalidRate(0.0)
                .to_string()
                .contains("clear_quota")
        );
    }

    fn assert_close(taken: Result<(), Duration>, want: Duration) {
        let wait = taken.expect_err("the bucket is empty");
        assert!(
            wait.abs_diff(want) < Duration::from_micros(1),
            "{wait:?} != {want:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_rate() {
        let mut quota = Quota::new(10.0, 5).unwrap();
        for _ in 0..5 {
            assert!(quota.try_take().is_ok());
        }
        // empty: the next token comes in 1/10 s
        assert_close(quota.try_take(), Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(50)).await;
        assert_close(quota.try_take(), Duration::from_millis(50));
        tokio::time::advance(Duration::from_millis(50)).await;
        assert!(quota.try_take().is_ok());
        assert!(quota.try_take().is_err());
        // a long pause refills the bucket to its burst, no more
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..5 {
            assert!(quota.try_take().is_ok());
        }
        assert!(quota.try_take().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn steady_rate_at_the_limit_is_never_rejected() {
        // (a burst of 2 keeps float rounding of the refill out of the picture)
        let mut quota = Quota::new(50.0, 2).unwrap();
        for _ in 0..500 {
            assert!(quota.try_take().is_ok());
            tokio::time::advance(Duration::from_millis(20)).await;
        }
        let err = quota.error(Operation::InstanceExists, Duration::from_millis(20));
        assert_eq!(err.kind(), ccm_core::ErrorKind::Throttled);
        assert_eq!(err.retry_after(), Some(Duration::from_millis(20)));
        assert!(err.to_string().contains("50 requests per second (burst 2)"));
    }
}
