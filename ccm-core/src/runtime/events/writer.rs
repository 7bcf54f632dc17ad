//! The background writer of one Event lane: a bounded backlog in which repeats of a pending event merge, and one
//! task that writes it to the API server in order.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::correlator::Correlated;
use super::metrics::{EventMetrics, Outcome};
use super::{DEFAULT_BACKLOG, EventSink};

/// How often a write that failed for a passing reason (429, 5xx, connection) is tried before the event is given
/// up (client-go tries 12 times, 10 s apart; a shorter series keeps the backlog moving when the API server is
/// down for long).
pub const MAX_ATTEMPTS: u32 = 6;
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(10);

/// One write waiting in the backlog.
struct Pending {
    /// The Event as JSON: one allocation (536 bytes for a node's `Synced` event), where an `Event` value is 1,000
    /// bytes inline and a dozen strings besides; decoded again when it is written.
    event: Box<[u8]>,
    /// The object does not exist yet on the server (as far as we know).
    create: bool,
}

#[derive(Default)]
struct State {
    order: VecDeque<String>,
    /// 48 bytes a slot: the name and the [`Pending`] JSON's pointer (a hash table keeps room for up to twice its
    /// entries, and both tables while it grows, so inline `Event` values made a full backlog cost ~12 MB at its
    /// peak; docs/benchmarks.md, "Memory").
    pending: HashMap<String, Pending>,
    /// The writer holds an event it took from the backlog.
    busy: bool,
    closed: bool,
}

/// The backlog (at most [`DEFAULT_BACKLOG`] events) and writer of one component's Events.
pub(super) struct Lane {
    component: String,
    client: kube::Client,
    state: Mutex<State>,
    wake: Notify,
    progress: Arc<Notify>,
    metrics: Option<EventMetrics>,
}

impl Lane {
    /// A lane of `sink`, reporting its progress and metrics there.
    pub(super) fn new(component: &str, client: kube::Client, sink: &EventSink) -> Self {
        Lane {
            component: component.to_owned(),
            client,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            progress: sink.inner.progress.clone(),
            metrics: sink.metrics.clone(),
        }
    }

    fn count(&self, outcome: Outcome) {
        if let Some(m) = &self.metrics {
            m.count(&self.component, outcome);
        }
    }

    fn set_backlog(&self, state: &State) {
        if let Some(m) = &self.metrics {
            m.set_backlog(&self.component, state.pending.len());
        }
    }

    /// Queue a correlated event. A repeat of an event still in the backlog replaces it (so a burst of identical
    /// emissions is one write); a new event beyond the capacity is dropped and counted.
    pub(super) fn push(&self, correlated: Correlated) {
        let (event, create) = match correlated {
            Correlated::Create(event) => (event, true),
            Correlated::Update(event) => (event, false),
            Correlated::Skip => {
                self.count(Outcome::SpamFiltered);
                return;
            }
        };
        let Some(name) = event.metadata.name.clone() else {
            return;
        };
        let event = match serde_json::to_vec(&event) {
            Ok(json) => json.into_boxed_slice(),
            Err(error) => {
                self.count(Outcome::Failed);
                tracing::warn!(component = %self.component, event = %name, %error, "could not encode event");
                return;
            }
        };
        let mut state = self.state.lock();
        if state.closed {
            self.count(Outcome::Dropped);
            return;
        }
        if let Some(waiting) = state.pending.get_mut(&name) {
            // Still a create if the object was never written: it is created with the newest count.
            waiting.event = event;
            self.count(Outcome::Merged);
            return;
        }
        if state.pending.len() >= DEFAULT_BACKLOG {
            drop(state);
            self.count(Outcome::Dropped);
            tracing::debug!(component = %self.component, event = %name, "event backlog full, event dropped");
            return;
        }
        state.order.push_back(name.clone());
        state.pending.insert(name, Pending { event, create });
        self.set_backlog(&state);
        drop(state);
        self.wake.notify_one();
    }

    /// True when nothing is waiting and nothing is being written.
    pub(super) fn is_idle(&self) -> bool {
        let state = self.state.lock();
        state.pending.is_empty() && !state.busy
    }

    /// Accept no more events; the writer stops once the backlog is written.
    pub(super) fn close(&self) {
        self.state.lock().closed = true;
        self.wake.notify_one();
    }

    /// Accept no more events and drop every waiting one unsent, counted as [`Outcome::Fenced`]. Returns how many
    /// were dropped.
    pub(super) fn discard(&self) -> usize {
        let mut state = self.state.lock();
        state.closed = true;
        let dropped = state.pending.len();
        state.pending.clear();
        state.order.clear();
        self.set_backlog(&state);
        drop(state);
        for _ in 0..dropped {
            self.count(Outcome::Fenced);
        }
        self.wake.notify_one();
        self.progress.notify_waiters();
        dropped
    }

    /// Events still waiting.
    pub(super) fn backlog(&self) -> usize {
        self.state.lock().pending.len()
    }

    /// Write the backlog, in order, until the lane is closed and empty.
    pub(super) async fn run(self: Arc<Self>) {
        loop {
            let woken = self.wake.notified();
            let next = {
                let mut state = self.state.lock();
                match state.order.pop_front() {
                    Some(name) => {
                        let pending = state.pending.remove(&name);
                        state.busy = pending.is_some();
                        self.set_backlog(&state);
                        pending
                    }
                    None if state.closed => return,
                    None => None,
                }
            };
            match next {
                Some(pending) => {
                    self.write(pending).await;
                    self.state.lock().busy = false;
                    self.progress.notify_waiters();
                }
                None => woken.await,
            }
        }
    }

    async fn write(&self, pending: Pending) {
        let mut create = pending.create;
        let mut event: Event = match serde_json::from_slice(&pending.event) {
            Ok(event) => event,
            Err(error) => {
                self.count(Outcome::Failed);
                tracing::warn!(component = %self.component, %error, "could not decode a queued event");
                return;
            }
        };
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let mut attempt = 0;
        loop {
            let result = if create {
                event.metadata.resource_version = None;
                api.create(&PostParams::default(), &event).await.map(drop)
            } else {
                let patch = serde_json::json!({
                    "count": event.count,
                    "lastTimestamp": event.last_timestamp,
                    "message": event.message,
                });
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
            };
            let Err(error) = result else {
                self.count(if create {
                    Outcome::Created
                } else {
                    Outcome::Patched
                });
                return;
            };
            if crate::fence::is_fenced(&error) {
                // Not leading (any more): the write was never sent and must not be retried.
                self.count(Outcome::Fenced);
                tracing::debug!(component = %self.component, event = %name, %error, "event not written");
                return;
            }
            match &error {
                // Created meanwhile (a retried create that had gone through): update it instead.
                kube::Error::Api(status) if status.code == 409 && create => create = false,
                // Expired or deleted: create it again with the count so far, as client-go does.
                kube::Error::Api(status) if status.code == 404 && !create => create = true,
                kube::Error::Api(status) if status.code != 429 && status.code < 500 => {
                    self.count(Outcome::Failed);
                    tracing::warn!(component = %self.component, event = %name, %error, "could not write event");
                    return;
                }
                _ => {
                    attempt += 1;
                    if attempt >= MAX_ATTEMPTS || self.state.lock().closed {
                        self.count(Outcome::Failed);
                        tracing::warn!(component = %self.component, event = %name, %error, attempts = attempt, "could not write event, giving up");
                        return;
                    }
                    let delay = FIRST_RETRY
                        .saturating_mul(1 << (attempt - 1).min(16))
                        .min(MAX_RETRY);
                    tracing::debug!(component = %self.component, event = %name, %error, ?delay, "event write failed, retrying");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}
