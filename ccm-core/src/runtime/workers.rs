//! Workers: the loop every controller (built-in or a vendor's) runs over its work queue, and the one place that
//! decides what happens to a key after its reconcile `key -> Result<Action, E>`:
//!
//! | reconcile returned | the queue |
//! |---|---|
//! | `Ok(Action::Done)` | forgets the key's failures |
//! | `Ok(Action::RequeueAfter(d))` | forgets the key's failures and queues it again after `d` |
//! | `Err(e)`, with a [`CloudError`](crate::CloudError) asking to retry after `d` anywhere in `e`'s source chain (`RetryAfter` or `Throttled` with a delay) | queues it again after exactly `d`, without counting a failure (Go: `RetryError`) |
//! | any other `Err(e)` | queues it again with the key's exponential backoff (one more failure) |
//!
//! ```no_run
//! use std::time::Duration;
//! use ccm_core::runtime::workers::{Action, run_workers};
//! use ccm_core::runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo() {
//! let queue: WorkQueue<String> = WorkQueue::new("tagging", default_controller_rate_limiter());
//! queue.add("node-1".into());
//! let shutdown = CancellationToken::new();
//! run_workers("tagging-controller", queue, 2, shutdown, |key: String| async move {
//!     println!("tagging {key}");
//!     Ok::<_, std::io::Error>(Action::RequeueAfter(Duration::from_secs(300)))
//! })
//! .await;
//! # }
//! ```

use std::error::Error as StdError;
use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::find_cloud_error;
use crate::runtime::workqueue::WorkQueue;

/// What a successful reconcile asks of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more to do until the key is added again.
    Done,
    /// Look again after this long (a periodic check of this key).
    RequeueAfter(Duration),
}

/// What happens to a key after a reconcile: the one retry decision of the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Success: reset the key's backoff.
    Forget,
    /// Success, look again later: reset the backoff and queue the key after this delay.
    ForgetAndRequeueAfter(Duration),
    /// The cloud asked to retry after exactly this delay: requeue then, leaving the backoff untouched.
    RetryAfter(Duration),
    /// Any other error: requeue with the key's exponential backoff (one more failure).
    Backoff,
}

/// The decision for a reconcile result.
///
/// ```
/// use std::time::Duration;
/// use ccm_core::CloudError;
/// use ccm_core::runtime::workers::{Action, Decision, decide};
///
/// let busy = CloudError::retry("load balancer still building", Duration::from_secs(42)).context("ensure");
/// assert_eq!(decide::<CloudError>(&Err(busy)), Decision::RetryAfter(Duration::from_secs(42)));
/// assert_eq!(decide::<CloudError>(&Err(CloudError::message("boom"))), Decision::Backoff);
/// assert_eq!(decide::<CloudError>(&Ok(Action::Done)), Decision::Forget);
/// ```
pub fn decide<E: StdError + 'static>(result: &Result<Action, E>) -> Decision {
    match result {
        Ok(Action::Done) => Decision::Forget,
        Ok(Action::RequeueAfter(after)) => Decision::ForgetAndRequeueAfter(*after),
        Err(error) => decide_error(error),
    }
}

/// The decision for a failed reconcile: the delay a [`CloudError`](crate::CloudError) anywhere in `error`'s
/// source chain asks for (see [`crate::CloudError::retry_after`]), else backoff.
pub fn decide_error(error: &(dyn StdError + 'static)) -> Decision {
    match find_cloud_error(error).and_then(|cloud| cloud.retry_after()) {
        Some(after) => Decision::RetryAfter(after),
        None => Decision::Backoff,
    }
}

/// Apply `decision` to `key` on `queue` (before the key's [`WorkItem`](crate::runtime::workqueue::WorkItem)
/// is dropped, so a requeue is not lost).
pub fn apply<K: Eq + Hash + Clone + Send + Sync + 'static>(
    queue: &WorkQueue<K>,
    key: &K,
    decision: Decision,
) {
    match decision {
        Decision::Forget => queue.forget(key),
        Decision::ForgetAndRequeueAfter(after) => {
            queue.forget(key);
            queue.add_after(key.clone(), after);
        }
        Decision::RetryAfter(after) => queue.add_after(key.clone(), after),
        Decision::Backoff => queue.add_rate_limited(key.clone()),
    }
}

/// Run `workers` workers over `queue` until `shutdown`: each takes a key, reconciles it, and applies the
/// [`decide`] decision (a panicking reconcile is logged and its key retried with backoff). At shutdown the queue
/// stops handing out keys, and the call returns once every worker has finished the key it holds.
pub async fn run_workers<K, F, Fut, E>(
    controller: &str,
    queue: WorkQueue<K>,
    workers: usize,
    shutdown: CancellationToken,
    reconcile: F,
) where
    K: Eq + Hash + Clone + Send + Sync + std::fmt::Display + 'static,
    F: Fn(K) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: StdError + Send + 'static,
{
    let handles: Vec<_> = (0..workers.max(1))
        .map(|_| {
            let queue = queue.clone();
            let reconcile = reconcile.clone();
            let controller = controller.to_owned();
            tokio::spawn(async move {
                while let Some(item) = queue.get().await {
                    let key = item.key().clone();
                    // Run in a task of its own so a panic is contained to this key.
                    let outcome = tokio::spawn(reconcile(key.clone())).await;
                    let decision = match &outcome {
                        Ok(result) => {
                            let decision = decide(result);
                            if let Err(error) = result {
                                match decision {
                                    // the cloud-call budget summarises calls abandoned at shutdown in one line
                                    _ if crate::budget::is_abandoned(error) => tracing::debug!(controller = %controller, key = %key, %error, "sync abandoned at shutdown"),
                                    Decision::RetryAfter(after) => tracing::info!(controller = %controller, key = %key, %error, retry_after = ?after, "error syncing; requeuing after the delay the cloud asked for"),
                                    _ => tracing::info!(controller = %controller, key = %key, %error, "error syncing; requeuing with backoff"),
                                }
                            }
                            decision
                        }
                        Err(join_error) => {
                            tracing::error!(controller = %controller, key = %key, error = %join_error, "reconcile panicked; requeuing with backoff");
                            Decision::Backoff
                        }
                    };
                    apply(&queue, &key, decision);
                    drop(item);
                }
            })
        })
        .collect();
    shutdown.cancelled().await;
    queue.shut_down();
    for handle in handles {
        if let Err(error) = handle.await {
            tracing::error!(controller, %error, "a worker panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CloudError;
    use crate::runtime::workqueue::ItemExponentialBackoff;
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    #[derive(Debug, thiserror::Error)]
    enum ControllerError {
        #[error("cloud call failed")]
        Cloud(#[source] CloudError),
        #[error("no luck")]
        Plain,
    }

    #[test]
    fn decisions_follow_the_table() {
        assert_eq!(
            decide::<ControllerError>(&Ok(Action::Done)),
            Decision::Forget
        );
        assert_eq!(
            decide::<ControllerError>(&Ok(Action::RequeueAfter(Duration::from_secs(3)))),
            Decision::ForgetAndRequeueAfter(Duration::from_secs(3))
        );
        assert_eq!(
            decide::<ControllerError>(&Err(ControllerError::Plain)),
            Decision::Backoff
        );
        assert_eq!(
            decide::<ControllerError>(&Err(ControllerError::Cloud(CloudError::message("x")))),
            Decision::Backoff
        );
        let wrapped = ControllerError::Cloud(
            CloudError::retry("building", Duration::from_secs(42))
                .context("one")
                .context("two"),
        );
        assert_eq!(
            decide::<ControllerError>(&Err(wrapped)),
            Decision::RetryAfter(Duration::from_secs(42))
        );
        let throttled = ControllerError::Cloud(CloudError::Throttled {
            message: "quota".into(),
            retry_after: Some(Duration::from_millis(1500)),
        });
        assert_eq!(
            decide::<ControllerError>(&Err(throttled)),
            Decision::RetryAfter(Duration::from_millis(1500))
        );
        let throttled = ControllerError::Cloud(CloudError::Throttled {
            message: "quota".into(),
            retry_after: None,
        });
        assert_eq!(
            decide::<ControllerError>(&Err(throttled)),
            Decision::Backoff
        );
    }

    fn queue() -> WorkQueue<String> {
        WorkQueue::new(
            "test",
            ItemExponentialBackoff::new(Duration::from_secs(1), Duration::from_secs(60)),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn apply_requeues_as_decided() {
        let q = queue();
        let key = "k".to_string();
        let start = Instant::now();
        apply(&q, &key, Decision::Backoff);
        apply(&q, &key, Decision::Backoff);
        assert_eq!(q.num_requeues(&key), 2);
        apply(&q, &key, Decision::RetryAfter(Duration::from_millis(500)));
        assert_eq!(q.num_requeues(&key), 2, "retry-after counts no failure");
        assert_eq!(
            q.waiting_deadline(&key),
            Some(start + Duration::from_millis(500))
        );
        apply(&q, &key, Decision::Forget);
        assert_eq!(q.num_requeues(&key), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn workers_reconcile_retry_and_stop_at_shutdown() {
        let q = queue();
        let calls: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
        for key in ["ok", "flaky", "periodic", "panics"] {
            q.add(key.into());
        }
        let shutdown = CancellationToken::new();
        let start = Instant::now();
        let runner = {
            let (q, calls, shutdown) = (q.clone(), calls.clone(), shutdown.clone());
            tokio::spawn(async move {
                run_workers("test", q, 2, shutdown, move |key: String| {
                    let calls = calls.clone();
                    async move {
                        let n = {
                            let mut calls = calls.lock().unwrap();
                            calls.push((key.clone(), Instant::now()));
                            calls.iter().filter(|(k, _)| *k == key).count()
                        };
                        match key.as_str() {
                            "flaky" if n < 3 => Err(ControllerError::Plain),
                            "periodic" => Ok(Action::RequeueAfter(Duration::from_secs(10))),
                            "panics" if n == 1 => panic!("boom"),
                            _ => Ok(Action::Done),
                        }
                    }
                })
                .await;
            })
        };
        tokio::time::sleep(Duration::from_secs(25)).await;
        shutdown.cancel();
        runner.await.unwrap();
        let calls = calls.lock().unwrap().clone();
        let times = |key: &str| -> Vec<Duration> {
            calls
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, at)| *at - start)
                .collect()
        };
        assert_eq!(times("ok"), [Duration::ZERO]);
        // Backoff 1 s, then 2 s.
        assert_eq!(
            times("flaky"),
            [
                Duration::ZERO,
                Duration::from_secs(1),
                Duration::from_secs(3)
            ]
        );
        assert_eq!(
            times("periodic"),
            [
                Duration::ZERO,
                Duration::from_secs(10),
                Duration::from_secs(20)
            ]
        );
        assert_eq!(times("panics"), [Duration::ZERO, Duration::from_secs(1)]);
        assert!(q.is_shutting_down());
    }
}
