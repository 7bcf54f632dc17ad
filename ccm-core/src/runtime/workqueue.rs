//! A rate-limited work queue with the semantics of client-go's `workqueue`, on tokio time.
//!
//! - An item added several times before a worker takes it is processed once ("dirty" set).
//! - An item is never handed to two workers at once: one added while being processed is queued again when the
//!   worker drops the [`WorkItem`] it was given.
//! - Delayed adds ([`WorkQueue::add_after`], [`WorkQueue::add_rate_limited`]) wait in a delay queue inside the
//!   queue itself: no task is spawned per delayed item, and nothing outlives [`WorkQueue::shut_down`].
//!
//! ```no_run
//! use std::time::Duration;
//! use ccm_core::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};
//!
//! # async fn demo() {
//! let queue = WorkQueue::new("service", ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300)));
//! queue.add("default/web".to_string());
//! while let Some(item) = queue.get().await {
//!     let ok = true; // process `item.key()`
//!     if ok { queue.forget(item.key()) } else { queue.add_rate_limited(item.key().clone()) }
//!     // dropping `item` marks it done
//! }
//! # }
//! ```

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::metrics::WorkqueueMetrics;
use super::ratelimit::TokenBucket;

/// How long an item waits before it is retried: per-item exponential backoff, `base × 2^failures` capped at `max`
/// (Go's `ItemExponentialFailureRateLimiter`), or longer with [`with_overall_limit`](Self::with_overall_limit)
/// (Go's `MaxOfRateLimiter`, as in [`default_controller_rate_limiter`]).
#[derive(Debug)]
pub struct ItemExponentialBackoff<K> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
    overall: Option<Mutex<TokenBucket>>,
}

impl<K> ItemExponentialBackoff<K> {
    /// Backoff from `base` to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialBackoff {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
            overall: None,
        }
    }

    /// Also wait for a token of an overall bucket (`qps`, `burst`) shared by all items (the workspace's one
    /// [`TokenBucket`]), whichever delay is longer.
    #[must_use]
    pub fn with_overall_limit(mut self, qps: f64, burst: u32) -> Self {
        self.overall = Some(Mutex::new(TokenBucket::new(qps, burst, Instant::now())));
        self
    }

    /// The delay after `failures` previous failures.
    pub fn delay_for(&self, failures: u32) -> Duration {
        let factor = 2u32.checked_pow(failures).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .map_or(self.max, |d| d.min(self.max))
    }
}

impl<K: Eq + Hash + Clone> ItemExponentialBackoff<K> {
    /// The delay before `item` is retried now; records one more failure (and takes an overall-bucket token).
    pub fn when(&self, item: &K) -> Duration {
        let mut failures = self.failures.lock();
        let count = failures.entry(item.clone()).or_insert(0);
        let delay = self.delay_for(*count);
        *count = count.saturating_add(1);
        let overall = self
            .overall
            .as_ref()
            .map(|b| b.lock().reserve(Instant::now()));
        delay.max(overall.unwrap_or_default())
    }

    /// Reset the failure count of `item`.
    pub fn forget(&self, item: &K) {
        self.failures.lock().remove(item);
    }

    /// How many times `item` has failed since it was last forgotten.
    pub fn num_requeues(&self, item: &K) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`: per-item exponential 5 ms → 1000 s, combined with an overall
/// 10 qps / burst 100 bucket.
pub fn default_controller_rate_limiter<K>() -> ItemExponentialBackoff<K> {
    ItemExponentialBackoff::new(Duration::from_millis(5), Duration::from_secs(1000))
        .with_overall_limit(10.0, 100)
}

struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    /// Each delayed item's deadline and sequence number (its key in `delayed`).
    waiting: HashMap<K, (Instant, u64)>,
    /// The delay queue, by deadline. Nothing runs for it in the background: due items are promoted whenever the
    /// queue is touched, and an idle `get` sleeps until the earliest deadline.
    delayed: BTreeMap<(Instant, u64), K>,
    next_seq: u64,
    added_at: HashMap<K, Instant>,
    shutting_down: bool,
}

struct Inner<K> {
    name: String,
    state: Mutex<State<K>>,
    notify: Notify,
    limiter: ItemExponentialBackoff<K>,
    metrics: Option<WorkqueueMetrics>,
}

/// A de-duplicating, rate-limited work queue. Cheap to clone; clones share the queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
        }
    }
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

/// An item handed out by [`WorkQueue::get`]: no other worker gets it while it lives; dropping it marks it done
/// (queued again if it was added meanwhile).
pub struct WorkItem<K: Eq + Hash + Clone + Send + Sync + 'static> {
    queue: WorkQueue<K>,
    item: K,
}

impl<K: Eq + Hash + Clone + Send + Sync + 'static> WorkItem<K> {
    /// The item.
    pub fn key(&self) -> &K {
        &self.item
    }

    /// The queue it came from.
    pub fn queue(&self) -> &WorkQueue<K> {
        &self.queue
    }
}

impl<K: Eq + Hash + Clone + Send + Sync + 'static> std::ops::Deref for WorkItem<K> {
    type Target = K;
    fn deref(&self) -> &K {
        &self.item
    }
}

impl<K: Eq + Hash + Clone + Send + Sync + std::fmt::Debug + 'static> std::fmt::Debug
    for WorkItem<K>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WorkItem").field(&self.item).finish()
    }
}

impl<K: Eq + Hash + Clone + Send + Sync + 'static> Drop for WorkItem<K> {
    fn drop(&mut self) {
        self.queue.done(&self.item);
    }
}

impl<K: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<K> {
    /// A queue named `name` (the `name` label of the `workqueue_*` metrics) using `limiter` for retries.
    pub fn new(name: impl Into<String>, limiter: ItemExponentialBackoff<K>) -> Self {
        Self::build(name, limiter, None)
    }

    /// Like [`new`](Self::new), recording the `workqueue_*` metrics.
    pub fn with_metrics(
        name: impl Into<String>,
        limiter: ItemExponentialBackoff<K>,
        metrics: &WorkqueueMetrics,
    ) -> Self {
        Self::build(name, limiter, Some(metrics))
    }

    /// [`new`](Self::new), or [`with_metrics`](Self::with_metrics) if `metrics` is set.
    pub(crate) fn build(
        name: impl Into<String>,
        limiter: ItemExponentialBackoff<K>,
        metrics: Option<&WorkqueueMetrics>,
    ) -> Self {
        WorkQueue {
            inner: Arc::new(Inner {
                name: name.into(),
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    waiting: HashMap::new(),
                    delayed: BTreeMap::new(),
                    next_seq: 0,
                    added_at: HashMap::new(),
                    shutting_down: false,
                }),
                notify: Notify::new(),
                limiter,
                metrics: metrics.cloned(),
            }),
        }
    }

    /// The state, with every delayed item whose deadline has passed moved to the queue.
    fn lock(&self) -> parking_lot::MutexGuard<'_, State<K>> {
        let mut state = self.inner.state.lock();
        let now = Instant::now();
        let mut promoted = false;
        while let Some(entry) = state.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            state.waiting.remove(&item);
            promoted |= self.enqueue(&mut state, item);
        }
        if promoted {
            self.inner.notify.notify_one();
        }
        state
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Queue `item` now (no-op if it is already queued, or after shutdown).
    pub fn add(&self, item: K) {
        let mut state = self.lock();
        if self.enqueue(&mut state, item) {
            drop(state);
            self.inner.notify.notify_one();
        }
    }

    /// Marks `item` dirty and queues it unless it is being processed; true if a worker should wake up.
    fn enqueue(&self, state: &mut State<K>, item: K) -> bool {
        if state.shutting_down || state.dirty.contains(&item) {
            return false;
        }
        if let Some(m) = &self.inner.metrics {
            m.add(&self.inner.name);
        }
        state.dirty.insert(item.clone());
        if state.processing.contains(&item) {
            return false;
        }
        state.added_at.insert(item.clone(), Instant::now());
        state.queue.push_back(item);
        self.set_depth(state);
        true
    }

    /// Queue `item` after `delay`; if it is already waiting with an earlier deadline, nothing changes.
    pub fn add_after(&self, item: K, delay: Duration) {
        if delay.is_zero() {
            self.add(item);
            return;
        }
        let deadline = Instant::now() + delay;
        let mut state = self.lock();
        if state.shutting_down {
            return;
        }
        if let Some(&(existing, seq)) = state.waiting.get(&item) {
            if existing <= deadline {
                return;
            }
            state.delayed.remove(&(existing, seq));
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        state.waiting.insert(item.clone(), (deadline, seq));
        let earliest = state
            .delayed
            .first_key_value()
            .is_none_or(|((first, _), _)| deadline < *first);
        state.delayed.insert((deadline, seq), item);
        drop(state);
        if earliest {
            // An idle worker sleeps until the earliest deadline: wake it to sleep until this one instead.
            self.inner.notify.notify_waiters();
        }
    }

    /// Queue `item` after the delay its rate limiter gives (one more failure).
    pub fn add_rate_limited(&self, item: K) {
        if let Some(m) = &self.inner.metrics {
            m.retry(&self.inner.name);
        }
        let delay = self.inner.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Reset the failure count of `item`.
    pub fn forget(&self, item: &K) {
        self.inner.limiter.forget(item);
    }

    /// How many times `item` has been retried since it was last forgotten.
    pub fn num_requeues(&self, item: &K) -> u32 {
        self.inner.limiter.num_requeues(item)
    }

    /// Wait for the next item; `None` once the queue is shut down. The item is done when the returned
    /// [`WorkItem`] is dropped.
    pub async fn get(&self) -> Option<WorkItem<K>> {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Registers interest before the state is checked, so no wake-up in between is lost.
            notified.as_mut().enable();
            let next_deadline = {
                let mut state = self.lock();
                if let Some(item) = state.queue.pop_front() {
                    state.dirty.remove(&item);
                    state.processing.insert(item.clone());
                    if let (Some(m), Some(added)) =
                        (&self.inner.metrics, state.added_at.remove(&item))
                    {
                        m.queued_for(&self.inner.name, added.elapsed());
                    }
                    self.set_depth(&state);
                    if !state.queue.is_empty() {
                        self.inner.notify.notify_one();
                    }
                    return Some(WorkItem {
                        queue: self.clone(),
                        item,
                    });
                }
                if state.shutting_down {
                    self.inner.notify.notify_one();
                    return None;
                }
                state.delayed.first_key_value().map(|((at, _), _)| *at)
            };
            match next_deadline {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Mark `item` processed (when its [`WorkItem`] is dropped); if it was added meanwhile, queue it again.
    fn done(&self, item: &K) {
        let mut state = self.lock();
        state.processing.remove(item);
        if state.dirty.contains(item) && !state.shutting_down {
            state.added_at.insert(item.clone(), Instant::now());
            state.queue.push_back(item.clone());
            self.set_depth(&state);
            drop(state);
            self.inner.notify.notify_one();
        }
    }

    /// Stop: [`get`](Self::get) returns `None` from now on, queued and delayed items are dropped, and nothing of
    /// the queue keeps running.
    pub fn shut_down(&self) {
        let mut state = self.lock();
        state.shutting_down = true;
        state.queue.clear();
        state.dirty.clear();
        state.waiting.clear();
        state.delayed.clear();
        self.set_depth(&state);
        drop(state);
        self.inner.notify.notify_waiters();
        self.inner.notify.notify_one();
    }

    /// Items queued and not yet handed out.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// True if no item is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items waiting for a delayed add.
    pub fn waiting_len(&self) -> usize {
        self.lock().waiting.len()
    }

    /// The pending deadline of `item`, if it waits for a delayed add.
    pub fn waiting_deadline(&self, item: &K) -> Option<Instant> {
        self.lock().waiting.get(item).map(|(at, _)| *at)
    }

    fn set_depth(&self, state: &State<K>) {
        if let Some(m) = &self.inner.metrics {
            m.set_depth(&self.inner.name, state.queue.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<K: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<K> {
        /// Whether [`shut_down`](Self::shut_down) was called (for the tests of other modules too).
        pub(crate) fn is_shutting_down(&self) -> bool {
            self.lock().shutting_down
        }
    }

    fn queue() -> WorkQueue<String> {
        WorkQueue::new(
            "test",
            ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300)),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn dedupes_and_orders() {
        let q = queue();
        q.add("a".into());
        q.add("b".into());
        q.add("a".into());
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await.unwrap().key(), "a");
        assert_eq!(q.get().await.unwrap().key(), "b");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn item_added_while_processing_is_requeued_on_done() {
        let q = queue();
        q.add("a".into());
        let item = q.get().await.unwrap();
        q.add("a".into());
        assert_eq!(q.len(), 0, "not handed out twice concurrently");
        drop(item);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await.unwrap().key(), "a");
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_keeps_earliest_deadline() {
        let q = queue();
        q.add_after("a".into(), Duration::from_secs(10));
        q.add_after("a".into(), Duration::from_secs(20));
        q.add_after("a".into(), Duration::from_secs(3));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(q.is_empty());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.len(), 1);
        drop(q.get().await.unwrap());
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(q.is_empty(), "superseded deadlines do not fire");
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_backoff_grows_and_forget_resets() {
        let q = queue();
        let start = Instant::now();
        q.add_rate_limited("a".into());
        assert_eq!(
            q.waiting_deadline(&"a".into()),
            Some(start + Duration::from_secs(5))
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        let item = q.get().await.unwrap().key().clone();
        q.add_rate_limited(item.clone());
        assert_eq!(q.num_requeues(&item), 2);
        assert_eq!(
            q.waiting_deadline(&item),
            Some(Instant::now() + Duration::from_secs(10))
        );
        q.forget(&item);
        assert_eq!(q.num_requeues(&item), 0);
    }

    #[test]
    fn exponential_caps() {
        let b: ItemExponentialBackoff<u8> =
            ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300));
        let delays: Vec<_> = (0..10).map(|_| b.when(&1).as_secs()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 80, 160, 300, 300, 300, 300]);
        assert_eq!(b.delay_for(200), Duration::from_secs(300));
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_burst_then_paces() {
        let b =
            ItemExponentialBackoff::new(Duration::ZERO, Duration::ZERO).with_overall_limit(10.0, 2);
        assert_eq!(b.when(&1), Duration::ZERO);
        assert_eq!(b.when(&2), Duration::ZERO);
        assert_eq!(b.when(&3), Duration::from_millis(100));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(b.when(&4), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn max_of_takes_longest() {
        let l: ItemExponentialBackoff<u8> = default_controller_rate_limiter();
        assert_eq!(l.when(&1), Duration::from_millis(5));
        assert_eq!(l.when(&1), Duration::from_millis(10));
        assert_eq!(l.num_requeues(&1), 2);
        l.forget(&1);
        assert_eq!(l.num_requeues(&1), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_workers() {
        let q = queue();
        let worker = {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        };
        tokio::task::yield_now().await;
        q.shut_down();
        assert!(worker.await.unwrap().is_none());
        q.add("late".into());
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn many_workers_each_get_distinct_items() {
        let q = queue();
        for i in 0..50 {
            q.add(format!("k{i}"));
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut handles = Vec::new();
        for _ in 0..4 {
            let (q, tx) = (q.clone(), tx.clone());
            handles.push(tokio::spawn(async move {
                while let Some(k) = q.get().await {
                    tx.send(k.key().clone()).unwrap();
                }
            }));
        }
        let mut all = Vec::new();
        while all.len() < 50 {
            all.push(rx.recv().await.unwrap());
        }
        q.shut_down();
        for h in handles {
            h.await.unwrap();
        }
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 50);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_worker_wakes_for_a_delayed_item_without_a_spawned_task() {
        let q = queue();
        let worker = {
            let q = q.clone();
            tokio::spawn(async move { q.get().await.map(|i| (i.key().clone(), Instant::now())) })
        };
        tokio::task::yield_now().await;
        let start = Instant::now();
        q.add_after("late".into(), Duration::from_secs(60));
        // A nearer deadline added while the worker sleeps for the first one is honoured.
        q.add_after("soon".into(), Duration::from_secs(2));
        let (key, at) = worker.await.unwrap().unwrap();
        assert_eq!(key, "soon");
        assert_eq!(at - start, Duration::from_secs(2));
        assert_eq!(q.waiting_len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_drops_delayed_items_and_leaves_nothing_running() {
        let q = queue();
        for i in 0..100 {
            q.add_after(format!("k{i}"), Duration::from_secs(i + 1));
        }
        q.shut_down();
        assert_eq!(q.waiting_len(), 0);
        tokio::time::sleep(Duration::from_secs(200)).await;
        assert!(q.is_empty());
        assert!(q.get().await.is_none());
        // The queue is the only owner of its state: no background task holds a clone.
        assert_eq!(Arc::strong_count(&q.inner), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_item_is_done_even_when_the_worker_panics() {
        let q = queue();
        q.add("a".into());
        let worker = {
            let q = q.clone();
            tokio::spawn(async move {
                let _item = q.get().await.unwrap();
                q.add("a".into());
                panic!("reconcile panicked");
            })
        };
        assert!(worker.await.is_err());
        assert_eq!(
            q.len(),
            1,
            "re-added while processing, queued again when dropped"
        );
        assert_eq!(q.get().await.unwrap().key(), "a");
    }

    #[tokio::test(start_paused = true)]
    async fn due_items_are_promoted_in_deadline_order() {
        let q = queue();
        q.add_after("c".into(), Duration::from_secs(3));
        q.add_after("a".into(), Duration::from_secs(1));
        q.add_after("b".into(), Duration::from_secs(2));
        tokio::time::sleep(Duration::from_secs(5)).await;
        let order: Vec<String> = vec![
            q.get().await.unwrap().key().clone(),
            q.get().await.unwrap().key().clone(),
            q.get().await.unwrap().key().clone(),
        ];
        assert_eq!(order, ["a", "b", "c"]);
    }
}
