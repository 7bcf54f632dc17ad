//! The I/O loop around the pure [`Election`] state machine: acquire, lead (renew), release, and the
//! Lease reads and writes.

use std::future::Future;

use ccm_core::runtime::events::EventRecorder;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{EVENT_REASON, LeaderElector};
use crate::Error;
use crate::config::JITTER_FACTOR;
use crate::election::{Action, Election, Wake, jittered, next_try};
use crate::handle::{LeaderHandle, LeaderHealth, LeaderState, StepDownReason};

/// Starts the loop of `elector` (see [`LeaderElector::run`]).
pub(super) fn start(elector: LeaderElector, token: CancellationToken) -> LeaderHandle {
    let (tx, rx) = watch::channel(LeaderState::Unknown);
    let lease = format!("{}/{}", elector.namespace, elector.name);
    let health = LeaderHealth::new(
        lease.clone(),
        elector.timing.lease_duration,
        elector.health_tolerance,
    );
    let runner = Runner {
        // `build` checked that the lease duration fits `leaseDurationSeconds`.
        election: Election::new(
            elector.identity.clone(),
            elector.timing.lease_duration_seconds().unwrap_or(i32::MAX),
        ),
        lease,
        recorder: elector.recorder(),
        elector,
        cached: None,
        maybe_holding: false,
        state: tx,
        health: health.clone(),
    };
    LeaderHandle {
        identity: runner.elector.identity.clone(),
        fence: runner.elector.fence.clone(),
        state: rx,
        health,
        task: tokio::spawn(runner.run(token)),
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
    /// The `LeaderElection` events' recorder (the kit's: correlated, written in the background).
    recorder: Option<EventRecorder>,
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
    /// Unlike client-go, a candidate also **watches** the Lease (this one object, by field selector
    /// `metadata.name`), so it observes every renewal as it arrives ([`Election::watched`], not up to 2.2 retry
    /// periods later) and tries the instant the observed lease runs out, or at once when the Lease is released
    /// or deleted. The jittered polls stay (client-go's cadence, and the fallback when the watch fails), and
    /// every try still reads the Lease and decides like client-go; the watch only chooses *when*.
    async fn acquire(&mut self, token: &CancellationToken) -> Option<Instant> {
        let mut watch = self.watch_lease();
        let mut watch_failures = 0_u32;
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
                    // Notifies the receivers only when the state changed.
                    let next = LeaderState::Following { holder };
                    self.state
                        .send_if_modified(|state| std::mem::replace(state, next) != *state);
                }
                Ok(Attempt::Conflict) => {
                    tracing::debug!(lease = %self.lease, "lost the race to acquire the lease");
                }
                Err(error) => {
                    tracing::warn!(lease = %self.lease, %error, "failed to acquire the lease");
                }
            }
            let retry = self.elector.timing.retry_period;
            let poll_at = Instant::now() + jittered(retry, JITTER_FACTOR, rand::random());
            loop {
                let wake_at = next_try(poll_at, expires_at);
                tokio::select! {
                    biased;
                    () = token.cancelled() => return None,
                    () = tokio::time::sleep_until(wake_at) => break,
                    event = watch.next() => match event {
                        Some(Ok(event)) => {
                            let spec = match event {
                                Event::Apply(new) | Event::InitApply(new) => Some(spec_of(&new)),
                                Event::Delete(_) => None,
                                // The markers of a relist (whose objects come as applied ones).
                                Event::Init | Event::InitDone => continue,
                            };
                            match self.election.watched(spec.as_ref(), Instant::now()) {
                                Wake::Now => break,
                                Wake::At(at) => expires_at = Some(at),
                            }
                        }
                        Some(Err(error)) => {
                            watch_failures += 1;
                            if watch_failures == 1 {
                                tracing::warn!(
                                    lease = %self.lease,
                                    %error,
                                    "watching the lease failed (retrying with backoff); until it works, \
                                     expiry is noticed at the retry period's polls"
                                );
                            } else {
                                tracing::debug!(lease = %self.lease, %error, "watching the lease failed");
                            }
                        }
                        // The watcher never ends on its own; if it did, the polls go on.
                        None => watch = futures::stream::pending().boxed(),
                    },
                }
            }
        }
    }

    /// The candidate's watch on the Lease, restarted with backoff on errors by kube's watcher.
    fn watch_lease(&self) -> BoxStream<'static, Result<Event<Lease>, watcher::Error>> {
        let config =
            watcher::Config::default().fields(&format!("metadata.name={}", self.elector.name));
        watcher(self.elector.api.clone(), config)
            .default_backoff()
            .boxed()
    }

    /// client-go's `renew`: every retry period renew; give up when no attempt succeeded within
    /// the renew deadline (measured from the start of the last successful attempt), or at once
    /// when another holder is seen.
    async fn lead(&mut self, token: &CancellationToken, acquired_at: Instant) -> StepDownReason {
        tracing::info!(
            lease = %self.lease,
            identity = %self.elector.identity,
            "successfully acquired lease, leading"
        );
        self.health.renewed(Instant::now());
        self.set_metric(true);
        self.state.send_replace(LeaderState::Leading);
        self.record_event("became leader");
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

    /// Publishes the end of the election, then releases the lease after a cancellation.
    ///
    /// The "stopped leading" event of a cancelled leader is written while it still holds the lease (before the
    /// fence is revoked and the lease released), so a fenced recorder writes it. After a lost lease the fence
    /// is revoked first: nothing may be written in our name any more, and a fenced recorder drops the event
    /// (Go's CCM exits before its broadcaster writes it).
    async fn finish(mut self, reason: StepDownReason, led: bool) -> StepDownReason {
        let cancelled = reason == StepDownReason::Cancelled;
        let events_deadline = Instant::now() + self.elector.api_timeout;
        if led && cancelled {
            self.record_event("stopped leading");
            self.flush_events(events_deadline).await;
        }
        self.elector.fence.revoke();
        self.health.not_leading();
        self.set_metric(false);
        self.state.send_replace(LeaderState::Stopped {
            reason: reason.clone(),
        });
        if led {
            if cancelled {
                tracing::info!(lease = %self.lease, "leader election cancelled, stopped leading");
            } else {
                tracing::error!(lease = %self.lease, %reason, "leader election lost");
                self.record_event("stopped leading");
            }
        }
        if cancelled && self.elector.release_on_cancel && (led || self.maybe_holding) {
            self.release().await;
        }
        self.flush_events(events_deadline).await;
        reason
    }

    /// Waits until the recorder's events are written or given up, at most until `deadline`.
    async fn flush_events(&self, deadline: Instant) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        if tokio::time::timeout_at(deadline, recorder.sink().flush())
            .await
            .is_err()
        {
            tracing::warn!(lease = %self.lease, "leader election events not written in time");
        }
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
            let spec = spec_of(&current);
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
                let lease = self.new_lease(Some(spec));
                self.write(Write::Create, lease, true).await
            }
            Action::Acquire(spec) | Action::Renew(spec) => {
                let Some(current) = current else {
                    // `step` answers Create for an absent Lease; nothing to update.
                    return Ok(Attempt::Conflict);
                };
                if was_leader && self.election.is_leader() {
                    self.elector.metrics.slowpath_exercised(&self.elector.name);
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
        self.elector
            .metrics
            .set_leading(&self.elector.name, leading);
    }

    /// Emits a `LeaderElection` event on the Lease, client-go's `"<identity> <what>"`: queued for the
    /// recorder's background writer, never waited for here.
    fn record_event(&self, what: &str) {
        if let Some(recorder) = &self.recorder {
            let message = format!("{} {what}", self.elector.identity);
            let lease = self.cached.clone().unwrap_or_else(|| self.new_lease(None));
            recorder.normal(&lease.object_ref(&()), EVENT_REASON, message);
        }
    }

    /// The Lease `namespace/name` with `spec` and no other field, as a create sends it.
    fn new_lease(&self, spec: Option<LeaseSpec>) -> Lease {
        let metadata = ObjectMeta {
            name: Some(self.elector.name.clone()),
            namespace: Some(self.elector.namespace.clone()),
            ..ObjectMeta::default()
        };
        Lease { metadata, spec }
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
