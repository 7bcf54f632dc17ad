//! [`RateLimitInterceptor`], the async layer over the budget's state machine, and [`Abandoned`].

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use scopeguard::ScopeGuard;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{CloudError, ErrorKind};
use crate::intercept::{CallInfo, Operation, ProviderInterceptor};
use crate::runtime::metrics::{Labels, SharedRegistry, labels};

use super::adaptive::AimdConfig;
use super::config::{BudgetError, CloudBudget};
use super::metrics::latency_histogram;
use super::priority::CallPriority;
use super::scheduler::{self, Outcome, Scheduler};

/// The error of a call abandoned while waiting for budget because the CCM is stopping (see [`is_abandoned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{ABANDONED}")]
pub struct Abandoned;

const ABANDONED: &str = "abandoned while waiting for the cloud-call budget: shutting down";

/// True if `error` (or any error in its source chain) is a call the budget gave up at shutdown. Such calls
/// never reached the cloud; the budget reports them in one summary line, so callers need not log each one.
///
/// The instance cache hands callers that shared a call a copy of its error that keeps only the message, so the
/// message is recognised too.
///
/// ```
/// use ccm_core::CloudError;
/// use ccm_core::budget::{Abandoned, is_abandoned};
///
/// let err = CloudError::provider("cloud call instance-exists for fake://n1", Abandoned).context("node n1");
/// assert!(is_abandoned(&err));
/// assert!(is_abandoned(&err.clone()));
/// assert!(!is_abandoned(&CloudError::message("boom")));
/// ```
pub fn is_abandoned(error: &(dyn StdError + 'static)) -> bool {
    crate::error::causes(error).any(|err| {
        err.is::<Abandoned>() || (err.source().is_none() && err.to_string().ends_with(ABANDONED))
    })
}

fn abandoned(call: &CallInfo<'_>) -> CloudError {
    CloudError::provider(
        format!("cloud call {} for {}", call.operation, call.target),
        Abandoned,
    )
}

/// Waits for budget before each provider call, learns from each answer, and gives waiting calls up at shutdown
/// (see the [module documentation](super)). The thin async layer over the pure state machine
/// (`budget/scheduler.rs` and [`adaptive`](super::adaptive), unit-tested with explicit times): a call that may go
/// returns at once, one that must wait parks on a channel, and one dispatcher task (started when a call first has
/// to wait, gone when none waits) wakes the waiting calls at the times the state machine says.
#[derive(Debug)]
pub struct RateLimitInterceptor {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Notify,
    shutdown: CancellationToken,
    metrics: std::sync::OnceLock<BudgetMetrics>,
}

#[derive(Debug)]
struct State {
    scheduler: Scheduler,
    waiters: HashMap<u64, oneshot::Sender<()>>,
    dispatcher: bool,
    /// The adaptive limit last reported (to log when it starts and stops limiting).
    limiting: bool,
}

#[derive(Debug, Clone)]
struct BudgetMetrics {
    waits: Family<Labels, Histogram>,
    rate: Gauge<f64, AtomicU64>,
    throttled: Family<Labels, Counter>,
    waiting: Family<Labels, Gauge>,
}

impl Shared {
    /// Update the gauges from the state (with the lock held).
    fn report(&self, state: &mut State, now: Instant) {
        let Some(metrics) = self.metrics.get() else {
            return;
        };
        metrics
            .rate
            .set(state.scheduler.rate(now).unwrap_or_default());
        for (priority, count) in CallPriority::ALL.iter().zip(state.scheduler.waiting()) {
            metrics
                .waiting
                .get_or_create(&labels(&[("priority", priority.as_str())]))
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// Hand the grants to their waiting callers; true if `mine` is among them.
    fn deliver(state: &mut State, grants: Vec<scheduler::Grant>, mine: Option<u64>) -> bool {
        let mut granted = false;
        for grant in grants {
            if Some(grant.id) == mine {
                granted = true;
            } else if let Some(waiter) = state.waiters.remove(&grant.id) {
                // a caller that gave up meanwhile wasted this token; nothing else to do
                let _ = waiter.send(());
            }
        }
        granted
    }

    /// Log the calls abandoned at shutdown, in one line.
    fn log_abandoned(state: &mut State) {
        let abandoned = state.scheduler.take_abandoned();
        if abandoned.is_empty() {
            return;
        }
        let total: usize = abandoned.values().sum();
        let by_operation = abandoned
            .iter()
            .map(|(op, n)| format!("{op}={n}"))
            .collect::<Vec<_>>()
            .join(", ");
        tracing::info!(
            calls = total,
            by_operation = %by_operation,
            "cloud calls abandoned at shutdown while waiting for the cloud-call budget"
        );
    }
}

/// The one task that wakes waiting calls: it sleeps until the state machine's next wake-up (or a change of
/// state, or shutdown), grants what may go, and ends when no call waits.
async fn dispatch(shared: Arc<Shared>) {
    loop {
        let next = {
            let mut state = shared.state.lock();
            let now = Instant::now();
            if shared.shutdown.is_cancelled() {
                for id in state.scheduler.shut_down() {
                    // dropping the sender fails the waiting call
                    state.waiters.remove(&id);
                }
                Shared::log_abandoned(&mut state);
                shared.report(&mut state, now);
                state.dispatcher = false;
                return;
            }
            let grants = state.scheduler.dispatch(now);
            Shared::deliver(&mut state, grants, None);
            shared.report(&mut state, now);
            match state.scheduler.next_wakeup(now) {
                None => {
                    state.dispatcher = false;
                    return;
                }
                // a state that says "now" again after granting what it could: try again a tick later
                Some(at) => at.max(now + Duration::from_micros(100)),
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = shared.wake.notified() => {}
            _ = shared.shutdown.cancelled() => {}
        }
    }
}

impl RateLimitInterceptor {
    /// A limiter for `budget` with the default [`AimdConfig`]; waiting calls fail once `shutdown` is cancelled.
    pub fn new(budget: &CloudBudget, shutdown: CancellationToken) -> Result<Self, BudgetError> {
        Self::with_aimd(budget, AimdConfig::default(), shutdown)
    }

    /// A limiter for `budget` whose adaptive rate (when `budget.adaptive`) is tuned by `aimd`.
    pub fn with_aimd(
        budget: &CloudBudget,
        aimd: AimdConfig,
        shutdown: CancellationToken,
    ) -> Result<Self, BudgetError> {
        budget.validate()?;
        Ok(RateLimitInterceptor {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    scheduler: Scheduler::new(budget, aimd, Instant::now()),
                    waiters: HashMap::new(),
                    dispatcher: false,
                    limiting: false,
                }),
                wake: Notify::new(),
                shutdown,
                metrics: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Register the budget's metrics into `registry`:
    ///
    /// - `cloudprovider_api_budget_wait_seconds{operation}`: how long each call waited for budget (a histogram
    ///   from 1 ms to about 65 s; calls that did not wait land in the lowest bucket). A growing wait means the
    ///   budget, not the cloud, limits the CCM;
    /// - `cloudprovider_api_budget_rate`: the rate calls may go at now, calls per second (the lower of the hard
    ///   cap and the adaptive limit); 0 while nothing limits;
    /// - `cloudprovider_api_budget_throttled_total{operation}`: throttled answers the budget adapted to;
    /// - `cloudprovider_api_budget_waiting{priority}`: calls waiting now, by [`CallPriority`].
    pub fn with_metrics(self, registry: &SharedRegistry) -> Self {
        let metrics = BudgetMetrics {
            waits: registry.registered(
                "cloudprovider_api_budget_wait_seconds",
                "Time cloud provider calls waited for the client-side cloud-call budget, by operation",
                Family::new_with_constructor(latency_histogram),
            ),
            rate: registry.registered(
                "cloudprovider_api_budget_rate",
                "Cloud provider calls per second the cloud-call budget allows now (hard cap or adaptive limit); 0 = no limit",
                Gauge::default(),
            ),
            throttled: registry.registered(
                "cloudprovider_api_budget_throttled",
                "Throttled cloud provider answers the cloud-call budget adapted to, by operation",
                Family::default(),
            ),
            waiting: registry.registered(
                "cloudprovider_api_budget_waiting",
                "Cloud provider calls waiting for the cloud-call budget, by priority",
                Family::default(),
            ),
        };
        let _ = self.shared.metrics.set(metrics);
        // sets the rate and every priority's waiting gauge, so each series shows from the start
        self.shared
            .report(&mut self.shared.state.lock(), Instant::now());
        self
    }

    fn observe_wait(&self, operation: Operation, waited: Duration) {
        if let Some(metrics) = self.shared.metrics.get() {
            metrics
                .waits
                .get_or_create(&labels(&[("operation", operation.as_str())]))
                .observe(waited.as_secs_f64());
        }
    }
}

#[async_trait]
impl ProviderInterceptor for RateLimitInterceptor {
    async fn before_call(&self, call: &CallInfo<'_>) -> Result<(), CloudError> {
        let priority = CallPriority::current();
        let operation = call.operation;
        let arrived = Instant::now();
        let (id, waiting) = {
            let mut state = self.shared.state.lock();
            let admitted = (!self.shared.shutdown.is_cancelled())
                .then(|| state.scheduler.arrive(operation, priority, arrived));
            let Some(Some((id, grants))) = admitted else {
                drop(state);
                tracing::debug!(%operation, target = call.target, "cloud call refused: shutting down");
                return Err(abandoned(call));
            };
            if Shared::deliver(&mut state, grants, Some(id)) {
                drop(state);
                self.observe_wait(operation, Duration::ZERO);
                return Ok(());
            }
            let (tx, rx) = oneshot::channel();
            state.waiters.insert(id, tx);
            if state.dispatcher {
                self.shared.wake.notify_one();
            } else {
                state.dispatcher = true;
                tokio::spawn(dispatch(self.shared.clone()));
            }
            self.shared.report(&mut state, arrived);
            (id, rx)
        };
        tracing::trace!(%operation, target = call.target, %priority, "waiting for cloud budget");
        // Takes the call out of the queue if its caller stops waiting (a dropped future).
        let guard = scopeguard::guard((), |()| {
            let mut state = self.shared.state.lock();
            let shutting_down = self.shared.shutdown.is_cancelled();
            state.scheduler.cancel(id, operation, shutting_down);
            state.waiters.remove(&id);
            self.shared.report(&mut state, Instant::now());
        });
        let granted = waiting.await;
        ScopeGuard::into_inner(guard);
        granted.map_err(|_| abandoned(call))?;
        self.observe_wait(operation, arrived.elapsed());
        Ok(())
    }

    fn after_call(
        &self,
        call: &CallInfo<'_>,
        _elapsed: Duration,
        outcome: Result<(), &CloudError>,
    ) {
        let outcome = match outcome {
            Ok(()) => Outcome::Accepted,
            // the budget's own refusal, or the leadership fence's: the cloud never saw the call
            Err(err) if is_abandoned(err) || err.kind() == ErrorKind::NotLeader => return,
            Err(err) => match err.kind() {
                ErrorKind::Throttled => Outcome::Congested {
                    retry_after: err.retry_after(),
                },
                ErrorKind::Timeout => Outcome::Congested { retry_after: None },
                _ => Outcome::Accepted,
            },
        };
        let throttled = outcome != Outcome::Accepted;
        if throttled && let Some(metrics) = self.shared.metrics.get() {
            metrics
                .throttled
                .get_or_create(&labels(&[("operation", call.operation.as_str())]))
                .inc();
        }
        let now = Instant::now();
        let mut state = self.shared.state.lock();
        let cut = state.scheduler.on_outcome(call.operation, outcome, now);
        let limit = state.scheduler.adaptive_limit(now);
        match (state.limiting, limit) {
            (false, Some(limit)) => {
                state.limiting = true;
                tracing::info!(operation = %call.operation, limit = format!("{limit:.1}/s"), "the cloud throttled calls: limiting the cloud-call rate");
            }
            (true, None) => {
                state.limiting = false;
                tracing::info!(
                    "no throttling for a while: the cloud-call rate is no longer limited"
                );
            }
            (true, Some(limit)) if cut => {
                tracing::debug!(operation = %call.operation, limit = format!("{limit:.1}/s"), "the cloud throttled calls: lowering the cloud-call rate");
            }
            _ => {}
        }
        self.shared.report(&mut state, now);
        if state.dispatcher && (throttled || cut) {
            self.shared.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    impl RateLimitInterceptor {
        /// The rate calls may go at now, calls per second (`None`: nothing limits).
        fn current_rate(&self) -> Option<f64> {
            self.shared.state.lock().scheduler.rate(Instant::now())
        }
    }

    fn call(op: Operation) -> CallInfo<'static> {
        CallInfo::new(op, "n1")
    }

    #[tokio::test(start_paused = true)]
    async fn calls_wait_for_budget_instead_of_failing() {
        let limiter = RateLimitInterceptor::new(
            &CloudBudget::default().with_qps(10.0).with_burst(2),
            CancellationToken::new(),
        )
        .unwrap();
        let start = Instant::now();
        for _ in 0..12 {
            limiter
                .before_call(&call(Operation::InstanceExists))
                .await
                .unwrap();
        }
        // 2 immediately, then 10 more at 10/s.
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn operation_limits_stack_with_provider_limit() {
        let budget = CloudBudget::default()
            .with_qps(100.0)
            .with_burst(100)
            .with_operation(Operation::ListRoutes, 1.0, 1);
        let limiter = RateLimitInterceptor::new(&budget, CancellationToken::new()).unwrap();
        let start = Instant::now();
        for _ in 0..3 {
            limiter
                .before_call(&call(Operation::ListRoutes))
                .await
                .unwrap();
        }
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        let start = Instant::now();
        limiter
            .before_call(&call(Operation::InstanceExists))
            .await
            .unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "other operations are not slowed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_call_respects_shutdown() {
        let token = CancellationToken::new();
        let limiter = RateLimitInterceptor::new(
            &CloudBudget::default().with_qps(0.01).with_burst(1),
            token.clone(),
        )
        .unwrap();
        limiter
            .before_call(&call(Operation::InstanceExists))
            .await
            .unwrap();
        let cancel = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            token.cancel();
        };
        let info = call(Operation::InstanceExists);
        let (result, ()) = tokio::join!(limiter.before_call(&info), cancel);
        assert!(result.unwrap_err().to_string().contains("shutting down"));
    }

    #[tokio::test(start_paused = true)]
    async fn budget_waits_are_observed() {
        let registry = SharedRegistry::new();
        let limiter = RateLimitInterceptor::new(
            &CloudBudget::default().with_qps(1.0).with_burst(1),
            CancellationToken::new(),
        )
        .unwrap()
        .with_metrics(&registry);
        for _ in 0..3 {
            limiter
                .before_call(&call(Operation::ListRoutes))
                .await
                .unwrap();
        }
        let text = registry.encode();
        let op = Operation::ListRoutes;
        assert!(
            text.contains(&format!(
                r#"cloudprovider_api_budget_wait_seconds_count{{operation="{op}"}} 3"#
            )),
            "{text}"
        );
        // one after another: waited 0 s, 1 s and 1 s
        assert!(
            text.contains(&format!(
                r#"cloudprovider_api_budget_wait_seconds_sum{{operation="{op}"}} 2.0"#
            )),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unlimited_never_waits() {
        let limiter =
            RateLimitInterceptor::new(&CloudBudget::unlimited(), CancellationToken::new()).unwrap();
        let start = Instant::now();
        for _ in 0..10_000 {
            limiter
                .before_call(&call(Operation::InstanceMetadata))
                .await
                .unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    fn throttled(retry_after: Option<Duration>) -> CloudError {
        CloudError::Throttled {
            message: "quota".into(),
            retry_after,
        }
    }

    /// Report `n` accepted calls spread over the last second, then one throttled answer.
    fn throttle_after(
        limiter: &RateLimitInterceptor,
        n: u32,
        op: Operation,
        retry: Option<Duration>,
    ) {
        let info = call(op);
        for _ in 0..n {
            limiter.after_call(&info, Duration::ZERO, Ok(()));
        }
        limiter.after_call(&info, Duration::ZERO, Err(&throttled(retry)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_lets_every_call_go_while_the_cloud_accepts_them() {
        let registry = SharedRegistry::new();
        let limiter = RateLimitInterceptor::new(&CloudBudget::default(), CancellationToken::new())
            .unwrap()
            .with_metrics(&registry);
        let start = Instant::now();
        for _ in 0..10_000 {
            let info = call(Operation::InstanceMetadata);
            limiter.before_call(&info).await.unwrap();
            limiter.after_call(&info, Duration::ZERO, Ok(()));
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(limiter.current_rate(), None);
        let text = registry.encode();
        assert!(text.contains("cloudprovider_api_budget_rate 0.0"), "{text}");
        assert!(
            text.contains(r#"cloudprovider_api_budget_wait_seconds_sum{operation="instance-metadata-by-provider-id"} 0.0"#),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_answer_limits_the_rate_and_holds_the_class_until_the_retry_after() {
        let registry = SharedRegistry::new();
        let limiter = RateLimitInterceptor::new(&CloudBudget::default(), CancellationToken::new())
            .unwrap()
            .with_metrics(&registry);
        // the cloud accepted 100 calls in the last second, then throttled one and asked for 500 ms
        throttle_after(
            &limiter,
            100,
            Operation::InstanceExists,
            Some(Duration::from_millis(500)),
        );
        let rate = limiter.current_rate().unwrap();
        assert!((rate - 90.0).abs() < 0.01, "{rate}");
        let text = registry.encode();
        assert!(
            text.contains("cloudprovider_api_budget_rate 90.0"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"cloudprovider_api_budget_throttled_total{operation="instance-exists"} 1"#
            ),
            "{text}"
        );
        // another class waits only for a token of the new limit: 1/90 s
        let start = Instant::now();
        limiter
            .before_call(&call(Operation::ListRoutes))
            .await
            .unwrap();
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(11) && waited <= Duration::from_millis(13),
            "{waited:?}"
        );
        // the throttled class (instances) waits for the retry-after
        limiter
            .before_call(&call(Operation::InstanceMetadata))
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        // timeouts are congestion too, but hold nothing
        let info = call(Operation::InstanceShutdown);
        let timeout = CloudError::Timeout {
            operation: Operation::InstanceShutdown,
            after: Duration::from_secs(30),
        };
        tokio::time::advance(Duration::from_millis(300)).await;
        limiter.after_call(&info, Duration::ZERO, Err(&timeout));
        let before = Instant::now();
        limiter.before_call(&info).await.unwrap();
        assert!(before.elapsed() < Duration::from_millis(100));
        // other errors are answers the cloud gave: no congestion
        assert_eq!(
            limiter.shared.state.lock().scheduler.take_abandoned().len(),
            0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn initialization_never_waits_behind_sweeps() {
        let limiter = Arc::new(
            RateLimitInterceptor::new(
                &CloudBudget::default().with_qps(10.0).with_burst(1),
                CancellationToken::new(),
            )
            .unwrap(),
        );
        let order = Arc::new(Mutex::new(Vec::new()));
        let spawn = |name: &'static str, priority: CallPriority, op: Operation| {
            let limiter = limiter.clone();
            let order = order.clone();
            tokio::spawn(priority.scope(async move {
                limiter.before_call(&call(op)).await.unwrap();
                order.lock().unwrap().push(name);
            }))
        };
        let mut tasks = Vec::new();
        // a lifecycle sweep and an address sync queue 6 calls
        for name in ["sweep-1", "sweep-2", "sweep-3"] {
            tasks.push(spawn(name, CallPriority::Low, Operation::InstanceExists));
        }
        tasks.push(spawn(
            "lb",
            CallPriority::Normal,
            Operation::UpdateLoadBalancer,
        ));
        for name in ["sync-1", "sync-2"] {
            tasks.push(spawn(name, CallPriority::Low, Operation::InstanceMetadata));
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        // two new nodes arrive while the sweeps wait
        for name in ["init-1", "init-2"] {
            tasks.push(spawn(name, CallPriority::High, Operation::InstanceMetadata));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(
            *order.lock().unwrap(),
            // the burst token at once, then one every 100 ms: the load balancer (Normal) before the sweeps,
            // and the two initializations, arriving later, before every sweep call still waiting
            [
                "sweep-1", "lb", "init-1", "init-2", "sweep-2", "sweep-3", "sync-1", "sync-2"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_stops_waiting_leaves_the_queue() {
        let limiter = RateLimitInterceptor::new(
            &CloudBudget::default().with_qps(1.0).with_burst(1),
            CancellationToken::new(),
        )
        .unwrap();
        limiter
            .before_call(&call(Operation::ListRoutes))
            .await
            .unwrap();
        let gave_up = tokio::time::timeout(
            Duration::from_millis(100),
            limiter.before_call(&call(Operation::ListRoutes)),
        )
        .await;
        assert!(gave_up.is_err());
        assert_eq!(limiter.shared.state.lock().scheduler.waiting(), [0, 0, 0]);
        let start = Instant::now();
        limiter
            .before_call(&call(Operation::ListRoutes))
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(900));
    }

    /// Counts the events whose message says calls were abandoned.
    struct CountAbandoned(Arc<std::sync::atomic::AtomicUsize>);

    impl tracing::Subscriber for CountAbandoned {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            struct Message(String);
            impl tracing::field::Visit for Message {
                fn record_debug(
                    &mut self,
                    field: &tracing::field::Field,
                    value: &dyn std::fmt::Debug,
                ) {
                    use std::fmt::Write;
                    let _ = write!(self.0, "{}={value:?} ", field.name());
                }
            }
            let mut message = Message(String::new());
            event.record(&mut message);
            if message.0.contains("abandoned") {
                assert!(
                    message.0.contains("calls=4")
                        && message.0.contains(
                            "by_operation=instance-exists=3, instance-metadata-by-provider-id=1"
                        ),
                    "{}",
                    message.0
                );
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_abandons_waiting_calls_with_one_summary_line() {
        let lines = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let _log = tracing::subscriber::set_default(CountAbandoned(lines.clone()));
        let token = CancellationToken::new();
        let limiter = Arc::new(
            RateLimitInterceptor::new(
                &CloudBudget::default().with_qps(0.1).with_burst(1),
                token.clone(),
            )
            .unwrap(),
        );
        limiter
            .before_call(&call(Operation::InstanceExists))
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for op in [
            Operation::InstanceExists,
            Operation::InstanceExists,
            Operation::InstanceMetadata,
            Operation::InstanceExists,
        ] {
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(
                async move { limiter.before_call(&call(op)).await },
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        token.cancel();
        for task in tasks {
            let err = task.await.unwrap().unwrap_err();
            assert!(is_abandoned(&err), "{err}");
            assert!(err.to_string().contains("shutting down"), "{err}");
            // the budget's own refusal is not an answer of the cloud
            limiter.after_call(&call(Operation::InstanceExists), Duration::ZERO, Err(&err));
        }
        // calls after shutdown fail at once, and are not logged again
        let err = limiter
            .before_call(&call(Operation::ListRoutes))
            .await
            .unwrap_err();
        assert!(is_abandoned(&err));
        tokio::task::yield_now().await;
        assert_eq!(lines.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
