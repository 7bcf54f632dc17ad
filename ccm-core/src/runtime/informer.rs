//! Shared informers: one watch and one cache per resource kind, fanned out to every controller.
//!
//! An [`Informer`] lists and watches one kind (with kube's `watcher`, which re-lists after errors with backoff),
//! keeps every object in a [`Store`], and hands what changed as [`InformerEvent`]s carrying the old and the new
//! object to the handlers registered with [`Informer::on_event`], so controllers can apply the Go reference's
//! update filters (`needsUpdate(old, new)`, ...).
//!
//! The [`SharedInformers`] cache less than whole objects ([`CachedNode`], [`CachedService`]; [`strip_node`] and
//! [`strip_service`] list what is kept): read an object from the API for anything else. The Node informer is a
//! [`NodeInformer`], whose store keeps each Node as a [`CompactNode`] and makes a `Node` of it again on each read
//! ([`Store::select`] reads the compact form and makes only the Nodes it keeps).
//!
//! ```no_run
//! use ccm_core::runtime::informer::{Informer, InformerEvent};
//! use k8s_openapi::api::core::v1::Node;
//! use kube::{Api, runtime::watcher};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(client: kube::Client) {
//! let nodes: Informer<Node> = Informer::new(Api::all(client), watcher::Config::default());
//! let registration = nodes.on_event(|event| {
//!     if let InformerEvent::Updated { old, new } = event {
//!         println!("{:?} -> {:?}", old.metadata.resource_version, new.metadata.resource_version);
//!     }
//! });
//! let shutdown = CancellationToken::new();
//! tokio::spawn(nodes.clone().run(shutdown.clone()));
//! nodes.wait_synced().await;
//! println!("{} nodes", nodes.store().len());
//! # drop(registration);
//! # }
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::helpers::object_key;

mod compact;
mod handlers;
mod strip;

pub use compact::{CompactNode, Slot};
pub use handlers::HandlerRegistration;

pub use strip::{CachedNode, CachedService, STRIPPED_VALUE_PREFIX, strip_node, strip_service};

/// Objects per page of an informer's initial list. kube's default is 500, but a page is held twice while it is
/// decoded (body and objects) and 500 real Nodes with their image lists are ~30 MiB of JSON, so the
/// SharedInformers list 100 at a time (5,000 Nodes: 50 requests instead of 10).
pub const LIST_PAGE_SIZE: u32 = 100;

/// A change seen by an informer.
#[derive(Debug, Clone)]
pub enum InformerEvent<K> {
    /// A new object.
    Added(Arc<K>),
    /// An object changed (its resourceVersion differs).
    Updated {
        /// The object as it was.
        old: Arc<K>,
        /// The object as it is now.
        new: Arc<K>,
    },
    /// An object was deleted (its last known state).
    Deleted(Arc<K>),
    /// Re-read the whole [`Store`] ([`Informer::resync`], the runtime's periodic resync).
    Resync,
}

/// The shared Node informer: its store keeps each Node as a [`CompactNode`].
pub type NodeInformer = Informer<Node, CompactNode>;

/// The shared Node informer's store ([`NodeInformer`]).
pub type NodeStore = Store<Node, CompactNode>;

/// A read-only view of an informer's cache, which keeps each object of kind `K` as an `S` ([`Slot`]: the object
/// itself by default, a [`CompactNode`] in the shared Node informer's [`NodeStore`]). Cheap to clone.
pub struct Store<K, S = Arc<K>> {
    objects: Arc<RwLock<HashMap<String, S>>>,
    kind: PhantomData<fn() -> K>,
}

impl<K, S> Clone for Store<K, S> {
    fn clone(&self) -> Self {
        Store {
            objects: self.objects.clone(),
            kind: PhantomData,
        }
    }
}

impl<K, S> Debug for Store<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("len", &self.len()).finish()
    }
}

impl<K, S> Default for Store<K, S> {
    fn default() -> Self {
        Store {
            objects: Arc::new(RwLock::new(HashMap::new())),
            kind: PhantomData,
        }
    }
}

impl<K, S> Store<K, S> {
    /// An empty store that stays empty (use a [`StoreWriter`] to fill one).
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, S>> {
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, S>> {
        self.objects.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Every cached key.
    pub fn keys(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K, S: Slot<K>> Store<K, S> {
    /// The object with key `namespace/name` (or `name` for cluster-scoped kinds).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().get(key).map(S::unpack)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().values().map(S::unpack).collect()
    }

    /// The cached objects whose slot `keep` accepts, in no particular order: for a pass over the whole cache that
    /// acts on few objects. In a [`NodeStore`], `keep` reads each [`CompactNode`] (through
    /// [`NodeFields`](crate::helpers::NodeFields)) and only the Nodes it keeps are made again.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use ccm_core::helpers::NodeFields;
    /// use ccm_core::runtime::informer::{CompactNode, StoreWriter};
    /// use k8s_openapi::api::core::v1::{Node, NodeSpec};
    ///
    /// let writer: StoreWriter<Node, CompactNode> = StoreWriter::new();
    /// for (name, id) in [("a", "fake://a"), ("b", "")] {
    ///     let mut node = Node::default();
    ///     node.metadata.name = Some(name.into());
    ///     node.spec = Some(NodeSpec { provider_id: Some(id.into()), ..Default::default() });
    ///     writer.insert(name.into(), Arc::new(node));
    /// }
    /// let without_id = writer.store().select(|node| node.provider_id().is_empty());
    /// assert_eq!(without_id.len(), 1);
    /// assert_eq!(without_id[0].metadata.name.as_deref(), Some("b"));
    /// ```
    pub fn select(&self, mut keep: impl FnMut(&S) -> bool) -> Vec<Arc<K>> {
        self.read()
            .values()
            .filter(|slot| keep(slot))
            .map(S::unpack)
            .collect()
    }
}

/// The writing side of a [`Store`] (as kube-runtime's `Writer`): the informer owns one, and tests of code that
/// reads a store make one. Readers only ever get the [`Store`].
///
/// ```
/// use std::sync::Arc;
/// use ccm_core::runtime::informer::StoreWriter;
///
/// let writer: StoreWriter<String> = StoreWriter::new();
/// let store = writer.store();
/// writer.insert("a".into(), Arc::new("object a".into()));
/// assert_eq!(store.get("a").as_deref().map(String::as_str), Some("object a"));
/// writer.remove("a");
/// assert!(store.is_empty());
/// ```
pub struct StoreWriter<K, S = Arc<K>> {
    store: Store<K, S>,
}

impl<K, S> Debug for StoreWriter<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter")
            .field("len", &self.store.len())
            .finish()
    }
}

impl<K, S> Default for StoreWriter<K, S> {
    fn default() -> Self {
        StoreWriter {
            store: Store::default(),
        }
    }
}

impl<K, S: Slot<K>> StoreWriter<K, S> {
    /// A writer over a new, empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The read-only view of the store this writes to.
    pub fn store(&self) -> Store<K, S> {
        self.store.clone()
    }

    /// Insert or replace the object under `key`, returning the previous one.
    pub fn insert(&self, key: String, object: Arc<K>) -> Option<Arc<K>> {
        self.replace(key, &object).as_ref().map(S::unpack)
    }

    /// Remove the object under `key`, returning it.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        self.store.write().remove(key).as_ref().map(S::unpack)
    }

    /// Keep `object` under `key`, returning what was kept before (from which the new slot shares what is equal).
    fn replace(&self, key: String, object: &Arc<K>) -> Option<S> {
        let mut objects = self.store.write();
        let slot = S::pack(object, objects.get(&key));
        objects.insert(key, slot)
    }
}

/// A list-watch of one kind from its start: kube's `watcher` with backoff, decoded as the informer caches it.
type Source<K> =
    Box<dyn Fn() -> BoxStream<'static, watcher::Result<watcher::Event<K>>> + Send + Sync>;

struct Inner<K: Resource + Clone, S> {
    source: Source<K>,
    handlers: Arc<handlers::Handlers<K>>,
    store: StoreWriter<K, S>,
    synced: watch::Sender<bool>,
}

/// A shared list-watch cache of one resource kind, which keeps each object as an `S` ([`Slot`]: by default the
/// object itself). Cheap to clone; clones share the cache.
pub struct Informer<K: Resource + Clone, S = Arc<K>> {
    inner: Arc<Inner<K, S>>,
}

impl<K: Resource + Clone, S> Clone for Informer<K, S> {
    fn clone(&self) -> Self {
        Informer {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Resource + Clone, S> Debug for Informer<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

impl<K, S> Informer<K, S>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
    S: Slot<K>,
{
    /// An informer over `api` with the watch settings `config` (label or field selectors) that caches whole
    /// objects. Not started.
    pub fn new(api: Api<K>, config: watcher::Config) -> Self {
        Self::decoded_as::<K>(api, config)
    }

    /// An informer that decodes the objects of `api` as `W` and caches them as `W` converts into `K`: the way to
    /// cache less than whole objects without building what is dropped (client-go's `SetTransform` runs after
    /// decoding), as the [`SharedInformers`] do. Not started.
    ///
    /// ```no_run
    /// use ccm_core::runtime::informer::{CachedNode, Informer};
    /// use k8s_openapi::api::core::v1::Node;
    /// use kube::{Api, runtime::watcher};
    ///
    /// # fn demo(client: kube::Client) {
    /// let nodes: Informer<Node> = Informer::decoded_as::<CachedNode>(Api::all(client), watcher::Config::default());
    /// # }
    /// ```
    pub fn decoded_as<W>(api: Api<W>, config: watcher::Config) -> Self
    where
        W: Resource + Clone + DeserializeOwned + Debug + Send + 'static + Into<K>,
    {
        let (synced, _) = watch::channel(false);
        let source: Source<K> = Box::new(move || {
            watcher(api.clone(), config.clone())
                .default_backoff()
                .map(|event| event.map(convert_event))
                .boxed()
        });
        Informer {
            inner: Arc::new(Inner {
                source,
                handlers: Arc::default(),
                store: StoreWriter::new(),
                synced,
            }),
        }
    }

    /// The cache.
    pub fn store(&self) -> Store<K, S> {
        self.inner.store.store()
    }

    /// Run `handler` on every event from now on, inside the informer's task, until the returned registration is
    /// dropped. For reactions that are quick and never wait or panic (queue a key, drop a cache entry): no task
    /// wakes up per event, and a handler never lags.
    ///
    /// ```no_run
    /// use ccm_core::runtime::informer::{Informer, InformerEvent};
    /// use ccm_core::runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
    /// use k8s_openapi::api::core::v1::Node;
    /// use kube::ResourceExt;
    ///
    /// # fn demo(nodes: Informer<Node>) {
    /// let queue: WorkQueue<String> = WorkQueue::new("Nodes", default_controller_rate_limiter());
    /// let store = nodes.store();
    /// let registration = nodes.on_event(move |event| match event {
    ///     InformerEvent::Added(node) | InformerEvent::Updated { new: node, .. } => queue.add(node.name_any()),
    ///     InformerEvent::Deleted(_) => {}
    ///     InformerEvent::Resync => store.keys().into_iter().for_each(|k| queue.add(k)),
    /// });
    /// // ... keep `registration` for as long as the handler must run
    /// drop(registration);
    /// # }
    /// ```
    pub fn on_event(
        &self,
        handler: impl Fn(&InformerEvent<K>) + Send + Sync + 'static,
    ) -> HandlerRegistration {
        self.inner.handlers.add(handler)
    }

    fn emit(&self, event: InformerEvent<K>) {
        self.inner.handlers.call(&event);
    }

    /// True once the first full list has been cached.
    pub fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    /// Ask every handler to re-read the whole [`Store`] by sending [`InformerEvent::Resync`], as client-go's
    /// periodic resync re-delivers every cached object. The runtime calls it every `--min-resync-period`
    /// (jittered).
    pub fn resync(&self) {
        self.emit(InformerEvent::Resync);
    }

    /// Wait until the first full list has been cached.
    pub async fn wait_synced(&self) {
        let mut rx = self.inner.synced.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// List and watch until `shutdown` is cancelled, re-listing with backoff after errors.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut stream = std::pin::pin!((self.inner.source)().take_until(shutdown.cancelled()));
        let mut init_keys: Option<HashSet<String>> = None;
        while let Some(next) = stream.next().await {
            match next {
                Err(err) => {
                    tracing::warn!(kind = %K::kind(&Default::default()), error = %err, "watch failed; retrying with backoff");
                }
                Ok(event) => self.apply(event, &mut init_keys),
            }
        }
    }

    fn apply(&self, event: watcher::Event<K>, init_keys: &mut Option<HashSet<String>>) {
        match event {
            watcher::Event::Init => *init_keys = Some(HashSet::new()),
            watcher::Event::InitApply(obj) => {
                let key = key_of(&obj);
                if let Some(keys) = init_keys.as_mut() {
                    keys.insert(key.clone());
                }
                self.upsert(key, obj);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = init_keys.take() {
                    for key in self.store().keys() {
                        if !seen.contains(&key)
                            && let Some(old) = self.inner.store.remove(&key)
                        {
                            self.emit(InformerEvent::Deleted(old));
                        }
                    }
                }
                self.inner.synced.send_replace(true);
            }
            watcher::Event::Apply(obj) => self.upsert(key_of(&obj), obj),
            watcher::Event::Delete(obj) => {
                let key = key_of(&obj);
                let last = self
                    .inner
                    .store
                    .remove(&key)
                    .unwrap_or_else(|| Arc::new(obj));
                self.emit(InformerEvent::Deleted(last));
            }
        }
    }

    fn upsert(&self, key: String, obj: K) {
        let new = Arc::new(obj);
        match self.inner.store.replace(key, &new) {
            None => self.emit(InformerEvent::Added(new)),
            Some(old) if old.resource_version() != new.meta().resource_version.as_deref() => {
                let old = old.unpack();
                self.emit(InformerEvent::Updated { old, new });
            }
            Some(_) => {}
        }
    }
}

/// A watcher event of the decoded type as one of the cached type.
fn convert_event<W: Into<K>, K>(event: watcher::Event<W>) -> watcher::Event<K> {
    match event {
        watcher::Event::Apply(obj) => watcher::Event::Apply(obj.into()),
        watcher::Event::Delete(obj) => watcher::Event::Delete(obj.into()),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(obj) => watcher::Event::InitApply(obj.into()),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

pub(crate) fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    object_key(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// Which objects the shared informers watch (default: every Node and Service). Selectors let several CCMs (or
/// test cases) share one cluster without touching each other's objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InformerScope {
    /// A label selector for Nodes (for example `ccm.example.com/shard=a`).
    pub node_selector: Option<String>,
    /// A label selector for Services.
    pub service_selector: Option<String>,
    /// Watch Services in this namespace only.
    pub service_namespace: Option<String>,
}

impl InformerScope {
    /// Every Node and Service.
    pub fn all() -> Self {
        Self::default()
    }
    /// Restrict Nodes to a label selector.
    pub fn with_node_selector(mut self, selector: impl Into<String>) -> Self {
        self.node_selector = Some(selector.into());
        self
    }
    /// Restrict Services to a label selector.
    pub fn with_service_selector(mut self, selector: impl Into<String>) -> Self {
        self.service_selector = Some(selector.into());
        self
    }
    /// Restrict Services to a namespace.
    pub fn with_service_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.service_namespace = Some(namespace.into());
        self
    }
}

/// The informers every controller shares, one for Nodes and one for Services, caching stripped objects (see the
/// [module documentation](self)).
#[derive(Clone, Debug)]
pub struct SharedInformers {
    nodes: NodeInformer,
    services: Informer<Service>,
}

impl SharedInformers {
    /// Informers over `client` limited to `scope`. Not started: call [`run`](Self::run).
    ///
    /// ```no_run
    /// use ccm_core::runtime::informer::{InformerScope, SharedInformers};
    /// # async fn demo(client: kube::Client) {
    /// let informers = SharedInformers::new(client, &InformerScope::all());
    /// let token = tokio_util::sync::CancellationToken::new();
    /// tokio::spawn(informers.clone().run(token));
    /// informers.wait_synced().await;
    /// # }
    /// ```
    pub fn new(client: kube::Client, scope: &InformerScope) -> Self {
        let mut node_cfg = watcher::Config::default().page_size(LIST_PAGE_SIZE);
        if let Some(sel) = &scope.node_selector {
            node_cfg = node_cfg.labels(sel);
        }
        let mut svc_cfg = watcher::Config::default().page_size(LIST_PAGE_SIZE);
        if let Some(sel) = &scope.service_selector {
            svc_cfg = svc_cfg.labels(sel);
        }
        let services_api = match &scope.service_namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        SharedInformers {
            nodes: Informer::decoded_as::<CachedNode>(Api::all(client), node_cfg),
            services: Informer::decoded_as::<CachedService>(services_api, svc_cfg),
        }
    }

    /// The Node informer.
    pub fn nodes(&self) -> &NodeInformer {
        &self.nodes
    }

    /// The Service informer.
    pub fn services(&self) -> &Informer<Service> {
        &self.services
    }

    /// Run both informers until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        tokio::join!(
            self.nodes.run(shutdown.clone()),
            self.services.run(shutdown)
        );
    }

    /// Wait until both informers have synced.
    pub async fn wait_synced(&self) {
        tokio::join!(self.nodes.wait_synced(), self.services.wait_synced());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    impl<K, S> Informer<K, S>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
        S: Slot<K>,
    {
        /// Send `event` to the handlers as if the watch had produced it (the cache is not changed); for this
        /// crate's tests of code that consumes informer events.
        pub(crate) fn inject_for_test(&self, event: InformerEvent<K>) {
            self.emit(event);
        }

        /// Apply `events` as the watch would have produced them, starting from a fresh list state; for this
        /// crate's tests of code that runs on an informer.
        pub(crate) fn apply_for_test(&self, events: Vec<watcher::Event<K>>) {
            let mut init = None;
            for event in events {
                self.apply(event, &mut init);
            }
        }
    }

    /// A Node named `name` at resourceVersion `rv`.
    pub(crate) fn node(name: &str, rv: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn informer() -> NodeInformer {
        offline_informer()
    }

    /// Every event `inf` hands its handlers from now on, while the registration is kept.
    fn collect(
        inf: &NodeInformer,
    ) -> (
        HandlerRegistration,
        Arc<std::sync::Mutex<Vec<InformerEvent<Node>>>>,
    ) {
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        let registration = inf.on_event(move |event| sink.lock().unwrap().push(event.clone()));
        (registration, events)
    }

    /// A Node informer whose client reaches nothing: its tests apply events directly.
    pub(crate) fn offline_informer() -> NodeInformer {
        Informer::new(Api::all(offline_client()), watcher::Config::default())
    }

    fn offline_client() -> kube::Client {
        // The api is never used: events are applied directly.
        kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                    "offline",
                ))
            }),
            "default",
        )
    }

    fn bulky(name: &str, rv: &str) -> Node {
        let mut n = node(name, rv);
        n.metadata.managed_fields = Some(vec![Default::default()]);
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            images: Some(vec![Default::default()]),
            ..Default::default()
        });
        n
    }

    fn is_stripped(n: &Node) -> bool {
        n.metadata.managed_fields.is_none() && n.status.as_ref().is_some_and(|s| s.images.is_none())
    }

    #[tokio::test]
    async fn a_decoded_shape_reaches_the_store_and_every_event() {
        // the shared Node informer's events, as its source converts them from `CachedNode`
        let cached = |name: &str, rv: &str| -> CachedNode {
            serde_json::from_value(serde_json::to_value(bulky(name, rv)).unwrap()).unwrap()
        };
        let inf = informer();
        let (_registration, seen_events) = collect(&inf);
        let mut init = None;
        let events = [
            watcher::Event::Init,
            watcher::Event::InitApply(cached("a", "1")),
            watcher::Event::InitDone,
            watcher::Event::Apply(cached("a", "2")),
            watcher::Event::Delete(cached("a", "3")),
            watcher::Event::Delete(cached("never-seen", "1")),
        ];
        for event in events {
            inf.apply(convert_event(event), &mut init);
            if let Some(node) = inf.store().get("a") {
                assert!(is_stripped(&node));
            }
        }
        let mut seen = 0;
        for ev in seen_events.lock().unwrap().drain(..) {
            seen += 1;
            match ev {
                InformerEvent::Added(n) | InformerEvent::Deleted(n) => assert!(is_stripped(&n)),
                InformerEvent::Updated { old, new } => {
                    assert!(is_stripped(&old) && is_stripped(&new));
                }
                InformerEvent::Resync => panic!("no resync expected"),
            }
        }
        assert_eq!(seen, 4);
        // the plain constructor with the default slot keeps whole objects
        let whole: Informer<Node> =
            Informer::new(Api::all(offline_client()), watcher::Config::default());
        whole.apply(watcher::Event::Apply(bulky("a", "1")), &mut init);
        assert!(!is_stripped(&whole.store().get("a").unwrap()));
    }

    #[tokio::test]
    async fn events_carry_old_and_new_and_relist_deletes_missing() {
        let inf = informer();
        let (_registration, events) = collect(&inf);
        let mut init = None;
        inf.apply(watcher::Event::Init, &mut init);
        inf.apply(watcher::Event::InitApply(node("a", "1")), &mut init);
        inf.apply(watcher::Event::InitApply(node("b", "1")), &mut init);
        assert!(!inf.has_synced());
        inf.apply(watcher::Event::InitDone, &mut init);
        assert!(inf.has_synced());
        assert_eq!(inf.store().len(), 2);

        inf.apply(watcher::Event::Apply(node("a", "2")), &mut init);
        inf.apply(watcher::Event::Apply(node("a", "2")), &mut init); // same version: no event
        // relist without b
        inf.apply(watcher::Event::Init, &mut init);
        inf.apply(watcher::Event::InitApply(node("a", "2")), &mut init);
        inf.apply(watcher::Event::InitDone, &mut init);
        inf.apply(watcher::Event::Delete(node("a", "3")), &mut init);

        let mut seen = Vec::new();
        for ev in events.lock().unwrap().drain(..) {
            seen.push(match ev {
                InformerEvent::Added(n) => format!("add {}", n.metadata.name.as_deref().unwrap()),
                InformerEvent::Updated { old, new } => format!(
                    "update {} {}->{}",
                    new.metadata.name.as_deref().unwrap(),
                    old.metadata.resource_version.as_deref().unwrap(),
                    new.metadata.resource_version.as_deref().unwrap()
                ),
                InformerEvent::Deleted(n) => {
                    format!("delete {}", n.metadata.name.as_deref().unwrap())
                }
                InformerEvent::Resync => "resync".into(),
            });
        }
        assert_eq!(
            seen,
            vec!["add a", "add b", "update a 1->2", "delete b", "delete a"]
        );
        assert!(inf.store().is_empty());
    }

    #[tokio::test]
    async fn resync_reaches_every_handler() {
        let inf = informer();
        let (_a, a) = collect(&inf);
        let (_b, b) = collect(&inf);
        inf.resync();
        assert!(matches!(
            a.lock().unwrap().pop(),
            Some(InformerEvent::Resync)
        ));
        assert!(matches!(
            b.lock().unwrap().pop(),
            Some(InformerEvent::Resync)
        ));
    }

    #[tokio::test]
    async fn handlers_run_inline_in_order_until_their_registration_is_dropped() {
        let inf = informer();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = |tag: &'static str| {
            let seen = seen.clone();
            move |event: &InformerEvent<Node>| {
                let what = match event {
                    InformerEvent::Added(n) => {
                        format!("{tag} add {}", n.metadata.name.as_deref().unwrap())
                    }
                    InformerEvent::Updated { new, .. } => {
                        format!("{tag} update {}", new.metadata.name.as_deref().unwrap())
                    }
                    InformerEvent::Deleted(n) => {
                        format!("{tag} delete {}", n.metadata.name.as_deref().unwrap())
                    }
                    InformerEvent::Resync => format!("{tag} resync"),
                };
                seen.lock().unwrap().push(what);
            }
        };
        let first = inf.on_event(record("first"));
        let second = inf.on_event(record("second"));
        let mut init = None;
        inf.apply(watcher::Event::Apply(node("a", "1")), &mut init);
        inf.resync();
        drop(first);
        inf.apply(watcher::Event::Apply(node("a", "2")), &mut init);
        drop(second);
        inf.apply(watcher::Event::Delete(node("a", "3")), &mut init);
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "first add a",
                "second add a",
                "first resync",
                "second resync",
                "second update a"
            ]
        );
        assert_eq!(inf.inner.handlers.len(), 0);
        // a handler may register another (no lock is held while handlers run)
        let nested = Arc::new(std::sync::Mutex::new(Vec::new()));
        let inner_inf = inf.clone();
        let keep = nested.clone();
        let _outer = inf.on_event(move |_| {
            keep.lock().unwrap().push(inner_inf.on_event(|_| {}));
        });
        inf.resync();
        assert_eq!(nested.lock().unwrap().len(), 1);
        assert_eq!(inf.inner.handlers.len(), 2);
    }

    #[test]
    fn scope_builders() {
        let s = InformerScope::all()
            .with_node_selector("a=b")
            .with_service_namespace("ns");
        assert_eq!(s.node_selector.as_deref(), Some("a=b"));
        assert_eq!(s.service_namespace.as_deref(), Some("ns"));
        assert_eq!(s.service_selector, None);
    }
}
