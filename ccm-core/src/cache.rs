//! Coalescing and a short-lived cache for instance questions (InstancesV2).
//!
//! An [`InstanceCache`] in front of a provider
//! ([`InterceptedProvider::with_instance_cache`](crate::intercept::InterceptedProvider::with_instance_cache)):
//!
//! - makes concurrent identical questions about one node (`instance-exists`, `instance-shutdown`,
//!   `instance-metadata-by-provider-id`) share one cloud call;
//! - keeps **metadata** answers (`instance_metadata`: addresses, instance type, zone, providerID, which rarely
//!   change) for `ttl`, so a retried initialization or an address sync soon after does not ask the cloud again.
//!   With native bulk calls ([`InstancesV2::supports_bulk`]), `instance_metadata_bulk` reuses the kept answers,
//!   asks the cloud (in one bulk call) only about the other nodes, and keeps those answers too;
//! - **never keeps existence or shutdown answers** (nor errors), whatever the TTL: the lifecycle controller
//!   deletes a Node or taints it on them, so every such question (`instance_exists`, `instance_shutdown` and
//!   their bulk forms) reaches the cloud, and a gone or shut-down instance is noticed at the next lifecycle pass,
//!   as in Go, never a TTL later.
//!
//! A kept answer is about a node's name **and** providerID, at most `ttl` old. The cache forgets a node when it is
//! deleted or its providerID or `Ready` condition status changes (a restarted instance may have other addresses),
//! and everything when informer events were missed: run [`InstanceCache::run_invalidator`] with the shared Node
//! informer, or call [`InstanceCache::invalidate`]. An answer in flight when its node is invalidated reaches its
//! callers but is not kept.
//!
//! The cache sits **in front of** the provider's interceptors (budget, call metrics): its answers cost no budget
//! and the call metrics count real cloud calls only. A provider reload clears it. [`InstanceCache::with_metrics`]
//! counts hits, coalesced questions and misses.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use ccm_core::cache::InstanceCache;
//! use ccm_core::intercept::InterceptedProvider;
//!
//! # fn demo(cloud: Arc<dyn ccm_core::CloudProvider>, informers: ccm_core::runtime::informer::SharedInformers) {
//! # let registry = ccm_core::runtime::metrics::SharedRegistry::new();
//! let cache = Arc::new(InstanceCache::new(Duration::from_secs(30)).with_metrics(&registry));
//! let token = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(cache.clone().run_invalidator(informers.nodes().clone(), token));
//! let cloud: Arc<dyn ccm_core::CloudProvider> =
//!     Arc::new(InterceptedProvider::new(cloud).with_instance_cache(cache));
//! # }
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::CloudError;
use crate::helpers::{node_condition_status, node_name, node_provider_id};
use crate::intercept::Operation;
use crate::names;
use crate::provider::{InstancesV2, one_by_one};
use crate::runtime::informer::{InformerEvent, NodeInformer};
use crate::runtime::metrics::{Labels, SharedRegistry, labels};
use crate::types::InstanceLookup;

#[derive(Debug, Clone)]
enum Answer {
    Bool(bool),
    Metadata(InstanceLookup),
}

impl Answer {
    fn bool(self, question: Operation) -> Result<bool, CloudError> {
        match self {
            Answer::Bool(b) => Ok(b),
            Answer::Metadata(_) => Err(unexpected(question)),
        }
    }

    fn lookup(self, question: Operation) -> Result<InstanceLookup, CloudError> {
        match self {
            Answer::Metadata(m) => Ok(m),
            Answer::Bool(_) => Err(unexpected(question)),
        }
    }
}

/// The question (the single call that asks it: `instance-exists`, `instance-shutdown` or
/// `instance-metadata-by-provider-id`, whose name labels the cache metrics), the node's name and its providerID:
/// a node whose providerID changed is a new key even before the informer reports the change.
type Key = (Operation, String, String);
type Flight = Shared<BoxFuture<'static, Result<Answer, Arc<CloudError>>>>;

fn key(question: Operation, node: &Node) -> Key {
    (
        question,
        node_name(node).to_owned(),
        node_provider_id(node).to_owned(),
    )
}

/// The default TTL of metadata answers (`--cloud-instance-cache-ttl`); existence and shutdown answers are never
/// kept (see the [module docs](self)), so the TTL never delays a lifecycle decision.
pub const DEFAULT_INSTANCE_CACHE_TTL: Duration = Duration::from_secs(30);

/// Expired answers are dropped after this many insertions (they are also replaced when asked again).
const PRUNE_EVERY: u64 = 1024;

#[derive(Default)]
struct State {
    answers: HashMap<Key, (Instant, Answer)>,
    flights: HashMap<Key, (u64, Flight)>,
    generation: u64,
    /// Bumped by every invalidation: a bulk answer that began before one is not stored.
    epoch: u64,
    inserts: u64,
}

impl State {
    fn insert(&mut self, key: Key, answer: Answer, ttl: Duration) {
        self.answers.insert(key, (Instant::now(), answer));
        self.inserts += 1;
        if self.inserts.is_multiple_of(PRUNE_EVERY) {
            self.answers.retain(|_, (at, _)| at.elapsed() < ttl);
        }
    }
}

/// How the cache answered so far (see [`InstanceCache::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Questions answered from a kept answer, without a cloud call.
    pub hits: u64,
    /// Questions that joined an identical call already in flight.
    pub coalesced: u64,
    /// Questions that needed a cloud call (one per node, also inside a bulk call).
    pub misses: u64,
}

/// How a question was answered: the `result` label of the cache metrics.
#[derive(Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
enum Outcome {
    Hit,
    Coalesced,
    Miss,
}

#[derive(Default)]
struct Counters {
    /// Questions so far, by [`Outcome`] in declaration order.
    counts: [AtomicU64; 3],
    family: OnceLock<Family<Labels, Counter>>,
}

impl Counters {
    fn record(&self, question: Operation, outcome: Outcome, n: usize) {
        let Ok(n @ 1..) = u64::try_from(n) else {
            return;
        };
        self.counts[outcome as usize].fetch_add(n, Ordering::Relaxed);
        if let Some(family) = self.family.get() {
            let labels = labels(&[("operation", question.as_str()), ("result", outcome.into())]);
            family.get_or_create(&labels).inc_by(n);
        }
    }
}

/// The instance cache (see the [module documentation](self)): answers, calls in flight, and counters.
pub struct InstanceCache {
    ttl: Duration,
    state: Mutex<State>,
    counters: Counters,
}

impl std::fmt::Debug for InstanceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl InstanceCache {
    /// A cache keeping metadata answers for `ttl` (zero: coalesce only, keep nothing).
    pub fn new(ttl: Duration) -> Self {
        InstanceCache {
            ttl,
            state: Mutex::default(),
            counters: Counters::default(),
        }
    }

    /// Count the cache's answers in `registry` as
    /// `cloudprovider_instance_cache_requests_total{operation, result}` (`result` = `hit`, `coalesced` or
    /// `miss`; `operation` = the call-log name of the InstancesV2 call).
    pub fn with_metrics(self, registry: &SharedRegistry) -> Self {
        self.register_metrics(registry);
        self
    }

    /// [`with_metrics`](Self::with_metrics) of a shared cache; a second registration of one cache does nothing.
    fn register_metrics(&self, registry: &SharedRegistry) {
        let family = Family::<Labels, Counter>::default();
        if self.counters.family.set(family.clone()).is_ok() {
            registry.register(
                "cloudprovider_instance_cache_requests",
                "Instance questions answered by the cloud-call cache, by operation and result (hit, coalesced, miss)",
                family,
            );
        }
    }

    /// How long metadata answers are kept (zero: coalescing only).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Forget everything about the node named `node_name`. A call about it still in flight is not kept when it
    /// finishes (a later question asks the cloud again).
    pub fn invalidate(&self, node_name: &str) {
        let mut state = self.state.lock();
        state.answers.retain(|(_, name, _), _| name != node_name);
        state.flights.retain(|(_, name, _), _| name != node_name);
        state.epoch += 1;
    }

    /// Forget everything, including calls in flight (as [`invalidate`](Self::invalidate) does for one node).
    pub fn clear(&self) {
        let mut state = self.state.lock();
        state.answers.clear();
        state.flights.clear();
        state.epoch += 1;
    }

    /// How many answers are held (expired ones included until they are pruned).
    pub fn len(&self) -> usize {
        self.state.lock().answers.len()
    }

    /// True if no answer is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hits, coalesced questions and misses so far.
    pub fn stats(&self) -> CacheStats {
        let load =
            |outcome: Outcome| self.counters.counts[outcome as usize].load(Ordering::Relaxed);
        CacheStats {
            hits: load(Outcome::Hit),
            coalesced: load(Outcome::Coalesced),
            misses: load(Outcome::Miss),
        }
    }

    /// Invalidate from Node events until `shutdown` (which events: see the [module docs](self)).
    pub async fn run_invalidator(
        self: Arc<Self>,
        nodes: NodeInformer,
        shutdown: CancellationToken,
    ) {
        // inline in the informer's task: a heartbeat costs a comparison, not a task wake-up
        let cache = self.clone();
        let registration = nodes.on_event(move |event| match event {
            InformerEvent::Deleted(node) => cache.invalidate(node_name(node)),
            InformerEvent::Updated { old, new } => {
                if invalidates(old, new) {
                    cache.invalidate(node_name(new));
                }
            }
            InformerEvent::Resync => cache.clear(),
            InformerEvent::Added(_) => {}
        });
        shutdown.cancelled().await;
        drop(registration);
    }

    async fn ask<F>(&self, question: Operation, node: &Node, call: F) -> Result<Answer, CloudError>
    where
        F: Future<Output = Result<Answer, CloudError>> + Send + 'static,
    {
        let key = key(question, node);
        let (generation, flight) = {
            let mut state = self.state.lock();
            if let Some(answer) = self.kept(&state, &key) {
                self.counters.record(question, Outcome::Hit, 1);
                return Ok(answer);
            }
            match state.flights.get(&key) {
                Some((generation, flight)) => {
                    self.counters.record(question, Outcome::Coalesced, 1);
                    (*generation, flight.clone())
                }
                None => {
                    self.counters.record(question, Outcome::Miss, 1);
                    state.generation += 1;
                    let generation = state.generation;
                    let flight: Flight = call.map(|r| r.map_err(Arc::new)).boxed().shared();
                    state
                        .flights
                        .insert(key.clone(), (generation, flight.clone()));
                    (generation, flight)
                }
            }
        };
        let result = flight.await;
        let mut state = self.state.lock();
        if state
            .flights
            .get(&key)
            .is_some_and(|(g, _)| *g == generation)
        {
            state.flights.remove(&key);
            if let Ok(answer) = &result
                && self.keeps(question)
            {
                state.insert(key, answer.clone(), self.ttl);
            }
        }
        result.map_err(|e| CloudError::clone(&e))
    }

    /// Whether answers to `question` are kept: only metadata answers (see the [module docs](self)), with a TTL
    /// above zero.
    fn keeps(&self, question: Operation) -> bool {
        question == Operation::InstanceMetadata && !self.ttl.is_zero()
    }

    /// The kept, unexpired answer for `key`, if its question keeps answers at all.
    fn kept(&self, state: &State, key: &Key) -> Option<Answer> {
        let (at, answer) = state.answers.get(key).filter(|_| self.keeps(key.0))?;
        (at.elapsed() < self.ttl).then(|| answer.clone())
    }

    /// The kept metadata answer of each node (`None`: ask the cloud), and the epoch to pass to
    /// [`store_many`](Self::store_many).
    fn cached_many(&self, nodes: &[Node]) -> (Vec<Option<Answer>>, u64) {
        let question = Operation::InstanceMetadata;
        let state = self.state.lock();
        let answers: Vec<Option<Answer>> = nodes
            .iter()
            .map(|node| self.kept(&state, &key(question, node)))
            .collect();
        let hits = answers.iter().filter(|a| a.is_some()).count();
        let misses = nodes.len() - hits;
        self.counters.record(question, Outcome::Hit, hits);
        self.counters.record(question, Outcome::Miss, misses);
        (answers, state.epoch)
    }

    /// Keep the metadata answers of a bulk call (if metadata answers are kept at all), unless something was
    /// invalidated since `epoch`.
    fn store_many<'a>(&self, epoch: u64, answers: impl Iterator<Item = (&'a Node, Answer)>) {
        let question = Operation::InstanceMetadata;
        let mut state = self.state.lock();
        if !self.keeps(question) || state.epoch != epoch {
            return;
        }
        for (node, answer) in answers {
            state.insert(key(question, node), answer, self.ttl);
        }
    }
}

/// Whether an update makes the cached answers about the node unsafe to reuse.
fn invalidates(old: &Node, new: &Node) -> bool {
    node_provider_id(old) != node_provider_id(new)
        || node_condition_status(old, names::conditions::READY)
            != node_condition_status(new, names::conditions::READY)
}

/// The InstancesV2 of a provider behind an [`InstanceCache`].
pub(crate) struct CachedV2 {
    pub(crate) inner: Arc<dyn InstancesV2>,
    pub(crate) cache: Arc<InstanceCache>,
}

fn unexpected(question: Operation) -> CloudError {
    CloudError::message(format!(
        "instance cache returned a mismatched answer for {question}; this is a bug"
    ))
}

fn short_bulk_answer(operation: Operation, got: usize, asked: usize) -> CloudError {
    CloudError::message(format!(
        "the provider's {operation} returned {got} answers for {asked} nodes; a bulk call must answer every \
         node, in order"
    ))
}

/// A bulk call of the wrapped provider.
type BulkCall<'n, T> = BoxFuture<'n, Result<Vec<Result<T, CloudError>>, CloudError>>;

impl CachedV2 {
    /// `instance_metadata_bulk` through the cache (see the [module docs](self)).
    async fn metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
        let (question, operation) = (Operation::InstanceMetadata, Operation::InstanceMetadataBulk);
        let (cached, epoch) = self.cache.cached_many(nodes);
        let missing: Cow<'_, [Node]> = if cached.iter().all(Option::is_none) {
            Cow::Borrowed(nodes)
        } else {
            let missing = nodes.iter().zip(&cached).filter(|(_, a)| a.is_none());
            Cow::Owned(missing.map(|(node, _)| node.clone()).collect())
        };
        let mut fresh = if missing.is_empty() {
            Vec::new()
        } else {
            let answers = self.inner.instance_metadata_bulk(&missing).await?;
            if answers.len() != missing.len() {
                return Err(short_bulk_answer(operation, answers.len(), missing.len()));
            }
            let kept = missing.iter().zip(&answers).filter_map(|(node, r)| {
                let metadata = r.as_ref().ok()?;
                Some((node, Answer::Metadata(metadata.clone())))
            });
            self.cache.store_many(epoch, kept);
            answers
        }
        .into_iter();
        Ok(cached
            .into_iter()
            .map(|answer| match answer {
                Some(answer) => answer.lookup(question),
                None => fresh
                    .next()
                    .unwrap_or_else(|| Err(short_bulk_answer(operation, 0, 1))),
            })
            .collect())
    }

    /// A bulk call whose answers are never kept (existence, shutdown): every node is a miss, asked in one call.
    async fn uncached_bulk<T>(
        &self,
        (question, operation): (Operation, Operation),
        nodes: &[Node],
        call: BulkCall<'_, T>,
    ) -> Result<Vec<Result<T, CloudError>>, CloudError> {
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let counters = &self.cache.counters;
        counters.record(question, Outcome::Miss, nodes.len());
        let answers = call.await?;
        if answers.len() != nodes.len() {
            return Err(short_bulk_answer(operation, answers.len(), nodes.len()));
        }
        Ok(answers)
    }
}

#[async_trait]
impl InstancesV2 for CachedV2 {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        let (inner, owned) = (self.inner.clone(), node.clone());
        let call = async move { inner.instance_exists(&owned).await.map(Answer::Bool) };
        let question = Operation::InstanceExists;
        self.cache.ask(question, node, call).await?.bool(question)
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let (inner, owned) = (self.inner.clone(), node.clone());
        let call = async move { inner.instance_shutdown(&owned).await.map(Answer::Bool) };
        let question = Operation::InstanceShutdown;
        self.cache.ask(question, node, call).await?.bool(question)
    }
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        let (inner, owned) = (self.inner.clone(), node.clone());
        let call = async move { inner.instance_metadata(&owned).await.map(Answer::Metadata) };
        let question = Operation::InstanceMetadata;
        self.cache.ask(question, node, call).await?.lookup(question)
    }
    fn supports_bulk(&self) -> bool {
        self.inner.supports_bulk()
    }
    async fn instance_metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_metadata(n)).await);
        }
        self.metadata_bulk(nodes).await
    }
    async fn instance_exists_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_exists(n)).await);
        }
        let operations = (Operation::InstanceExists, Operation::InstanceExistsBulk);
        let call = self.inner.instance_exists_bulk(nodes);
        self.uncached_bulk(operations, nodes, call).await
    }
    async fn instance_shutdown_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            return Ok(one_by_one(nodes, |n| self.instance_shutdown(n)).await);
        }
        let operations = (Operation::InstanceShutdown, Operation::InstanceShutdownBulk);
        let call = self.inner.instance_shutdown_bulk(nodes);
        self.uncached_bulk(operations, nodes, call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intercept::InterceptedProvider;
    use crate::provider::CloudProvider;
    use crate::types::InstanceMetadata;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counting {
        calls: AtomicUsize,
        exists: Mutex<bool>,
        shutdown: Mutex<bool>,
        fail: Mutex<bool>,
        /// `instance_metadata` takes 100 ms (as `instance_exists` always does).
        slow_metadata: bool,
        bulk: bool,
        /// The node names of each bulk call.
        bulk_calls: Mutex<Vec<Vec<String>>>,
        /// Answer one node fewer than asked (a broken provider).
        short: bool,
    }

    #[async_trait]
    impl InstancesV2 for Counting {
        async fn instance_exists(&self, _node: &Node) -> Result<bool, CloudError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            if *self.fail.lock().unwrap() {
                return Err(CloudError::InstanceNotFound.context("describe"));
            }
            Ok(*self.exists.lock().unwrap())
        }
        async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(*self.shutdown.lock().unwrap())
        }
        async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.slow_metadata {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(InstanceMetadata::new(format!("t://{}", node_name(node))).into())
        }
        fn supports_bulk(&self) -> bool {
            self.bulk
        }
        async fn instance_exists_bulk(
            &self,
            nodes: &[Node],
        ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
            self.bulk_calls
                .lock()
                .unwrap()
                .push(nodes.iter().map(|n| node_name(n).to_owned()).collect());
            let exists = *self.exists.lock().unwrap();
            let answers = nodes.len() - usize::from(self.short);
            // "gone-*" nodes do not exist, "err-*" nodes fail
            Ok(nodes[..answers]
                .iter()
                .map(|n| match node_name(n) {
                    name if name.starts_with("gone") => Ok(false),
                    name if name.starts_with("err") => Err(CloudError::message("item failed")),
                    _ => Ok(exists),
                })
                .collect())
        }
        async fn instance_metadata_bulk(
            &self,
            nodes: &[Node],
        ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
            self.bulk_calls
                .lock()
                .unwrap()
                .push(nodes.iter().map(|n| node_name(n).to_owned()).collect());
            // "gone-*" nodes have no instance, "err-*" nodes fail
            Ok(nodes
                .iter()
                .map(|n| match node_name(n) {
                    name if name.starts_with("gone") => Err(CloudError::InstanceNotFound),
                    name if name.starts_with("skip") => Ok(InstanceLookup::skip("unmanaged")),
                    name if name.starts_with("err") => Err(CloudError::message("item failed")),
                    name => Ok(InstanceMetadata::new(format!("t://{name}")).into()),
                })
                .collect())
        }
    }

    struct Cloud(Arc<Counting>);
    impl CloudProvider for Cloud {
        fn provider_name(&self) -> &str {
            "t"
        }
        fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
            Some(self.0.clone())
        }
    }

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n
    }

    /// The counting cloud behind an instance cache, as the runtime stacks them.
    struct Cached {
        provider: Arc<InterceptedProvider>,
        cache: Arc<InstanceCache>,
    }

    impl Cached {
        fn cache(&self) -> Arc<InstanceCache> {
            self.cache.clone()
        }
        fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
            Arc::clone(&self.provider).instances_v2()
        }
        fn with_metrics(self, registry: &SharedRegistry) -> Self {
            self.cache.register_metrics(registry);
            self
        }
    }

    fn setup(ttl: Duration) -> (Arc<Counting>, Arc<Cached>) {
        setup_with(ttl, Counting::default())
    }

    fn setup_with(ttl: Duration, counting: Counting) -> (Arc<Counting>, Arc<Cached>) {
        let counting = Arc::new(Counting {
            exists: Mutex::new(true),
            ..counting
        });
        let cache = Arc::new(InstanceCache::new(ttl));
        let provider = InterceptedProvider::new(Arc::new(Cloud(counting.clone())))
            .with_instance_cache(cache.clone());
        let provider = Arc::new(provider);
        (counting, Arc::new(Cached { provider, cache }))
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_calls_for_one_node_coalesce() {
        let (counting, cloud) = setup(Duration::ZERO);
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let n = node("a");
        let results = futures::future::join_all((0..10).map(|_| v2.instance_exists(&n))).await;
        assert!(results.into_iter().all(|r| r.unwrap()));
        assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
        // ttl zero: nothing cached afterwards
        v2.instance_exists(&n).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
        // different nodes do not coalesce
        let (a, b) = (node("a"), node("b"));
        let _ = tokio::join!(v2.instance_exists(&a), v2.instance_exists(&b));
        assert_eq!(counting.calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn metadata_is_cached_for_ttl_and_invalidated() {
        let (counting, cloud) = setup(Duration::from_secs(30));
        let cache = cloud.cache();
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let n = node("a");
        for _ in 0..5 {
            assert!(v2.instance_metadata(&n).await.unwrap().found().is_some());
        }
        assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(31)).await;
        v2.instance_metadata(&n).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
        cache.invalidate("a");
        v2.instance_metadata(&n).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 3);
        v2.instance_metadata(&node("b")).await.unwrap();
        v2.instance_metadata(&node("b")).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 4);
        assert_eq!(cache.len(), 2);
        cache.clear();
        assert!(cache.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn existence_and_shutdown_answers_are_never_kept() {
        // Even with a long TTL: these answers decide whether a Node is deleted or tainted.
        let (counting, cloud) = setup(Duration::from_secs(300));
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let n = node("a");
        for _ in 0..3 {
            assert!(v2.instance_exists(&n).await.unwrap());
            assert!(!v2.instance_shutdown(&n).await.unwrap());
        }
        assert_eq!(
            counting.calls.load(Ordering::SeqCst),
            6,
            "every question reaches the cloud"
        );
        assert!(cloud.cache().is_empty());
        // The instance is stopped, then terminated: the very next questions see it.
        *counting.shutdown.lock().unwrap() = true;
        assert!(v2.instance_shutdown(&n).await.unwrap());
        *counting.exists.lock().unwrap() = false;
        assert!(!v2.instance_exists(&n).await.unwrap());
        assert_eq!(
            cloud.cache().stats(),
            CacheStats {
                hits: 0,
                coalesced: 0,
                misses: 8,
            }
        );
        // Concurrent identical questions still share one call.
        let before = counting.calls.load(Ordering::SeqCst);
        let _ = futures::future::join_all((0..5).map(|_| v2.instance_exists(&n))).await;
        assert_eq!(counting.calls.load(Ordering::SeqCst), before + 1);
        assert_eq!(cloud.cache().stats().coalesced, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn not_found_and_errors_are_never_cached_and_keep_their_kind() {
        let (counting, cloud) = setup(Duration::from_secs(30));
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let n = node("a");
        *counting.exists.lock().unwrap() = false;
        assert!(!v2.instance_exists(&n).await.unwrap());
        assert!(!v2.instance_exists(&n).await.unwrap());
        assert_eq!(
            counting.calls.load(Ordering::SeqCst),
            2,
            "a negative answer is always fresh"
        );
        *counting.fail.lock().unwrap() = true;
        let errs = futures::future::join_all((0..3).map(|_| v2.instance_exists(&n))).await;
        for e in errs {
            let e = e.unwrap_err();
            assert!(e.is_instance_not_found());
            assert_eq!(e.to_string(), "describe: instance not found");
        }
        assert_eq!(counting.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn informer_events_invalidate() {
        use crate::runtime::informer::Informer;
        use kube::Api;
        let (counting, cloud) = setup(Duration::from_secs(300));
        let cache = cloud.cache();
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        v2.instance_metadata(&node("a")).await.unwrap();
        v2.instance_metadata(&node("b")).await.unwrap();
        assert_eq!(cache.len(), 2);
        let client = kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                    "offline",
                ))
            }),
            "default",
        );
        let informer: NodeInformer =
            Informer::new(Api::all(client), kube::runtime::watcher::Config::default());
        let token = CancellationToken::new();
        let task = tokio::spawn(
            cache
                .clone()
                .run_invalidator(informer.clone(), token.clone()),
        );
        tokio::task::yield_now().await;
        informer.inject_for_test(InformerEvent::Deleted(Arc::new(node("a"))));
        let mut moved = node("b");
        moved.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some("t://new".into()),
            ..Default::default()
        });
        informer.inject_for_test(InformerEvent::Updated {
            old: Arc::new(node("b")),
            new: Arc::new(moved),
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(cache.is_empty());
        // a node going NotReady: its metadata is asked again; a status update that keeps Ready does not matter
        v2.instance_metadata(&node("c")).await.unwrap();
        v2.instance_metadata(&node("d")).await.unwrap();
        informer.inject_for_test(InformerEvent::Updated {
            old: Arc::new(ready("d", "True")),
            new: Arc::new(ready("d", "True")),
        });
        informer.inject_for_test(InformerEvent::Updated {
            old: Arc::new(ready("c", "True")),
            new: Arc::new(ready("c", "False")),
        });
        informer.inject_for_test(InformerEvent::Added(Arc::new(node("e"))));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(cache.len(), 1, "only d is kept");
        // missed events: forget everything
        informer.inject_for_test(InformerEvent::Resync);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(cache.is_empty());
        token.cancel();
        task.await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 4);
    }

    fn names(list: &[&str]) -> Vec<Node> {
        list.iter().map(|n| node(n)).collect()
    }

    fn with_provider_id(name: &str, id: &str) -> Node {
        let mut n = node(name);
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some(id.into()),
            ..Default::default()
        });
        n
    }

    fn ready(name: &str, status: &str) -> Node {
        let mut n = node(name);
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::NodeCondition {
                type_: "Ready".into(),
                status: status.into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        n
    }

    fn provider_id(answer: &Result<InstanceLookup, CloudError>) -> &str {
        &answer.as_ref().unwrap().found().unwrap().provider_id
    }

    #[tokio::test(start_paused = true)]
    async fn bulk_metadata_reuses_kept_answers_and_asks_only_about_the_rest() {
        let (counting, cloud) = setup_with(
            Duration::from_secs(30),
            Counting {
                bulk: true,
                ..Default::default()
            },
        );
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        assert!(v2.supports_bulk());
        // a single answer about "a" is kept and reused by the bulk call
        v2.instance_metadata(&node("a")).await.unwrap();
        let answers = v2
            .instance_metadata_bulk(&names(&["a", "b", "skip-c", "err-d"]))
            .await
            .unwrap();
        assert_eq!(answers.len(), 4);
        assert_eq!(provider_id(&answers[0]), "t://a");
        assert_eq!(provider_id(&answers[1]), "t://b");
        assert_eq!(
            answers[2].as_ref().unwrap().skip_reason(),
            Some("unmanaged")
        );
        assert!(answers[3].is_err());
        assert_eq!(
            *counting.bulk_calls.lock().unwrap(),
            vec![vec!["b", "skip-c", "err-d"]]
        );
        // "b" and "skip-c" (a deliberate skip is an answer) are kept now; failures are asked again
        v2.instance_metadata_bulk(&names(&["a", "b", "skip-c", "err-d"]))
            .await
            .unwrap();
        assert_eq!(counting.bulk_calls.lock().unwrap()[1], vec!["err-d"]);
        // everything kept: no call at all
        let answers = v2
            .instance_metadata_bulk(&names(&["b", "a"]))
            .await
            .unwrap();
        assert_eq!(provider_id(&answers[0]), "t://b");
        assert_eq!(counting.bulk_calls.lock().unwrap().len(), 2);
        // bulk answers are shared with single questions
        assert_eq!(
            v2.instance_metadata(&node("b"))
                .await
                .unwrap()
                .into_found()
                .unwrap()
                .provider_id,
            "t://b"
        );
        assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            cloud.cache().stats(),
            CacheStats {
                hits: 1 + 3 + 2 + 1,
                coalesced: 0,
                misses: 1 + 3 + 1,
            }
        );
        // after the TTL the bulk call asks about everyone again
        tokio::time::sleep(Duration::from_secs(31)).await;
        v2.instance_metadata_bulk(&names(&["a", "b"]))
            .await
            .unwrap();
        assert_eq!(counting.bulk_calls.lock().unwrap()[2], vec!["a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn bulk_existence_asks_about_every_node_every_time() {
        let (counting, cloud) = setup_with(
            Duration::from_secs(300),
            Counting {
                bulk: true,
                ..Default::default()
            },
        );
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        assert!(v2.instance_exists(&node("a")).await.unwrap());
        for _ in 0..2 {
            let answers = v2
                .instance_exists_bulk(&names(&["a", "b", "gone-c", "err-d"]))
                .await
                .unwrap();
            assert!(*answers[0].as_ref().unwrap() && *answers[1].as_ref().unwrap());
            assert!(!answers[2].as_ref().unwrap());
            assert!(answers[3].is_err());
        }
        let all = vec!["a", "b", "gone-c", "err-d"];
        assert_eq!(*counting.bulk_calls.lock().unwrap(), vec![all.clone(), all]);
        // the instances go away: the next bulk call says so
        *counting.exists.lock().unwrap() = false;
        let answers = v2.instance_exists_bulk(&names(&["a", "b"])).await.unwrap();
        assert!(answers.iter().all(|a| !a.as_ref().unwrap()));
        assert!(cloud.cache().is_empty());
        assert_eq!(
            cloud.cache().stats(),
            CacheStats {
                hits: 0,
                coalesced: 0,
                misses: 1 + 4 + 4 + 2,
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bulk_metadata_is_cached_too_and_zero_ttl_keeps_nothing() {
        let (counting, cloud) = setup_with(
            Duration::from_secs(30),
            Counting {
                bulk: true,
                ..Default::default()
            },
        );
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let first = v2
            .instance_metadata_bulk(&names(&["a", "b"]))
            .await
            .unwrap();
        assert_eq!(
            first[1].as_ref().unwrap().found().unwrap().provider_id,
            "t://b"
        );
        let again = v2
            .instance_metadata(&node("b"))
            .await
            .unwrap()
            .into_found()
            .unwrap();
        assert_eq!(again.provider_id, "t://b");
        assert_eq!(counting.calls.load(Ordering::SeqCst), 0);
        assert_eq!(counting.bulk_calls.lock().unwrap().len(), 1);

        let (counting, cloud) = setup_with(
            Duration::ZERO,
            Counting {
                bulk: true,
                ..Default::default()
            },
        );
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        for _ in 0..3 {
            v2.instance_metadata_bulk(&names(&["a", "b"]))
                .await
                .unwrap();
        }
        assert_eq!(counting.bulk_calls.lock().unwrap().len(), 3);
        assert!(cloud.cache().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_bulk_answer_of_the_wrong_length_is_an_error() {
        let (_, cloud) = setup_with(
            Duration::from_secs(30),
            Counting {
                bulk: true,
                short: true,
                ..Default::default()
            },
        );
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let err = v2
            .instance_exists_bulk(&names(&["a", "b"]))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("returned 1 answers for 2 nodes; a bulk call must answer every node"),
            "{err}"
        );
        assert!(cloud.cache().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn without_native_bulk_the_bulk_methods_use_the_cached_single_calls() {
        let (counting, cloud) = setup(Duration::from_secs(30));
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        assert!(!v2.supports_bulk());
        v2.instance_metadata_bulk(&names(&["a", "b"]))
            .await
            .unwrap();
        v2.instance_metadata_bulk(&names(&["a", "b"]))
            .await
            .unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2, "kept metadata");
        v2.instance_exists_bulk(&names(&["a", "b"])).await.unwrap();
        v2.instance_exists_bulk(&names(&["a", "b"])).await.unwrap();
        assert_eq!(
            counting.calls.load(Ordering::SeqCst),
            6,
            "existence is asked every time"
        );
        assert!(counting.bulk_calls.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_in_flight_during_invalidation_is_not_kept() {
        let (counting, cloud) = setup_with(
            Duration::from_secs(300),
            Counting {
                slow_metadata: true,
                ..Default::default()
            },
        );
        let cache = cloud.cache();
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let n = node("a");
        let invalidate = async {
            // the cloud answers after 100 ms
            tokio::time::sleep(Duration::from_millis(50)).await;
            cache.invalidate("a");
        };
        let (answer, ()) = tokio::join!(v2.instance_metadata(&n), invalidate);
        assert!(answer.unwrap().found().is_some());
        assert!(cache.is_empty(), "the answer predates the invalidation");
        v2.instance_metadata(&n).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
        assert_eq!(cache.len(), 1);
        // the same for clear()
        cache.clear();
        let clear = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cache.clear();
        };
        let _ = tokio::join!(v2.instance_metadata(&n), clear);
        assert!(cache.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_provider_id_is_a_new_question() {
        let (counting, cloud) = setup(Duration::from_secs(300));
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        v2.instance_metadata(&with_provider_id("a", "t://1"))
            .await
            .unwrap();
        v2.instance_metadata(&with_provider_id("a", "t://1"))
            .await
            .unwrap();
        v2.instance_metadata(&with_provider_id("a", "t://2"))
            .await
            .unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
        // invalidation by name forgets both
        cloud.cache().invalidate("a");
        assert!(cloud.cache().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn stats_and_metrics_count_hits_coalesced_and_misses() {
        let registry = SharedRegistry::new();
        let (_, cloud) = setup_with(
            Duration::from_secs(30),
            Counting {
                slow_metadata: true,
                ..Default::default()
            },
        );
        let cloud = Arc::new(
            Arc::into_inner(cloud)
                .expect("one handle")
                .with_metrics(&registry),
        );
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        let n = node("a");
        let _ = futures::future::join_all((0..3).map(|_| v2.instance_metadata(&n))).await;
        v2.instance_metadata(&n).await.unwrap();
        assert_eq!(
            cloud.cache().stats(),
            CacheStats {
                hits: 1,
                coalesced: 2,
                misses: 1
            }
        );
        let text = registry.encode();
        for (result, count) in [("miss", 1), ("coalesced", 2), ("hit", 1)] {
            let line = format!(
                r#"cloudprovider_instance_cache_requests_total{{operation="{}",result="{result}"}} {count}"#,
                Operation::InstanceMetadata
            );
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        // registering twice does not register the family twice
        let cloud = Arc::new(
            Arc::into_inner(cloud)
                .expect("one handle")
                .with_metrics(&registry),
        );
        assert_eq!(
            registry
                .encode()
                .matches("# TYPE cloudprovider_instance_cache_requests counter")
                .count(),
            1
        );
        assert_eq!(cloud.cache().ttl(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn expired_answers_are_pruned() {
        let (_, cloud) = setup(Duration::from_secs(30));
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        for i in 0..1000 {
            v2.instance_metadata(&node(&format!("old-{i}")))
                .await
                .unwrap();
        }
        assert_eq!(cloud.cache().len(), 1000);
        tokio::time::sleep(Duration::from_secs(31)).await;
        for i in 0..24 {
            v2.instance_metadata(&node(&format!("new-{i}")))
                .await
                .unwrap();
        }
        assert_eq!(cloud.cache().len(), 24, "the 1024th insertion prunes");
    }

    #[test]
    fn what_invalidates() {
        assert!(!invalidates(&node("a"), &node("a")));
        assert!(invalidates(
            &with_provider_id("a", "t://1"),
            &with_provider_id("a", "t://2")
        ));
        assert!(invalidates(&ready("a", "True"), &ready("a", "False")));
        assert!(invalidates(&ready("a", "False"), &ready("a", "True")));
        // a missing condition counts as Unknown
        assert!(!invalidates(&node("a"), &ready("a", "Unknown")));
        assert!(invalidates(&node("a"), &ready("a", "False")));
        assert!(!invalidates(&ready("a", "False"), &ready("a", "False")));
    }
}
