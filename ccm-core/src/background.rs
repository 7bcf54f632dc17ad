//! Background tasks tied to the runtime's shutdown: what a provider factory starts (credential refreshers, cache
//! warmers) runs until the CCM stops, is awaited then, and is aborted if it does not stop in time.
//!
//! Where background work belongs:
//! - in the **provider factory** ([`ProviderSettings::tasks`](crate::registry::ProviderSettings::tasks)): work
//!   every replica, leader or not, needs to answer cloud calls (refreshing credentials, keeping a cache warm); it
//!   runs until the process shuts down;
//! - in [`crate::CloudProvider::initialize`]: work only the leader does (sweeping leaked cloud resources); it
//!   stops when `ctx.shutdown` is cancelled, at shutdown or when leadership is lost.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use ccm_core::background::BackgroundTasks;
//! use tokio_util::sync::CancellationToken;
//!
//! let shutdown = CancellationToken::new();
//! let tasks = BackgroundTasks::new(shutdown.clone());
//! let stop = tasks.shutdown_token();
//! tasks.spawn("credential-refresher", async move {
//!     stop.cancelled().await; // refresh until the CCM stops
//! });
//! assert_eq!(tasks.running(), 1);
//! shutdown.cancel();
//! assert_eq!(tasks.stop(Duration::from_secs(1)).await, 0, "it stopped in time; nothing was aborted");
//! # }
//! ```

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use parking_lot::Mutex;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Background tasks that stop with the runtime; cheap to clone (clones share the same tasks).
#[derive(Clone)]
pub struct BackgroundTasks {
    token: CancellationToken,
    tracker: TaskTracker,
    aborts: Arc<Mutex<Vec<(String, AbortHandle)>>>,
}

impl std::fmt::Debug for BackgroundTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundTasks")
            .field("running", &self.running())
            .field("stopping", &self.token.is_cancelled())
            .finish()
    }
}

impl BackgroundTasks {
    /// Tasks that are asked to stop when `shutdown` is cancelled (or when [`stop`](Self::stop) is called).
    pub fn new(shutdown: CancellationToken) -> Self {
        BackgroundTasks {
            token: shutdown.child_token(),
            tracker: TaskTracker::new(),
            aborts: Arc::default(),
        }
    }

    /// Cancelled when the tasks must stop: select on it in every loop of a background task.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Start `task` on the current Tokio runtime under `name` (used in logs). A panic in it is logged with the
    /// name and ends only that task.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, as `tokio::spawn` does.
    pub fn spawn<F>(&self, name: &str, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let label = name.to_owned();
        let handle = self.tracker.spawn(async move {
            if let Err(panic) = AssertUnwindSafe(task).catch_unwind().await {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string panic payload".to_owned());
                tracing::error!(task = %label, panic = %message, "background task panicked");
            }
        });
        let mut aborts = self.aborts.lock();
        aborts.retain(|(_, h)| !h.is_finished());
        aborts.push((name.to_owned(), handle.abort_handle()));
    }

    /// How many tasks have not finished yet.
    pub fn running(&self) -> usize {
        self.tracker.len()
    }

    /// Ask every task to stop (cancel [`shutdown_token`](Self::shutdown_token)), wait up to `grace` for them, then
    /// abort the rest with a log line naming them. Returns how many were aborted.
    pub async fn stop(&self, grace: Duration) -> usize {
        self.token.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
        {
            return 0;
        }
        let pending: Vec<(String, AbortHandle)> = self
            .aborts
            .lock()
            .drain(..)
            .filter(|(_, h)| !h.is_finished())
            .collect();
        let names: Vec<&str> = pending.iter().map(|(n, _)| n.as_str()).collect();
        tracing::warn!(tasks = ?names, ?grace, "background tasks did not stop in time; aborting them");
        for (_, handle) in &pending {
            handle.abort();
        }
        self.tracker.wait().await;
        pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test(start_paused = true)]
    async fn cooperative_tasks_stop_and_stubborn_ones_are_aborted_after_the_grace() {
        let shutdown = CancellationToken::new();
        let tasks = BackgroundTasks::new(shutdown.clone());
        let stop = tasks.shutdown_token();
        let polite_done = Arc::new(AtomicBool::new(false));
        let done = polite_done.clone();
        tasks.spawn("polite", async move {
            stop.cancelled().await;
            done.store(true, Ordering::SeqCst);
        });
        tasks.spawn("stubborn", std::future::pending());
        assert_eq!(tasks.running(), 2);
        let started = tokio::time::Instant::now();
        let aborted = tasks.stop(Duration::from_secs(5)).await;
        assert_eq!(aborted, 1);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert!(polite_done.load(Ordering::SeqCst));
        assert_eq!(tasks.running(), 0);
        assert!(tasks.shutdown_token().is_cancelled());
        assert!(
            !shutdown.is_cancelled(),
            "stopping the tasks does not stop the process"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_runtime_shutdown_reaches_the_tasks_and_a_panic_ends_only_its_task() {
        let shutdown = CancellationToken::new();
        let tasks = BackgroundTasks::new(shutdown.clone());
        tasks.spawn("panics", async { panic!("refresher broke") });
        let stop = tasks.shutdown_token();
        tasks.spawn("waits", async move { stop.cancelled().await });
        tokio::task::yield_now().await;
        assert_eq!(
            tasks.running(),
            1,
            "the panicking task ended, the other runs"
        );
        shutdown.cancel();
        assert_eq!(tasks.stop(Duration::from_secs(1)).await, 0);
    }
}
