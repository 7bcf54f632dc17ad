//! A client-side token bucket for Kubernetes API requests: `--kube-api-qps` / `--kube-api-burst`, enforced the
//! way client-go's `flowcontrol.NewTokenBucketRateLimiter` does (kube-rs has no such limiter), on the workspace's
//! one [`TokenBucket`].
//!
//! The bucket holds up to `burst` tokens and refills at `qps` tokens per second; every request takes one token,
//! waiting for it when the bucket is empty ([`Throttle::acquire`], awaited by a named client before it sends a
//! request). A waiting request has reserved its token, so requests leave in the order they asked. Zero and negative
//! limits mean what they mean to client-go ([`effective_limits`]).

use std::sync::{Arc, Mutex, MutexGuard};

use ccm_core::runtime::ratelimit::TokenBucket;
use tokio::time::Instant;

/// client-go's default QPS, used when `qps == 0`.
pub const CLIENT_GO_DEFAULT_QPS: f32 = 5.0;
/// client-go's default burst, used when `burst == 0`.
pub const CLIENT_GO_DEFAULT_BURST: i32 = 10;

/// A token bucket shared by its clones (or none: no limit), which a request waits on before it is sent.
#[derive(Debug, Clone)]
pub struct Throttle {
    bucket: Option<Arc<Mutex<TokenBucket>>>,
    /// Take only a token that is free now; otherwise wait and look again (normal: reserve a token, going into
    /// debt if need be, as client-go's limiter does).
    low_priority: bool,
}

impl Throttle {
    /// A limiter of `qps` requests per second with bursts of `burst`, with client-go's handling of zero and
    /// negative values.
    pub fn new(qps: f32, burst: i32) -> Self {
        let (qps, burst) = effective_limits(qps, burst);
        Throttle {
            bucket: qps.map(|qps| {
                Arc::new(Mutex::new(TokenBucket::new(
                    f64::from(qps),
                    burst,
                    Instant::now(),
                )))
            }),
            low_priority: false,
        }
    }

    /// A throttle over the same bucket for traffic that must never delay this one's (Events): its requests only
    /// take tokens nobody else is waiting for, so they wait while this one's keep the bucket busy.
    pub fn low_priority(&self) -> Self {
        Throttle {
            bucket: self.bucket.clone(),
            low_priority: true,
        }
    }

    /// Wait until one request may be sent, and take its token.
    pub async fn acquire(&self) {
        let Some(bucket) = &self.bucket else {
            return;
        };
        let lock =
            || -> MutexGuard<'_, TokenBucket> { bucket.lock().unwrap_or_else(|e| e.into_inner()) };
        if !self.low_priority {
            let wait = lock().reserve(Instant::now());
            if !wait.is_zero() {
                tracing::trace!(wait_ms = wait.as_millis() as u64, "client-side throttling");
                tokio::time::sleep(wait).await;
            }
            return;
        }
        loop {
            let taken = lock().try_take(Instant::now());
            match taken {
                Ok(()) => return,
                // Look again when a token could be free; a normal request may take it first.
                Err(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}

/// client-go's rules: `qps == 0` → 5, `burst == 0` → 10, `qps < 0` → no limit (`None`).
pub fn effective_limits(qps: f32, burst: i32) -> (Option<f32>, u32) {
    let burst = u32::try_from(burst).ok().filter(|b| *b > 0);
    let qps = if qps == 0.0 {
        Some(CLIENT_GO_DEFAULT_QPS)
    } else {
        // NaN and negative `qps`: no limit.
        (qps > 0.0).then_some(qps)
    };
    (qps, burst.unwrap_or(CLIENT_GO_DEFAULT_BURST.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tower::ServiceExt;

    impl Throttle {
        /// Whether requests are limited at all.
        pub(crate) fn is_limited(&self) -> bool {
            self.bucket.is_some()
        }
    }

    /// Send `n` requests one after the other and return when each was sent, relative to the start.
    async fn send_sequentially(layer: &Throttle, n: u32) -> Vec<Duration> {
        let start = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..n {
            layer.acquire().await;
            sent.push(Instant::now() - start);
        }
        sent
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let layer = Throttle::new(20.0, 30);
        assert!(layer.is_limited());
        let sent = send_sequentially(&layer, 40).await;
        // the first 30 leave at once
        assert!(sent[..30].iter().all(|d| d.is_zero()), "{sent:?}");
        // then one every 50 ms
        for (i, at) in sent[30..].iter().enumerate() {
            let want = Duration::from_millis(50 * (i as u64 + 1));
            let diff = at.abs_diff(want);
            assert!(
                diff < Duration::from_millis(2),
                "request {}: {at:?} vs {want:?}",
                30 + i
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_refills_while_idle_but_not_beyond_burst() {
        let layer = Throttle::new(10.0, 5);
        let sent = send_sequentially(&layer, 5).await;
        assert!(sent.iter().all(|d| d.is_zero()));
        // after one second 10 tokens were earned, but the bucket holds 5
        tokio::time::advance(Duration::from_secs(1)).await;
        let sent = send_sequentially(&layer, 7).await;
        assert!(sent[..5].iter().all(|d| d.is_zero()), "{sent:?}");
        assert!(sent[5] >= Duration::from_millis(99), "{sent:?}");
        assert!(sent[6] >= Duration::from_millis(199), "{sent:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn clones_of_a_layer_share_one_bucket() {
        let layer = Throttle::new(1.0, 2);
        let (a, b) = (&layer, layer.clone());
        let start = Instant::now();
        a.acquire().await;
        b.acquire().await;
        a.acquire().await;
        let at = Instant::now();
        assert!(at - start >= Duration::from_millis(999), "{:?}", at - start);
    }

    #[tokio::test(start_paused = true)]
    async fn throughput_over_a_long_run_is_qps() {
        let layer = Throttle::new(20.0, 30);
        let sent = send_sequentially(&layer, 230).await;
        // 30 from the burst, then 200 at 20/s: 10 s
        let last = *sent.last().unwrap();
        assert!(
            last.abs_diff(Duration::from_secs(10)) < Duration::from_millis(5),
            "{last:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn negative_qps_disables_limiting_and_zero_means_client_go_defaults() {
        let unlimited = Throttle::new(-1.0, 0);
        assert!(!unlimited.is_limited());
        let sent = send_sequentially(&unlimited, 1000).await;
        assert!(sent.iter().all(|d| d.is_zero()));

        assert_eq!(effective_limits(0.0, 0), (Some(5.0), 10));
        assert_eq!(effective_limits(20.0, 30), (Some(20.0), 30));
        assert_eq!(effective_limits(-1.0, 30), (None, 30));
        assert_eq!(effective_limits(f32::NAN, 3), (None, 3));
        let defaults = Throttle::new(0.0, 0);
        let sent = send_sequentially(&defaults, 11).await;
        assert!(sent[..10].iter().all(|d| d.is_zero()));
        assert!(sent[10] >= Duration::from_millis(199), "{sent:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_are_served_in_turn() {
        // Through tower's Buffer (as kube's Client does), concurrent requests queue for tokens.
        let layer = Throttle::new(10.0, 1);
        let inner = tower::service_fn(move |n: u32| {
            let layer = layer.clone();
            async move {
                layer.acquire().await;
                Ok::<_, std::convert::Infallible>((n, Instant::now()))
            }
        });
        let svc = tower::buffer::Buffer::new(inner, 64);
        let start = Instant::now();
        let tasks: Vec<_> = (0..5)
            .map(|i| {
                let svc = svc.clone();
                tokio::spawn(async move { svc.oneshot(i).await.unwrap().1 })
            })
            .collect();
        let mut times = Vec::new();
        for t in tasks {
            times.push(t.await.unwrap() - start);
        }
        times.sort();
        for (i, at) in times.iter().enumerate() {
            let want = Duration::from_millis(100 * i as u64);
            assert!(at.abs_diff(want) < Duration::from_millis(2), "{times:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn low_priority_requests_never_delay_normal_ones() {
        let writes = Throttle::new(10.0, 2);
        let events = writes.low_priority();
        let start = Instant::now();
        // Ten events queue up first...
        let event_task = {
            let events = events.clone();
            tokio::spawn(async move { send_sequentially(&events, 10).await })
        };
        tokio::task::yield_now().await;
        // ...the two burst tokens went to events, but from now on writes leave exactly as if events did not
        // exist: one every 100 ms.
        let sent = send_sequentially(&writes, 20).await;
        for (i, at) in sent.iter().enumerate() {
            let want = Duration::from_millis(100 * (i as u64 + 1));
            assert!(
                at.abs_diff(want) < Duration::from_millis(2),
                "write {i}: {sent:?}"
            );
        }
        // The events go once writes are done: the remaining 8 at the bucket's rate.
        let event_times = event_task.await.unwrap();
        let last = start + *event_times.last().unwrap();
        assert!(
            last - start >= Duration::from_millis(2000),
            "{event_times:?}"
        );
        assert!(
            last - start <= Duration::from_millis(3000),
            "{event_times:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn low_priority_alone_gets_the_full_rate() {
        let events = Throttle::new(20.0, 30).low_priority();
        let sent = send_sequentially(&events, 230).await;
        let last = *sent.last().unwrap();
        assert!(
            last.abs_diff(Duration::from_secs(10)) < Duration::from_millis(60),
            "{last:?}"
        );
    }
}
