//! A periodic pass: the loop of every controller that looks at the whole cluster on a timer (the node status
//! sync, the lifecycle monitor, the periodic re-ensure, the doctor's self-check), with Go's `wait.Until` timing.
//!
//! [`every`]`(period, jitter, timing)` runs a pass, waits, and runs the next, until shutdown:
//!
//! | [`Timing`] | the next pass starts | Go |
//! |---|---|---|
//! | [`Sliding`](Timing::Sliding) | `period` after the previous pass **ended** | `wait.Until`, `wait.JitterUntil(.., sliding=true)` |
//! | [`NonSliding`](Timing::NonSliding) | `period` after the previous pass **started** (at once if the pass took longer) | `wait.NonSlidingUntil` |
//!
//! The jitter is drawn again for every period (Go's `wait.Jitter`); the first pass starts at once (see
//! [`Every::after_first_period`]). Shutdown is checked before every pass and stops the wait at once; a pass in
//! progress at shutdown is dropped at its next await point (a pass is a full sweep that the next start repeats).
//!
//! ```no_run
//! use std::time::Duration;
//! use ccm_core::runtime::every::{Timing, every};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(shutdown: CancellationToken) {
//! every(Duration::from_secs(5), 0.0, Timing::Sliding)
//!     .run(&shutdown, || async { println!("monitoring nodes") })
//!     .await;
//! # }
//! ```

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// From when the period between two passes is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// From the end of the previous pass (Go's `wait.Until`).
    Sliding,
    /// From the start of the previous pass (Go's `wait.NonSlidingUntil`).
    NonSliding,
}

/// A periodic pass; build it with [`every`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Every {
    period: Duration,
    jitter: f64,
    timing: Timing,
    first_after_period: bool,
}

/// Passes every `period`, each period lengthened by a random part of up to `jitter × period` (0 for none; a
/// negative or non-finite `jitter` counts as 0), measured as `timing` says.
pub fn every(period: Duration, jitter: f64, timing: Timing) -> Every {
    Every {
        period,
        jitter: if jitter.is_finite() {
            jitter.max(0.0)
        } else {
            0.0
        },
        timing,
        first_after_period: false,
    }
}

impl Every {
    /// Start the first pass one (jittered) period after [`run`](Self::run) is called instead of at once.
    #[must_use]
    pub fn after_first_period(mut self) -> Self {
        self.first_after_period = true;
        self
    }

    /// One period with its jitter (Go: `wait.Jitter(period, jitter)`).
    fn jittered(&self) -> Duration {
        if self.jitter > 0.0 {
            self.period + self.period.mul_f64(self.jitter * rand::random::<f64>())
        } else {
            self.period
        }
    }

    /// Run `pass` until `shutdown` is cancelled (see the [module documentation](self) for the timing).
    pub async fn run<F, Fut>(&self, shutdown: &CancellationToken, mut pass: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        if self.first_after_period && !wait_until(shutdown, Instant::now() + self.jittered()).await
        {
            return;
        }
        while !shutdown.is_cancelled() {
            let period = self.jittered();
            let started = Instant::now();
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                () = pass() => {}
            }
            let from = match self.timing {
                Timing::Sliding => Instant::now(),
                Timing::NonSliding => started,
            };
            if !wait_until(shutdown, from + period).await {
                return;
            }
        }
    }

    /// [`run`](Self::run) for a pass that never waits (it queues keys or reads a cache).
    pub async fn run_sync(&self, shutdown: &CancellationToken, mut pass: impl FnMut()) {
        self.run(shutdown, || {
            pass();
            std::future::ready(())
        })
        .await;
    }
}

/// Sleep until `deadline`; false if `shutdown` came first.
async fn wait_until(shutdown: &CancellationToken, deadline: Instant) -> bool {
    tokio::select! {
        biased;
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep_until(deadline) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Run passes that each take `pass_ms` until `until_ms`, returning the pass start times in milliseconds.
    async fn starts(every: Every, pass_ms: u64, until_ms: u64) -> Vec<u64> {
        let t0 = Instant::now();
        let starts: Arc<Mutex<Vec<u64>>> = Arc::default();
        let shutdown = CancellationToken::new();
        let runner = {
            let (starts, shutdown) = (starts.clone(), shutdown.clone());
            tokio::spawn(async move {
                every
                    .run(&shutdown, || {
                        let starts = starts.clone();
                        async move {
                            let ms = Instant::now().duration_since(t0).as_millis();
                            starts.lock().unwrap().push(u64::try_from(ms).unwrap());
                            tokio::time::sleep(Duration::from_millis(pass_ms)).await;
                        }
                    })
                    .await;
            })
        };
        tokio::time::sleep_until(t0 + Duration::from_millis(until_ms)).await;
        shutdown.cancel();
        runner.await.unwrap();
        starts.lock().unwrap().clone()
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn sliding_measures_from_the_end_of_a_pass() {
        let got = starts(every(SECOND, 0.0, Timing::Sliding), 300, 5000).await;
        assert_eq!(got, [0, 1300, 2600, 3900]);
    }

    #[tokio::test(start_paused = true)]
    async fn non_sliding_measures_from_the_start_of_a_pass() {
        let got = starts(every(SECOND, 0.0, Timing::NonSliding), 300, 3500).await;
        assert_eq!(got, [0, 1000, 2000, 3000]);
        // A pass longer than the period is followed at once by the next.
        let got = starts(every(SECOND, 0.0, Timing::NonSliding), 1500, 5000).await;
        assert_eq!(got, [0, 1500, 3000, 4500]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_pass_may_wait_one_period() {
        let got = starts(
            every(SECOND, 0.0, Timing::Sliding).after_first_period(),
            0,
            3500,
        )
        .await;
        assert_eq!(got, [1000, 2000, 3000]);
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_lengthens_each_period_by_at_most_its_fraction() {
        let got = starts(every(SECOND, 0.5, Timing::NonSliding), 0, 20_000).await;
        assert_eq!(got[0], 0);
        for pair in got.windows(2) {
            let gap = pair[1] - pair[0];
            assert!((1000..=1500).contains(&gap), "gap {gap} ms");
        }
        assert!(got.len() >= 13, "{} passes in 20 s", got.len());
        // Garbage jitter means none.
        assert_eq!(every(SECOND, f64::NAN, Timing::Sliding).jittered(), SECOND);
        assert_eq!(every(SECOND, -1.0, Timing::Sliding).jittered(), SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_a_wait_and_a_pass_in_progress() {
        // The pass at 1300 ms is still running at 1500 ms; no pass starts after shutdown.
        let got = starts(every(SECOND, 0.0, Timing::Sliding), 300, 1500).await;
        assert_eq!(got, [0, 1300]);
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let mut ran = false;
        every(SECOND, 0.0, Timing::Sliding)
            .run(&shutdown, || {
                ran = true;
                async {}
            })
            .await;
        assert!(!ran, "no pass after shutdown");
        every(SECOND, 0.0, Timing::Sliding)
            .run_sync(&shutdown, || ran = true)
            .await;
        assert!(!ran, "no pass after shutdown");
    }
}
