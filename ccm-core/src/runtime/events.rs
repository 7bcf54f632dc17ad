//! Kubernetes Events with the Go reference's reasons, written best-effort and logged in structured form.
//!
//! ```no_run
//! use ccm_core::names;
//! use ccm_core::runtime::events::EventRecorder;
//! use k8s_openapi::api::core::v1::Node;
//! use kube::Resource;
//!
//! # async fn demo(client: kube::Client, node: Node) {
//! let recorder = EventRecorder::new(client, names::components::CLOUD_NODE_CONTROLLER, Some("ccm-0".into()));
//! recorder.normal(&node.object_ref(&()), names::events::SYNCED, "Node synced successfully").await;
//! # }
//! ```

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Publishes Events for one controller (the `reportingController` is the controller's component name).
#[derive(Clone)]
pub struct EventRecorder {
    recorder: Recorder,
    component: String,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder for `component` (for example `service-controller`), from the replica `instance`.
    pub fn new(client: kube::Client, component: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: component.to_owned(),
            instance,
        };
        EventRecorder {
            recorder: Recorder::new(client, reporter),
            component: component.to_owned(),
        }
    }

    /// The component name.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// Publish a Normal event.
    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, note: impl Into<String>) {
        self.publish(regarding, EventType::Normal, reason, note.into())
            .await;
    }

    /// Publish a Warning event.
    pub async fn warning(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        note: impl Into<String>,
    ) {
        self.publish(regarding, EventType::Warning, reason, note.into())
            .await;
    }

    /// Publish an event; failures are logged, never returned (events are best effort, as in Go).
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let object = regarding.name.as_deref().unwrap_or_default();
        let namespace = regarding.namespace.as_deref().unwrap_or_default();
        let kind = regarding.kind.as_deref().unwrap_or_default();
        match type_ {
            EventType::Normal => {
                tracing::info!(component = %self.component, kind, namespace, object, reason, note = %note, "event")
            }
            EventType::Warning => {
                tracing::warn!(component = %self.component, kind, namespace, object, reason, note = %note, "event")
            }
        }
        let mut note = note;
        if note.len() > 1024 {
            let mut cut = 1021;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(component = %self.component, object, reason, %error, "could not write event");
        }
    }
}
