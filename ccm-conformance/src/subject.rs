//! What a factory hands the suite: [`ConformanceSubject`] (the provider, its fixture, an optional
//! [`LoadBalancerInspector`] and [`ErrorInjector`], an optional teardown), which clause it is for
//! ([`ClauseInfo`]), and the factory traits ([`SubjectFactory`], [`IntoSubject`], [`per_clause`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_core::intercept::Operation;
use ccm_core::{BoxError, CloudProvider, ErrorKind};
use k8s_openapi::api::core::v1::Service;

use crate::clause::Clause;
use crate::fixture::ConformanceFixture;

/// Looks at a load balancer in the cloud, to check what the provider traits cannot report: its backends.
///
/// Optional: without one, the clauses about backends are skipped.
///
/// ```
/// use async_trait::async_trait;
/// use ccm_conformance::LoadBalancerInspector;
/// use ccm_core::BoxError;
/// use k8s_openapi::api::core::v1::Service;
///
/// struct AcmeInspector;
///
/// #[async_trait]
/// impl LoadBalancerInspector for AcmeInspector {
///     async fn backend_nodes(&self, _cluster: &str, _service: &Service) -> Result<Option<Vec<String>>, BoxError> {
///         // Ask the cloud for the load balancer's pool and map its members back to node names.
///         Ok(Some(vec!["worker-1".to_owned()]))
///     }
/// }
/// ```
#[async_trait]
pub trait LoadBalancerInspector: Send + Sync + 'static {
    /// The node names behind the Service's load balancer in any order, or `None` if it has no load balancer.
    async fn backend_nodes(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<Vec<String>>, BoxError>;
}

/// Makes the cloud under the provider fail, so the error-kind clauses (`errors/*-kind-survives-wrapping`) can
/// check that the provider hands the cloud's errors on with the right [`ErrorKind`].
///
/// The injector arms the cloud the provider talks to (a test double of the vendor's SDK or API, an in-memory
/// backend): the next call of `operation` answers with the error **the cloud** gives for `kind`, in the cloud's
/// own terms (its HTTP 404 for [`ErrorKind::InstanceNotFound`], its rate-limit answer for
/// [`ErrorKind::Throttled`], ...). The provider under test then has to translate or wrap that error so that
/// [`CloudError::kind`](ccm_core::CloudError::kind) is `kind`. Optional: without an injector the clauses that
/// need one are skipped (the V1 and V2 error clauses still check `InstanceNotFound` for an unknown instance).
///
/// ```
/// use std::sync::Mutex;
/// use async_trait::async_trait;
/// use ccm_conformance::ErrorInjector;
/// use ccm_core::intercept::Operation;
/// use ccm_core::{BoxError, ErrorKind};
///
/// /// The in-memory stand-in of the acme SDK answers the next call with this HTTP status.
/// #[derive(Default)]
/// struct AcmeApi { next_status: Mutex<Option<(Operation, u16)>> }
///
/// struct AcmeFaults(std::sync::Arc<AcmeApi>);
///
/// #[async_trait]
/// impl ErrorInjector for AcmeFaults {
///     async fn fail_next(&self, operation: Operation, kind: ErrorKind) -> Result<bool, BoxError> {
///         let status = match kind {
///             ErrorKind::InstanceNotFound => 404,
///             ErrorKind::Throttled => 429,
///             ErrorKind::NotImplemented => 501,
///             _ => return Ok(false), // the acme API has no such answer
///         };
///         *self.0.next_status.lock().unwrap() = Some((operation, status));
///         Ok(true)
///     }
/// }
/// ```
#[async_trait]
pub trait ErrorInjector: Send + Sync + 'static {
    /// Arm the cloud so that its next `operation` call fails with the cloud's error for `kind`. `Ok(false)`
    /// when the cloud has no such error for that operation (the suite then does not check that pair); an
    /// error when arming failed.
    async fn fail_next(&self, operation: Operation, kind: ErrorKind) -> Result<bool, BoxError>;
}

/// What the suite tells a factory about the clause a subject is for (see [`per_clause`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClauseInfo {
    /// The clause the subject will serve.
    pub clause: Clause,
}

impl ClauseInfo {
    /// The information for `clause`.
    pub fn new(clause: Clause) -> Self {
        ClauseInfo { clause }
    }
}

/// A teardown: releases what a factory set up for one clause.
pub type Teardown = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The provider under test with what the suite needs to know about it; what a factory returns.
///
/// ```
/// use std::sync::Arc;
/// use ccm_conformance::{ConformanceFixture, ConformanceSubject, InstanceRef};
/// use ccm_core::CloudProvider;
///
/// struct Acme;
/// impl CloudProvider for Acme {
///     fn provider_name(&self) -> &str { "acme" }
/// }
///
/// let subject = ConformanceSubject::new(
///     Arc::new(Acme),
///     ConformanceFixture::new().with_running(InstanceRef::new("worker-1")),
/// )
/// .with_teardown(|| async { /* delete the clause's temporary files, stop its threads */ });
/// assert!(subject.inspector.is_none());
/// assert!(subject.teardown.is_some());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ConformanceSubject {
    /// The provider.
    pub provider: Arc<dyn CloudProvider>,
    /// What the suite needs to know about its cloud.
    pub fixture: ConformanceFixture,
    /// How to see load-balancer backends, if the vendor provides it.
    pub inspector: Option<Arc<dyn LoadBalancerInspector>>,
    /// How to make the cloud fail, if the vendor provides it.
    pub injector: Option<Arc<dyn ErrorInjector>>,
    /// Run once after the clause (after the suite's own clean-up, also when the clause failed, panicked or
    /// timed out), within the fixture's call timeout.
    pub teardown: Option<Teardown>,
}

impl fmt::Debug for ConformanceSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConformanceSubject")
            .field("provider", &self.provider.provider_name())
            .field("fixture", &self.fixture)
            .field("inspector", &self.inspector.is_some())
            .field("injector", &self.injector.is_some())
            .field("teardown", &self.teardown.is_some())
            .finish()
    }
}

impl ConformanceSubject {
    /// A provider and its fixture, without inspector, injector or teardown.
    pub fn new(provider: Arc<dyn CloudProvider>, fixture: ConformanceFixture) -> Self {
        ConformanceSubject {
            provider,
            fixture,
            inspector: None,
            injector: None,
            teardown: None,
        }
    }

    /// Add a load-balancer inspector.
    pub fn with_inspector(mut self, inspector: impl LoadBalancerInspector) -> Self {
        self.inspector = Some(Arc::new(inspector));
        self
    }

    /// Add a load-balancer inspector held elsewhere too.
    pub fn with_shared_inspector(mut self, inspector: Arc<dyn LoadBalancerInspector>) -> Self {
        self.inspector = Some(inspector);
        self
    }

    /// Add an error injector (see [`ErrorInjector`]).
    pub fn with_error_injector(mut self, injector: impl ErrorInjector) -> Self {
        self.injector = Some(Arc::new(injector));
        self
    }

    /// Release the clause's resources afterwards: `teardown` runs once after the clause and the suite's
    /// clean-up, whatever the outcome. A teardown that panics or outlasts the fixture's call timeout fails the
    /// clause.
    pub fn with_teardown<F, Fut>(mut self, teardown: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.teardown = Some(Arc::new(move || Box::pin(teardown())));
        self
    }

    /// Replace the provider, keeping the rest (for example to wrap it in an
    /// [`InterceptedProvider`](ccm_core::intercept::InterceptedProvider)).
    pub fn map_provider(
        mut self,
        wrap: impl FnOnce(Arc<dyn CloudProvider>) -> Arc<dyn CloudProvider>,
    ) -> Self {
        self.provider = wrap(self.provider);
        self
    }
}

/// What a factory may return: a [`ConformanceSubject`], or a `Result` of one (an error fails the clause with
/// the message).
pub trait IntoSubject {
    /// The subject, or why it could not be created.
    fn into_subject(self) -> Result<ConformanceSubject, BoxError>;
}

impl IntoSubject for ConformanceSubject {
    fn into_subject(self) -> Result<ConformanceSubject, BoxError> {
        Ok(self)
    }
}

impl<E: Into<BoxError>> IntoSubject for Result<ConformanceSubject, E> {
    fn into_subject(self) -> Result<ConformanceSubject, BoxError> {
        self.map_err(Into::into)
    }
}

/// A future that creates a subject.
pub type SubjectFuture = Pin<Box<dyn Future<Output = Result<ConformanceSubject, BoxError>>>>;

/// Creates a fresh provider under test for each clause: any `Fn() -> impl Future<Output = S>` where `S` is a
/// [`ConformanceSubject`] or a `Result` of one, such as an `async fn`; or, to be told which clause the subject
/// serves, a `Fn(ClauseInfo) -> impl Future<Output = S>` wrapped in [`per_clause`].
///
/// ```
/// # use std::sync::Arc;
/// use ccm_conformance::{ConformanceFixture, ConformanceSubject, SubjectFactory};
/// # struct Acme;
/// # impl ccm_core::CloudProvider for Acme { fn provider_name(&self) -> &str { "acme" } }
///
/// async fn acme() -> ConformanceSubject {
///     ConformanceSubject::new(Arc::new(Acme), ConformanceFixture::new())
/// }
/// fn takes_factory(_: impl SubjectFactory) {}
/// takes_factory(acme);
/// takes_factory(|| async { Ok::<_, std::io::Error>(ConformanceSubject::new(Arc::new(Acme), ConformanceFixture::new())) });
/// ```
pub trait SubjectFactory {
    /// Start creating a subject for the clause `info` describes.
    fn create(&self, info: &ClauseInfo) -> SubjectFuture;
}

impl<F, Fut, S> SubjectFactory for F
where
    F: Fn() -> Fut,
    Fut: Future<Output = S> + 'static,
    S: IntoSubject,
{
    fn create(&self, _info: &ClauseInfo) -> SubjectFuture {
        let future = self();
        Box::pin(async move { future.await.into_subject() })
    }
}

/// A factory that is told which clause it serves: see [`per_clause`].
#[derive(Debug, Clone, Copy)]
pub struct PerClause<F>(F);

/// Turn `factory`, a `Fn(ClauseInfo) -> impl Future<Output = S>`, into a [`SubjectFactory`] that is told which
/// clause each subject serves (to name per-clause resources, or to set up only what a clause needs).
///
/// ```no_run
/// use std::sync::Arc;
/// use ccm_conformance::{ClauseInfo, ConformanceFixture, ConformanceSubject, per_clause};
/// # struct Acme;
/// # impl ccm_core::CloudProvider for Acme { fn provider_name(&self) -> &str { "acme" } }
///
/// async fn acme(info: ClauseInfo) -> ConformanceSubject {
///     // One scratch directory per clause, removed when the clause is done.
///     let dir = std::env::temp_dir().join(format!("acme-{}", info.clause.test_name()));
///     std::fs::create_dir_all(&dir).expect("scratch directory");
///     ConformanceSubject::new(Arc::new(Acme), ConformanceFixture::new()).with_teardown(move || {
///         let dir = dir.clone();
///         async move {
///             let _ = std::fs::remove_dir_all(dir);
///         }
///     })
/// }
///
/// ccm_conformance::provider_conformance_tests!(per_clause(acme));
/// ```
pub fn per_clause<F, Fut, S>(factory: F) -> PerClause<F>
where
    F: Fn(ClauseInfo) -> Fut,
    Fut: Future<Output = S> + 'static,
    S: IntoSubject,
{
    PerClause(factory)
}

impl<F, Fut, S> SubjectFactory for PerClause<F>
where
    F: Fn(ClauseInfo) -> Fut,
    Fut: Future<Output = S> + 'static,
    S: IntoSubject,
{
    fn create(&self, info: &ClauseInfo) -> SubjectFuture {
        let future = (self.0)(*info);
        Box::pin(async move { future.await.into_subject() })
    }
}
