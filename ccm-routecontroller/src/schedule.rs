//! When passes run: the periodic loop of the Go reference, or event-driven passes coalesced to at most one per
//! period, with retry backoff and a slow full resync.
//!
//! Both modes drive one work queue named `Routes` (as in Go's watch mode, so the `workqueue_*` metrics carry
//! `name="Routes"`) holding a single key: a pass always covers the whole cluster.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_core::runtime::metrics::WorkqueueMetrics;
use ccm_core::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::RouteSyncMode;

/// The queue name (the `name` label of the `workqueue_*` metrics), as in Go.
pub const QUEUE_NAME: &str = "Routes";
/// The single key of the queue, as in Go.
pub const QUEUE_KEY: &str = "routes";

/// Decides when passes of the route controller run.
///
/// - [`RouteSyncMode::Periodic`]: a pass starts every `period`, measured from the start of the previous one; a
///   pass longer than the period is followed immediately by the next (Go's `wait.NonSlidingUntil`).
///   [`trigger`](Self::trigger) is ignored and failures are not retried early.
/// - [`RouteSyncMode::EventDriven`]: [`trigger`](Self::trigger) asks for a pass; it starts at once unless one
///   started less than `period` ago, in which case it starts `period` after that one (all triggers in between are
///   coalesced into it; triggers during a pass lead to exactly one more pass). A failed pass is retried with
///   exponential backoff from `period` to `max_backoff`; a successful pass resets the backoff. `resync` after the
///   end of the last pass, a full pass runs even without triggers.
///
/// The first pass starts as soon as [`run`](Self::run) is called.
#[derive(Clone, Debug)]
pub struct Scheduler {
    queue: WorkQueue<&'static str>,
    last_start: Arc<Mutex<Option<Instant>>>,
    mode: RouteSyncMode,
    period: Duration,
}

impl Scheduler {
    /// A scheduler; with `metrics`, the queue records the `workqueue_*` metrics under the name `Routes`.
    pub fn new(
        mode: RouteSyncMode,
        period: Duration,
        max_backoff: Duration,
        metrics: Option<&WorkqueueMetrics>,
    ) -> Self {
        let limiter = ItemExponentialBackoff::new(period, max_backoff.max(period));
        let queue = match metrics {
            Some(m) => WorkQueue::with_metrics(QUEUE_NAME, limiter, m),
            None => WorkQueue::new(QUEUE_NAME, limiter),
        };
        Scheduler {
            queue,
            last_start: Arc::new(Mutex::new(None)),
            mode,
            period,
        }
    }

    /// The mode.
    pub fn mode(&self) -> RouteSyncMode {
        self.mode
    }

    /// Ask for a pass (event-driven mode; ignored in periodic mode).
    pub fn trigger(&self) {
        if matches!(self.mode, RouteSyncMode::Periodic) {
            return;
        }
        let delay = self.delay_until_allowed(Instant::now());
        self.queue.add_after(QUEUE_KEY, delay);
    }

    /// How long from `now` until a new pass may start: zero if none started within the last period.
    pub fn delay_until_allowed(&self, now: Instant) -> Duration {
        let last = *self.last_start.lock().unwrap_or_else(|e| e.into_inner());
        last.map(|start| (start + self.period).saturating_duration_since(now))
            .unwrap_or_default()
    }

    /// Run passes until `shutdown` is cancelled. `pass` returns true when the pass fully succeeded. A pass in
    /// progress when `shutdown` is cancelled is finished first.
    pub async fn run<F, Fut>(&self, shutdown: CancellationToken, mut pass: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        self.queue.add(QUEUE_KEY);
        let mut resync_at: Option<Instant> = None;
        loop {
            let resync = async {
                match resync_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let item = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                item = self.queue.get() => item,
                _ = resync => {
                    resync_at = None;
                    tracing::debug!("periodic full route resync");
                    self.queue.add(QUEUE_KEY);
                    continue;
                }
            };
            let Some(taken) = item else { break };
            let item = *taken.key();
            *self.last_start.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            if matches!(self.mode, RouteSyncMode::Periodic) {
                self.queue.add_after(QUEUE_KEY, self.period);
            }
            let ok = pass().await;
            if let RouteSyncMode::EventDriven { resync } = self.mode {
                if ok {
                    self.queue.forget(&item);
                } else {
                    self.queue.add_rate_limited(item);
                    tracing::debug!(
                        retries = self.queue.num_requeues(&item),
                        "route pass failed; retrying with backoff"
                    );
                }
                resync_at = Some(Instant::now() + resync);
            }
            drop(taken);
        }
        self.queue.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    const PERIOD: Duration = Duration::from_secs(10);
    const RESYNC: Duration = Duration::from_secs(300);

    /// Records pass start times (seconds since `t0`); each pass takes `durations[i]` (default 0) and returns
    /// `results[i]` (default true).
    #[derive(Clone)]
    struct Recorder {
        t0: Instant,
        starts: Arc<Mutex<Vec<u64>>>,
        durations: Arc<Mutex<VecDeque<u64>>>,
        results: Arc<Mutex<VecDeque<bool>>>,
    }

    impl Recorder {
        fn new(durations: &[u64], results: &[bool]) -> Self {
            Recorder {
                t0: Instant::now(),
                starts: Arc::default(),
                durations: Arc::new(Mutex::new(durations.iter().copied().collect())),
                results: Arc::new(Mutex::new(results.iter().copied().collect())),
            }
        }
        async fn pass(&self) -> bool {
            let start = Instant::now();
            self.starts
                .lock()
                .unwrap()
                .push(start.duration_since(self.t0).as_secs());
            let d = self.durations.lock().unwrap().pop_front().unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(d)).await;
            self.results.lock().unwrap().pop_front().unwrap_or(true)
        }
        fn starts(&self) -> Vec<u64> {
            self.starts.lock().unwrap().clone()
        }
        async fn at(&self, secs: u64) {
            tokio::time::sleep_until(self.t0 + Duration::from_secs(secs)).await;
        }
    }

    fn start(
        mode: RouteSyncMode,
        rec: &Recorder,
    ) -> (Scheduler, CancellationToken, tokio::task::JoinHandle<()>) {
        let sched = Scheduler::new(mode, PERIOD, Duration::from_secs(60), None);
        let token = CancellationToken::new();
        let handle = {
            let (sched, token, rec) = (sched.clone(), token.clone(), rec.clone());
            tokio::spawn(async move {
                sched
                    .run(token, || {
                        let rec = rec.clone();
                        async move { rec.pass().await }
                    })
                    .await
            })
        };
        (sched, token, handle)
    }

    fn event_driven() -> RouteSyncMode {
        RouteSyncMode::EventDriven { resync: RESYNC }
    }

    #[tokio::test(start_paused = true)]
    async fn triggers_are_coalesced_to_one_pass_per_period() {
        let rec = Recorder::new(&[], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        // A burst right after the initial pass: one pass, one period after the first.
        for s in 1..=5 {
            rec.at(s).await;
            sched.trigger();
            sched.trigger();
        }
        rec.at(25).await;
        assert_eq!(rec.starts(), vec![0, 10]);
        // A trigger long after the last pass runs at once.
        rec.at(40).await;
        sched.trigger();
        rec.at(41).await;
        assert_eq!(rec.starts(), vec![0, 10, 40]);
        // A steady stream of triggers: never more than one pass per period.
        for s in 41..=80 {
            rec.at(s).await;
            sched.trigger();
        }
        rec.at(81).await;
        assert_eq!(rec.starts(), vec![0, 10, 40, 50, 60, 70, 80]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_cluster_only_resyncs() {
        let rec = Recorder::new(&[], &[]);
        let (_sched, token, handle) = start(event_driven(), &rec);
        rec.at(3 * 300 + 1).await;
        assert_eq!(rec.starts(), vec![0, 300, 600, 900]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn resync_is_measured_from_the_last_pass() {
        let rec = Recorder::new(&[], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        rec.at(100).await;
        sched.trigger();
        rec.at(401).await;
        assert_eq!(rec.starts(), vec![0, 100, 400]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn trigger_during_a_pass_gives_exactly_one_more() {
        // The first pass takes 15 s.
        let rec = Recorder::new(&[15], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        rec.at(2).await;
        sched.trigger();
        rec.at(5).await;
        sched.trigger();
        rec.at(12).await;
        sched.trigger();
        rec.at(60).await;
        // The pass 0..15 is followed right away by one pass (the triggers were due at 10).
        assert_eq!(rec.starts(), vec![0, 15]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_and_success_resets() {
        // Passes 1-4 fail, then all succeed.
        let rec = Recorder::new(&[], &[false, false, false, false]);
        let (sched, token, handle) = start(event_driven(), &rec);
        rec.at(200).await;
        // 0 fails → +10; 10 fails → +20; 30 fails → +40; 70 fails → +60 (cap); 130 succeeds.
        assert_eq!(rec.starts(), vec![0, 10, 30, 70, 130]);
        // The backoff was reset: a trigger now runs at once, a failure after it is retried after one period.
        rec.results.lock().unwrap().push_back(false);
        sched.trigger();
        rec.at(215).await;
        assert_eq!(rec.starts(), vec![0, 10, 30, 70, 130, 200, 210]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn trigger_overrides_a_longer_retry_wait() {
        let rec = Recorder::new(&[], &[false, false, false]);
        let (sched, token, handle) = start(event_driven(), &rec);
        // Fails at 0, 10, 30; the next retry would be at 70.
        rec.at(45).await;
        sched.trigger();
        rec.at(46).await;
        assert_eq!(rec.starts()[..4], [0, 10, 30, 45]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_mode_ignores_triggers_and_runs_every_period() {
        let rec = Recorder::new(&[0, 0, 14], &[false]);
        let (sched, token, handle) = start(RouteSyncMode::Periodic, &rec);
        for s in 1..=9 {
            rec.at(s).await;
            sched.trigger();
        }
        rec.at(61).await;
        // 0, 10, 20 (takes 14 s, so the next starts at once at 34), 44, 54.
        assert_eq!(rec.starts(), vec![0, 10, 20, 34, 44, 54]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn delay_until_allowed() {
        let sched = Scheduler::new(event_driven(), PERIOD, RESYNC, None);
        let now = Instant::now();
        assert_eq!(sched.delay_until_allowed(now), Duration::ZERO);
        *sched.last_start.lock().unwrap() = Some(now);
        assert_eq!(sched.delay_until_allowed(now), PERIOD);
        assert_eq!(
            sched.delay_until_allowed(now + Duration::from_secs(4)),
            Duration::from_secs(6)
        );
        assert_eq!(
            sched.delay_until_allowed(now + Duration::from_secs(11)),
            Duration::ZERO
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_finishes_the_running_pass() {
        let rec = Recorder::new(&[30], &[]);
        let (_sched, token, handle) = start(event_driven(), &rec);
        rec.at(1).await;
        token.cancel();
        let t = Instant::now();
        handle.await.unwrap();
        assert_eq!(t.elapsed(), Duration::from_secs(29));
        assert_eq!(rec.starts(), vec![0]);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_metrics_use_the_go_name() {
        let registry = ccm_core::runtime::metrics::SharedRegistry::new();
        let metrics = WorkqueueMetrics::register(&registry);
        let sched = Scheduler::new(event_driven(), PERIOD, RESYNC, Some(&metrics));
        let token = CancellationToken::new();
        let run = {
            let (sched, token) = (sched.clone(), token.clone());
            tokio::spawn(async move { sched.run(token, || async { true }).await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        sched.trigger();
        tokio::time::sleep(Duration::from_secs(20)).await;
        token.cancel();
        run.await.unwrap();
        let text = registry.encode();
        assert!(
            text.contains("workqueue_adds_total{name=\"Routes\"} 2"),
            "{text}"
        );
    }
}
