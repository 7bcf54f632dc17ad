//! Objects of a benchmark: creating many at once, and watching how many of them are "done" (a Node
//! initialized, a Service with an ingress) until a goal holds; and a sleep that Ctrl-C ends.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use tokio::sync::watch;

use super::ccm::CcmProcess;
use crate::process::{self, Interrupt, Interrupted};

/// How often waits report progress on stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// Sleeps, unless Ctrl-C comes first.
///
/// # Errors
/// [`Interrupted`] on Ctrl-C.
pub async fn pause(duration: Duration, interrupt: &Interrupt) -> anyhow::Result<()> {
    tokio::select! {
        () = tokio::time::sleep(duration) => Ok(()),
        () = interrupt.interrupted() => Err(Interrupted.into()),
    }
}

/// Objects seen by a watch and how many of them are "done".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Objects that exist.
    pub seen: usize,
    /// Of those, how many satisfy the tracker's predicate.
    pub done: usize,
}

/// Keeps a count of objects (from a watch) and of those satisfying a predicate.
pub struct Tracker {
    progress: watch::Receiver<Progress>,
    task: tokio::task::JoinHandle<()>,
}

impl Tracker {
    /// Starts watching `api`.
    pub fn start<K>(api: kube::Api<K>, is_done: fn(&K) -> bool) -> Self
    where
        K: kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let (sender, progress) = watch::channel(Progress::default());
        let task = tokio::spawn(async move {
            let mut live: HashMap<String, bool> = HashMap::new();
            let mut buffer: Option<HashMap<String, bool>> = None;
            let mut events =
                std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            loop {
                let event = match events.try_next().await {
                    Ok(Some(event)) => event,
                    Ok(None) => return,
                    Err(err) => {
                        tracing::warn!(error = %err, "benchmark watch failed; retrying");
                        continue;
                    }
                };
                let name = |obj: &K| obj.meta().name.clone().unwrap_or_default();
                match event {
                    watcher::Event::Init => buffer = Some(HashMap::new()),
                    watcher::Event::InitApply(obj) => {
                        buffer
                            .get_or_insert_with(HashMap::new)
                            .insert(name(&obj), is_done(&obj));
                    }
                    watcher::Event::InitDone => {
                        live = buffer.take().unwrap_or_default();
                    }
                    watcher::Event::Apply(obj) => {
                        live.insert(name(&obj), is_done(&obj));
                    }
                    watcher::Event::Delete(obj) => {
                        live.remove(&name(&obj));
                    }
                }
                let progress = Progress {
                    seen: live.len(),
                    done: live.values().filter(|done| **done).count(),
                };
                sender.send_if_modified(|current| {
                    let changed = *current != progress;
                    *current = progress;
                    changed
                });
            }
        });
        Tracker { progress, task }
    }

    /// The latest counts.
    pub fn progress(&self) -> Progress {
        *self.progress.borrow()
    }

    /// Waits until `goal` holds; returns when it first held. Reports progress on stderr, and
    /// watches the CCM (if any) and the deadline.
    ///
    /// # Errors
    /// On timeout (with the counts reached), if the CCM exits, or on Ctrl-C.
    pub async fn wait_until(
        &mut self,
        what: &str,
        goal: impl Fn(Progress) -> bool,
        timeout: Duration,
        mut ccm: Option<&mut CcmProcess>,
        interrupt: &Interrupt,
    ) -> anyhow::Result<Instant> {
        let started = Instant::now();
        let mut reported = started;
        loop {
            let progress = *self.progress.borrow_and_update();
            if goal(progress) {
                return Ok(Instant::now());
            }
            if started.elapsed() >= timeout {
                bail!(
                    "timed out after {} waiting for {what}: {} of {} done",
                    process::seconds(timeout),
                    progress.done,
                    progress.seen
                );
            }
            if reported.elapsed() >= PROGRESS_EVERY {
                eprintln!(
                    "  {:>6}: {what}: {} of {} done",
                    process::seconds(started.elapsed()),
                    progress.done,
                    progress.seen
                );
                reported = Instant::now();
            }
            tokio::select! {
                changed = self.progress.changed() => {
                    if changed.is_err() {
                        bail!("the watch for {what} ended");
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(500)) => {
                    if let Some(ccm) = ccm.as_deref_mut() {
                        ccm.check_running()?;
                    }
                }
                () = interrupt.interrupted() => return Err(Interrupted.into()),
            }
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Creates `objects` with `concurrency` requests in flight.
///
/// # Errors
/// The first failed create (naming the object).
pub async fn create_all<K>(
    api: &kube::Api<K>,
    objects: Vec<K>,
    concurrency: usize,
    interrupt: &Interrupt,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let creates = futures::stream::iter(objects)
        .map(|object| async move {
            let name = object.meta().name.clone().unwrap_or_default();
            api.create(&kube::api::PostParams::default(), &object)
                .await
                .map(|_| ())
                .with_context(|| format!("creating {name}"))
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>();
    tokio::select! {
        created = creates => created.map(|_| ()),
        () = interrupt.interrupted() => Err(Interrupted.into()),
    }
}
