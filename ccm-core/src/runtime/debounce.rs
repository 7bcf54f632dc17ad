//! Debounced passes over a single key: the loops of controllers whose every pass covers the whole cluster, so
//! that a change needs "a pass soon", not a key of its own (the route controller; in [`burst`], the load-balancer
//! host sync).
//!
//! A [`Debounced`] drives one work queue holding one key (the route controller's queue `Routes` with the key
//! `routes`, as in Go's watch mode, so the `workqueue_*` metrics keep their meaning).
//!
//! ```no_run
//! use std::time::Duration;
//! use ccm_core::runtime::debounce::{Debounced, Schedule};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(shutdown: CancellationToken) {
//! let passes = Debounced::new(
//!     "Routes",
//!     "routes",
//!     Schedule::Triggered { resync: Duration::from_secs(300) },
//!     Duration::from_secs(10),
//!     Duration::from_secs(300),
//!     None,
//! );
//! // an informer handler calls `passes.trigger()` on every relevant change
//! passes.run(shutdown, || async { /* reconcile every route */ true }).await;
//! # }
//! ```

pub mod burst;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::metrics::WorkqueueMetrics;
use crate::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};

/// The default debounce of a triggered pass: 250 ms (the route controller's `--route-event-debounce`).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(250);

/// What starts a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// A timer only: a pass every `period` from the start of the previous one; triggers are ignored.
    Periodic,
    /// Triggers, retries after failures, and a full pass `resync` after the last one.
    Triggered {
        /// How long after the end of the last pass a pass runs although nothing triggered one.
        resync: Duration,
    },
}

/// Decides when the passes over one key run; the first starts as soon as [`run`](Self::run) is called.
///
/// - [`Schedule::Periodic`]: a pass starts every `period` from the start of the previous one, at once after one
///   that took longer (Go's `wait.NonSlidingUntil`); [`trigger`](Self::trigger) is ignored and failures are not
///   retried early.
/// - [`Schedule::Triggered`]: [`trigger`](Self::trigger) asks for a pass `debounce` (default [`DEFAULT_DEBOUNCE`])
///   later, however recently the last one ran. Triggers in between join that pass (the window runs from the
///   first, so a steady stream cannot postpone it); triggers during a pass lead to exactly one more, right after it
///   or `debounce` after the trigger, whichever is later. A failed pass is retried with exponential backoff from
///   `period` to `max_backoff`, and while the last pass failed a trigger starts one no earlier than `period` after
///   the failed one started (a failing cloud is not hammered at the rate of events); a success resets both. A full
///   pass runs `resync` after the end of the last one even without triggers.
#[derive(Clone, Debug)]
pub struct Debounced {
    queue: WorkQueue<&'static str>,
    last_start: Arc<Mutex<Option<Instant>>>,
    failing: Arc<AtomicBool>,
    key: &'static str,
    mode: Schedule,
    period: Duration,
    debounce: Duration,
}

impl Debounced {
    /// Passes over `key` with the default debounce (see [`with_debounce`](Self::with_debounce)); with `metrics`,
    /// the queue records the `workqueue_*` metrics under `queue_name`. `period` and `max_backoff`: see the type's
    /// documentation.
    pub fn new(
        queue_name: &'static str,
        key: &'static str,
        mode: Schedule,
        period: Duration,
        max_backoff: Duration,
        metrics: Option<&WorkqueueMetrics>,
    ) -> Self {
        let limiter = ItemExponentialBackoff::new(period, max_backoff.max(period));
        Debounced {
            queue: WorkQueue::build(queue_name, limiter, metrics),
            last_start: Arc::new(Mutex::new(None)),
            failing: Arc::new(AtomicBool::new(false)),
            key,
            mode,
            period,
            debounce: DEFAULT_DEBOUNCE.min(period),
        }
    }

    /// Set how long after a trigger a pass starts (capped at the period; zero = at once).
    #[must_use]
    pub fn with_debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce.min(self.period);
        self
    }

    /// The debounce in use.
    pub fn debounce(&self) -> Duration {
        self.debounce
    }

    /// Ask for a pass (ignored with [`Schedule::Periodic`]).
    pub fn trigger(&self) {
        if matches!(self.mode, Schedule::Periodic) {
            return;
        }
        let delay = self.trigger_delay(Instant::now());
        self.queue.add_after(self.key, delay);
    }

    /// How long from `now` until a pass asked for at `now` starts: the debounce, and while the last pass failed,
    /// at least until one period after that pass started.
    pub fn trigger_delay(&self, now: Instant) -> Duration {
        if !self.failing.load(Ordering::Relaxed) {
            return self.debounce;
        }
        let last = *self.last_start.lock();
        last.map(|start| (start + self.period).saturating_duration_since(now))
            .unwrap_or_default()
            .max(self.debounce)
    }

    /// Run passes until `shutdown` is cancelled. `pass` returns true when the pass fully succeeded. A pass in
    /// progress when `shutdown` is cancelled is finished first.
    pub async fn run<F, Fut>(&self, shutdown: CancellationToken, mut pass: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        self.queue.add(self.key);
        let mut resync_at: Option<Instant> = None;
        loop {
            let resync = tokio::time::sleep_until(resync_at.unwrap_or_else(Instant::now));
            let item = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                item = self.queue.get() => item,
                () = resync, if resync_at.is_some() => {
                    resync_at = None;
                    tracing::debug!(queue = %self.key, "periodic full resync");
                    self.queue.add(self.key);
                    continue;
                }
            };
            let Some(taken) = item else { break };
            *self.last_start.lock() = Some(Instant::now());
            if matches!(self.mode, Schedule::Periodic) {
                self.queue.add_after(self.key, self.period);
            }
            let ok = pass().await;
            if let Schedule::Triggered { resync } = self.mode {
                self.failing.store(!ok, Ordering::Relaxed);
                if ok {
                    self.queue.forget(&self.key);
                } else {
                    self.queue.add_rate_limited(self.key);
                    tracing::debug!(
                        queue = %self.key,
                        retries = self.queue.num_requeues(&self.key),
                        "pass failed; retrying with backoff"
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
    use std::sync::Mutex;

    const PERIOD: Duration = Duration::from_secs(10);
    const RESYNC: Duration = Duration::from_secs(300);

    /// Records pass start times (milliseconds since `t0`); each pass takes `durations[i]` seconds (default 0) and
    /// returns `results[i]` (default true).
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
            let ms = u64::try_from(start.duration_since(self.t0).as_millis()).unwrap();
            self.starts.lock().unwrap().push(ms);
            let d = self.durations.lock().unwrap().pop_front().unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(d)).await;
            self.results.lock().unwrap().pop_front().unwrap_or(true)
        }
        fn starts(&self) -> Vec<u64> {
            self.starts.lock().unwrap().clone()
        }
        /// Sleep until `ms` milliseconds after `t0`.
        async fn at(&self, ms: u64) {
            tokio::time::sleep_until(self.t0 + Duration::from_millis(ms)).await;
        }
    }

    fn start(
        mode: Schedule,
        rec: &Recorder,
    ) -> (Debounced, CancellationToken, tokio::task::JoinHandle<()>) {
        let sched = Debounced::new(
            "Routes",
            "routes",
            mode,
            PERIOD,
            Duration::from_secs(60),
            None,
        );
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

    fn event_driven() -> Schedule {
        Schedule::Triggered { resync: RESYNC }
    }

    #[tokio::test(start_paused = true)]
    async fn a_trigger_starts_a_pass_after_the_debounce_however_recent_the_last_pass() {
        let rec = Recorder::new(&[], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        assert_eq!(sched.debounce(), DEFAULT_DEBOUNCE);
        // The first pass ran at 0; a node added 1 ms later does not wait for the period.
        rec.at(1).await;
        sched.trigger();
        rec.at(250).await;
        assert_eq!(rec.starts(), vec![0]);
        rec.at(252).await;
        assert_eq!(rec.starts(), vec![0, 251]);
        // Right after that pass: again one debounce later.
        rec.at(300).await;
        sched.trigger();
        rec.at(1000).await;
        assert_eq!(rec.starts(), vec![0, 251, 550]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_is_batched_and_a_stream_cannot_postpone_passes() {
        let rec = Recorder::new(&[], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        // 21 changes within 200 ms: one pass, 250 ms after the first.
        for ms in (5000..=5200).step_by(10) {
            rec.at(ms).await;
            sched.trigger();
        }
        rec.at(6000).await;
        assert_eq!(rec.starts(), vec![0, 5250]);
        // A change every 100 ms for 2 s: a pass 250 ms after the first change following each pass.
        for ms in (6000..=8000).step_by(100) {
            rec.at(ms).await;
            sched.trigger();
        }
        rec.at(9000).await;
        assert_eq!(
            rec.starts(),
            vec![0, 5250, 6250, 6550, 6850, 7150, 7450, 7750, 8050]
        );
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn zero_debounce_starts_at_once() {
        let rec = Recorder::new(&[], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        let sched = sched.with_debounce(Duration::ZERO);
        rec.at(3000).await;
        sched.trigger();
        rec.at(3001).await;
        assert_eq!(rec.starts(), vec![0, 3000]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_cluster_only_resyncs() {
        let rec = Recorder::new(&[], &[]);
        let (_sched, token, handle) = start(event_driven(), &rec);
        rec.at(3 * 300_000 + 1000).await;
        assert_eq!(rec.starts(), vec![0, 300_000, 600_000, 900_000]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn resync_is_measured_from_the_last_pass() {
        let rec = Recorder::new(&[], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        rec.at(100_000).await;
        sched.trigger();
        rec.at(401_000).await;
        assert_eq!(rec.starts(), vec![0, 100_250, 400_250]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn triggers_during_a_pass_give_exactly_one_more() {
        // The first pass takes 15 s.
        let rec = Recorder::new(&[15], &[]);
        let (sched, token, handle) = start(event_driven(), &rec);
        for ms in [2000, 5000, 12_000] {
            rec.at(ms).await;
            sched.trigger();
        }
        rec.at(60_000).await;
        // The pass 0..15 s is followed right away by one pass (the triggers were due long before it ended).
        assert_eq!(rec.starts(), vec![0, 15_000]);
        // A trigger just before a long pass ends: the next pass waits for the debounce, not only for the end.
        rec.durations.lock().unwrap().push_back(1);
        sched.trigger();
        rec.at(60_250 + 900).await;
        sched.trigger();
        rec.at(63_000).await;
        assert_eq!(rec.starts(), vec![0, 15_000, 60_250, 61_400]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_and_success_resets() {
        // Passes 1-4 fail, then all succeed.
        let rec = Recorder::new(&[], &[false, false, false, false]);
        let (sched, token, handle) = start(event_driven(), &rec);
        rec.at(200_000).await;
        // 0 fails → +10; 10 fails → +20; 30 fails → +40; 70 fails → +60 (cap); 130 succeeds.
        assert_eq!(rec.starts(), vec![0, 10_000, 30_000, 70_000, 130_000]);
        // The backoff was reset: a trigger now runs after the debounce, a failure after it is retried after one
        // period.
        rec.results.lock().unwrap().push_back(false);
        sched.trigger();
        rec.at(215_000).await;
        assert_eq!(
            rec.starts(),
            vec![0, 10_000, 30_000, 70_000, 130_000, 200_250, 210_250]
        );
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn while_passes_fail_triggers_wait_for_the_period() {
        // The first pass fails: its retry is due at 10 s.
        let rec = Recorder::new(&[], &[false]);
        let (sched, token, handle) = start(event_driven(), &rec);
        rec.at(1000).await;
        sched.trigger();
        rec.at(9900).await;
        assert_eq!(
            rec.starts(),
            vec![0],
            "no pass within a period of a failed one"
        );
        rec.at(11_000).await;
        assert_eq!(
            rec.starts(),
            vec![0, 10_000],
            "the trigger joined the retry"
        );
        // That pass succeeded: triggers are quick again.
        sched.trigger();
        rec.at(12_000).await;
        assert_eq!(rec.starts(), vec![0, 10_000, 11_250]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_trigger_overrides_a_longer_retry_wait() {
        let rec = Recorder::new(&[], &[false, false, false]);
        let (sched, token, handle) = start(event_driven(), &rec);
        // Fails at 0, 10, 30 s; the next retry would be at 70 s.
        rec.at(45_000).await;
        sched.trigger();
        rec.at(46_000).await;
        assert_eq!(rec.starts()[..4], [0, 10_000, 30_000, 45_250]);
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_mode_ignores_triggers_and_runs_every_period() {
        let rec = Recorder::new(&[0, 0, 14], &[false]);
        let (sched, token, handle) = start(Schedule::Periodic, &rec);
        for s in 1..=9 {
            rec.at(s * 1000).await;
            sched.trigger();
        }
        rec.at(61_000).await;
        // 0, 10, 20 (takes 14 s, so the next starts at once at 34), 44, 54.
        assert_eq!(
            rec.starts(),
            vec![0, 10_000, 20_000, 34_000, 44_000, 54_000]
        );
        token.cancel();
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn trigger_delay() {
        let sched = Debounced::new("Routes", "routes", event_driven(), PERIOD, RESYNC, None);
        let now = Instant::now();
        assert_eq!(sched.trigger_delay(now), Duration::from_millis(250));
        // A pass that started now failed.
        *sched.last_start.lock() = Some(now);
        sched.failing.store(true, Ordering::Relaxed);
        assert_eq!(sched.trigger_delay(now), PERIOD);
        assert_eq!(
            sched.trigger_delay(now + Duration::from_secs(4)),
            Duration::from_secs(6)
        );
        assert_eq!(
            sched.trigger_delay(now + Duration::from_millis(9900)),
            Duration::from_millis(250),
            "never less than the debounce"
        );
        assert_eq!(
            sched.trigger_delay(now + Duration::from_secs(11)),
            Duration::from_millis(250)
        );
        sched.failing.store(false, Ordering::Relaxed);
        assert_eq!(sched.trigger_delay(now), Duration::from_millis(250));
        // The debounce is capped at the period.
        let long = sched.clone().with_debounce(Duration::from_secs(3600));
        assert_eq!(long.debounce(), PERIOD);
        let short_period = Debounced::new(
            "Routes",
            "routes",
            event_driven(),
            Duration::from_millis(100),
            RESYNC,
            None,
        );
        assert_eq!(short_period.debounce(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_finishes_the_running_pass() {
        let rec = Recorder::new(&[30], &[]);
        let (_sched, token, handle) = start(event_driven(), &rec);
        rec.at(1000).await;
        token.cancel();
        let t = Instant::now();
        handle.await.unwrap();
        assert_eq!(t.elapsed(), Duration::from_secs(29));
        assert_eq!(rec.starts(), vec![0]);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_metrics_use_the_go_name() {
        let registry = crate::runtime::metrics::SharedRegistry::new();
        let metrics = WorkqueueMetrics::register(&registry);
        let sched = Debounced::new(
            "Routes",
            "routes",
            event_driven(),
            PERIOD,
            RESYNC,
            Some(&metrics),
        );
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
