//! The builder of the leader elector; its loop is in [`runner`].

use std::time::Duration;

use ccm_core::runtime::events::{EventRecorder, EventSink};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use crate::config::{self, Timing};
use crate::handle::LeaderHandle;
use crate::{Error, LeaderElectionMetrics, default_identity};
use ccm_core::fence::LeadershipFence;

mod runner;

/// The default event reporter (`reportingController`) and field manager.
pub const DEFAULT_COMPONENT: &str = "cloud-controller-manager";
/// The `reason` of the events recorded on the Lease, as in client-go.
pub const EVENT_REASON: &str = ccm_core::names::events::LEADER_ELECTION;
/// `reportingInstance` of an Event is limited to 128 characters.
const MAX_REPORTING_INSTANCE: usize = 128;

/// Where the `LeaderElection` Events go.
#[derive(Clone, Debug)]
enum Events {
    /// Not recorded.
    Off,
    /// A recorder of its own (see [`LeaderElectorBuilder::events`]), made when the loop starts.
    Own,
    /// The recorder the runner gave.
    Given(EventRecorder),
}

/// Builds a [`LeaderElector`]; created by [`LeaderElector::builder`]. Each method gives its setting's
/// default: the reference CCM's, except that the lease is released on cancellation.
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
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until built"]
pub struct LeaderElectorBuilder {
    /// The elector being configured; `build` resolves its identity and API timeout.
    elector: LeaderElector,
    identity: Option<String>,
    api_timeout: Option<Duration>,
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
        self.elector.timing.lease_duration = lease_duration;
        self
    }

    /// How long the leader keeps retrying a failed renewal before it steps down
    /// (`--leader-elect-renew-deadline`, default 10 s), measured from the start of its last
    /// successful renewal.
    pub fn renew_deadline(mut self, renew_deadline: Duration) -> Self {
        self.elector.timing.renew_deadline = renew_deadline;
        self
    }

    /// The interval between attempts (`--leader-elect-retry-period`, default 2 s); candidates
    /// add client-go's jitter of up to 1.2 periods.
    pub fn retry_period(mut self, retry_period: Duration) -> Self {
        self.elector.timing.retry_period = retry_period;
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
        self.elector.release_on_cancel = release;
        self
    }

    /// How long beyond the lease duration an overdue renewal is tolerated before
    /// [`LeaderHealth::check`](crate::LeaderHealth::check) fails (default 20 s, as in the reference CCM).
    pub fn health_tolerance(mut self, tolerance: Duration) -> Self {
        self.elector.health_tolerance = tolerance;
        self
    }

    /// Keep `leader_election_master_status{name}` (and the slow-path counter) up to date in
    /// these metrics (default: none kept); see [`LeaderElectionMetrics::register`].
    pub fn metrics(mut self, metrics: LeaderElectionMetrics) -> Self {
        self.elector.metrics = metrics;
        self
    }

    /// Record `LeaderElection` events on the Lease (`<identity> became leader`, `<identity>
    /// stopped leading`). Default `true`: through a recorder of the kit's event pipeline
    /// ([`ccm_core::runtime::events`]) of its own, component `cloud-controller-manager`, instance the
    /// identity, written with the elector's client. `false` records none (and forgets a recorder
    /// given with [`event_recorder`](Self::event_recorder)). Failures are only logged.
    pub fn events(mut self, enabled: bool) -> Self {
        self.elector.events = match (enabled, self.elector.events) {
            (false, _) => Events::Off,
            (true, Events::Off) => Events::Own,
            (true, kept) => kept,
        };
        self
    }

    /// Record the `LeaderElection` events through `recorder` (the runner's event pipeline: correlated,
    /// never blocking the election, and — with a fenced client — never written once leadership is lost).
    /// Use component `cloud-controller-manager`, as Go's CCM does. The elector waits for its own events
    /// (at most the API timeout) before it releases the Lease and before its loop ends; give it a recorder
    /// whose sink is not closed before the elector's token is cancelled.
    ///
    /// ```no_run
    /// use ccm_core::runtime::events::EventSink;
    /// use ccm_leaderelection::{DEFAULT_COMPONENT, LeaderElector};
    ///
    /// # fn doc(client: kube::Client) -> Result<(), ccm_leaderelection::Error> {
    /// let identity = ccm_leaderelection::default_identity()?;
    /// let recorder = EventSink::new().recorder(client.clone(), DEFAULT_COMPONENT, Some(identity.clone()));
    /// let elector = LeaderElector::builder(client, "kube-system", "cloud-controller-manager")
    ///     .identity(identity)
    ///     .event_recorder(recorder)
    ///     .build()?;
    /// # drop(elector);
    /// # Ok(())
    /// # }
    /// ```
    pub fn event_recorder(mut self, recorder: EventRecorder) -> Self {
        self.elector.events = Events::Given(recorder);
        self
    }

    /// The [leadership fence](ccm_core::fence) this elector confirms on every accepted acquire or renewal
    /// (valid for the renew deadline from when the request was sent) and revokes when it stops leading; give
    /// the same fence to the clients and the cloud provider that must only act while leading. Default: a
    /// fence of its own, read with [`LeaderHandle::fence`].
    pub fn fence(mut self, fence: LeadershipFence) -> Self {
        self.elector.fence = fence;
        self
    }

    /// The field manager of the Lease writes (default `cloud-controller-manager`).
    pub fn field_manager(mut self, field_manager: impl Into<String>) -> Self {
        self.elector.post_params.field_manager = Some(field_manager.into());
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
        let mut elector = self.elector;
        let t = elector.timing;
        let timings = [t.lease_duration, t.renew_deadline, t.retry_period];
        let violations = config::violations(timings, &elector.namespace, &elector.name);
        if let Some(error) = violations.into_iter().next() {
            return Err(error);
        }
        elector.api_timeout = self
            .api_timeout
            .unwrap_or_else(|| elector.timing.default_api_timeout());
        config::validate_api_timeout(elector.api_timeout, &elector.timing)?;
        elector.identity = self.identity.map_or_else(default_identity, Ok)?;
        if elector.identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        Ok(elector)
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    let end = (0..=max.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i));
    &s[..end.unwrap_or(0)]
}

/// A validated leader elector for one Lease; [`run`](Self::run) starts it. It writes the Lease exactly like
/// client-go, so that it can share it with Go replicas (e.g. while migrating from a Go CCM; see the [crate]).
#[derive(Clone, Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    timing: Timing,
    api_timeout: Duration,
    release_on_cancel: bool,
    health_tolerance: Duration,
    metrics: LeaderElectionMetrics,
    fence: LeadershipFence,
    events: Events,
    post_params: PostParams,
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
        let namespace = namespace.into();
        let elector = LeaderElector {
            api: Api::namespaced(client, &namespace),
            namespace,
            name: name.into(),
            // Both resolved by `build`.
            identity: String::new(),
            api_timeout: Duration::ZERO,
            timing: Timing::default(),
            release_on_cancel: true,
            health_tolerance: config::DEFAULT_HEALTH_TOLERANCE,
            metrics: LeaderElectionMetrics::default(),
            fence: LeadershipFence::default(),
            events: Events::Own,
            post_params: PostParams {
                dry_run: false,
                field_manager: Some(DEFAULT_COMPONENT.to_owned()),
            },
        };
        LeaderElectorBuilder {
            elector,
            identity: None,
            api_timeout: None,
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

    /// The recorder of the `LeaderElection` events, if any (an own one is made here, on the runtime).
    fn recorder(&self) -> Option<EventRecorder> {
        match &self.events {
            Events::Off => None,
            Events::Own => Some(EventSink::new().recorder(
                self.api.clone().into_client(),
                DEFAULT_COMPONENT,
                Some(truncate(&self.identity, MAX_REPORTING_INSTANCE).to_owned()),
            )),
            Events::Given(recorder) => Some(recorder.clone()),
        }
    }

    /// Spawns the election loop on the current Tokio runtime and returns its handle.
    ///
    /// The loop tries to acquire the lease every retry period (jittered) and, watching the Lease, the moment
    /// the lease it observed runs out or is released; then it renews it every retry period. It stops (state
    /// [`LeaderState::Stopped`](crate::LeaderState::Stopped)) when leadership is lost or `token` is
    /// cancelled; after a cancellation it releases the lease if release-on-cancel is on and it held it.
    ///
    /// # Panics
    ///
    /// If called outside a Tokio runtime.
    pub fn run(self, token: CancellationToken) -> LeaderHandle {
        runner::start(self, token)
    }
}
