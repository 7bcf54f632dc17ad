//! What the runtime gives a controller, and how a controller is described to the runtime.
//!
//! The runtime (crate `ccm-app`) builds one [`ControllerContext`] for the whole process and calls each enabled
//! [`ControllerDescriptor`]'s init function with it; the [`Controller`] it returns is then run until shutdown.
//! Vendors register their own controllers the same way, usually with [`ControllerDescriptor::build`], which
//! also says why a controller is not started (here: a provider without InstancesV2).
//!
//! ```no_run
//! use async_trait::async_trait;
//! use ccm_core::intercept::Capability;
//! use ccm_core::runtime::controller::{Controller, ControllerContext, ControllerDescriptor};
//! use ccm_core::BoxError;
//! use tokio_util::sync::CancellationToken;
//!
//! struct TagSync;
//!
//! #[async_trait]
//! impl Controller for TagSync {
//!     async fn run(self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
//!         shutdown.cancelled().await;
//!         Ok(())
//!     }
//! }
//!
//! let descriptor = ControllerDescriptor::build("tagging-controller", |ctx: &ControllerContext| {
//!     ctx.require(&[Capability::InstancesV2])?;
//!     Ok(TagSync)
//! })
//! .with_aliases(&["tagging"])
//! .disabled_by_default();
//! assert_eq!(descriptor.name, "tagging-controller");
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::error::BoxError;
use crate::intercept::Capability;
use crate::provider::CloudProvider;
use crate::runtime::events::{EventRecorder, EventSink};
use crate::runtime::informer::SharedInformers;
use crate::runtime::metrics::{SharedRegistry, WorkqueueMetrics};
use crate::vendor::VendorSettings;

/// A running controller.
#[async_trait]
pub trait Controller: Send + 'static {
    /// Run until `shutdown` is cancelled, then finish in-flight work and return. An error stops the CCM.
    async fn run(self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError>;

    /// A health check for `/healthz/<name>`; by default the controller is healthy while it runs.
    fn health_check(&self) -> Option<HealthCheck> {
        None
    }
}

/// A health check: `Ok(())` when healthy, otherwise the reason.
pub type HealthCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Everything a controller needs from the process, shared by all controllers.
#[derive(Clone)]
#[non_exhaustive]
pub struct ControllerContext {
    /// A client for the cluster.
    pub client: kube::Client,
    /// The cloud provider.
    pub provider: Arc<dyn CloudProvider>,
    /// The shared Node and Service caches.
    pub informers: SharedInformers,
    /// The process's metrics registry.
    pub metrics: SharedRegistry,
    /// The `workqueue_*` metric families, shared by every queue.
    pub workqueue_metrics: WorkqueueMetrics,
    /// `--cluster-name`, passed to every load-balancer and route call.
    pub cluster_name: String,
    /// This replica's identity (pod name or host name), the `reportingInstance` of events.
    pub instance: Option<String>,
    /// The process's Event pipeline, shared by every controller.
    pub events: EventSink,
    /// The client Events are written with; `None` uses [`client`](Self::client). The runtime sets a client that
    /// shares the controller's API budget at a lower priority than its object writes.
    pub event_client: Option<kube::Client>,
    /// The vendor's flags, config section and the values its provider factory shared (for example its cloud
    /// client): what a vendor controller reads its settings from.
    pub vendor: VendorSettings,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("provider", &self.provider.provider_name())
            .field("cluster_name", &self.cluster_name)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl ControllerContext {
    /// A context; registers the shared workqueue metrics into `metrics`.
    pub fn new(
        client: kube::Client,
        provider: Arc<dyn CloudProvider>,
        informers: SharedInformers,
        metrics: SharedRegistry,
        cluster_name: impl Into<String>,
    ) -> Self {
        let workqueue_metrics = WorkqueueMetrics::register(&metrics);
        ControllerContext {
            client,
            provider,
            informers,
            metrics,
            workqueue_metrics,
            cluster_name: cluster_name.into(),
            instance: None,
            events: EventSink::new(),
            event_client: None,
            vendor: VendorSettings::new(),
        }
    }

    /// Use `events` as the Event pipeline (to share one sink with other contexts).
    pub fn with_events(mut self, events: EventSink) -> Self {
        self.events = events;
        self
    }

    /// Use `vendor` as the vendor's settings (the runtime passes the ones its provider factory received).
    pub fn with_vendor(mut self, vendor: VendorSettings) -> Self {
        self.vendor = vendor;
        self
    }

    /// Set the replica identity used in events.
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// A controller named `name` on the kit's builder, whose queue `queue_name` (Go's queue name) reports into
    /// this context's `workqueue_*` metrics.
    ///
    /// ```no_run
    /// # fn demo(ctx: ccm_core::runtime::controller::ControllerContext) {
    /// use ccm_core::runtime::builder::added_or_updated;
    ///
    /// let tagging = ctx.controller("tagging-controller", "tagging").watches(ctx.informers.nodes(), added_or_updated);
    /// # }
    /// ```
    pub fn controller(&self, name: &str, queue_name: &str) -> crate::runtime::builder::Controller {
        crate::runtime::builder::Controller::new(name)
            .queue_with_metrics(queue_name, &self.workqueue_metrics)
    }

    /// `Ok` when the provider has one of `any_of`, else [`NotStarted`] naming the provider and what it lacks: the
    /// check a controller's init makes before it is built ([`ControllerDescriptor::build`]).
    pub fn require(&self, any_of: &[Capability]) -> Result<(), NotStarted> {
        if any_of.iter().any(|c| c.supported_by(&self.provider)) {
            return Ok(());
        }
        let names: Vec<&str> = any_of.iter().map(|c| c.as_str()).collect();
        Err(NotStarted(format!(
            "cloud provider {:?} does not support {}",
            self.provider.provider_name(),
            names.join(" or ")
        )))
    }

    /// An event recorder for `component`, writing through the shared [`EventSink`].
    pub fn recorder(&self, component: &str) -> EventRecorder {
        let client = self.event_client.as_ref().unwrap_or(&self.client).clone();
        self.events
            .recorder(client, component, self.instance.clone())
    }
}

/// Builds a controller from the context: `Ok(None)` means "not started" (for example the provider lacks the
/// capability), which the runtime logs and skips; an error stops the CCM.
pub type ControllerInitFn =
    Arc<dyn Fn(&ControllerContext) -> Result<Option<Box<dyn Controller>>, BoxError> + Send + Sync>;

/// The error of a [`ControllerDescriptor::build`] function that means "do not start this controller", for this
/// reason (such as a missing capability, see [`ControllerContext::require`]): logged, the others run, as in Go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotStarted(pub String);

/// A named controller the runtime can enable with `--controllers`.
#[derive(Clone)]
#[non_exhaustive]
pub struct ControllerDescriptor {
    /// The canonical name (for example `service-lb-controller`).
    pub name: String,
    /// Other names accepted by `--controllers` (for example `service`); the first is the short name used by
    /// `running_managed_controllers`.
    pub aliases: Vec<String>,
    /// Whether `*` leaves it off (it must then be named explicitly).
    pub disabled_by_default: bool,
    /// Builds the controller.
    pub init: ControllerInitFn,
}

impl std::fmt::Debug for ControllerDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerDescriptor")
            .field("name", &self.name)
            .field("aliases", &self.aliases)
            .field("disabled_by_default", &self.disabled_by_default)
            .finish_non_exhaustive()
    }
}

impl ControllerDescriptor {
    /// A controller named `name`, enabled by `*`, built by `init`.
    pub fn new<F>(name: impl Into<String>, init: F) -> Self
    where
        F: Fn(&ControllerContext) -> Result<Option<Box<dyn Controller>>, BoxError>
            + Send
            + Sync
            + 'static,
    {
        ControllerDescriptor {
            name: name.into(),
            aliases: Vec::new(),
            disabled_by_default: false,
            init: Arc::new(init),
        }
    }

    /// A controller named `name`, enabled by `*`, that `build` makes from the context: a [`NotStarted`] error is
    /// logged (a warning with the controller's name and the reason) and the controller is not started; any other
    /// error stops the CCM. Example: the [module documentation](self).
    pub fn build<C, F>(name: impl Into<String>, build: F) -> Self
    where
        C: Controller,
        F: Fn(&ControllerContext) -> Result<C, BoxError> + Send + Sync + 'static,
    {
        let name = name.into();
        let controller = name.clone();
        Self::new(name, move |ctx: &ControllerContext| match build(ctx) {
            Ok(built) => Ok(Some(Box::new(built) as Box<dyn Controller>)),
            Err(err) => match err.downcast::<NotStarted>() {
                Ok(reason) => {
                    tracing::warn!(%controller, %reason, "not starting the controller");
                    Ok(None)
                }
                Err(err) => Err(err),
            },
        })
    }

    /// Add aliases.
    pub fn with_aliases(mut self, aliases: &[&str]) -> Self {
        self.aliases.extend(aliases.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Leave the controller off unless `--controllers` names it.
    pub fn disabled_by_default(mut self) -> Self {
        self.disabled_by_default = true;
        self
    }

    /// The short name used in `running_managed_controllers` (the first alias, else the name).
    pub fn short_name(&self) -> &str {
        self.aliases.first().unwrap_or(&self.name)
    }
}
