//! Metrics of the Event recorder: what became of each emitted event, and the backlog per component.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::runtime::metrics::{Labels, SharedRegistry, labels};

/// What became of one emitted event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    /// Written as a new Event object.
    Created,
    /// Written as a repeat (`count` raised on an existing object).
    Patched,
    /// Folded into a write still waiting in the backlog (no API call of its own).
    Merged,
    /// Skipped by the per-object spam filter (client-go's correlator does the same).
    SpamFiltered,
    /// Dropped because the backlog was full or the recorder was closed.
    Dropped,
    /// The API server refused it, or it kept failing until the writer gave up.
    Failed,
    /// Not written because this replica's leadership was lost or not confirmed (the
    /// [fence](crate::fence) was closed): dropped unsent, as Go drops its queued Events.
    Fenced,
}

impl Outcome {
    /// The `outcome` label value.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// `ccm_events_total{component,outcome}` and `ccm_events_backlog{component}`.
#[derive(Debug, Clone, Default)]
pub struct EventMetrics {
    events: Family<Labels, Counter>,
    backlog: Family<Labels, Gauge>,
}

impl EventMetrics {
    /// Create the families and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        EventMetrics {
            events: registry.registered(
                "ccm_events",
                "Kubernetes Events emitted by the controllers, by component and what became of them",
                Family::default(),
            ),
            backlog: registry.registered(
                "ccm_events_backlog",
                "Events waiting to be written, by component",
                Family::default(),
            ),
        }
    }

    pub(crate) fn count(&self, component: &str, outcome: Outcome) {
        self.events
            .get_or_create(&event_labels(component, outcome))
            .inc();
    }

    pub(crate) fn set_backlog(&self, component: &str, len: usize) {
        self.backlog
            .get_or_create(&labels(&[("component", component)]))
            .set(i64::try_from(len).unwrap_or(i64::MAX));
    }

    /// How many events of `component` ended with `outcome` so far.
    pub fn total(&self, component: &str, outcome: Outcome) -> u64 {
        self.events
            .get_or_create(&event_labels(component, outcome))
            .get()
    }
}

fn event_labels(component: &str, outcome: Outcome) -> Labels {
    labels(&[("component", component), ("outcome", outcome.as_str())])
}
