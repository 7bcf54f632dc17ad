//! Batching node changes: the node-sync pass runs once per batch of node changes, not once per node event.
//!
//! Node events put the node's name on the `node` work queue (as in Go, so the `workqueue_*{name="node"}` metrics
//! keep their meaning). [`next_burst`] waits for the first key and takes it with every key already queued.
//!
//! With the default zero `quiet` period the batching is **work-conserving**: when the node-sync loop is idle, a
//! change starts a pass at once; changes that arrive while a pass runs wait in the queue and are all taken by the
//! next call, which returns at once, so they share the next pass. Batches are as large as the time a pass takes
//! (a slow or throttled cloud batches more), and a lone change is never delayed. With a positive `quiet` period
//! (an opt-in), [`next_burst`] keeps taking keys until the queue has been quiet that long or `max_delay` has
//! passed since the first key. Either way the pass reads the node cache (level-triggered), so every change taken
//! is covered by that single pass.

use std::time::Duration;

use ccm_core::runtime::workqueue::{WorkItem, WorkQueue};
use tokio::time::Instant;

/// What [`next_burst`] collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burst {
    /// How many node keys were taken off the queue (one per distinct pending node).
    pub keys: usize,
    /// When the first key was taken.
    pub started: Instant,
}

/// Wait for the next burst of node keys on `queue`; `None` once the queue is shut down.
///
/// With a zero `quiet` period (the default), it returns as soon as there is a key, with every key already queued
/// (see the [module documentation](self)).
pub async fn next_burst(
    queue: &WorkQueue<String>,
    quiet: Duration,
    max_delay: Duration,
) -> Option<Burst> {
    finish(queue.get().await?);
    let started = Instant::now();
    let cap = started + max_delay;
    let mut deadline = (started + quiet).min(cap);
    let mut keys = 1;
    loop {
        tokio::select! {
            biased;
            item = queue.get() => {
                finish(item?);
                keys += 1;
                deadline = (Instant::now() + quiet).min(cap);
            }
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    Some(Burst { keys, started })
}

/// The pass reads the node cache, so a taken key is done at once (dropping it marks it done).
fn finish(item: WorkItem<String>) {
    item.queue().forget(item.key());
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::runtime::workqueue::ItemExponentialBackoff;

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
        let burst = next_burst(&q, Duration::from_secs(1), Duration::from_secs(30))
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
        let first = next_burst(&q, Duration::from_secs(1), max).await.unwrap();
        assert_eq!(Instant::now() - t0, max);
        assert_eq!(first.keys, 31, "keys added at 0.0 s .. 3.0 s");
        let second = next_burst(&q, Duration::from_secs(1), max).await.unwrap();
        assert_eq!(second.started, t0 + Duration::from_millis(3100));
        feeder.abort();
    }

    /// Run the node-sync loop as the controller does, with passes lasting `pass`; returns (start in ms, keys) of
    /// each pass.
    async fn drive(q: WorkQueue<String>, quiet: Duration, pass: Duration) -> Vec<(u64, usize)> {
        let t0 = Instant::now();
        let mut passes = Vec::new();
        while let Some(burst) = next_burst(&q, quiet, Duration::from_secs(10)).await {
            let start = u64::try_from((Instant::now() - t0).as_millis()).unwrap();
            passes.push((start, burst.keys));
            tokio::time::sleep(pass).await;
        }
        passes
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
        at(7000).await;
        q.shut_down();
        // The first batch waits for 300 ms of quiet (last change at 1950 ms), then one pass takes the rest.
        assert_eq!(passes.await.unwrap(), vec![(2250, 21), (5300, 1)]);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_quiet_takes_only_what_is_queued() {
        let q = queue();
        for i in 0..5 {
            q.add(format!("node-{i}"));
        }
        q.add("node-0".into());
        let t0 = Instant::now();
        let burst = next_burst(&q, Duration::ZERO, Duration::ZERO)
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
                next_burst(&q, Duration::from_secs(1), Duration::from_secs(10)).await
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
                next_burst(&q, Duration::from_secs(1), Duration::from_secs(10)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None, "shut down mid-burst");
    }
}
