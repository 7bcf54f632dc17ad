//! Deliberately broken providers (the fake with one bug each) fail exactly the clauses their bug breaks, with
//! a message that says what was observed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ccm_conformance::{Clause, ConformanceSubject, Outcome, check_subject, fake, run_all};
use ccm_core::helpers::{node_name, service_key};
use ccm_core::{
    CloudError, CloudProvider, Clusters, InstanceLookup, Instances, InstancesV2, LoadBalancer,
    Route, Routes, Zone, Zones,
};
use ccm_provider_fake::FakeCloud;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};
use tokio::time::Instant;

/// One bug each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bug {
    /// `ensure_load_balancer` returns an empty status.
    EmptyStatus,
    /// Every ensure rebuilds the load balancer, which gets a new address.
    EnsureNotIdempotent,
    /// Deleting an absent load balancer fails.
    DeleteAbsentFails,
    /// Deleting an absent load balancer answers ImplementedElsewhere ("not mine").
    DeleteAbsentImplementedElsewhere,
    /// `update_load_balancer` succeeds without touching the backends.
    UpdateIgnoresHosts,
    /// Stopped instances are reported as gone.
    StoppedIsNotFound,
    /// An unknown instance makes `instance_exists` fail instead of answering false.
    UnknownInstanceErrors,
    /// Metadata providerIDs lack the `fake://` prefix.
    ProviderIdWithoutPrefix,
    /// V1 `instance_id` of an unknown node fails with a plain message instead of InstanceNotFound.
    UntypedNotFound,
    /// `list_routes` lists the routes of every cluster.
    RoutesOfAllClusters,
    /// `delete_route` of a missing route fails.
    RouteDeleteMissingFails,
    /// `get_load_balancer` panics.
    GetPanics,
    /// `list_routes` never answers.
    ListRoutesHangs,
    /// A deleted route is still listed for this long.
    DeletedRoutesLinger(Duration),
}

/// The fake cloud with a bug.
#[derive(Clone)]
struct Mutant {
    cloud: FakeCloud,
    bug: Bug,
    /// Deleted routes still listed, and until when.
    lingering: Arc<Mutex<Vec<(Route, Instant)>>>,
}

impl Mutant {
    fn subject(bug: Bug) -> ConformanceSubject {
        let cloud = fake::cloud();
        let mut subject = fake::subject_for(cloud.clone());
        subject.provider = Arc::new(Mutant {
            cloud,
            bug,
            lingering: Arc::default(),
        });
        subject
    }

    fn is(&self, bug: Bug) -> bool {
        self.bug == bug
    }

    /// Whether the node is one of the fake's stopped instances.
    fn stopped(&self, node: &str) -> bool {
        self.cloud.instance(node).is_some_and(|i| i.shutdown)
    }

    fn stopped_provider_id(&self, provider_id: &str) -> bool {
        self.cloud
            .all_instances()
            .iter()
            .any(|i| i.shutdown && i.provider_id.as_deref() == Some(provider_id))
    }

    fn known(&self, node: &Node) -> bool {
        self.cloud.instance(node_name(node)).is_some()
    }
}

#[async_trait]
impl CloudProvider for Mutant {
    fn provider_name(&self) -> &str {
        CloudProvider::provider_name(&self.cloud)
    }
    fn load_balancer(self: Arc<Self>) -> Option<Arc<dyn LoadBalancer>> {
        Some(self)
    }
    fn instances(self: Arc<Self>) -> Option<Arc<dyn Instances>> {
        Some(self)
    }
    fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
        Some(self)
    }
    fn zones(self: Arc<Self>) -> Option<Arc<dyn Zones>> {
        Some(self)
    }
    fn clusters(self: Arc<Self>) -> Option<Arc<dyn Clusters>> {
        Some(self)
    }
    fn routes(self: Arc<Self>) -> Option<Arc<dyn Routes>> {
        Some(self)
    }
}

#[async_trait]
impl LoadBalancer for Mutant {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        if self.is(Bug::GetPanics) {
            panic!("acme sdk: unexpected nil in describe-load-balancers");
        }
        self.cloud.get_load_balancer(cluster_name, service).await
    }
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        self.cloud.get_load_balancer_name(cluster_name, service)
    }
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        if self.is(Bug::EnsureNotIdempotent) {
            self.cloud.remove_load_balancer(&service_key(service));
        }
        let status = self
            .cloud
            .ensure_load_balancer(cluster_name, service, nodes)
            .await?;
        if self.is(Bug::EmptyStatus) {
            return Ok(LoadBalancerStatus::default());
        }
        Ok(status)
    }
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        if self.is(Bug::UpdateIgnoresHosts) {
            return Ok(());
        }
        self.cloud
            .update_load_balancer(cluster_name, service, nodes)
            .await
    }
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let absent = self.cloud.load_balancer(&service_key(service)).is_none();
        if absent && self.is(Bug::DeleteAbsentFails) {
            return Err(CloudError::message("load balancer not found"));
        }
        if absent && self.is(Bug::DeleteAbsentImplementedElsewhere) {
            return Err(CloudError::ImplementedElsewhere);
        }
        self.cloud
            .ensure_load_balancer_deleted(cluster_name, service)
            .await
    }
}

#[async_trait]
impl InstancesV2 for Mutant {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        if self.is(Bug::StoppedIsNotFound) && self.stopped(node_name(node)) {
            return Ok(false);
        }
        if self.is(Bug::UnknownInstanceErrors) && !self.known(node) {
            return Err(CloudError::message("describe instances: no such instance"));
        }
        InstancesV2::instance_exists(&self.cloud, node).await
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        if self.is(Bug::StoppedIsNotFound) && self.stopped(node_name(node)) {
            return Err(CloudError::InstanceNotFound);
        }
        InstancesV2::instance_shutdown(&self.cloud, node).await
    }
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        if self.is(Bug::StoppedIsNotFound) && self.stopped(node_name(node)) {
            return Err(CloudError::InstanceNotFound);
        }
        let meta = InstancesV2::instance_metadata(&self.cloud, node).await?;
        if self.is(Bug::ProviderIdWithoutPrefix)
            && let InstanceLookup::Found(mut m) = meta
        {
            m.provider_id = node_name(node).to_owned();
            return Ok(m.into());
        }
        Ok(meta)
    }
}

#[async_trait]
impl Instances for Mutant {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.cloud.node_addresses(node_name).await
    }
    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        self.cloud.node_addresses_by_provider_id(provider_id).await
    }
    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        if self.is(Bug::StoppedIsNotFound) && self.stopped(node_name) {
            return Err(CloudError::InstanceNotFound);
        }
        match self.cloud.instance_id(node_name).await {
            Err(err) if self.is(Bug::UntypedNotFound) && err.is_instance_not_found() => Err(
                CloudError::message(format!("instance {node_name} not found")),
            ),
            other => other,
        }
    }
    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.cloud.instance_type(node_name).await
    }
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        self.cloud.instance_type_by_provider_id(provider_id).await
    }
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        if self.is(Bug::StoppedIsNotFound) && self.stopped_provider_id(provider_id) {
            return Ok(false);
        }
        self.cloud.instance_exists_by_provider_id(provider_id).await
    }
    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<bool, CloudError> {
        if self.is(Bug::StoppedIsNotFound) && self.stopped_provider_id(provider_id) {
            return Err(CloudError::InstanceNotFound);
        }
        self.cloud
            .instance_shutdown_by_provider_id(provider_id)
            .await
    }
}

#[async_trait]
impl Zones for Mutant {
    async fn get_zone(&self) -> Result<Zone, CloudError> {
        self.cloud.get_zone().await
    }
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        self.cloud.get_zone_by_provider_id(provider_id).await
    }
    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        self.cloud.get_zone_by_node_name(node_name).await
    }
}

#[async_trait]
impl Clusters for Mutant {
    async fn list_clusters(&self) -> Result<Vec<String>, CloudError> {
        self.cloud.list_clusters().await
    }
    async fn master(&self, cluster_name: &str) -> Result<String, CloudError> {
        self.cloud.master(cluster_name).await
    }
}

#[async_trait]
impl Routes for Mutant {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        if self.is(Bug::ListRoutesHangs) {
            futures::future::pending::<()>().await;
        }
        if self.is(Bug::RoutesOfAllClusters) {
            return Ok(FakeCloud::routes(&self.cloud));
        }
        let mut routes = self.cloud.list_routes(cluster_name).await?;
        let now = Instant::now();
        let mut lingering = self
            .lingering
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        lingering.retain(|(_, until)| *until > now);
        routes.extend(lingering.iter().map(|(route, _)| route.clone()));
        Ok(routes)
    }
    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        self.cloud
            .create_route(cluster_name, name_hint, route)
            .await
    }
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        let listed = self.cloud.routes_in(cluster_name);
        let missing = !listed
            .iter()
            .any(|r| r.destination_cidr == route.destination_cidr);
        if missing && self.is(Bug::RouteDeleteMissingFails) {
            return Err(CloudError::message(format!(
                "route to {} not found",
                route.destination_cidr
            )));
        }
        self.cloud.delete_route(cluster_name, route).await?;
        if let Bug::DeletedRoutesLinger(visible_for) = self.bug {
            self.lingering
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((route.clone(), Instant::now() + visible_for));
        }
        Ok(())
    }
}

/// Run every clause against the mutant and check that exactly `expected` fail, each with a message
/// containing its needle.
async fn assert_breaks(bug: Bug, expected: &[(Clause, &str)]) {
    let report = run_all(move || async move { Mutant::subject(bug) }).await;
    let failed: BTreeSet<Clause> = report.failed().into_iter().collect();
    let want: BTreeSet<Clause> = expected.iter().map(|(c, _)| *c).collect();
    assert_eq!(failed, want, "{bug:?} failed the wrong clauses:\n{report}");
    assert!(report.skipped().is_empty(), "{bug:?}:\n{report}");
    for (clause, needle) in expected {
        let result = report.result(*clause).expect("every clause ran");
        let shown = result.to_string();
        assert!(
            shown.starts_with(&format!("FAILED {}: ", clause.id())),
            "{shown}"
        );
        assert!(
            shown.contains(needle),
            "{bug:?}: {shown:?} lacks {needle:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_status_fails_only_ensure_returns_status() {
    assert_breaks(
        Bug::EmptyStatus,
        &[(
            Clause::LoadBalancerEnsureReturnsStatus,
            "returned no ingress: the status has no ingress entry",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_rebuilt_on_every_ensure_is_not_idempotent() {
    assert_breaks(
        Bug::EnsureNotIdempotent,
        &[(
            Clause::LoadBalancerEnsureIsIdempotent,
            "with the same nodes returned ingress [ip \"203.0.113.1\"] then ingress [ip \"203.0.113.2\"]",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_to_delete_an_absent_load_balancer() {
    assert_breaks(
        Bug::DeleteAbsentFails,
        &[
            (
                Clause::LoadBalancerDeleteAbsentSucceeds,
                "which never had a load balancer, failed: \"load balancer not found\" (kind other)",
            ),
            (
                Clause::LoadBalancerDeleteIsIdempotent,
                "the second ensure_load_balancer_deleted",
            ),
            // The bug answers before asking the cloud, so the cloud's throttling error is lost too.
            (
                Clause::ErrorsLoadBalancerKindSurvivesWrapping,
                "load balancer not found\" (kind other): CloudError::kind() must be throttled",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implemented_elsewhere_from_delete() {
    assert_breaks(
        Bug::DeleteAbsentImplementedElsewhere,
        &[
            (
                Clause::LoadBalancerDeleteAbsentSucceeds,
                "(kind implemented_elsewhere)",
            ),
            (
                Clause::LoadBalancerDeleteIsIdempotent,
                "(kind implemented_elsewhere)",
            ),
            (
                Clause::LoadBalancerDeleteNeverImplementedElsewhere,
                "(an absent load balancer) returned ImplementedElsewhere",
            ),
            (
                Clause::ErrorsLoadBalancerKindSurvivesWrapping,
                "(kind implemented_elsewhere): CloudError::kind() must be throttled",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_that_ignores_the_hosts() {
    assert_breaks(
        Bug::UpdateIgnoresHosts,
        &[
            (
                Clause::LoadBalancerUpdateReplacesHosts,
                "has backends [conformance-backend-1, conformance-running]; expected exactly [conformance-backend-1, conformance-backend-2]",
            ),
            // An update that never reaches the cloud also swallows the cloud's errors.
            (
                Clause::ErrorsLoadBalancerKindSurvivesWrapping,
                "succeeded although the cloud was armed to fail it with its throttled error",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_instances_reported_as_not_found() {
    assert_breaks(
        Bug::StoppedIsNotFound,
        &[
            (
                Clause::InstancesV2StoppedInstanceExists,
                "instance_exists of the stopped node conformance-stopped (providerID fake://conformance-stopped) is false",
            ),
            (
                Clause::InstancesV2ShutdownIsReported,
                "instance_shutdown of the stopped node conformance-stopped (providerID fake://conformance-stopped) failed: \"instance not found\"",
            ),
            (
                Clause::InstancesStoppedInstanceExists,
                "instance_id of the stopped node conformance-stopped failed with InstanceNotFound",
            ),
            (
                Clause::InstancesShutdownIsReported,
                "(kind instance_not_found)",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_for_an_unknown_instance() {
    assert_breaks(
        Bug::UnknownInstanceErrors,
        &[(
            Clause::InstancesV2UnknownInstanceDoesNotExist,
            "must be reported as Ok(false), not as an error",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_id_without_the_prefix() {
    assert_breaks(
        Bug::ProviderIdWithoutPrefix,
        &[
            (
                Clause::InstancesV2MetadataProviderId,
                "reports providerID \"conformance-running\", which is not of the form fake://<id>",
            ),
            (
                Clause::InstancesV2MetadataByNodeName,
                "instance_metadata of node conformance-running (no spec.providerID) reports providerID \"conformance-running\"",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_found_error_without_its_kind() {
    assert_breaks(
        Bug::UntypedNotFound,
        &[
            (
                Clause::InstancesUnknownInstanceNotFound,
                "(kind other), not InstanceNotFound: the lifecycle controller acts on the kind",
            ),
            (
                Clause::ErrorsInstancesKindSurvivesWrapping,
                "(kind other): CloudError::kind() must be instance_not_found",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_listed_for_every_cluster() {
    assert_breaks(
        Bug::RoutesOfAllClusters,
        &[
            (
                Clause::RoutesScopedToCluster,
                "list_routes(\"ccm-conformance-other\") lists the route to 10.244.250.0/24 created for cluster \"kubernetes\"",
            ),
            (
                Clause::ErrorsRoutesKindSurvivesWrapping,
                "list_routes(\"kubernetes\") succeeded although the cloud was armed",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_missing_route_fails() {
    assert_breaks(
        Bug::RouteDeleteMissingFails,
        &[
            (
                Clause::RoutesDeleteMissingSucceeds,
                "route to 10.244.250.0/24 not found",
            ),
            (
                Clause::ErrorsRoutesKindSurvivesWrapping,
                "not found\" (kind other): CloudError::kind() must be throttled",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_provider_fails_the_clause_instead_of_the_run() {
    let result = check_subject(
        Clause::LoadBalancerGetAbsentIsNone,
        Mutant::subject(Bug::GetPanics),
    )
    .await;
    assert_eq!(
        result.outcome,
        Outcome::Failed {
            message: "the provider (or the clause) panicked: acme sdk: unexpected nil in describe-load-balancers".into()
        }
    );
    // Clauses that do not call get are unaffected.
    let result = check_subject(
        Clause::LoadBalancerEnsureReturnsStatus,
        Mutant::subject(Bug::GetPanics),
    )
    .await;
    assert!(result.passed(), "{result}");
}

#[tokio::test(start_paused = true)]
async fn a_hanging_call_fails_after_the_call_timeout() {
    let mut subject = Mutant::subject(Bug::ListRoutesHangs);
    subject.fixture = subject.fixture.with_call_timeout(Duration::from_secs(7));
    let result = check_subject(Clause::RoutesCreateListDeleteRoundTrip, subject).await;
    assert_eq!(
        result.outcome,
        Outcome::Failed {
            message: "list_routes(\"kubernetes\") did not answer within 7.0s (the fixture's call timeout)"
                .into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn eventual_consistency_is_waited_for_up_to_the_limit() {
    // A deleted route stays listed for 10 s: with 30 s allowed for changes to become visible, that conforms.
    let lagging = |visible_for: Duration, consistency: Duration| {
        let mut subject = Mutant::subject(Bug::DeletedRoutesLinger(visible_for));
        subject.fixture = subject.fixture.with_consistency_timeout(consistency);
        subject
    };
    let start = tokio::time::Instant::now();
    let result = check_subject(
        Clause::RoutesCreateListDeleteRoundTrip,
        lagging(Duration::from_secs(10), Duration::from_secs(30)),
    )
    .await;
    assert!(result.passed(), "{result}");
    assert!(start.elapsed() >= Duration::from_secs(10));
    assert!(start.elapsed() < Duration::from_secs(12));

    // Without the allowance the same provider fails, and with a lag beyond it the message says how long the
    // suite waited.
    let result = check_subject(
        Clause::RoutesCreateListDeleteRoundTrip,
        lagging(Duration::from_secs(10), Duration::ZERO),
    )
    .await;
    assert!(result.failed(), "{result}");
    let result = check_subject(
        Clause::RoutesCreateListDeleteRoundTrip,
        lagging(Duration::from_secs(3600), Duration::from_secs(30)),
    )
    .await;
    match result.outcome {
        Outcome::Failed { message } => {
            assert!(
                message.contains("after delete_route, list_routes(\"kubernetes\") still lists a route to 10.244.250.0/24"),
                "{message}"
            );
            assert!(
                message
                    .ends_with("(still so after waiting 30.0s for the change to become visible)"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_consistency_wait_polls_at_the_fixtures_interval() {
    // A deleted route stays listed for 10 s; the wait notices it is gone within one poll interval.
    let waited = |interval: Option<Duration>| async move {
        let mut subject = Mutant::subject(Bug::DeletedRoutesLinger(Duration::from_secs(10)));
        subject.fixture = subject
            .fixture
            .with_consistency_timeout(Duration::from_secs(30));
        if let Some(interval) = interval {
            subject.fixture = subject.fixture.with_poll_interval(interval);
        }
        let start = Instant::now();
        let result = check_subject(Clause::RoutesCreateListDeleteRoundTrip, subject).await;
        assert!(result.passed(), "{result}");
        start.elapsed()
    };
    let fast = waited(Some(Duration::from_millis(250))).await;
    assert!(fast >= Duration::from_secs(10), "{fast:?}");
    assert!(fast <= Duration::from_millis(10_250), "{fast:?}");
    let slow = waited(Some(Duration::from_secs(4))).await;
    assert_eq!(slow, Duration::from_secs(12));
}
