//! The controller builder, modelled on kube-runtime's `Controller` over this crate's shared informers and delay
//! queue: everything a controller does besides deciding, in one place.
//!
//! A controller supplies its keys (how informer events map to queue keys, and which keys to queue at start), a
//! reconcile function for one key and its context; [`Controller`] does the rest, the same way for every
//! controller, built-in or a vendor's:
//!
//! 1. waits until every informer it uses has synced (or returns at once if shutdown comes first);
//! 2. registers the event handlers ([`watches`](Controller::watches), [`on_events`](Controller::on_events))
//!    inline in the informers' tasks, then queues every key of [`enqueue_all`](Controller::enqueue_all): that
//!    covers the events of the initial list, which are skipped (a change the handlers saw only queues a key
//!    already queued);
//! 3. runs the [`workers`](Controller::workers) over the queue with [`run_workers`] (retry decision, panic
//!    guard, `workqueue_*` metrics) and the side loops ([`with_loop`](Controller::with_loop): periodic passes
//!    with [`every`](crate::runtime::every::every), debounced ones with
//!    [`Debounced`](crate::runtime::debounce::Debounced));
//! 4. at shutdown, stops handing out keys, waits for the keys in progress and the side loops, then removes the
//!    handlers.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use ccm_core::runtime::Controller;
//! use ccm_core::runtime::builder::added_or_updated;
//! use ccm_core::runtime::controller::ControllerContext;
//! use ccm_core::runtime::workers::Action;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(ctx: ControllerContext, shutdown: CancellationToken) {
//! Controller::new("tagging-controller")
//!     .queue_with_metrics("tagging", &ctx.workqueue_metrics)
//!     .watches(ctx.informers.nodes(), added_or_updated)
//!     .workers(2)
//!     .run(shutdown, Arc::new(ctx.cluster_name.clone()), |node: String, cluster: Arc<String>| async move {
//!         println!("tagging {node} for {cluster}");
//!         Ok::<_, std::io::Error>(Action::RequeueAfter(Duration::from_secs(300)))
//!     })
//!     .await;
//! # }
//! ```

use std::error::Error as StdError;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::{BoxFuture, FutureExt, join_all};
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::error::BoxError;
use crate::runtime::controller::Controller as RunnableController;
use crate::runtime::informer::{HandlerRegistration, Informer, InformerEvent, Slot, key_of};
use crate::runtime::metrics::WorkqueueMetrics;
use crate::runtime::workers::{Action, run_workers};
use crate::runtime::workqueue::{WorkQueue, default_controller_rate_limiter};

type KeysFn = Arc<dyn Fn() -> Vec<String> + Send + Sync>;
type Register = Box<dyn FnOnce(&WorkQueue<String>, &KeysFn) -> HandlerRegistration + Send>;
type WaitSynced = BoxFuture<'static, ()>;
type SideLoop = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;
type InitialKeys = Box<dyn FnOnce() -> BoxFuture<'static, Vec<String>> + Send>;

/// A controller being assembled; see the [module documentation](self).
#[must_use = "a controller does nothing until it is run"]
pub struct Controller {
    name: String,
    queue: WorkQueue<String>,
    workers: usize,
    synced: Vec<WaitSynced>,
    handlers: Vec<Register>,
    enqueue_all: Option<KeysFn>,
    initial_keys: Option<InitialKeys>,
    loops: Vec<SideLoop>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("queue", &self.queue)
            .field("workers", &self.workers)
            .field("informers", &self.synced.len())
            .field("loops", &self.loops.len())
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller named `name` (its log and error field): one worker over a queue of that name with Go's
    /// default rate limiter and no metrics (see [`queue`](Self::queue)).
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Controller {
            queue: WorkQueue::new(name.clone(), default_controller_rate_limiter()),
            name,
            workers: 1,
            synced: Vec::new(),
            handlers: Vec::new(),
            enqueue_all: None,
            initial_keys: None,
            loops: Vec::new(),
        }
    }

    /// Use `queue` (for example one made with [`WorkQueue::with_metrics`] under Go's queue name).
    pub fn queue(mut self, queue: WorkQueue<String>) -> Self {
        self.queue = queue;
        self
    }

    /// Use a queue named `queue_name` (Go's queue name, the `name` label of the `workqueue_*` metrics) with Go's
    /// default controller rate limiter, reporting into `metrics` (`ControllerContext::workqueue_metrics`).
    pub fn queue_with_metrics(self, queue_name: &str, metrics: &WorkqueueMetrics) -> Self {
        let queue = WorkQueue::with_metrics(queue_name, default_controller_rate_limiter(), metrics);
        self.queue(queue)
    }

    /// Run `workers` reconciles at once (at least one).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Wait for `informer`'s cache before starting (implied by [`watches`](Self::watches) and
    /// [`on_events`](Self::on_events)).
    pub fn waits_for<K, S>(mut self, informer: &Informer<K, S>) -> Self
    where
        S: Slot<K>,
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let informer = informer.clone();
        self.synced
            .push(async move { informer.wait_synced().await }.boxed());
        self
    }

    /// Queue the key `map` returns for each event of `informer` (`None`: the event needs no reconcile);
    /// [`InformerEvent::Resync`] queues every key of [`enqueue_all`](Self::enqueue_all) instead. `map` runs
    /// inline in the informer's task: it must be quick and never block.
    pub fn watches<K, S, M>(mut self, informer: &Informer<K, S>, map: M) -> Self
    where
        S: Slot<K>,
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
        M: Fn(&InformerEvent<K>) -> Option<String> + Send + Sync + 'static,
    {
        if self.enqueue_all.is_none() {
            let store = informer.store();
            self.enqueue_all = Some(Arc::new(move || store.keys()));
        }
        let handle = informer.clone();
        self.handlers.push(Box::new(move |queue, enqueue_all| {
            let (queue, enqueue_all) = (queue.clone(), enqueue_all.clone());
            handle.on_event(move |event: &InformerEvent<K>| {
                if let InformerEvent::Resync = event {
                    enqueue_all().into_iter().for_each(|key| queue.add(key));
                } else if let Some(key) = map(event) {
                    queue.add(key);
                }
            })
        }));
        self.waits_for(informer)
    }

    /// Hand every event of `informer` to `handler` once started (for events that feed another loop, such as a
    /// debounced pass's [`trigger`](crate::runtime::debounce::Debounced::trigger)); inline in the informer's task,
    /// so quick and never blocking.
    pub fn on_events<K, S, H>(mut self, informer: &Informer<K, S>, handler: H) -> Self
    where
        S: Slot<K>,
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
        H: Fn(&InformerEvent<K>) + Send + Sync + 'static,
    {
        let handle = informer.clone();
        self.handlers
            .push(Box::new(move |_, _| handle.on_event(handler)));
        self.waits_for(informer)
    }

    /// The keys queued at start and on every [`InformerEvent::Resync`] (default: the cache keys, `name` or
    /// `namespace/name`, of the first watched informer).
    pub fn enqueue_all(mut self, keys: impl Fn() -> Vec<String> + Send + Sync + 'static) -> Self {
        self.enqueue_all = Some(Arc::new(keys));
        self
    }

    /// The keys queued at start only, computed once the caches have synced (for example after asking the cloud
    /// what already exists, as the service controller's takeover does); [`enqueue_all`](Self::enqueue_all) still
    /// gives the keys of every [`InformerEvent::Resync`]. Default: the keys of `enqueue_all`.
    pub fn initial_keys<F, Fut>(mut self, keys: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Vec<String>> + Send + 'static,
    {
        self.initial_keys = Some(Box::new(move || keys().boxed()));
        self
    }

    /// Run `side_loop` next to the workers once the caches have synced; it must return soon after its
    /// shutdown token is cancelled, and shutdown waits for it.
    pub fn with_loop<F, Fut>(mut self, side_loop: F) -> Self
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.loops
            .push(Box::new(move |shutdown| side_loop(shutdown).boxed()));
        self
    }

    /// Run until `shutdown`: wait for the caches, queue every key, and reconcile each queued key with
    /// `reconcile(key, context)` on the workers (see the [module documentation](self)).
    pub async fn run<C, F, Fut, E>(self, shutdown: CancellationToken, context: Arc<C>, reconcile: F)
    where
        C: Send + Sync + 'static,
        F: Fn(String, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: StdError + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        self.start(shutdown, move |name, queue, workers, shutdown| {
            let reconcile = move |key: String| reconcile(key, context.clone());
            async move { run_workers(&name, queue, workers, shutdown, reconcile).await }.boxed()
        })
        .await;
    }

    /// Run only the side loops and handlers until `shutdown` (a controller without keys, such as one made of a
    /// periodic pass): wait for the caches, start the loops, and wait for them at shutdown.
    pub async fn run_loops(self, shutdown: CancellationToken) {
        self.start(shutdown, |_, _, _, shutdown| {
            async move { shutdown.cancelled().await }.boxed()
        })
        .await;
    }

    /// The same as [`run`](Self::run), as a controller for a
    /// [`ControllerDescriptor`](crate::runtime::controller::ControllerDescriptor)'s init function.
    pub fn boxed<C, F, Fut, E>(self, context: Arc<C>, reconcile: F) -> Box<dyn RunnableController>
    where
        C: Send + Sync + 'static,
        F: Fn(String, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: StdError + Send + 'static,
    {
        Box::new(Assembled(Box::new(move |shutdown| {
            self.run(shutdown, context, reconcile).boxed()
        })))
    }

    /// [`boxed`](Self::boxed), handing `reconcile` each key's object from `informer`'s cache (kube-runtime's
    /// shape); a key whose object is gone is done without a call (to act on deletions, take keys and keep your
    /// own memory).
    pub fn boxed_objects<K, S, C, F, Fut, E>(
        self,
        informer: &Informer<K, S>,
        context: Arc<C>,
        reconcile: F,
    ) -> Box<dyn RunnableController>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: StdError + Send + 'static,
        S: Slot<K>,
    {
        let store = informer.store();
        self.boxed(context, move |key: String, context| match store.get(&key) {
            Some(object) => reconcile(object, context).boxed(),
            None => futures::future::ready(Ok(Action::Done)).boxed(),
        })
    }

    async fn start<W>(self, shutdown: CancellationToken, workers: W)
    where
        W: FnOnce(String, WorkQueue<String>, usize, CancellationToken) -> BoxFuture<'static, ()>,
    {
        let (name, queue) = (self.name, self.queue);
        tracing::info!(controller = %name, workers = self.workers, "waiting for the caches to sync");
        tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                tracing::info!(controller = %name, "stopped before the caches synced");
                return;
            }
            _ = join_all(self.synced) => {}
        }
        let enqueue_all: KeysFn = self.enqueue_all.unwrap_or_else(|| Arc::new(Vec::new));
        let registrations: Vec<HandlerRegistration> = self
            .handlers
            .into_iter()
            .map(|register| register(&queue, &enqueue_all))
            .collect();
        let keys = match self.initial_keys {
            None => enqueue_all(),
            Some(initial) => tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    tracing::info!(controller = %name, "stopped before its initial keys were known");
                    return;
                }
                keys = initial() => keys,
            },
        };
        tracing::debug!(controller = %name, keys = keys.len(), "queued every key from the caches");
        keys.into_iter().for_each(|key| queue.add(key));
        let loops: Vec<_> = self
            .loops
            .into_iter()
            .map(|side_loop| tokio::spawn(side_loop(shutdown.clone())))
            .collect();
        workers(name.clone(), queue, self.workers, shutdown).await;
        for joined in join_all(loops).await {
            if let Err(error) = joined {
                tracing::error!(controller = %name, %error, "a controller loop panicked");
            }
        }
        drop(registrations);
        tracing::info!(controller = %name, "stopped");
    }
}

/// The key mapping that reconciles every added or changed object: the cache key (`name` or `namespace/name`) of
/// an [`InformerEvent::Added`] or [`InformerEvent::Updated`] object, `None` for the other events.
///
/// ```
/// use std::sync::Arc;
/// use ccm_core::runtime::builder::added_or_updated;
/// use ccm_core::runtime::informer::InformerEvent;
/// use k8s_openapi::api::core::v1::Node;
/// use kube::api::ObjectMeta;
///
/// let node = Arc::new(Node { metadata: ObjectMeta { name: Some("n1".into()), ..Default::default() }, ..Default::default() });
/// assert_eq!(added_or_updated(&InformerEvent::Added(node.clone())), Some("n1".to_owned()));
/// assert_eq!(added_or_updated(&InformerEvent::Deleted(node)), None);
/// ```
pub fn added_or_updated<K: Resource>(event: &InformerEvent<K>) -> Option<String> {
    match event {
        InformerEvent::Added(object) | InformerEvent::Updated { new: object, .. } => {
            Some(key_of(object.as_ref()))
        }
        InformerEvent::Deleted(_) | InformerEvent::Resync => None,
    }
}

/// A [`Controller`] with its reconcile function, runnable by the runtime.
struct Assembled(Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>);

#[async_trait]
impl RunnableController for Assembled {
    async fn run(self: Box<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        (self.0)(shutdown).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
