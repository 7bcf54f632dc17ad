//! Kubernetes Events the way Go's controllers write them, without ever making a controller wait.
//!
//! - **`core/v1` Events**, as client-go's recorder writes them: `source.component` and `reportingComponent`
//!   (the Go component names in [`crate::names::components`]), `reportingInstance` (this replica), `count`,
//!   `firstTimestamp` and `lastTimestamp`, Go's reasons and messages, named `<object>.<nanoseconds in hex>` in the
//!   object's namespace (`default` for Nodes). Every tool that reads `kubectl get events` sees them as Go's.
//! - **Correlated like client-go** ([`correlator`]): a repeat raises the `count` of one object (a PATCH) instead of
//!   making another, similar events combine, and each source and object has a spam filter.
//! - **Non-blocking**: [`EventRecorder::normal`] and [`EventRecorder::warning`] return at once. One writer task per
//!   component writes the backlog in order; a repeat of an event still waiting merges into it, so a burst of
//!   identical emissions is one object and one write. The backlog is bounded ([`DEFAULT_BACKLOG`] per component);
//!   what does not fit is dropped and counted (`ccm_events_total{outcome="dropped"}`).
//! - **Lower priority than object writes**: the runtime gives the writer a client that shares the controller's
//!   `--kube-api-qps` budget but only takes tokens that are free at that moment (see
//!   [`crate::runtime::ratelimit`]), so a Node's or Service's own patches never wait behind Events.
//!
//! One [`EventSink`] serves the whole process; each controller takes an [`EventRecorder`] for its component.
//!
//! ```no_run
//! use ccm_core::names;
//! use ccm_core::runtime::events::EventSink;
//! use ccm_core::runtime::metrics::SharedRegistry;
//! use k8s_openapi::api::core::v1::Node;
//! use kube::Resource;
//!
//! # async fn demo(client: kube::Client, node: Node) {
//! let sink = EventSink::new().with_metrics(&SharedRegistry::new());
//! let recorder = sink.recorder(client, names::components::CLOUD_NODE_CONTROLLER, Some("ccm-0".into()));
//! recorder.normal(&node.object_ref(&()), names::events::SYNCED, "Node synced successfully");
//! // At shutdown: write what is still waiting, for at most five seconds.
//! sink.close(std::time::Duration::from_secs(5)).await;
//! # }
//! ```

pub mod correlator;
pub mod metrics;
mod writer;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use self::correlator::{Correlator, Emission};
use self::metrics::EventMetrics;
use self::writer::Lane;

/// Events one component may have waiting to be written before new ones are dropped: 1,000, as client-go's
/// broadcaster queues for each controller's recorder. A 1,000-node initialization burst fits (its writer drains
/// the backlog while it fills); at 10,000 new nodes a larger backlog only held up to 3 MiB more at the peak and wrote
/// the surplus after the burst (docs/benchmarks.md, "2026-12-03").
pub const DEFAULT_BACKLOG: usize = 1000;

/// Messages longer than this are cut (the API server's limit for an Event note).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// The type of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something went wrong or needs attention.
    Warning,
}

impl EventType {
    /// `Normal` or `Warning`, as written in `type`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Default)]
struct SinkInner {
    correlator: Mutex<Correlator>,
    lanes: Mutex<HashMap<String, Arc<Lane>>>,
    progress: Arc<Notify>,
}

/// The process-wide Event pipeline: one correlator, and one background writer per component. Cheap to clone.
#[derive(Clone, Default)]
pub struct EventSink {
    inner: Arc<SinkInner>,
    metrics: Option<EventMetrics>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("waiting", &self.waiting())
            .finish_non_exhaustive()
    }
}

impl EventSink {
    /// A sink with a backlog of [`DEFAULT_BACKLOG`] events per component and no metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same sink, counting into `ccm_events_total` and `ccm_events_backlog` in `registry` (before any
    /// recorder is made).
    pub fn with_metrics(self, registry: &crate::runtime::metrics::SharedRegistry) -> Self {
        EventSink {
            metrics: Some(EventMetrics::register(registry)),
            ..Self::default()
        }
    }

    /// The same sink, counting into the metrics of `other` (if it has any): several sinks of one process share
    /// one registration of `ccm_events_total` and `ccm_events_backlog` (before any recorder is made).
    ///
    /// ```no_run
    /// use ccm_core::runtime::events::EventSink;
    /// use ccm_core::runtime::metrics::SharedRegistry;
    ///
    /// let controllers = EventSink::new().with_metrics(&SharedRegistry::new());
    /// // A pipeline of its own (closed at another time), counted in the same metrics.
    /// let leader_election = EventSink::new().sharing_metrics(&controllers);
    /// # drop(leader_election);
    /// ```
    pub fn sharing_metrics(self, other: &EventSink) -> Self {
        EventSink {
            metrics: other.metrics.clone(),
            ..Self::default()
        }
    }

    /// The metrics, if registered.
    pub fn metrics(&self) -> Option<&EventMetrics> {
        self.metrics.as_ref()
    }

    /// A recorder for `component` (for example `service-controller`) from the replica `instance`. Events of a
    /// component are written with the `client` of its first recorder.
    pub fn recorder(
        &self,
        client: kube::Client,
        component: &str,
        instance: Option<String>,
    ) -> EventRecorder {
        let mut lanes = self.inner.lanes.lock();
        let lane = lanes
            .entry(component.to_owned())
            .or_insert_with(|| {
                let lane = Arc::new(Lane::new(component, client, self));
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    handle.spawn(lane.clone().run());
                } else {
                    tracing::warn!(
                        component,
                        "event recorder made outside a Tokio runtime: its events are only logged"
                    );
                    lane.close();
                }
                lane
            })
            .clone();
        EventRecorder {
            sink: self.clone(),
            lane,
            component: component.to_owned(),
            instance,
        }
    }

    /// Events waiting to be written, over all components.
    pub fn waiting(&self) -> usize {
        self.lanes().iter().map(|l| l.backlog()).sum()
    }

    fn lanes(&self) -> Vec<Arc<Lane>> {
        self.inner.lanes.lock().values().cloned().collect()
    }

    /// Wait until every event emitted so far has been written (or given up).
    pub async fn flush(&self) {
        loop {
            let progress = self.inner.progress.notified();
            if self.lanes().iter().all(|l| l.is_idle()) {
                return;
            }
            progress.await;
        }
    }

    /// Write what is waiting for at most `timeout`, then accept no more events (they are still logged). Returns
    /// how many events were left unwritten.
    pub async fn close(&self, timeout: Duration) -> usize {
        let flushed = tokio::time::timeout(timeout, self.flush()).await.is_ok();
        for lane in self.lanes() {
            lane.close();
        }
        let left = if flushed { 0 } else { self.waiting() };
        if left > 0 {
            tracing::warn!(events = left, "shutting down with events not yet written");
        }
        left
    }

    /// Leadership was lost: accept no more events and drop every waiting one unsent (counted as
    /// `ccm_events_total{outcome="fenced"}`, one summary log line), as Go drops its broadcaster's queued Events
    /// with the lease. Returns how many were dropped; a write already in flight is refused by the fenced client.
    pub fn discard(&self) -> usize {
        let dropped: usize = self.lanes().iter().map(|lane| lane.discard()).sum();
        if dropped > 0 {
            tracing::warn!(
                events = dropped,
                "leadership lost: dropping events not yet written"
            );
        }
        dropped
    }
}

/// Emits Events for one controller; cheap to clone. Emitting never waits: the event is logged, correlated and
/// queued, and a background writer sends it.
#[derive(Clone)]
pub struct EventRecorder {
    sink: EventSink,
    lane: Arc<Lane>,
    component: String,
    instance: Option<String>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// The sink this recorder writes through.
    pub fn sink(&self) -> &EventSink {
        &self.sink
    }

    /// Emit a Normal event.
    pub fn normal(&self, regarding: &ObjectReference, reason: &str, message: impl Into<String>) {
        self.publish(regarding, EventType::Normal, reason, message.into());
    }

    /// Emit a Normal event about `object` (a Node, a Service, ...), for a controller that holds the object rather
    /// than a reference to it.
    ///
    /// ```no_run
    /// # fn demo(recorder: ccm_core::runtime::events::EventRecorder, node: k8s_openapi::api::core::v1::Node) {
    /// recorder.normal_about(&node, "TaggedInstance", "Tagged instance fake://n1");
    /// # }
    /// ```
    pub fn normal_about<K>(&self, object: &K, reason: &str, message: impl Into<String>)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.normal(&object.object_ref(&()), reason, message);
    }

    /// Emit a Warning event.
    pub fn warning(&self, regarding: &ObjectReference, reason: &str, message: impl Into<String>) {
        self.publish(regarding, EventType::Warning, reason, message.into());
    }

    /// Emit an event: log it, correlate it and queue it for the writer. Never waits and never fails (Events are
    /// best effort, as in Go).
    pub fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let object = regarding.name.as_deref().unwrap_or_default();
        let namespace = regarding.namespace.as_deref().unwrap_or_default();
        let kind = regarding.kind.as_deref().unwrap_or_default();
        match type_ {
            EventType::Normal => {
                tracing::info!(component = %self.component, kind, namespace, object, reason, message = %message, "event")
            }
            EventType::Warning => {
                tracing::warn!(component = %self.component, kind, namespace, object, reason, message = %message, "event")
            }
        }
        let emission = Emission {
            regarding: regarding.clone(),
            type_: type_.as_str(),
            reason: reason.to_owned(),
            message: truncate(message),
            component: self.component.clone(),
            instance: self.instance.clone(),
        };
        let correlated = self.sink.inner.correlator.lock().correlate(
            &emission,
            Instant::now(),
            Timestamp::now(),
        );
        self.lane.push(correlated);
    }
}

fn truncate(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES - 3;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...");
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("short".into()), "short");
        let long = "é".repeat(1000);
        let cut = truncate(long);
        assert!(cut.len() <= MAX_MESSAGE_BYTES);
        assert!(cut.ends_with("..."));
    }

    #[test]
    fn event_types_are_go_strings() {
        assert_eq!(EventType::Normal.as_str(), "Normal");
        assert_eq!(EventType::Warning.as_str(), "Warning");
    }
}
