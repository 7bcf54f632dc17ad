//! Coalescing and a short-lived cache for instance questions (InstancesV2).
//!
//! [`CachingProvider`] wraps a provider so that:
//!
//! - concurrent calls asking the same question about the same node (`instance-exists`, `instance-shutdown`,
//!   `instance-metadata`) share one cloud call;
//! - successful answers are kept for a short time (`ttl`), so the lifecycle loop, which asks about every NotReady
//!   node every 5 seconds, does not ask the cloud the same question again while nothing changed. "Does not exist"
//!   is never cached: a node is only deleted on a fresh answer.
//!
//! The cache forgets a node when it is deleted or its providerID changes: run [`InstanceCache::run_invalidator`]
//! with the shared Node informer, or call [`InstanceCache::invalidate`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use ccm_core::cache::CachingProvider;
//!
//! # fn demo(cloud: Arc<dyn ccm_core::CloudProvider>, informers: ccm_core::runtime::informer::SharedInformers) {
//! let caching = CachingProvider::new(cloud, Duration::from_secs(30));
//! let cache = caching.cache();
//! let token = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(cache.run_invalidator(informers.nodes().clone(), token));
//! let cloud: Arc<dyn ccm_core::CloudProvider> = Arc::new(caching);
//! # }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::CloudError;
use crate::helpers::{node_name, node_provider_id};
use crate::provider::{
    CloudProvider, Clusters, InitializeContext, Instances, InstancesV2, LoadBalancer, Routes, Zones,
};
use crate::runtime::informer::{Informer, InformerEvent};
use crate::types::InstanceMetadata;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Question {
    Exists,
    Shutdown,
    Metadata,
}

#[derive(Debug, Clone)]
enum Answer {
    Bool(bool),
    Metadata(Option<InstanceMetadata>),
}

type Key = (Question, String);
type Flight = Shared<BoxFuture<'static, Result<Answer, Arc<CloudError>>>>;

#[derive(Default)]
struct State {
    answers: HashMap<Key, (Instant, Answer)>,
    flights: HashMap<Key, (u64, Flight)>,
    generation: u64,
}

/// The shared state of a [`CachingProvider`]: answers, calls in flight, and counters.
pub struct InstanceCache {
    ttl: Duration,
    state: Mutex<State>,
}

impl std::fmt::Debug for InstanceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl InstanceCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forget everything about the node named `node_name`.
    pub fn invalidate(&self, node_name: &str) {
        self.lock().answers.retain(|(_, name), _| name != node_name);
    }

    /// Forget everything.
    pub fn clear(&self) {
        self.lock().answers.clear();
    }

    /// How many answers are cached.
    pub fn len(&self) -> usize {
        self.lock().answers.len()
    }

    /// True if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Invalidate from Node events until `shutdown`: a deleted node, a changed providerID, or missed events
    /// (everything).
    pub async fn run_invalidator(
        self: Arc<Self>,
        nodes: Informer<Node>,
        shutdown: CancellationToken,
    ) {
        let mut events = nodes.subscribe();
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                event = events.recv() => event,
            };
            match event {
                None => return,
                Some(InformerEvent::Deleted(node)) => self.invalidate(node_name(&node)),
                Some(InformerEvent::Updated { old, new }) => {
                    if node_provider_id(&old) != node_provider_id(&new) {
                        self.invalidate(node_name(&new));
                    }
                }
                Some(InformerEvent::Resync) => self.clear(),
                Some(InformerEvent::Added(_)) => {}
            }
        }
    }

    async fn ask<F>(&self, question: Question, node: &Node, call: F) -> Result<Answer, CloudError>
    where
        F: Future<Output = Result<Answer, CloudError>> + Send + 'static,
    {
        let key = (question, node_name(node).to_owned());
        let (generation, flight) = {
            let mut state = self.lock();
            if let Some((at, answer)) = state.answers.get(&key)
                && at.elapsed() < self.ttl
            {
                return Ok(answer.clone());
            }
            match state.flights.get(&key) {
                Some((generation, flight)) => (*generation, flight.clone()),
                None => {
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
        let mut state = self.lock();
        if state
            .flights
            .get(&key)
            .is_some_and(|(g, _)| *g == generation)
        {
            state.flights.remove(&key);
            if let Ok(answer) = &result {
                let cacheable =
                    !matches!((question, answer), (Question::Exists, Answer::Bool(false)));
                if cacheable && !self.ttl.is_zero() {
                    state.answers.insert(key, (Instant::now(), answer.clone()));
                }
            }
        }
        result.map_err(|e| e.duplicate())
    }
}

/// A provider whose InstancesV2 answers are coalesced and cached; everything else passes through.
#[derive(Clone)]
pub struct CachingProvider {
    inner: Arc<dyn CloudProvider>,
    cache: Arc<InstanceCache>,
}

impl std::fmt::Debug for CachingProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingProvider")
            .field("provider", &self.inner.provider_name())
            .field("cache", &self.cache)
            .finish()
    }
}

impl CachingProvider {
    /// Wrap `inner`; answers are kept for `ttl` (zero: coalesce only, cache nothing).
    pub fn new(inner: Arc<dyn CloudProvider>, ttl: Duration) -> Self {
        CachingProvider {
            inner,
            cache: Arc::new(InstanceCache {
                ttl,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The cache, for invalidation.
    pub fn cache(&self) -> Arc<InstanceCache> {
        self.cache.clone()
    }
}

#[async_trait]
impl CloudProvider for CachingProvider {
    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }
    async fn initialize(&self, ctx: InitializeContext) -> Result<(), CloudError> {
        self.inner.initialize(ctx).await
    }
    fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>> {
        self.inner.load_balancer()
    }
    fn instances(&self) -> Option<Arc<dyn Instances>> {
        self.inner.instances()
    }
    fn instances_v2(&self) -> Option<Arc<dyn InstancesV2>> {
        let inner = self.inner.instances_v2()?;
        Some(Arc::new(CachedV2 {
            inner,
            cache: self.cache.clone(),
        }))
    }
    fn zones(&self) -> Option<Arc<dyn Zones>> {
        self.inner.zones()
    }
    fn clusters(&self) -> Option<Arc<dyn Clusters>> {
        self.inner.clusters()
    }
    fn routes(&self) -> Option<Arc<dyn Routes>> {
        self.inner.routes()
    }
    fn has_cluster_id(&self) -> bool {
        self.inner.has_cluster_id()
    }
}

struct CachedV2 {
    inner: Arc<dyn InstancesV2>,
    cache: Arc<InstanceCache>,
}

fn unexpected(question: Question) -> CloudError {
    CloudError::msg(format!(
        "instance cache returned a mismatched answer for {question:?}; this is a bug"
    ))
}

#[async_trait]
impl InstancesV2 for CachedV2 {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        let (inner, owned) = (self.inner.clone(), node.clone());
        let call = async move { inner.instance_exists(&owned).await.map(Answer::Bool) };
        match self.cache.ask(Question::Exists, node, call).await? {
            Answer::Bool(b) => Ok(b),
            Answer::Metadata(_) => Err(unexpected(Question::Exists)),
        }
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let (inner, owned) = (self.inner.clone(), node.clone());
        let call = async move { inner.instance_shutdown(&owned).await.map(Answer::Bool) };
        match self.cache.ask(Question::Shutdown, node, call).await? {
            Answer::Bool(b) => Ok(b),
            Answer::Metadata(_) => Err(unexpected(Question::Shutdown)),
        }
    }
    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let (inner, owned) = (self.inner.clone(), node.clone());
        let call = async move { inner.instance_metadata(&owned).await.map(Answer::Metadata) };
        match self.cache.ask(Question::Metadata, node, call).await? {
            Answer::Metadata(m) => Ok(m),
            Answer::Bool(_) => Err(unexpected(Question::Metadata)),
        }
    }
    fn supports_bulk(&self) -> bool {
        self.inner.supports_bulk()
    }
    async fn instance_metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<Option<InstanceMetadata>, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_metadata(node).await);
            }
            return Ok(out);
        }
        self.inner.instance_metadata_bulk(nodes).await
    }
    async fn instance_exists_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        if !self.inner.supports_bulk() {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                out.push(self.instance_exists(node).await);
            }
            return Ok(out);
        }
        self.inner.instance_exists_bulk(nodes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counting {
        calls: AtomicUsize,
        exists: Mutex<bool>,
        fail: Mutex<bool>,
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
            Ok(false)
        }
        async fn instance_metadata(
            &self,
            node: &Node,
        ) -> Result<Option<InstanceMetadata>, CloudError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(Some(InstanceMetadata::new(format!(
                "t://{}",
                node_name(node)
            ))))
        }
    }

    struct Cloud(Arc<Counting>);
    impl CloudProvider for Cloud {
        fn provider_name(&self) -> &str {
            "t"
        }
        fn instances_v2(&self) -> Option<Arc<dyn InstancesV2>> {
            Some(self.0.clone())
        }
    }

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n
    }

    fn setup(ttl: Duration) -> (Arc<Counting>, CachingProvider) {
        let counting = Arc::new(Counting {
            exists: Mutex::new(true),
            ..Default::default()
        });
        (
            counting.clone(),
            CachingProvider::new(Arc::new(Cloud(counting)), ttl),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_calls_for_one_node_coalesce() {
        let (counting, cloud) = setup(Duration::ZERO);
        let v2 = cloud.instances_v2().unwrap();
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
    async fn answers_are_cached_for_ttl_and_invalidated() {
        let (counting, cloud) = setup(Duration::from_secs(30));
        let cache = cloud.cache();
        let v2 = cloud.instances_v2().unwrap();
        let n = node("a");
        for _ in 0..5 {
            assert!(v2.instance_exists(&n).await.unwrap());
        }
        assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(31)).await;
        v2.instance_exists(&n).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
        cache.invalidate("a");
        v2.instance_exists(&n).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 3);
        v2.instance_metadata(&n).await.unwrap();
        v2.instance_metadata(&n).await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 4);
        assert_eq!(cache.len(), 2);
        cache.clear();
        assert!(cache.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn not_found_and_errors_are_never_cached_and_keep_their_kind() {
        let (counting, cloud) = setup(Duration::from_secs(30));
        let v2 = cloud.instances_v2().unwrap();
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
        let v2 = cloud.instances_v2().unwrap();
        v2.instance_exists(&node("a")).await.unwrap();
        v2.instance_exists(&node("b")).await.unwrap();
        assert_eq!(cache.len(), 2);
        let client = kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                    "offline",
                ))
            }),
            "default",
        );
        let informer: Informer<Node> =
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
        token.cancel();
        task.await.unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
    }
}
