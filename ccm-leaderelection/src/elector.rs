//! The builder and the I/O loop around the pure [`Election`] state machine.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{self, JITTER_FACTOR, Timing};
use crate::election::{Action, Election, jittered, next_try};
use crate::handle::{LeaderHandle, LeaderHealth, LeaderState, StepDownReason};
use crate::{Error, LeaderElectionMetrics, default_identity};
use ccm_core::fence::LeadershipFence;

/// The default event reporter (`reportingController`) and field manager.
pub const DEFAULT_COMPONENT: &str = "cloud-controller-manager";
/// The `reason` of the events recorded on the Lease, as in client-go.
pub const EVENT_REASON: &str = "LeaderElection";
/// `reportingInstance` of an `events.k8s.io/v1` Event is limited to 128 characters.
const MAX_REPORTING_INSTANCE: usize = 128;

/// Builds a [`LeaderElector`]; created by [`LeaderElector::builder`].
///
/// Every setting has the reference CCM's default: lease 15 s, renew deadline 10 s, retry period
/// 2 s, identity from [`default_identity`]; in addition the lease is released on cancellation
/// (the reference CCM does not do that), events are recorded and no metrics are kept unless
/// [`metrics`](Self::metrics) is given.
///
/// ```no_run
/// use std::time::Duration;
/// use ccm_leaderelection::{LeaderElector, default_identity};
///
/// # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let elector = LeaderElector::builder(client, "kube-system", "cloud-controller-manager")
///     .identity(default_identity()?)
///     .lease_duration(Duration::from_secs(15))
///     .renew_deadline(Duration::from_secs(10))
///     .retry_period(Duration::from_secs(2))
///     .release_on_cancel(true)
///     .build()?;
/// # drop(elector);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until built"]
pub struct LeaderElectorBuilder {
    client: Client,
    namespace: String,
    name: String,
    identity: Option<String>,
    timing: Timing,
    api_timeout: Option<Duration>,
    release_on_cancel: bool,
    health_tolerance: Duration,
    metrics: Option<LeaderElectionMetrics>,
    events: bool,
    reporter: Option<Reporter>,
    field_manager: String,
    fence: Option<LeadershipFence>,
}

impl std::fmt::Debug for LeaderElectorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElectorBuilder")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("timing", &self.timing)
            .field("api_timeout", &self.api_timeout)
            .field("release_on_cancel", &self.release_on_cancel)
            .field("health_tolerance", &self.health_tolerance)
            .field("events", &self.events)
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

impl LeaderElectorBuilder {
    /// The holder identity written to `spec.holderIdentity`; it must be unique per replica.
    /// Defaults to [`default_identity`] (`<POD_NAME or hostname>_<uuid>`).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// How long followers wait, from their last observed change of the lease record, before
    /// taking over (`--leader-elect-lease-duration`, default 15 s). Written in whole seconds.
    pub fn lease_duration(mut self, lease_duration: Duration) -> Self {
        self.timing.lease_duration = lease_duration;
        self
    }

    /// How long the leader keeps retrying a failed renewal before it steps down
    /// (`--leader-elect-renew-deadline`, default 10 s), measured from the start of its last
    /// successful renewal.
    pub fn renew_deadline(mut self, renew_deadline: Duration) -> Self {
        self.timing.renew_deadline = renew_deadline;
        self
    }

    /// The interval between attempts (`--leader-elect-retry-period`, default 2 s); candidates
    /// add client-go's jitter of up to 1.2 periods.
    pub fn retry_period(mut self, retry_period: Duration) -> Self {
        self.timing.retry_period = retry_period;
        self
    }

    /// The bound of every single API request. Defaults to client-go's lock-client timeout: half
    /// the renew deadline, at least one second. Must be below the renew deadline.
    pub fn api_timeout(mut self, api_timeout: Duration) -> Self {
        self.api_timeout = Some(api_timeout);
        self
    }

    /// Release the lease (client-go style: empty holder, `leaseDurationSeconds: 1`) when the token
    /// is cancelled, so that another replica takes over within about one retry period instead of
    /// a full lease duration. Default `true`. Cancel only after leader-only work has stopped.
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// How long beyond the lease duration an overdue renewal is tolerated before
    /// [`LeaderHealth::check`] fails (default 20 s, as in the reference CCM).
    pub fn health_tolerance(mut self, tolerance: Duration) -> Self {
        self.health_tolerance = tolerance;
        self
    }

    /// Keep `leader_election_master_status{name}` (and the slow-path counter) up to date in
    /// these metrics; see [`LeaderElectionMetrics::register`].
    pub fn metrics(mut self, metrics: LeaderElectionMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Record `LeaderElection` events on the Lease (`<identity> became leader`, `<identity>
    /// stopped leading`). Default `true`; failures are only logged.
    pub fn events(mut self, enabled: bool) -> Self {
        self.events = enabled;
        self
    }

    /// The event reporter. Defaults to controller `cloud-controller-manager` with the identity
    /// as instance.
    pub fn event_reporter(mut self, reporter: Reporter) -> Self {
        self.reporter = Some(reporter);
        self
    }

    /// The [leadership fence](ccm_core::fence) this elector confirms on every accepted acquire or renewal
    /// (valid for the renew deadline from when the request was sent) and revokes when it stops leading; give
    /// the same fence to the clients and the cloud provider that must only act while leading. Default: a
    /// fence of its own, read with [`LeaderHandle::fence`].
    pub fn fence(mut self, fence: LeadershipFence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// The field manager of the Lease writes (default `cloud-controller-manager`).
    pub fn field_manager(mut self, field_manager: impl Into<String>) -> Self {
        self.field_manager = field_manager.into();
        self
    }

    /// Validates the settings and builds the elector.
    ///
    /// # Errors
    ///
    /// A configuration error if `lease > renew > 1.2 × retry` does not hold, a duration is below
    /// one second, the API timeout is not below the renew deadline, the Lease name or namespace
    /// is invalid, the identity is empty, or no default identity could be determined.
    pub fn build(self) -> Result<LeaderElector, Error> {
        self.timing.validate()?;
        config::validate_namespace(&self.namespace)?;
        config::validate_lease_name(&self.name)?;
        let api_timeout = self
            .api_timeout
            .unwrap_or_else(|| self.timing.default_api_timeout());
        config::validate_api_timeout(api_timeout, &self.timing)?;
        let identity = match self.identity {
            Some(identity) => identity,
            None => default_identity()?,
        };
        if identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        let lease_duration_seconds =
            self.timing
                .lease_duration_seconds()
                .ok_or(Error::LeaseDurationTooLong {
                    value: self.timing.lease_duration,
                    max: i32::MAX,
                })?;
        let recorder = self.events.then(|| {
            let reporter = self.reporter.unwrap_or_else(|| Reporter {
                controller: DEFAULT_COMPONENT.to_owned(),
                instance: Some(truncate(&identity, MAX_REPORTING_INSTANCE).to_owned()),
            });
            Recorder::new(self.client.clone(), reporter)
        });
        Ok(LeaderElector {
            api: Api::namespaced(self.client, &self.namespace),
            namespace: self.namespace,
            name: self.name,
            identity,
            lease_duration_seconds,
            timing: self.timing,
            api_timeout,
            release_on_cancel: self.release_on_cancel,
            health_tolerance: self.health_tolerance,
            metrics: self.metrics,
            fence: self.fence.unwrap_or_default(),
            recorder,
            post_params: PostParams {
                dry_run: false,
                field_manager: Some(self.field_manager),
            },
        })
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A validated leader elector for one Lease; [`run`](Self::run) starts it.
///
/// It implements client-go's `tools/leaderelection` algorithm on a `coordination.k8s.io/v1`
/// Lease, writing the same fields the same way, so that it can share a Lease with Go replicas
/// (for example during a migration from a Go cloud controller manager).
pub struct LeaderElector {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    lease_duration_seconds: i32,
    timing: Timing,
    api_timeout: Duration,
    release_on_cancel: bool,
    health_tolerance: Duration,
    metrics: Option<LeaderElectionMetrics>,
    fence: LeadershipFence,
    recorder: Option<Recorder>,
    post_params: PostParams,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("timing", &self.timing)
            .field("api_timeout", &self.api_timeout)
            .field("release_on_cancel", &self.release_on_cancel)
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// Starts building an elector for the Lease `namespace/name` (the reference CCM uses
    /// `kube-system/cloud-controller-manager`).
    ///
    /// ```no_run
    /// use ccm_leaderelection::LeaderElector;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// let token = CancellationToken::new();
    /// let handle = LeaderElector::builder(client, "kube-system", "cloud-controller-manager")
    ///     .build()?
    ///     .run(token.clone());
    /// if handle.wait_leading().await.is_ok() {
    ///     // start the controllers, stop them when `handle.lost()` resolves
    ///     let reason = handle.lost().await;
    ///     eprintln!("leadership lost: {reason}");
    /// }
    /// token.cancel();
    /// handle.join().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(
        client: Client,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> LeaderElectorBuilder {
        LeaderElectorBuilder {
            client,
            namespace: namespace.into(),
            name: name.into(),
            identity: None,
            timing: Timing::default(),
            api_timeout: None,
            release_on_cancel: true,
            health_tolerance: config::DEFAULT_HEALTH_TOLERANCE,
            metrics: None,
            events: true,
            reporter: None,
            field_manager: DEFAULT_COMPONENT.to_owned(),
            fence: None,
        }
    }

    /// This replica's holder identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The Lease namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Lease name (also the `name` label of the metrics).
    pub fn lease_name(&self) -> &str {
        &self.name
    }

    /// Spawns the election loop on the current Tokio runtime and returns its handle.
    ///
    /// The loop tries to acquire the lease every retry period (jittered), then renews it every
    /// retry period. It stops — and the state becomes [`LeaderState::Stopped`] — when leadership
    /// is lost or `token` is cancelled; after cancellation it releases the lease if
    /// release-on-cancel is enabled and this replica held it.
    ///
    /// # Panics
    ///
    /// If called outside a Tokio runtime.
    pub fn run(self, token: CancellationToken) -> LeaderHandle {
        let (tx, rx) = watch::channel(LeaderState::Unknown);
        let lease = format!("{}/{}", self.namespace, self.name);
        let health = LeaderHealth::new(
            lease.clone(),
            self.timing.lease_duration,
            self.health_tolerance,
        );
        let identity = self.identity.clone();
        let runner = Runner {
            election: Election::new(self.identity.clone(), self.lease_duration_seconds),
            lease,
            elector: self,
            cached: None,
            maybe_holding: false,
            state: tx,
            health: health.clone(),
            events: TaskTracker::new(),
        };
        let fence = runner.elector.fence.clone();
        let task = tokio::spawn(runner.run(token));
        LeaderHandle {
            identity,
            fence,
            state: rx,
            health,
            task,
        }
    }
}

/// The result of one `tryAcquireOrRenew`.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// We hold the lease (created, acquired or renewed).
    Holding,
    /// Somebody else holds an unexpired lease, which expires (by local observation) at the instant given.
    HeldBy(String, Instant),
    /// Lost an optimistic-concurrency race (409): somebody else wrote first.
    Conflict,
}

struct Runner {
    elector: LeaderElector,
    election: Election,
    /// `namespace/name`, for logs and errors.
    lease: String,
    /// The last Lease object read or written; its resourceVersion makes the fast path optimistic.
    cached: Option<Lease>,
    /// An acquisition write was sent but its outcome is unknown (timeout, transport error,
    /// cancellation); cleared by the next successful read.
    maybe_holding: bool,
    state: watch::Sender<LeaderState>,
    health: LeaderHealth,
    events: TaskTracker,
}

impl Runner {
    async fn run(mut self, token: CancellationToken) -> StepDownReason {
        self.set_metric(false);
        tracing::info!(
            lease = %self.lease,
            identity = %self.elector.identity,
            "attempting to acquire leader lease"
        );
        let (reason, led) = match self.acquire(&token).await {
            Some(acquired_at) => (self.lead(&token, acquired_at).await, true),
            None => (StepDownReason::Cancelled, false),
        };
        self.finish(reason, led).await
    }

    /// client-go's `acquire`: try, then wait a jittered retry period, until we hold the lease.
    /// Returns the start instant of the successful attempt, `None` if cancelled first.
    ///
    /// Unlike client-go, a follower whose observed lease runs out before its next jittered try
    /// tries again at that instant instead: a dead leader is replaced one lease duration after
    /// its last observed renewal, not up to 2.2 retry periods later. In steady state (the holder
    /// renews every retry period, so the lease runs out later than the next try) nothing changes.
    async fn acquire(&mut self, token: &CancellationToken) -> Option<Instant> {
        loop {
            let mut expires_at = None;
            let started = Instant::now();
            let result = tokio::select! {
                biased;
                () = token.cancelled() => return None,
                result = self.try_acquire_or_renew() => result,
            };
            match result {
                Ok(Attempt::Holding) => return Some(started),
                Ok(Attempt::HeldBy(holder, expiry)) => {
                    expires_at = Some(expiry);
                    tracing::debug!(
                        lease = %self.lease,
                        %holder,
                        "lease is held by another replica and has not yet expired"
                    );
                    self.state.send_if_modified(|state| {
                        let next = LeaderState::Following { holder };
                        let changed = *state != next;
                        *state = next;
                        changed
                    });
                }
                Ok(Attempt::Conflict) => {
                    tracing::debug!(lease = %self.lease, "lost the race to acquire the lease");
                }
                Err(error) => {
                    tracing::warn!(lease = %self.lease, %error, "failed to acquire the lease");
                }
            }
            let retry = self.elector.timing.retry_period;
            let pause = next_try(
                jittered(retry, JITTER_FACTOR, rand::random()),
                expires_at,
                Instant::now(),
            );
            tokio::select! {
                biased;
                () = token.cancelled() => return None,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// client-go's `renew`: every retry period renew; give up when no attempt succeeded within
    /// the renew deadline (measured from the start of the last successful attempt), or at once
    /// when another holder is seen.
    async fn lead(&mut self, token: &CancellationToken, acquired_at: Instant) -> StepDownReason {
        self.became_leader();
        let timing = self.elector.timing;
        let mut last_success = acquired_at;
        loop {
            tokio::select! {
                biased;
                () = token.cancelled() => return StepDownReason::Cancelled,
                () = tokio::time::sleep(timing.retry_period) => {}
            }
            let deadline = last_success + timing.renew_deadline;
            loop {
                let started = Instant::now();
                if started >= deadline {
                    return StepDownReason::RenewDeadlineExceeded;
                }
                let attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew());
                let result = tokio::select! {
                    biased;
                    () = token.cancelled() => return StepDownReason::Cancelled,
                    result = attempt => result,
                };
                match result {
                    Err(_elapsed) => return StepDownReason::RenewDeadlineExceeded,
                    Ok(Ok(Attempt::Holding)) => {
                        tracing::trace!(lease = %self.lease, "renewed the lease");
                        last_success = started;
                        self.health.renewed(Instant::now());
                        break;
                    }
                    Ok(Ok(Attempt::HeldBy(holder, _))) => {
                        return StepDownReason::HolderChanged { holder };
                    }
                    Ok(Ok(Attempt::Conflict)) => {
                        tracing::debug!(
                            lease = %self.lease,
                            "conflict while renewing the lease, retrying"
                        );
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(
                            lease = %self.lease,
                            %error,
                            "failed to renew the lease, retrying"
                        );
                    }
                }
                let next = (Instant::now() + timing.retry_period).min(deadline);
                tokio::select! {
                    biased;
                    () = token.cancelled() => return StepDownReason::Cancelled,
                    () = tokio::time::sleep_until(next) => {}
                }
            }
        }
    }

    fn became_leader(&mut self) {
        tracing::info!(
            lease = %self.lease,
            identity = %self.elector.identity,
            "successfully acquired lease, leading"
        );
        self.health.renewed(Instant::now());
        self.set_metric(true);
        self.state.send_replace(LeaderState::Leading);
        self.record_event("BecameLeader", "became leader");
    }

    /// Publishes the end of the election, then releases the lease after a cancellation.
    async fn finish(mut self, reason: StepDownReason, led: bool) -> StepDownReason {
        // First of all: nothing may be written in our name any more.
        self.elector.fence.revoke();
        self.health.not_leading();
        self.set_metric(false);
        self.state.send_replace(LeaderState::Stopped {
            reason: reason.clone(),
        });
        let cancelled = reason == StepDownReason::Cancelled;
        if led {
            if cancelled {
                tracing::info!(lease = %self.lease, "leader election cancelled, stopped leading");
            } else {
                tracing::error!(lease = %self.lease, %reason, "leader election lost");
            }
            self.record_event("StoppedLeading", "stopped leading");
        }
        if cancelled && self.elector.release_on_cancel && (led || self.maybe_holding) {
            self.release().await;
        }
        self.events.close();
        self.events.wait().await;
        reason
    }

    /// client-go's `release`: read, and if we hold the lease, write an empty holder with
    /// `leaseDurationSeconds: 1`; retried on conflict, bounded by the renew deadline.
    async fn release(&mut self) {
        let deadline = Instant::now() + self.elector.timing.renew_deadline;
        match tokio::time::timeout_at(deadline, self.try_release()).await {
            Ok(Ok(true)) => tracing::info!(lease = %self.lease, "released the lease"),
            Ok(Ok(false)) => {
                tracing::debug!(lease = %self.lease, "lease not held by this replica");
            }
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.lease, %error, "failed to release the lease");
            }
            Err(_) => {
                tracing::warn!(
                    lease = %self.lease,
                    "failed to release the lease within the renew deadline"
                );
            }
        }
    }

    /// One release: `Ok(false)` if the lease is absent or not ours.
    async fn try_release(&mut self) -> Result<bool, Error> {
        loop {
            let Some(current) = self.get_lease().await? else {
                return Ok(false);
            };
            let spec = current.spec.clone().unwrap_or_default();
            let Some(released) = self.election.release_spec(&spec, Timestamp::now()) else {
                return Ok(false);
            };
            let lease = Lease {
                spec: Some(released),
                ..current
            };
            match self.replace_lease(&lease).await {
                Ok(written) => {
                    self.election.wrote(&spec_of(&written), Instant::now());
                    return Ok(true);
                }
                Err(error) if is_conflict(&error) => {
                    // Typically an in-flight renewal of ours landed first: read again.
                    tracing::debug!(lease = %self.lease, "conflict while releasing the lease");
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`, with its optimistic fast path for the leader.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, Error> {
        if let Some(cached) = &self.cached {
            let now = Instant::now();
            if let Some(renewed) = self
                .election
                .fast_renew(&spec_of(cached), now, Timestamp::now())
            {
                let lease = Lease {
                    spec: Some(renewed),
                    ..cached.clone()
                };
                match self.write(Write::Replace, lease, false).await {
                    Ok(Attempt::Holding) => return Ok(Attempt::Holding),
                    Ok(_) => {
                        tracing::debug!(
                            lease = %self.lease,
                            "optimistic renewal conflicted, reading the lease"
                        );
                    }
                    Err(error) => {
                        tracing::debug!(
                            lease = %self.lease,
                            %error,
                            "optimistic renewal failed, reading the lease"
                        );
                    }
                }
            }
        }

        let current = self.get_lease().await?;
        self.maybe_holding = false;
        let was_leader = self.election.is_leader();
        let spec = current.as_ref().map(spec_of);
        match self
            .election
            .step(spec.as_ref(), Instant::now(), Timestamp::now())
        {
            Action::Create(spec) => {
                self.election.forget();
                self.cached = None;
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.elector.name.clone()),
                        namespace: Some(self.elector.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.write(Write::Create, lease, true).await
            }
            Action::Acquire(spec) | Action::Renew(spec) => {
                let Some(current) = current else {
                    // `step` answers Create for an absent Lease; nothing to update.
                    return Ok(Attempt::Conflict);
                };
                if was_leader && self.election.is_leader() {
                    self.slowpath_exercised();
                }
                let lease = Lease {
                    spec: Some(spec),
                    ..current.clone()
                };
                // Remember the latest resourceVersion even if this write loses a race.
                self.cached = Some(current);
                let acquiring = !self.election.is_leader();
                self.write(Write::Replace, lease, acquiring).await
            }
            Action::Wait { holder, expires_at } => {
                self.cached = current;
                Ok(Attempt::HeldBy(holder, expires_at))
            }
        }
    }

    /// Creates or replaces the Lease. A 409 is a lost race, not an error.
    async fn write(
        &mut self,
        kind: Write,
        lease: Lease,
        acquiring: bool,
    ) -> Result<Attempt, Error> {
        if acquiring {
            self.maybe_holding = true;
        }
        // The fence trusts a confirmation from when the request was sent: the API server (and so any follower)
        // cannot have seen the new renewTime earlier.
        let sent = Instant::now();
        let result = match kind {
            Write::Create => {
                let request = self.elector.api.create(&self.elector.post_params, &lease);
                self.call("create", request).await
            }
            Write::Replace => self.replace_lease(&lease).await,
        };
        match result {
            Ok(written) => {
                self.maybe_holding = false;
                let renew_deadline = self.elector.timing.renew_deadline;
                self.elector.fence.confirm(sent, renew_deadline);
                self.election.wrote(&spec_of(&written), Instant::now());
                self.cached = Some(written);
                Ok(Attempt::Holding)
            }
            Err(error) if is_conflict(&error) => {
                self.maybe_holding = false;
                Ok(Attempt::Conflict)
            }
            Err(error) => {
                if let Error::Api {
                    source: kube::Error::Api(_),
                    ..
                } = &error
                {
                    // A definite refusal from the apiserver: nothing was written.
                    self.maybe_holding = false;
                }
                Err(error)
            }
        }
    }

    async fn get_lease(&self) -> Result<Option<Lease>, Error> {
        self.call("get", self.elector.api.get_opt(&self.elector.name))
            .await
    }

    async fn replace_lease(&self, lease: &Lease) -> Result<Lease, Error> {
        let request =
            self.elector
                .api
                .replace(&self.elector.name, &self.elector.post_params, lease);
        self.call("update", request).await
    }

    /// Runs one API call bounded by the API timeout.
    async fn call<T>(
        &self,
        operation: &'static str,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, Error> {
        let timeout = self.elector.api_timeout;
        match tokio::time::timeout(timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(Error::Api {
                operation,
                lease: self.lease.clone(),
                source,
            }),
            Err(_) => Err(Error::Timeout {
                operation,
                lease: self.lease.clone(),
                timeout,
            }),
        }
    }

    fn set_metric(&self, leading: bool) {
        if let Some(metrics) = &self.elector.metrics {
            metrics.set_leading(&self.elector.name, leading);
        }
    }

    fn slowpath_exercised(&self) {
        if let Some(metrics) = &self.elector.metrics {
            metrics.slowpath_exercised(&self.elector.name);
        }
    }

    /// Publishes a `LeaderElection` event on the Lease in the background (best effort, bounded
    /// by the API timeout; awaited before the loop ends). The `action` differs per kind of event
    /// because kube's recorder folds events with equal reason and action into one series.
    fn record_event(&self, action: &'static str, what: &str) {
        let Some(recorder) = self.elector.recorder.clone() else {
            return;
        };
        let reference = self.lease_reference();
        let event = Event {
            type_: EventType::Normal,
            reason: EVENT_REASON.to_owned(),
            note: Some(format!("{} {what}", self.elector.identity)),
            action: action.to_owned(),
            secondary: None,
        };
        let timeout = self.elector.api_timeout;
        let lease = self.lease.clone();
        self.events.spawn(async move {
            match tokio::time::timeout(timeout, recorder.publish(&event, &reference)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%lease, %error, "failed to record leader election event");
                }
                Err(_) => {
                    tracing::warn!(%lease, ?timeout, "timed out recording leader election event");
                }
            }
        });
    }

    fn lease_reference(&self) -> ObjectReference {
        match &self.cached {
            Some(lease) => lease.object_ref(&()),
            None => ObjectReference {
                api_version: Some(<Lease as k8s_openapi::Resource>::API_VERSION.to_owned()),
                kind: Some(<Lease as k8s_openapi::Resource>::KIND.to_owned()),
                name: Some(self.elector.name.clone()),
                namespace: Some(self.elector.namespace.clone()),
                ..ObjectReference::default()
            },
        }
    }
}

/// The two kinds of Lease writes.
#[derive(Clone, Copy, Debug)]
enum Write {
    Create,
    Replace,
}

fn spec_of(lease: &Lease) -> LeaseSpec {
    lease.spec.clone().unwrap_or_default()
}

fn is_conflict(error: &Error) -> bool {
    matches!(error, Error::Api { source: kube::Error::Api(status), .. } if status.code == 409)
}
