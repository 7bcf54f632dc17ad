//! What a clause runs with: the provider, the fixture, helpers that call the provider with the fixture's time
//! limits, made-up Services and routes (cleaned up afterwards), and the `Check` result type.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ccm_core::helpers::service_key;
use ccm_core::{
    CloudError, CloudProvider, ErrorKind, Instances, InstancesV2, LoadBalancer, Route, Routes,
    Zones,
};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::time::Instant;

use crate::fixture::{ConformanceFixture, InstanceRef};
use crate::report::format_elapsed;
use crate::subject::{ErrorInjector, LoadBalancerInspector};

/// Why a clause stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The provider broke the rule (or a precondition of checking it); what was observed.
    Fail(String),
    /// The clause cannot be checked; why.
    Skip(String),
    /// The clause does not apply, as the fixture declares; the declaration.
    Declared(String),
}

/// The result of a step of a clause.
pub(crate) type Check<T = ()> = Result<T, Stop>;

/// Stop the clause as failed.
pub(crate) fn fail<T>(message: impl Into<String>) -> Check<T> {
    Err(Stop::Fail(message.into()))
}

/// Stop the clause as skipped.
pub(crate) fn skip<T>(reason: impl Into<String>) -> Check<T> {
    Err(Stop::Skip(reason.into()))
}

/// Stop the clause as not applicable, because the fixture says so.
pub(crate) fn declared<T>(reason: impl Into<String>) -> Check<T> {
    Err(Stop::Declared(reason.into()))
}

/// An error as `"<message>" (kind <kind>)`.
pub(crate) fn describe_error(err: &CloudError) -> String {
    format!("{:?} (kind {})", err.to_string(), err.kind().as_str())
}

/// Node names, for messages.
pub(crate) fn node_names(nodes: &[Node]) -> String {
    let names: Vec<&str> = nodes.iter().map(ccm_core::helpers::node_name).collect();
    format!("[{}]", names.join(", "))
}

/// Everything a clause runs with.
pub(crate) struct Ctx {
    pub(crate) provider: Arc<dyn CloudProvider>,
    pub(crate) fixture: ConformanceFixture,
    pub(crate) inspector: Option<Arc<dyn LoadBalancerInspector>>,
    pub(crate) injector: Option<Arc<dyn ErrorInjector>>,
    poll_interval: Duration,
    run_id: String,
    counter: AtomicUsize,
    services: Mutex<Vec<Service>>,
    routes: Mutex<Vec<(String, String)>>,
}

impl Ctx {
    pub(crate) fn new(
        provider: Arc<dyn CloudProvider>,
        fixture: ConformanceFixture,
        inspector: Option<Arc<dyn LoadBalancerInspector>>,
        injector: Option<Arc<dyn ErrorInjector>>,
        poll_interval: Duration,
    ) -> Self {
        let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        Ctx {
            provider,
            fixture,
            inspector,
            injector,
            poll_interval,
            run_id,
            counter: AtomicUsize::new(0),
            services: Mutex::new(Vec::new()),
            routes: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn cluster(&self) -> &str {
        &self.fixture.cluster_name
    }

    // ----- capabilities -----

    pub(crate) fn lb(&self) -> Check<Arc<dyn LoadBalancer>> {
        match Arc::clone(&self.provider).load_balancer() {
            Some(lb) => Ok(lb),
            None => fail(
                "CloudProvider::load_balancer() returned None during the clause, after Some before it",
            ),
        }
    }

    pub(crate) fn v2(&self) -> Check<Arc<dyn InstancesV2>> {
        match Arc::clone(&self.provider).instances_v2() {
            Some(v2) => Ok(v2),
            None => fail(
                "CloudProvider::instances_v2() returned None during the clause, after Some before it",
            ),
        }
    }

    pub(crate) fn v1(&self) -> Check<Arc<dyn Instances>> {
        match Arc::clone(&self.provider).instances() {
            Some(v1) => Ok(v1),
            None => fail(
                "CloudProvider::instances() returned None during the clause, after Some before it",
            ),
        }
    }

    pub(crate) fn zones(&self) -> Check<Arc<dyn Zones>> {
        match Arc::clone(&self.provider).zones() {
            Some(z) => Ok(z),
            None => {
                fail("CloudProvider::zones() returned None during the clause, after Some before it")
            }
        }
    }

    pub(crate) fn routes(&self) -> Check<Arc<dyn Routes>> {
        match Arc::clone(&self.provider).routes() {
            Some(r) => Ok(r),
            None => fail(
                "CloudProvider::routes() returned None during the clause, after Some before it",
            ),
        }
    }

    // ----- fixture -----

    pub(crate) fn running(&self) -> Check<InstanceRef> {
        match &self.fixture.running {
            Some(i) => Ok(i.clone()),
            None => {
                skip("the fixture names no running instance (set ConformanceFixture::with_running)")
            }
        }
    }

    pub(crate) fn stopped(&self) -> Check<InstanceRef> {
        match &self.fixture.stopped {
            Some(i) => Ok(i.clone()),
            None => {
                skip("the fixture names no stopped instance (set ConformanceFixture::with_stopped)")
            }
        }
    }

    /// The fixture's unknown instance, or a made-up one with a providerID under this provider's name.
    pub(crate) fn unknown(&self) -> InstanceRef {
        match &self.fixture.unknown {
            Some(i) => i.clone(),
            None => {
                let name = format!("ccm-conformance-absent-{}", self.run_id);
                let provider_id = format!("{}://{name}", self.provider.provider_name());
                InstanceRef::new(name).with_provider_id(provider_id)
            }
        }
    }

    pub(crate) fn route_target(&self) -> Check<InstanceRef> {
        match self
            .fixture
            .route_target
            .as_ref()
            .or(self.fixture.running.as_ref())
        {
            Some(i) => Ok(i.clone()),
            None => skip(
                "the fixture names no route target or running instance (set ConformanceFixture::with_route_target)",
            ),
        }
    }

    pub(crate) fn backend_nodes(&self) -> Vec<Node> {
        self.fixture
            .effective_backends()
            .iter()
            .map(InstanceRef::node)
            .collect()
    }

    /// A unique suffix for this clause run.
    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    // ----- calls -----

    /// Await a provider call, failing the clause if it takes longer than the fixture's call timeout.
    pub(crate) async fn call<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Check<Result<T, CloudError>> {
        with_call_timeout(self.fixture.call_timeout, what, call).await
    }

    /// Await a provider call that must succeed.
    pub(crate) async fn ok<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Check<T> {
        match self.call(what, call).await? {
            Ok(value) => Ok(value),
            Err(err) => fail(format!("{what} failed: {}", describe_error(&err))),
        }
    }

    /// Ensure a load balancer, waiting out retry-after answers for up to the fixture's ready timeout.
    pub(crate) async fn ensure(
        &self,
        service: &Service,
        nodes: &[Node],
    ) -> Check<LoadBalancerStatus> {
        let lb = self.lb()?;
        ensure_until_ready(
            lb.as_ref(),
            self.cluster(),
            service,
            nodes,
            self.fixture.call_timeout,
            self.fixture.ready_timeout,
        )
        .await
        .or_else(fail)
    }

    /// `get_load_balancer`, which must succeed.
    pub(crate) async fn get(&self, service: &Service) -> Check<Option<LoadBalancerStatus>> {
        let lb = self.lb()?;
        let what = format!("get_load_balancer for service {}", service_key(service));
        self.ok(&what, lb.get_load_balancer(self.cluster(), service))
            .await
    }

    /// `ensure_load_balancer_deleted`, which must succeed.
    pub(crate) async fn delete(&self, service: &Service) -> Check {
        let lb = self.lb()?;
        let what = format!(
            "ensure_load_balancer_deleted for service {}",
            service_key(service)
        );
        self.ok(
            &what,
            lb.ensure_load_balancer_deleted(self.cluster(), service),
        )
        .await
    }

    /// Run `check` until it passes, for up to the fixture's consistency timeout (polling at the fixture's
    /// poll interval, one second by default); a skip or the last failure ends it.
    pub(crate) async fn eventually<T, F, Fut>(&self, mut check: F) -> Check<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Check<T>>,
    {
        let limit = self.fixture.consistency_timeout;
        let deadline = Instant::now() + limit;
        loop {
            match check().await {
                Err(Stop::Fail(message)) => {
                    let now = Instant::now();
                    if now >= deadline {
                        if limit.is_zero() {
                            return fail(message);
                        }
                        return fail(format!(
                            "{message} (still so after waiting {} for the change to become visible)",
                            format_elapsed(limit)
                        ));
                    }
                    tokio::time::sleep((deadline - now).min(self.poll_interval)).await;
                }
                other => return other,
            }
        }
    }

    // ----- made-up objects -----

    /// A new `type: LoadBalancer` Service with a unique name and UID, deleted from the cloud after the clause.
    pub(crate) fn new_service(&self, tag: &str) -> Service {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut name = format!(
            "{}-{tag}-{}-{n}",
            self.fixture.service_name_prefix, self.run_id
        );
        name.truncate(63);
        let name = name.trim_end_matches('-').to_owned();
        let node_port = 30000 + i32::try_from(n % 2000).unwrap_or(0);
        let mut service = Service {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(self.fixture.namespace.clone()),
                uid: Some(uuid::Uuid::new_v4().to_string()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".to_owned()),
                external_traffic_policy: Some("Cluster".to_owned()),
                ip_families: Some(vec!["IPv4".to_owned()]),
                session_affinity: Some("None".to_owned()),
                ports: Some(vec![ServicePort {
                    name: Some("http".to_owned()),
                    protocol: Some("TCP".to_owned()),
                    port: 80,
                    target_port: Some(IntOrString::Int(8080)),
                    node_port: Some(node_port),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        };
        if let Some(customize) = &self.fixture.customize_service {
            customize(&mut service);
        }
        self.services
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(service.clone());
        service
    }

    /// A route to `target` for `cidr`, as the route controller builds it; remembered for clean-up.
    pub(crate) fn new_route(&self, cluster: &str, target: &InstanceRef, cidr: &str) -> Route {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((cluster.to_owned(), cidr.to_owned()));
        let mut route = Route::new(target.node_name.clone(), cidr);
        route.target_node_addresses = target.addresses.clone();
        route
    }

    /// Delete every load balancer and route the clause made (best effort, logged).
    pub(crate) async fn cleanup(&self) {
        let services =
            std::mem::take(&mut *self.services.lock().unwrap_or_else(PoisonError::into_inner));
        if let (false, Some(lb)) = (
            services.is_empty(),
            Arc::clone(&self.provider).load_balancer(),
        ) {
            let deletes = services.iter().map(|service| {
                let lb = lb.clone();
                async move {
                    let what = format!("cleaning up the load balancer of {}", service_key(service));
                    match with_call_timeout(
                        self.fixture.call_timeout,
                        &what,
                        lb.ensure_load_balancer_deleted(self.cluster(), service),
                    )
                    .await
                    {
                        Ok(Ok(())) => {}
                        Ok(Err(err)) => tracing::warn!(
                            service = %service_key(service),
                            error = %err,
                            "conformance clean-up: deleting a load balancer failed"
                        ),
                        Err(stop) => tracing::warn!(
                            service = %service_key(service),
                            ?stop,
                            "conformance clean-up: deleting a load balancer timed out"
                        ),
                    }
                }
            });
            futures::future::join_all(deletes).await;
        }
        let routes =
            std::mem::take(&mut *self.routes.lock().unwrap_or_else(PoisonError::into_inner));
        if let (false, Some(api)) = (routes.is_empty(), Arc::clone(&self.provider).routes()) {
            let mut clusters: Vec<&str> = routes.iter().map(|(c, _)| c.as_str()).collect();
            clusters.sort_unstable();
            clusters.dedup();
            for cluster in clusters {
                let listed = match with_call_timeout(
                    self.fixture.call_timeout,
                    "cleaning up routes",
                    api.list_routes(cluster),
                )
                .await
                {
                    Ok(Ok(listed)) => listed,
                    other => {
                        tracing::warn!(
                            cluster,
                            ?other,
                            "conformance clean-up: listing routes failed"
                        );
                        continue;
                    }
                };
                for route in listed.iter().filter(|r| {
                    routes
                        .iter()
                        .any(|(c, cidr)| c == cluster && *cidr == r.destination_cidr)
                }) {
                    let outcome = with_call_timeout(
                        self.fixture.call_timeout,
                        "cleaning up a route",
                        api.delete_route(cluster, route),
                    )
                    .await;
                    let problem = match outcome {
                        Ok(Ok(())) => continue,
                        Ok(Err(err)) => err.to_string(),
                        Err(
                            Stop::Fail(message) | Stop::Skip(message) | Stop::Declared(message),
                        ) => message,
                    };
                    tracing::warn!(cluster, cidr = %route.destination_cidr, problem, "conformance clean-up: deleting a route failed");
                }
            }
        }
    }
}

/// Await a provider call with a time limit.
pub(crate) async fn with_call_timeout<T>(
    limit: Duration,
    what: &str,
    call: impl Future<Output = Result<T, CloudError>>,
) -> Check<Result<T, CloudError>> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => Ok(result),
        Err(_) => fail(format!(
            "{what} did not answer within {} (the fixture's call timeout)",
            format_elapsed(limit)
        )),
    }
}

/// Ensure a load balancer, retrying retry-after answers until `ready_timeout`; the error is the message.
pub(crate) async fn ensure_until_ready(
    lb: &dyn LoadBalancer,
    cluster: &str,
    service: &Service,
    nodes: &[Node],
    call_timeout: Duration,
    ready_timeout: Duration,
) -> Result<LoadBalancerStatus, String> {
    let key = service_key(service);
    let what = format!(
        "ensure_load_balancer for service {key} with nodes {}",
        node_names(nodes)
    );
    let deadline = Instant::now() + ready_timeout;
    loop {
        let result = match with_call_timeout(
            call_timeout,
            &what,
            lb.ensure_load_balancer(cluster, service, nodes),
        )
        .await
        {
            Ok(result) => result,
            Err(Stop::Fail(message) | Stop::Skip(message) | Stop::Declared(message)) => {
                return Err(message);
            }
        };
        match result {
            Ok(status) => return Ok(status),
            Err(err) if err.kind() == ErrorKind::Retry => {
                let after = err
                    .retry_after()
                    .unwrap_or(Duration::from_secs(1))
                    .max(Duration::from_millis(100));
                if Instant::now() + after > deadline {
                    return Err(format!(
                        "{what} still answered retry-after ({}) after {} (the fixture's ready timeout); the load balancer never became ready",
                        describe_error(&err),
                        format_elapsed(ready_timeout)
                    ));
                }
                tracing::debug!(service = %key, ?after, "load balancer not ready yet; retrying");
                tokio::time::sleep(after).await;
            }
            Err(err) if err.kind() == ErrorKind::ImplementedElsewhere => {
                return Err(format!(
                    "{what} answered ImplementedElsewhere; the suite's Services must be served by this provider (adapt them with ConformanceFixture::with_service_customizer)"
                ));
            }
            Err(err) => return Err(format!("{what} failed: {}", describe_error(&err))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    use async_trait::async_trait;

    /// Answers retry-after `retries` times, then a status.
    struct SlowLb {
        retries: AtomicU32,
        after: Duration,
    }

    #[async_trait]
    impl LoadBalancer for SlowLb {
        async fn get_load_balancer(
            &self,
            _: &str,
            _: &Service,
        ) -> Result<Option<LoadBalancerStatus>, CloudError> {
            Ok(None)
        }
        async fn ensure_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[Node],
        ) -> Result<LoadBalancerStatus, CloudError> {
            if self
                .retries
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(CloudError::retry("building", self.after).context("acme"));
            }
            Ok(LoadBalancerStatus::default())
        }
        async fn update_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[Node],
        ) -> Result<(), CloudError> {
            Ok(())
        }
        async fn ensure_load_balancer_deleted(
            &self,
            _: &str,
            _: &Service,
        ) -> Result<(), CloudError> {
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ensure_waits_out_retry_after_within_the_ready_timeout() {
        let lb = SlowLb {
            retries: AtomicU32::new(3),
            after: Duration::from_secs(20),
        };
        let start = Instant::now();
        let status = ensure_until_ready(
            &lb,
            "kubernetes",
            &Service::default(),
            &[],
            Duration::from_secs(5),
            Duration::from_secs(120),
        )
        .await;
        assert!(status.is_ok(), "{status:?}");
        assert_eq!(start.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn ensure_gives_up_after_the_ready_timeout() {
        let lb = SlowLb {
            retries: AtomicU32::new(100),
            after: Duration::from_secs(20),
        };
        let err = ensure_until_ready(
            &lb,
            "kubernetes",
            &Service::default(),
            &[],
            Duration::from_secs(5),
            Duration::from_secs(50),
        )
        .await
        .unwrap_err();
        assert!(err.contains("never became ready"), "{err}");
        assert!(err.contains("kind retry"), "{err}");
    }

    struct HangingLb;

    #[async_trait]
    impl LoadBalancer for HangingLb {
        async fn get_load_balancer(
            &self,
            _: &str,
            _: &Service,
        ) -> Result<Option<LoadBalancerStatus>, CloudError> {
            Ok(None)
        }
        async fn ensure_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[Node],
        ) -> Result<LoadBalancerStatus, CloudError> {
            futures::future::pending().await
        }
        async fn update_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[Node],
        ) -> Result<(), CloudError> {
            Ok(())
        }
        async fn ensure_load_balancer_deleted(
            &self,
            _: &str,
            _: &Service,
        ) -> Result<(), CloudError> {
            Err(CloudError::ImplementedElsewhere)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_call_fails_after_the_call_timeout() {
        let err = ensure_until_ready(
            &HangingLb,
            "kubernetes",
            &Service::default(),
            &[],
            Duration::from_secs(5),
            Duration::from_secs(50),
        )
        .await
        .unwrap_err();
        assert!(err.contains("did not answer within 5.0s"), "{err}");
    }

    #[test]
    fn errors_are_described_with_their_kind() {
        let err = CloudError::InstanceNotFound.context("describing i-1");
        assert_eq!(
            describe_error(&err),
            "\"describing i-1: instance not found\" (kind instance_not_found)"
        );
    }
}
