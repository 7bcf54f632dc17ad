//! A started CCM: leading (or waiting to lead), starting and watching the controllers over one set of shared
//! informers, draining them on shutdown or lost leadership, then releasing the Lease.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ccm_core::BoxError;
use ccm_core::background::BackgroundTasks;
use ccm_core::names;
use ccm_core::provider::InitializeContext;
use ccm_core::runtime::controller::{ControllerContext, ControllerDescriptor, HealthCheck};
use ccm_core::runtime::events::EventSink;
use ccm_core::runtime::every::{Timing, every};
use ccm_core::runtime::informer::{InformerScope, SharedInformers};
use ccm_core::runtime::metrics::{ControllerManagerMetrics, SharedRegistry};
use ccm_core::vendor::VendorSettings;
use ccm_leaderelection::{LeaderHandle, StepDownReason};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};
use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::assemble::{Clients, ProviderStack};
use super::{CcmStatus, RunError};
use crate::admin::AdminServer;
use crate::health::{Endpoint, HealthChecks};
use crate::options::CcmOptions;
use crate::service_accounts;

/// How long the runtime waits for the API server's `/healthz` before starting controllers (Go: 10 s).
const APISERVER_WAIT: Duration = Duration::from_secs(10);

/// How long a clean shutdown waits for the Lease to be released.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// A started CCM; returned by [`CcmBuilder::start`](super::CcmBuilder::start).
#[derive(Debug)]
pub struct RunningCcm {
    pub(super) admin_addr: Option<SocketAddr>,
    pub(super) admin_cert_pem: Option<String>,
    pub(super) webhook: Option<crate::webhook::WebhookEndpoint>,
    pub(super) status: watch::Receiver<CcmStatus>,
    pub(super) metrics: SharedRegistry,
    pub(super) identity: Option<String>,
    pub(super) task: tokio::task::JoinHandle<Result<(), RunError>>,
}

impl RunningCcm {
    /// The address of the admin server, if serving.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The admin server's certificate (PEM), if serving; a self-signed one can be trusted directly.
    pub fn admin_certificate_pem(&self) -> Option<&str> {
        self.admin_cert_pem.as_deref()
    }

    /// The webhook server's address and certificate, if serving (`--webhooks` enabled one and
    /// `--webhook-secure-port` is not 0).
    pub fn webhook_endpoint(&self) -> Option<&crate::webhook::WebhookEndpoint> {
        self.webhook.as_ref()
    }

    /// The status channel.
    pub fn status(&self) -> watch::Receiver<CcmStatus> {
        self.status.clone()
    }

    /// The metrics registry `/metrics` serves.
    pub fn metrics(&self) -> &SharedRegistry {
        &self.metrics
    }

    /// The leader-election identity, when leader election is on.
    pub fn identity(&self) -> Option<&str> {
        self.identity.as_deref()
    }

    /// Wait until the CCM has stopped.
    ///
    /// # Errors
    ///
    /// [`RunError`] if it stopped because of an error rather than a cancelled shutdown token.
    pub async fn wait(self) -> Result<(), RunError> {
        self.task
            .await
            .map_err(|e| RunError::Panicked(e.to_string()))?
    }
}

pub(super) struct Supervisor {
    pub(super) options: CcmOptions,
    pub(super) plan: Vec<ControllerDescriptor>,
    pub(super) clients: Clients,
    /// The provider; its instance cache is invalidated from the shared Node informer while leading.
    pub(super) stack: ProviderStack,
    pub(super) metrics: SharedRegistry,
    pub(super) manager_metrics: ControllerManagerMetrics,
    pub(super) checks: HealthChecks,
    pub(super) status: watch::Sender<CcmStatus>,
    pub(super) shutdown: CancellationToken,
    pub(super) instance: String,
    pub(super) informers_slot: Arc<OnceLock<SharedInformers>>,
    /// The process's Event pipeline (one writer per controller, flushed at shutdown).
    pub(super) events: EventSink,
    /// The vendor's flags, config section and shared values, handed to every controller.
    pub(super) vendor: VendorSettings,
    /// The provider's background tasks and the reload watcher: stopped last.
    pub(super) background: BackgroundTasks,
}

/// Why the leader phase ended.
enum Outcome {
    Shutdown,
    Lost(StepDownReason),
    Failed(RunError),
}

impl Supervisor {
    pub(super) async fn supervise(
        self,
        leader: Option<(LeaderHandle, CancellationToken)>,
        admin: Option<AdminServer>,
    ) -> Result<(), RunError> {
        let result = self.lead(leader.as_ref().map(|(h, _)| h)).await;
        self.status.send_replace(CcmStatus::ShuttingDown);
        // The controllers have stopped: now the Lease may be released.
        if let Some((handle, token)) = leader {
            token.cancel();
            match tokio::time::timeout(RELEASE_TIMEOUT, handle.join()).await {
                Ok(Ok(reason)) => tracing::info!(%reason, "leader election stopped"),
                Ok(Err(err)) => tracing::warn!(error = %err, "leader election ended abnormally"),
                Err(_) => tracing::warn!("releasing the leader lease did not finish in time"),
            }
        }
        if let Some(admin) = admin {
            admin.stop().await;
        }
        self.background.stop(self.options.shutdown_timeout).await;
        self.status.send_replace(CcmStatus::Stopped);
        result
    }

    async fn lead(&self, leader: Option<&LeaderHandle>) -> Result<(), RunError> {
        if let Some(handle) = leader {
            self.status.send_replace(CcmStatus::WaitingForLeadership);
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return Ok(()),
                result = handle.wait_leading() => match result {
                    Ok(()) => tracing::info!(identity = %handle.identity(), "became leader"),
                    Err(_) if self.shutdown.is_cancelled() => return Ok(()),
                    Err(reason) => return Err(RunError::LeadershipLost(reason)),
                },
            }
        }
        self.status.send_replace(CcmStatus::Leading);
        let lost = async {
            match leader {
                Some(handle) => handle.lost().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(lost);
        let controllers = CancellationToken::new();
        let informers = CancellationToken::new();
        let mut running = Running::default();
        let outcome = self
            .start_and_watch(&mut lost, &controllers, &informers, &mut running)
            .await;

        // Stop taking work; let in-flight work finish within the bound.
        controllers.cancel();
        self.stack.cloud_calls.cancel();
        let grace = match &outcome {
            // Another replica may take over once the lease expires: stop within what is left of it. In-flight work
            // cannot write any more meanwhile: the elector revoked the fence when it stepped down.
            Outcome::Lost(_) => self
                .options
                .leader_elect_lease_duration
                .saturating_sub(self.options.leader_elect_renew_deadline)
                .min(self.options.shutdown_timeout),
            _ => self.options.shutdown_timeout,
        };
        let drain_started = Instant::now();
        self.drain(&mut running, grace).await;
        match &outcome {
            // The fence is revoked: nothing more is written in this replica's name, as Go drops its queued
            // Events when it loses the lease.
            Outcome::Lost(_) => {
                self.events.discard();
            }
            // Write the Events the controllers emitted, within what is left of the grace period.
            _ => {
                let left = grace.saturating_sub(drain_started.elapsed());
                self.events.close(left).await;
            }
        }
        informers.cancel();
        match outcome {
            Outcome::Shutdown => Ok(()),
            Outcome::Lost(reason) => {
                tracing::error!(%reason, "leaderelection lost");
                Err(RunError::LeadershipLost(reason))
            }
            Outcome::Failed(err) => Err(err),
        }
    }

    async fn start_and_watch(
        &self,
        lost: &mut (impl std::future::Future<Output = StepDownReason> + Unpin),
        controllers: &CancellationToken,
        informers_token: &CancellationToken,
        running: &mut Running,
    ) -> Outcome {
        let shutdown = self.shutdown.clone();
        macro_rules! guarded {
            ($fut:expr) => {
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Outcome::Shutdown,
                    reason = &mut *lost => return Outcome::Lost(reason),
                    value = $fut => value,
                }
            };
        }

        let base_client = self.clients.factory.client(names::MANAGER_NAME);
        if let Err(err) = guarded!(wait_for_apiserver(&base_client, APISERVER_WAIT)) {
            return Outcome::Failed(err);
        }
        let informer_client = self.clients.factory.client("shared-informers");
        if let Err(err) = guarded!(check_scope(&informer_client, &self.options)) {
            return Outcome::Failed(err);
        }
        let informers = SharedInformers::new(informer_client, &scope_of(&self.options));
        let _ = self.informers_slot.set(informers.clone());
        // Answers kept from before this term may be stale; from now on Node events invalidate them.
        self.stack.instance_cache.clear();
        tokio::spawn(
            self.stack
                .instance_cache
                .clone()
                .run_invalidator(informers.nodes().clone(), informers_token.clone()),
        );

        let provider_client = self.clients.factory.client("cloud-provider");
        let init = InitializeContext::new(provider_client, controllers.clone());
        if let Err(err) = guarded!(self.stack.provider.initialize(init)) {
            return Outcome::Failed(RunError::Initialize(err));
        }

        let base = ControllerContext::new(
            base_client,
            self.stack.provider.clone(),
            informers.clone(),
            self.metrics.clone(),
            self.options.cluster_name.clone(),
        )
        .with_instance(self.instance.clone())
        .with_events(self.events.clone())
        .with_vendor(self.vendor.clone());

        for (i, descriptor) in self.plan.iter().enumerate() {
            if shutdown.is_cancelled() {
                return Outcome::Shutdown;
            }
            if i > 0 && !self.options.controller_start_interval.is_zero() {
                let pause = jittered(self.options.controller_start_interval);
                guarded!(tokio::time::sleep(pause));
            }
            let mut ctx = base.clone();
            let mut identity = None;
            if let Some(connection) = &self.clients.service_account_connection {
                // The CCM's own identity creates the account and requests its tokens; the controller's clients
                // wait for the first one.
                let account = service_accounts::service_account_name(&descriptor.name);
                let tokens = service_accounts::start(
                    self.clients.factory.client(names::MANAGER_NAME),
                    account,
                    controllers.clone(),
                );
                if !guarded!(tokens.ready(controllers)) {
                    return Outcome::Shutdown;
                }
                tracing::info!(controller = %descriptor.name, service_account = %account, "controller acts as its own ServiceAccount");
                identity = Some((connection, tokens));
            }
            let (client, event_client) = self.clients.factory.client_with_events(
                client_name(&descriptor.name),
                identity
                    .as_ref()
                    .map(|(connection, tokens)| (*connection, tokens)),
            );
            ctx.client = client;
            ctx.event_client = Some(event_client);
            match (descriptor.init)(&ctx) {
                Err(source) => {
                    return Outcome::Failed(RunError::ControllerInit {
                        name: descriptor.name.clone(),
                        source,
                    });
                }
                Ok(None) => {
                    tracing::warn!(controller = %descriptor.name, "skipping controller: it was not started");
                }
                Ok(Some(controller)) => {
                    let check: HealthCheck = controller
                        .health_check()
                        .unwrap_or_else(|| Arc::new(|| Ok(())));
                    let endpoints = [Endpoint::Healthz, Endpoint::Readyz];
                    self.checks.add(&descriptor.name, &endpoints, check);
                    let short = descriptor.short_name().to_owned();
                    self.manager_metrics.controller_started(&short);
                    let run = controller.run(controllers.child_token());
                    let id = running.tasks.spawn(run).id();
                    running.names.insert(id, (descriptor.name.clone(), short));
                    tracing::info!(controller = %descriptor.name, "started controller");
                }
            }
        }

        tokio::spawn(informers.clone().run(informers_token.clone()));
        tokio::spawn(resync_loop(
            informers.clone(),
            self.options.min_resync_period,
            informers_token.clone(),
        ));
        self.status.send_replace(CcmStatus::Running);
        tracing::info!(started = running.names.len(), "controllers started");

        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Outcome::Shutdown,
                reason = &mut *lost => return Outcome::Lost(reason),
                Some((name, ended)) = running.next_stopped(&self.manager_metrics),
                    if !running.tasks.is_empty() =>
                {
                    let reason = match ended {
                        Ok(Ok(())) => {
                            tracing::warn!(controller = %name, "controller stopped on its own");
                            continue;
                        }
                        Ok(Err(err)) => err.to_string(),
                        Err(panic) => format!("it panicked: {panic}"),
                    };
                    return Outcome::Failed(RunError::ControllerFailed { name, reason });
                }
            }
        }
    }

    async fn drain(&self, running: &mut Running, grace: Duration) {
        let all_stopped = tokio::time::timeout(grace, async {
            while let Some((name, ended)) = running.next_stopped(&self.manager_metrics).await {
                match ended {
                    Ok(Ok(())) => tracing::info!(controller = %name, "controller stopped"),
                    Ok(Err(err)) => {
                        tracing::warn!(controller = %name, error = %err, "controller stopped with an error")
                    }
                    Err(panic) => {
                        tracing::warn!(controller = %name, error = %panic, "controller task ended abnormally")
                    }
                }
            }
        });
        if all_stopped.await.is_err() {
            let pending: Vec<&str> = running.names.values().map(|(n, _)| n.as_str()).collect();
            tracing::warn!(
                controllers = ?pending,
                grace = ?grace,
                "controllers did not stop in time; abandoning their in-flight work"
            );
            running.tasks.abort_all();
            while running.tasks.join_next().await.is_some() {}
            for (_, short) in running.names.drain().map(|(_, v)| v) {
                self.manager_metrics.controller_stopped(&short);
            }
        }
    }
}

/// The controllers started in this term: their tasks, and each task's controller name and short name (metrics).
#[derive(Default)]
struct Running {
    tasks: JoinSet<Result<(), BoxError>>,
    names: HashMap<tokio::task::Id, (String, String)>,
}

impl Running {
    /// The next controller to stop, by name (its metric updated), with what it returned or how it panicked;
    /// `None` when none runs.
    async fn next_stopped(
        &mut self,
        metrics: &ControllerManagerMetrics,
    ) -> Option<(String, Result<Result<(), BoxError>, JoinError>)> {
        let joined = self.tasks.join_next_with_id().await?;
        let id = joined.as_ref().map_or_else(JoinError::id, |(id, _)| *id);
        let name = match self.names.remove(&id) {
            Some((name, short)) => {
                metrics.controller_stopped(&short);
                name
            }
            None => "unknown".to_owned(),
        };
        Some((name, joined.map(|(_, result)| result)))
    }
}

/// The client name (user agent suffix) of a controller: Go's names for the standard ones.
fn client_name(controller: &str) -> &str {
    match controller {
        names::controllers::CLOUD_NODE | names::controllers::CLOUD_NODE_LIFECYCLE => {
            names::controllers::NODE_CONTROLLER_CLIENT
        }
        names::controllers::SERVICE_LB => names::controllers::SERVICE_CONTROLLER_CLIENT,
        names::controllers::NODE_ROUTE => names::controllers::ROUTE_CONTROLLER_CLIENT,
        other => other,
    }
}

/// The informer scope of `--node-selector`, `--service-selector`, `--service-namespace`.
fn scope_of(o: &CcmOptions) -> InformerScope {
    let mut scope = InformerScope::all();
    scope.node_selector.clone_from(&o.node_selector);
    scope.service_selector.clone_from(&o.service_selector);
    scope.service_namespace.clone_from(&o.service_namespace);
    scope
}

/// `interval` stretched by a random factor in [1, 2) (Go: `wait.Jitter(interval, 1.0)`).
fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(1.0 + rand::random::<f64>())
}

async fn wait_for_apiserver(client: &kube::Client, timeout: Duration) -> Result<(), RunError> {
    let deadline = Instant::now() + timeout;
    let mut last = "no answer".to_owned();
    loop {
        let mut request = http::Request::new(Vec::new());
        *request.uri_mut() = http::Uri::from_static("/healthz");
        match tokio::time::timeout_at(deadline, client.request_text(request)).await {
            Ok(Ok(text)) if text.trim() == "ok" => return Ok(()),
            Ok(Ok(text)) => last = format!("/healthz answered {text:?}"),
            Ok(Err(err)) => last = err.to_string(),
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(RunError::ApiServerUnhealthy {
                waited: timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Ask the API server once with each scope selector, so a malformed selector stops the CCM with a clear error
/// instead of failing every watch forever.
async fn check_scope(client: &kube::Client, options: &CcmOptions) -> Result<(), RunError> {
    if let Some(selector) = &options.node_selector {
        let nodes: Api<Node> = Api::all(client.clone());
        check_selector(nodes, "node-selector", selector).await?;
    }
    if let Some(selector) = &options.service_selector {
        let services: Api<Service> = match &options.service_namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        check_selector(services, "service-selector", selector).await?;
    }
    Ok(())
}

/// List at most one object of `api` with `selector`: a 400 answer rejects the selector; any other failure is
/// logged and left to the informers' retries.
async fn check_selector<K>(
    api: Api<K>,
    setting: &'static str,
    selector: &str,
) -> Result<(), RunError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = ListParams::default().labels(selector).limit(1);
    match api.list_metadata(&params).await {
        Err(kube::Error::Api(status)) if status.code == 400 => Err(RunError::InvalidScope {
            setting,
            value: selector.to_owned(),
            reason: status.message.clone(),
        }),
        Err(err) => {
            tracing::warn!(setting, error = %err, "could not check the selector; the informers will retry");
            Ok(())
        }
        Ok(_) => Ok(()),
    }
}

/// Every `[min, 2 × min)` (Go: the informer factory's resync period), ask controllers to re-read the caches.
async fn resync_loop(informers: SharedInformers, min: Duration, stop: CancellationToken) {
    if min.is_zero() {
        return;
    }
    every(min, 1.0, Timing::Sliding)
        .after_first_period()
        .run_sync(&stop, || {
            tracing::debug!("periodic informer resync");
            informers.nodes().resync();
            informers.services().resync();
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::test_support::parse;

    #[test]
    fn client_names_are_gos() {
        assert_eq!(client_name("cloud-node-controller"), "node-controller");
        assert_eq!(
            client_name("cloud-node-lifecycle-controller"),
            "node-controller"
        );
        assert_eq!(client_name("service-lb-controller"), "service-controller");
        assert_eq!(client_name("node-route-controller"), "route-controller");
        assert_eq!(client_name("tagging-controller"), "tagging-controller");
    }

    #[test]
    fn scope_flags_map_to_the_informer_scope() {
        let o = parse(&[
            "--cloud-provider=fake",
            "--node-selector=ccm=a",
            "--service-namespace=team-a",
            "--service-selector=lb=public",
        ])
        .unwrap();
        assert_eq!(
            scope_of(&o),
            InformerScope::all()
                .with_node_selector("ccm=a")
                .with_service_namespace("team-a")
                .with_service_selector("lb=public")
        );
        assert_eq!(scope_of(&CcmOptions::default()), InformerScope::all());
    }

    #[tokio::test(start_paused = true)]
    async fn start_interval_jitter_stays_within_one_to_two_times() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(10));
            assert!(
                d >= Duration::from_secs(10) && d < Duration::from_secs(20),
                "{d:?}"
            );
        }
    }
}
