//! A pass per burst of changes (the load-balancer host sync runs once per batch of node changes, not per event).
//!
//! Changes put a key on a work queue (the service controller's `node` queue, so the `workqueue_*{name="node"}`
//! metrics keep Go's meaning); [`run_bursts`] runs one pass per burst. [`next_burst`] waits for the first key, then
//! keeps taking keys until they settle:
//!
//! - a batch ends once no key has come for `quiet` (default 100 ms), so the Nodes of one burst (an autoscaler
//!   adding many at once) share one pass and each load balancer gets one update for the burst;
//! - a continuous stream of changes is cut every `max_delay` (default 1 s): passes start at most that often
//!   (counted from the previous pass's start), so while Nodes keep arriving every Node reaches every load balancer
//!   within about `max_delay` plus one pass, at one update per load balancer per `max_delay`;
//! - after an idle spell longer than `max_delay`, the first change starts a pass after `quiet` only.
//!
//! With `quiet` zero the batching is purely work-conserving: an idle loop starts a pass at once, and changes that
//! arrive during a pass share the next one, which starts the moment it ends. Either way the pass reads the node
//! cache (level-triggered), so every change taken is covered by that single pass.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::workqueue::{WorkItem, WorkQueue};

/// What [`next_burst`] collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burst {
    /// How many node keys were taken off the queue (one per distinct pending node).
    pub keys: usize,
    /// When the first key was taken.
    pub started: Instant,
}

/// Wait for the next burst of node keys on `queue` (see the [module documentation](self); `previous` is when the
/// previous pass started); `None` once the queue is shut down.
pub async fn next_burst(
    queue: &WorkQueue<String>,
    quiet: Duration,
    max_delay: Duration,
    previous: Option<Instant>,
) -> Option<Burst> {
    finish(queue.get().await?);
    let started = Instant::now();
    let floor = match previous {
        Some(previous) if !quiet.is_zero() => (previous + max_delay).max(started),
        _ => started,
    };
    // While passes are recent, changes have been piling up since the last one began: the next pass starts at
    // the floor. After an idle spell, the first change may wait for the others up to `max_delay`.
    let cap = if floor > started {
        floor
    } else {
        started + max_delay
    };
    let settle = |now: Instant| (now + quiet).min(cap).max(floor);
    let mut deadline = settle(started);
    let mut keys = 1;
    loop {
        tokio::select! {
            biased;
            item = queue.get() => {
                finish(item?);
                keys += 1;
                deadline = settle(Instant::now());
            }
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    Some(Burst { keys, started })
}

/// Run `pass` once per burst of keys on `queue` (see [`next_burst`]) until the queue is shut down, which
/// `shutdown` does (a pass in progress then finishes first); the keys only say that something changed.
///
/// ```no_run
/// use std::time::Duration;
/// use ccm_core::runtime::debounce::burst::run_bursts;
/// use ccm_core::runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn demo(shutdown: CancellationToken) {
/// let changes: WorkQueue<String> = WorkQueue::new("node", default_controller_rate_limiter());
/// let (quiet, max_delay) = (Duration::from_millis(100), Duration::from_secs(1));
/// run_bursts(&changes, quiet, max_delay, &shutdown, |burst| async move {
///     println!("{} changes: updating every load balancer's hosts", burst.keys);
/// })
/// .await;
/// # }
/// ```
pub async fn run_bursts<F, Fut>(
    queue: &WorkQueue<String>,
    quiet: Duration,
    max_delay: Duration,
    shutdown: &CancellationToken,
    mut pass: F,
) where
    F: FnMut(Burst) -> Fut,
    Fut: Future<Output = ()>,
{
    let passes = async {
        let mut previous = None;
        while let Some(burst) = next_burst(queue, quiet, max_delay, previous).await {
            previous = Some(Instant::now());
            pass(burst).await;
        }
    };
    tokio::pin!(passes);
    tokio::select! {
        () = &mut passes => return,
        () = shutdown.cancelled() => queue.shut_down(),
    }
    passes.await;
}

/// The pass reads the cache, so a taken key is done at once (dropping it marks it done).
fn finish(item: WorkItem<String>) {
    item.queue().forget(item.key());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::workqueue::ItemExponentialBackoff;
    use std::sync::{Arc, Mutex};

    fn queue() -> WorkQueue<String> {
        WorkQueue::new(
            "node",
            ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300)),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_ends_after_the_quiet_period() {
        let q = queue();
        let feeder = {
            let q = q.clone();
            tokio::spawn(async move {
                // 100 node changes, one every 50 ms (5 s in all), then silence.
                for i in 0..100 {
                    q.add(format!("node-{}", i % 37));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        };
        let t0 = Instant::now();
        let burst = next_burst(&q, Duration::from_secs(1), Duration::from_secs(30), None)
            .await
            .unwrap();
        assert_eq!(burst.keys, 100, "each change was taken while collecting");
        assert_eq!(burst.started, t0);
        // Last key at 4.95 s, quiet for 1 s.
        assert_eq!(Instant::now() - t0, Duration::from_millis(5950));
        feeder.await.unwrap();
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_continuous_stream_is_cut_at_max_delay() {
        let q = queue();
        let feeder = {
            let q = q.clone();
            tokio::spawn(async move {
                for i in 0..1000 {
                    q.add(format!("node-{i}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let t0 = Instant::now();
        let max = Duration::from_millis(3020);
        let first = next_burst(&q, Duration::from_secs(1), max, None)
            .await
            .unwrap();
        assert_eq!(Instant::now() - t0, max);
        assert_eq!(first.keys, 31, "keys added at 0.0 s .. 3.0 s");
        let second = next_burst(&q, Duration::from_secs(1), max, None)
            .await
            .unwrap();
        assert_eq!(second.started, t0 + Duration::from_millis(3100));
        feeder.abort();
    }

    /// Run the node-sync loop as the controller does, with passes lasting `pass`; returns (start in ms, keys) of
    /// each pass.
    async fn drive(q: WorkQueue<String>, quiet: Duration, pass: Duration) -> Vec<(u64, usize)> {
        drive_with(q, quiet, Duration::from_secs(10), pass).await
    }

    async fn drive_with(
        q: WorkQueue<String>,
        quiet: Duration,
        max_delay: Duration,
        pass: Duration,
    ) -> Vec<(u64, usize)> {
        let t0 = Instant::now();
        let passes: Arc<Mutex<Vec<(u64, usize)>>> = Arc::default();
        run_bursts(&q, quiet, max_delay, &CancellationToken::new(), |burst| {
            let start = u64::try_from((Instant::now() - t0).as_millis()).unwrap();
            passes.lock().unwrap().push((start, burst.keys));
            tokio::time::sleep(pass)
        })
        .await;
        passes.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn defaults_one_pass_per_burst_and_one_per_second_while_nodes_trickle_in() {
        // The service controller's defaults (`--node-sync-debounce`, `--node-sync-max-delay`).
        let (quiet, max) = (Duration::from_millis(100), Duration::from_secs(1));
        let q = queue();
        let passes = tokio::spawn(drive_with(
            q.clone(),
            quiet,
            max,
            Duration::from_millis(200),
        ));
        let t0 = Instant::now();
        let at = |ms: u64| tokio::time::sleep_until(t0 + Duration::from_millis(ms));
        // A burst: 100 Nodes within 160 ms; one pass once they settle.
        for i in 0..100u64 {
            at(i * 16 / 10).await;
            q.add(format!("burst-{i}"));
        }
        // Idle, then a lone change: 100 ms later.
        at(3000).await;
        q.add("lone".into());
        // Idle, then 100 Nodes one every 50 ms (5 s): a pass every second, the last 100 ms after the last Node.
        at(6000).await;
        for i in 0..100u64 {
            at(6000 + 50 * i).await;
            q.add(format!("trickle-{i}"));
        }
        at(15000).await;
        q.shut_down();
        let passes = passes.await.unwrap();
        assert_eq!(
            passes[0],
            (258, 100),
            "the burst: one pass, 100 ms after it settled"
        );
        assert_eq!(passes[1], (3100, 1), "a lone change after an idle spell");
        let trickle = &passes[2..];
        assert_eq!(trickle.iter().map(|(_, k)| k).sum::<usize>(), 100);
        for pair in trickle.windows(2) {
            assert!(
                pair[1].0 - pair[0].0 >= 1000,
                "passes at most once a second: {passes:?}"
            );
        }
        // Every Node of the trickle was in a pass that started within 1 s of its arrival.
        for i in 0..100u64 {
            let arrived = 6000 + 50 * i;
            let pass = trickle.iter().find(|(start, _)| *start >= arrived).unwrap();
            assert!(pass.0 - arrived <= 1000, "node {i}: {passes:?}");
        }
        assert!(trickle.len() <= 7, "{passes:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn by_default_batching_is_work_conserving() {
        let q = queue();
        let passes = tokio::spawn(drive(q.clone(), Duration::ZERO, Duration::from_secs(1)));
        let t0 = Instant::now();
        let at = |ms: u64| tokio::time::sleep_until(t0 + Duration::from_millis(ms));
        // The loop is idle: the first change starts a pass at once.
        q.add("n0".into());
        // A change every 100 ms for 2 s while passes of 1 s run: each pass takes everything that came in during
        // the previous one, and starts the moment it ends.
        for i in 0..20u64 {
            at(50 + 100 * i).await;
            q.add(format!("n{}", i + 1));
        }
        // Idle again: a lone change starts a pass at once.
        at(5000).await;
        q.add("late".into());
        at(7000).await;
        q.shut_down();
        assert_eq!(
            passes.await.unwrap(),
            vec![(0, 1), (1000, 10), (2000, 10), (5000, 1)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_opt_in_quiet_period_delays_and_batches_more() {
        let q = queue();
        let passes = tokio::spawn(drive(
            q.clone(),
            Duration::from_millis(300),
            Duration::from_secs(1),
        ));
        let t0 = Instant::now();
        let at = |ms: u64| tokio::time::sleep_until(t0 + Duration::from_millis(ms));
        q.add("n0".into());
        for i in 0..20u64 {
            at(50 + 100 * i).await;
            q.add(format!("n{}", i + 1));
        }
        at(5000).await;
        q.add("late".into());
        at(13000).await;
        q.shut_down();
        // The first batch waits for 300 ms of quiet (last change at 1950 ms), then one pass takes the rest; the
        // next pass comes no sooner than `max_delay` (10 s here) after it.
        assert_eq!(passes.await.unwrap(), vec![(2250, 21), (12250, 1)]);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_quiet_takes_only_what_is_queued() {
        let q = queue();
        for i in 0..5 {
            q.add(format!("node-{i}"));
        }
        q.add("node-0".into());
        let t0 = Instant::now();
        let burst = next_burst(&q, Duration::ZERO, Duration::ZERO, Some(t0))
            .await
            .unwrap();
        assert_eq!(burst.keys, 5, "duplicates were already merged by the queue");
        assert_eq!(Instant::now(), t0);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_collection() {
        let q = queue();
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move {
                next_burst(&q, Duration::from_secs(1), Duration::from_secs(10), None).await
            })
        };
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);

        let q = queue();
        q.add("a".into());
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move {
                next_burst(&q, Duration::from_secs(1), Duration::from_secs(10), None).await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None, "shut down mid-burst");
    }
}
