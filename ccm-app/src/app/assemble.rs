//! The pieces `start` ([`super::builder`]) wires in order for the supervisor, each from its own option group: the
//! Kubernetes clients, the provider stack (budget, interception, cache), the health checks, and leader election.

use std::sync::{Arc, OnceLock};

use ccm_core::budget::{CloudCallMetrics, RateLimitInterceptor};
use ccm_core::cache::InstanceCache;
use ccm_core::fence::LeadershipFence;
use ccm_core::intercept::InterceptedProvider;
use ccm_core::names;
use ccm_core::provider::CloudProvider;
use ccm_core::runtime::controller::HealthCheck;
use ccm_core::runtime::events::EventSink;
use ccm_core::runtime::informer::SharedInformers;
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_leaderelection::{LeaderElectionMetrics, LeaderElector, LeaderHandle};
use tokio_util::sync::CancellationToken;

use super::{RunError, StartupError};
use crate::client::{ClientFactory, KubeApiLimits, base_client, kube_config};
use crate::health::{Endpoint, HealthChecks};
use crate::options::{CcmOptions, invalid};
use crate::service_accounts::without_credentials;

/// The clients of the process: the factory of the named clients (its limits decided, its metrics not yet
/// registered, no fence yet) and, with `--use-service-account-credentials`, the connection without credentials
/// the controllers' own clients are sent over.
pub(super) struct Clients {
    pub(super) factory: ClientFactory,
    pub(super) service_account_connection: Option<kube::Client>,
}

/// The clients from `--kubeconfig`/`--master`/in-cluster (or the embedder's `client`), `--kube-api-qps`/`-burst`
/// and `--use-service-account-credentials`.
pub(super) async fn clients(
    options: &CcmOptions,
    client: Option<kube::Client>,
    service_account_connection: Option<kube::Client>,
    agent_prefix: &str,
) -> Result<Clients, RunError> {
    let (base, connection) = match client {
        Some(client) => (client, service_account_connection),
        None => {
            let config = kube_config(options).await?;
            let connection = match service_account_connection {
                None if options.use_service_account_credentials => {
                    Some(base_client(without_credentials(&config))?)
                }
                given => given,
            };
            (base_client(config)?, connection)
        }
    };
    let service_account_connection = options
        .use_service_account_credentials
        .then(|| connection.ok_or(RunError::NoServiceAccountConnection))
        .transpose()?;
    // --kube-api-qps/--kube-api-burst unset: one request tells whether the API server runs APF.
    let limits = KubeApiLimits::resolve(&base, options).await;
    Ok(Clients {
        factory: ClientFactory::new(base, limits, agent_prefix),
        service_account_connection,
    })
}

/// The provider the controllers call, and what the supervisor needs of it.
pub(super) struct ProviderStack {
    pub(super) provider: Arc<dyn CloudProvider>,
    pub(super) instance_cache: Arc<InstanceCache>,
    /// Cancelled when the controllers stop: a cloud call waiting for budget gives up.
    pub(super) cloud_calls: CancellationToken,
}

/// The cloud-call budget (`--cloud-api-qps`, `--cloud-api-burst`, `--cloud-api-operation-limit`), the metrics
/// and the leadership fence around `provider`, and the instance cache (`--cloud-instance-cache-ttl`) outside them.
pub(super) fn provider_stack(
    provider: Arc<dyn CloudProvider>,
    options: &CcmOptions,
    fence: LeadershipFence,
    metrics: &SharedRegistry,
    shutdown: &CancellationToken,
) -> Result<ProviderStack, RunError> {
    // Every controller's cloud calls share one budget and are counted per operation. A call waiting for budget
    // gives up when the process shuts down or the controllers stop (leadership lost).
    let cloud_calls = shutdown.child_token();
    let budget = options.cloud_budget();
    tracing::info!(budget = %budget.describe(), "cloud-call budget");
    let limiter = RateLimitInterceptor::new(&budget, cloud_calls.clone())
        .map_err(|e| StartupError::Invalid(vec![invalid("cloud-api-qps", e.to_string())]))?
        .with_metrics(metrics);
    // In front of the budget: an answer from the cache costs no budget and is not counted as a cloud call.
    let instance_cache =
        Arc::new(InstanceCache::new(options.cloud_instance_cache_ttl).with_metrics(metrics));
    let provider = InterceptedProvider::new(provider)
        .with_interceptor(limiter)
        .with_interceptor(CloudCallMetrics::register(metrics))
        .with_fence(fence)
        .with_instance_cache(instance_cache.clone());
    Ok(ProviderStack {
        provider: Arc::new(provider),
        instance_cache,
        cloud_calls,
    })
}

/// The checks known at start: `ping` and the vendor's on every endpoint, `shutdown` on `/readyz`, and
/// `informer-sync` on `/readyz` reading the slot the supervisor fills when the informers start.
pub(super) fn health_checks(
    vendor: Vec<(String, HealthCheck)>,
    shutdown: &CancellationToken,
    informers: &Arc<OnceLock<SharedInformers>>,
) -> HealthChecks {
    let checks = HealthChecks::default();
    checks.add("ping", Endpoint::ALL, Arc::new(|| Ok(())));
    for (name, check) in vendor {
        checks.add(&name, Endpoint::ALL, check);
    }
    let shutting_down = shutdown.clone();
    checks.add(
        "shutdown",
        &[Endpoint::Readyz],
        Arc::new(move || match shutting_down.is_cancelled() {
            true => Err("the process is shutting down".to_owned()),
            false => Ok(()),
        }),
    );
    let slot = informers.clone();
    checks.add(
        "informer-sync",
        &[Endpoint::Readyz],
        Arc::new(move || match slot.get() {
            None => Err("the shared informers have not been started".to_owned()),
            Some(i) if i.nodes().has_synced() && i.services().has_synced() => Ok(()),
            Some(_) => Err("the shared informers have not synced yet".to_owned()),
        }),
    );
    checks
}

/// The leader elector of `--leader-elect-*` over `lease_client` (a client without the fence: the Lease requests
/// are never fenced). Its Events go through the kit's pipeline on a fenced client of `factory`, in a sink of their
/// own sharing the metrics of `events`: the elector writes "stopped leading" after the controllers' sink has
/// closed, before the release.
pub(super) fn leader_elector(
    options: &CcmOptions,
    lease_client: kube::Client,
    factory: &ClientFactory,
    fence: LeadershipFence,
    (metrics, events, identity): (&SharedRegistry, &EventSink, &str),
) -> Result<LeaderElector, RunError> {
    let le_events = EventSink::new().sharing_metrics(events).recorder(
        factory.client("leader-election-events"),
        names::components::CLOUD_CONTROLLER_MANAGER,
        Some(identity.to_owned()),
    );
    LeaderElector::builder(
        lease_client,
        options.leader_elect_resource_namespace.clone(),
        options.leader_elect_resource_name.clone(),
    )
    .lease_duration(options.leader_elect_lease_duration)
    .renew_deadline(options.leader_elect_renew_deadline)
    .retry_period(options.leader_elect_retry_period)
    .release_on_cancel(options.leader_elect_release_on_cancel)
    .metrics(metrics.with(LeaderElectionMetrics::register))
    .fence(fence)
    .event_recorder(le_events)
    .build()
    .map_err(RunError::LeaderElection)
}

/// Start campaigning, and add the elector's health check (every endpoint) and `leader` (`/readyz`) to `checks`.
pub(super) fn campaign(
    elector: LeaderElector,
    checks: &HealthChecks,
) -> (LeaderHandle, CancellationToken) {
    let token = CancellationToken::new();
    let identity = elector.identity().to_owned();
    let handle = elector.run(token.clone());
    let health = handle.health();
    checks.add(
        health.name(),
        Endpoint::ALL,
        Arc::new(move || health.check().map_err(|e| e.to_string())),
    );
    let state = handle.state();
    checks.add(
        "leader",
        &[Endpoint::Readyz],
        Arc::new(move || match state.borrow().is_leading() {
            true => Ok(()),
            false => Err("this replica is not the leader".to_owned()),
        }),
    );
    tracing::info!(identity = %identity, "campaigning for leadership");
    (handle, token)
}
