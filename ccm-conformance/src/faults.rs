//! A fault-injecting [`ProviderInterceptor`]: make chosen provider operations fail or slow down (once, N
//! times, always, or at random with a seeded generator), to see a CCM converge under cloud faults.
//!
//! [`FaultInjector`] plugs into [`InterceptedProvider`](ccm_core::intercept::InterceptedProvider), so it
//! works around any provider, a vendor's real one included:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use ccm_conformance::faults::{FaultInjector, FaultRule, InjectedError};
//! use ccm_core::intercept::{InterceptedProvider, Operation};
//! use ccm_core::CloudProvider;
//!
//! let faults = Arc::new(FaultInjector::new());
//! // The first ensure answers "retry after 5 s", as a cloud still building the load balancer would.
//! faults.add(FaultRule::fail(Operation::EnsureLoadBalancer, InjectedError::Retry(Duration::from_secs(5))).once());
//! // Every metadata lookup takes 300 ms longer.
//! faults.add(FaultRule::delay(Operation::InstanceMetadata, Duration::from_millis(300)));
//! // One call in ten, of any operation, is throttled.
//! faults.add(FaultRule::fail_any(InjectedError::Throttled).with_probability(0.1));
//!
//! let provider: Arc<dyn CloudProvider> = Arc::new(
//!     InterceptedProvider::new(Arc::new(ccm_conformance::fake::cloud())).with_shared_interceptor(faults.clone()),
//! );
//! ```
//!
//! Rules can also be written as text (for a flag or an environment variable), see
//! [`FaultInjector::from_spec`]:
//!
//! ```
//! use ccm_conformance::faults::FaultInjector;
//!
//! let faults = FaultInjector::from_spec("create=retry:5s*1; instance-exists/node-a=not-found*3; *=latency:50ms").unwrap();
//! assert_eq!(faults.rules().len(), 3);
//! ```
//!
//! Delays are awaited with `tokio::time::sleep`, so tests with paused time run instantly. They happen before
//! the provider is called, outside the interceptor chain's call timeout.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::CloudError;
use ccm_core::intercept::{CallInfo, Capability, Operation, ProviderInterceptor};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

/// The error a failure rule returns and how many calls a rule affects: the fake cloud's types
/// ([`ccm_provider_fake::InjectedError`], [`ccm_provider_fake::Times`]), so a fault is written the same way for
/// the fake cloud and for this injector around any provider.
///
/// [`InjectedError::Throttled`] is throttling without a delay, [`InjectedError::ThrottledFor`] asks the caller to
/// wait; [`InjectedError::Retry`] is the retry-after error. [`Times::Always`] affects every matching call until
/// the rule is removed ([`FaultInjector::clear`]); [`Times::N(0)`](Times::N) affects none.
pub use ccm_provider_fake::{InjectedError, Times};

/// The [`CloudError`] a failure rule returns for `call`: the [`InjectedError`] as the fake cloud reports it
/// ([`InjectedError::to_cloud_error`], with `latency`, the call's injected delay, as a timeout's limit), with the
/// call and target it hit as context, for example
/// `injected fault in create of "default/web": injected retry-after for create (retry after 5s)`.
///
/// The kind and retry-after delay survive the context ([`CloudError::kind`], [`CloudError::retry_after`]).
///
/// ```
/// use std::time::Duration;
/// use ccm_conformance::faults::{InjectedError, injected_cloud_error};
/// use ccm_core::ErrorKind;
/// use ccm_core::intercept::{CallInfo, Operation};
///
/// let call = CallInfo::new(Operation::EnsureLoadBalancer, "default/web");
/// let err = injected_cloud_error(&InjectedError::Retry(Duration::from_secs(5)), &call, Duration::ZERO);
/// assert_eq!(err.kind(), ErrorKind::Retry);
/// assert_eq!(err.retry_after(), Some(Duration::from_secs(5)));
/// assert!(err.to_string().starts_with("injected fault in create of \"default/web\": "));
/// ```
pub fn injected_cloud_error(
    error: &InjectedError,
    call: &CallInfo<'_>,
    latency: Duration,
) -> CloudError {
    error
        .to_cloud_error(call.operation, latency)
        .context(format!(
            "injected fault in {} of {:?}",
            call.operation, call.target
        ))
}

/// What a rule does to a matching call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultEffect {
    /// Fail the call with this error, without calling the provider.
    Fail(InjectedError),
    /// Wait this long, then go on (to other rules and the provider).
    Delay(Duration),
}

/// Which operations a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationMatch {
    /// Every operation.
    Any,
    /// One operation.
    One(Operation),
    /// Every operation of a capability.
    Capability(Capability),
}

impl OperationMatch {
    fn matches(self, operation: Operation) -> bool {
        match self {
            OperationMatch::Any => true,
            OperationMatch::One(op) => op == operation,
            OperationMatch::Capability(cap) => operation.capability() == Some(cap),
        }
    }
}

/// One fault: which calls, what happens to them, how often.
///
/// Built with [`fail`](FaultRule::fail), [`delay`](FaultRule::delay) and friends; by default it applies to
/// every matching call ([`Times::Always`]) with probability 1.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FaultRule {
    /// The operations matched.
    pub operations: OperationMatch,
    /// Only calls on this target (node name, providerID, `namespace/name`, CIDR, cluster; see
    /// [`CallInfo::target`]) match, if set.
    pub target: Option<String>,
    /// What happens.
    pub effect: FaultEffect,
    /// How many matching calls are affected.
    pub times: Times,
    /// The chance that a matching call is affected (1 = every one); draws use the injector's seeded generator.
    pub probability: f64,
}

impl FaultRule {
    fn new(operations: OperationMatch, effect: FaultEffect) -> Self {
        FaultRule {
            operations,
            target: None,
            effect,
            times: Times::Always,
            probability: 1.0,
        }
    }

    /// Fail calls of `operation` with `error`.
    pub fn fail(operation: Operation, error: InjectedError) -> Self {
        Self::new(OperationMatch::One(operation), FaultEffect::Fail(error))
    }

    /// Fail calls of every operation of `capability` with `error`.
    pub fn fail_capability(capability: Capability, error: InjectedError) -> Self {
        Self::new(
            OperationMatch::Capability(capability),
            FaultEffect::Fail(error),
        )
    }

    /// Fail calls of any operation with `error`.
    pub fn fail_any(error: InjectedError) -> Self {
        Self::new(OperationMatch::Any, FaultEffect::Fail(error))
    }

    /// Delay calls of `operation` by `latency`.
    pub fn delay(operation: Operation, latency: Duration) -> Self {
        Self::new(OperationMatch::One(operation), FaultEffect::Delay(latency))
    }

    /// Delay calls of any operation by `latency`.
    pub fn delay_any(latency: Duration) -> Self {
        Self::new(OperationMatch::Any, FaultEffect::Delay(latency))
    }

    /// Only calls on `target`.
    pub fn for_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Only the next matching call.
    pub fn once(mut self) -> Self {
        self.times = Times::Once;
        self
    }

    /// Only the next `n` matching calls.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Times::N(n);
        self
    }

    /// Every matching call (the default).
    pub fn always(mut self) -> Self {
        self.times = Times::Always;
        self
    }

    /// Affect a matching call with this probability (clamped to 0..=1).
    pub fn with_probability(mut self, probability: f64) -> Self {
        self.probability = if probability.is_nan() {
            0.0
        } else {
            probability.clamp(0.0, 1.0)
        };
        self
    }

    fn matches(&self, call: &CallInfo<'_>) -> bool {
        self.operations.matches(call.operation)
            && self.target.as_deref().is_none_or(|t| t == call.target)
    }
}

/// A rule and how many more calls it may affect (`None` = unlimited).
#[derive(Debug)]
struct Armed {
    rule: FaultRule,
    remaining: Option<u32>,
}

#[derive(Debug)]
struct State {
    rules: Vec<Armed>,
    rng: StdRng,
    fired: BTreeMap<Operation, u64>,
    delayed: BTreeMap<Operation, u64>,
}

/// A [`ProviderInterceptor`] applying [`FaultRule`]s to provider calls.
///
/// For each call the rules are tried in the order added: every matching delay rule adds its latency, and the
/// first matching failure rule fails the call (after the delays). A rule with a count stops once used up.
/// Share it (`Arc`) between the [`InterceptedProvider`](ccm_core::intercept::InterceptedProvider) and the test
/// to add rules at run time and read the counters.
pub struct FaultInjector {
    state: Mutex<State>,
}

impl fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("FaultInjector")
            .field("rules", &st.rules)
            .field("fired", &st.fired)
            .field("delayed", &st.delayed)
            .finish_non_exhaustive()
    }
}

impl Default for FaultInjector {
    fn default() -> Self {
        Self::with_seed(0)
    }
}

impl FaultInjector {
    /// An injector with no rules, drawing random numbers from seed 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// An injector with no rules whose probabilistic rules draw from `seed` (the same seed gives the same
    /// sequence of faults for the same sequence of calls).
    pub fn with_seed(seed: u64) -> Self {
        FaultInjector {
            state: Mutex::new(State {
                rules: Vec::new(),
                rng: StdRng::seed_from_u64(seed),
                fired: BTreeMap::new(),
                delayed: BTreeMap::new(),
            }),
        }
    }

    /// An injector with the rules of `spec` (see [`parse_spec`]).
    ///
    /// # Errors
    /// [`FaultSpecError`] naming the first rule that does not parse.
    pub fn from_spec(spec: &str) -> Result<Self, FaultSpecError> {
        let injector = Self::new();
        for rule in parse_spec(spec)? {
            injector.add(rule);
        }
        Ok(injector)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Add a rule (tried after the rules added before it).
    pub fn add(&self, rule: FaultRule) {
        let remaining = match rule.times {
            Times::Once => Some(1),
            Times::N(n) => Some(n),
            Times::Always => None,
        };
        self.lock().rules.push(Armed { rule, remaining });
    }

    /// Remove every rule (counters are kept).
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// The rules that can still fire.
    pub fn rules(&self) -> Vec<FaultRule> {
        self.lock()
            .rules
            .iter()
            .filter(|a| a.remaining != Some(0))
            .map(|a| a.rule.clone())
            .collect()
    }

    /// How many calls of `operation` were failed by a rule.
    pub fn failed(&self, operation: Operation) -> u64 {
        self.lock().fired.get(&operation).copied().unwrap_or(0)
    }

    /// How many calls of `operation` were delayed by a rule.
    pub fn delayed(&self, operation: Operation) -> u64 {
        self.lock().delayed.get(&operation).copied().unwrap_or(0)
    }

    /// How many calls were failed, over all operations.
    pub fn total_failed(&self) -> u64 {
        self.lock().fired.values().sum()
    }

    /// Decide the fate of one call: the total delay and the error, if any. Pure bookkeeping, no waiting.
    fn decide(&self, call: &CallInfo<'_>) -> (Duration, Option<CloudError>) {
        let mut st = self.lock();
        let State {
            rules,
            rng,
            fired,
            delayed,
        } = &mut *st;
        let mut delay = Duration::ZERO;
        let mut error = None;
        for armed in rules.iter_mut() {
            if armed.remaining == Some(0) || !armed.rule.matches(call) {
                continue;
            }
            if matches!(armed.rule.effect, FaultEffect::Fail(_)) && error.is_some() {
                continue;
            }
            let p = armed.rule.probability;
            if p < 1.0 && !rng.random_bool(p) {
                continue;
            }
            if let Some(n) = armed.remaining.as_mut() {
                *n -= 1;
            }
            match &armed.rule.effect {
                FaultEffect::Delay(latency) => {
                    delay += *latency;
                    *delayed.entry(call.operation).or_default() += 1;
                }
                FaultEffect::Fail(injected) => {
                    error = Some(injected.clone());
                    *fired.entry(call.operation).or_default() += 1;
                }
            }
        }
        rules.retain(|a| a.remaining != Some(0));
        // Built after every delay is known: a timeout reports the call's whole injected latency.
        let error = error.map(|injected| injected_cloud_error(&injected, call, delay));
        (delay, error)
    }
}

#[async_trait]
impl ProviderInterceptor for FaultInjector {
    async fn before_call(&self, call: &CallInfo<'_>) -> Result<(), CloudError> {
        let (delay, error) = self.decide(call);
        if !delay.is_zero() {
            tracing::debug!(operation = %call.operation, target = call.target, ?delay, "injected latency");
            tokio::time::sleep(delay).await;
        }
        match error {
            Some(err) => {
                tracing::debug!(operation = %call.operation, target = call.target, error = %err, "injected failure");
                Err(err)
            }
            None => Ok(()),
        }
    }
}

/// A fault rule written as text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid fault rule {rule:?}: {reason}; write <operation>[/<target>]=<effect>[*<count>|*always][@<probability>], for example create=retry:5s*1"
)]
pub struct FaultSpecError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parse fault rules written as text, separated by `;`:
///
/// `<operation>[/<target>]=<effect>[*<count>|*always][@<probability>]`
///
/// - `<operation>`: an operation's call-log name ([`Operation::as_str`]: `create`, `update`, `delete`,
///   `get-load-balancer`, `instance-exists`, `instance-metadata-by-provider-id`, `list-routes`, ...), a
///   capability as `cap:<name>` (`cap:routes`, `cap:load-balancer`, ...), or `*` for every operation;
/// - `<target>`: only calls on this target (a service key `ns/name`, a node name, a providerID, a CIDR);
/// - `<effect>`: `error` or `error:<message>`, `not-found`, `not-implemented`, `implemented-elsewhere`,
///   `retry:<duration>`, `throttled` or `throttled:<duration>`, `timeout` (the [`InjectedError`]s `Other`,
///   `InstanceNotFound`, `NotImplemented`, `ImplementedElsewhere`, `Retry`, `Throttled` or `ThrottledFor`,
///   `Timeout`), `latency:<duration>` (a delay; Go durations such as `250ms`, `5s`, `1.5s` or `1m30s`, see
///   [`ccm_core::duration`]);
/// - `*<count>`: affect only the next `count` matching calls (default: every call);
/// - `@<probability>`: affect a matching call with this probability (`0.1` = one in ten).
///
/// ```
/// use std::time::Duration;
/// use ccm_conformance::faults::{parse_spec, FaultEffect, InjectedError, Times};
///
/// let rules = parse_spec("delete/default/web=error:quota exceeded*2; *=latency:20ms@0.5").unwrap();
/// assert_eq!(rules[0].target.as_deref(), Some("default/web"));
/// assert_eq!(rules[0].effect, FaultEffect::Fail(InjectedError::Other("quota exceeded".into())));
/// assert_eq!(rules[0].times, Times::N(2));
/// assert_eq!(rules[1].effect, FaultEffect::Delay(Duration::from_millis(20)));
/// assert_eq!(rules[1].probability, 0.5);
/// ```
///
/// # Errors
/// [`FaultSpecError`] naming the first rule that does not parse.
pub fn parse_spec(spec: &str) -> Result<Vec<FaultRule>, FaultSpecError> {
    spec.split(';')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(parse_rule)
        .collect()
}

fn parse_rule(text: &str) -> Result<FaultRule, FaultSpecError> {
    let err = |reason: String| FaultSpecError {
        rule: text.to_owned(),
        reason,
    };
    let (selector, rest) = text
        .rsplit_once('=')
        .ok_or_else(|| err("there is no '='".to_owned()))?;
    let (rest, probability) = match rest.rsplit_once('@') {
        Some((rest, p)) => {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| err(format!("probability {p:?} is not a number")))?;
            if !(0.0..=1.0).contains(&p) {
                return Err(err(format!("probability {p} is not between 0 and 1")));
            }
            (rest, p)
        }
        None => (rest, 1.0),
    };
    let (effect, times) = match rest.rsplit_once('*') {
        Some((effect, count)) => {
            let count = count.trim();
            let times = if count == "always" {
                Times::Always
            } else {
                let n: u32 = count.parse().map_err(|_| {
                    err(format!(
                        "count {count:?} is not a whole number or \"always\""
                    ))
                })?;
                if n == 1 { Times::Once } else { Times::N(n) }
            };
            (effect, times)
        }
        None => (rest, Times::Always),
    };
    let (operation, target) = match selector.trim().split_once('/') {
        Some((op, target)) if !target.is_empty() => (op, Some(target.to_owned())),
        Some((_, _)) => return Err(err("the target after '/' is empty".to_owned())),
        None => (selector.trim(), None),
    };
    let operations = parse_operations(operation).map_err(err)?;
    let effect = parse_effect(effect.trim()).map_err(err)?;
    Ok(FaultRule {
        operations,
        target,
        effect,
        times,
        probability,
    })
}

fn parse_operations(text: &str) -> Result<OperationMatch, String> {
    if text == "*" {
        return Ok(OperationMatch::Any);
    }
    if let Some(cap) = text.strip_prefix("cap:") {
        return Capability::ALL
            .into_iter()
            .find(|c| c.as_str() == cap)
            .map(OperationMatch::Capability)
            .ok_or_else(|| {
                let known: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
                format!("unknown capability {cap:?} (known: {})", known.join(", "))
            });
    }
    // Initialize is not intercepted, so no rule could ever match it.
    Operation::from_name(text)
        .filter(|op| op.is_intercepted())
        .map(OperationMatch::One)
        .ok_or_else(|| {
            format!(
                "unknown operation {text:?} (known: *, cap:<capability>, {})",
                Operation::intercepted_names()
            )
        })
}

fn parse_effect(text: &str) -> Result<FaultEffect, String> {
    let (name, arg) = match text.split_once(':') {
        Some((name, arg)) => (name.trim(), Some(arg.trim())),
        None => (text, None),
    };
    let duration = |arg: Option<&str>| -> Result<Duration, String> {
        let arg = arg.ok_or_else(|| format!("{name} needs a duration, as in {name}:5s"))?;
        ccm_core::duration::parse_go_duration(arg).map_err(|e| e.to_string())
    };
    let no_arg = |effect: FaultEffect| match arg {
        None => Ok(effect),
        Some(arg) => Err(format!("{name} takes no argument, got {arg:?}")),
    };
    match name {
        "error" => Ok(FaultEffect::Fail(InjectedError::Other(
            arg.filter(|a| !a.is_empty())
                .unwrap_or("injected cloud failure")
                .to_owned(),
        ))),
        "not-found" => no_arg(FaultEffect::Fail(InjectedError::InstanceNotFound)),
        "not-implemented" => no_arg(FaultEffect::Fail(InjectedError::NotImplemented)),
        "implemented-elsewhere" => no_arg(FaultEffect::Fail(InjectedError::ImplementedElsewhere)),
        "timeout" => no_arg(FaultEffect::Fail(InjectedError::Timeout)),
        "retry" => Ok(FaultEffect::Fail(InjectedError::Retry(duration(arg)?))),
        "throttled" => Ok(FaultEffect::Fail(match arg {
            None => InjectedError::Throttled,
            Some(_) => InjectedError::ThrottledFor(duration(arg)?),
        })),
        "latency" => Ok(FaultEffect::Delay(duration(arg)?)),
        other => Err(format!(
            "unknown effect {other:?} (known: error[:message], not-found, not-implemented, implemented-elsewhere, retry:<duration>, throttled[:<duration>], timeout, latency:<duration>)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use ccm_core::intercept::InterceptedProvider;
    use ccm_core::{CloudProvider, ErrorKind};
    use k8s_openapi::api::core::v1::Node;
    use tokio::time::Instant;

    fn call(op: Operation, target: &str) -> CallInfo<'_> {
        CallInfo::new(op, target)
    }

    fn node(name: &str) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node
    }

    #[test]
    fn once_n_and_always() {
        let f = FaultInjector::new();
        f.add(FaultRule::fail(Operation::InstanceExists, InjectedError::Timeout).once());
        f.add(FaultRule::fail(Operation::ListRoutes, InjectedError::NotImplemented).times(2));
        f.add(FaultRule::fail(
            Operation::CreateRoute,
            InjectedError::InstanceNotFound,
        ));
        let kinds = |op| {
            (0..4)
                .map(|_| f.decide(&call(op, "x")).1.map(|e| e.kind()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kinds(Operation::InstanceExists),
            [Some(ErrorKind::Timeout), None, None, None]
        );
        assert_eq!(
            kinds(Operation::ListRoutes),
            [
                Some(ErrorKind::NotImplemented),
                Some(ErrorKind::NotImplemented),
                None,
                None
            ]
        );
        assert_eq!(
            kinds(Operation::CreateRoute),
            [Some(ErrorKind::InstanceNotFound); 4]
        );
        assert_eq!(f.failed(Operation::ListRoutes), 2);
        assert_eq!(f.total_failed(), 7);
        // Used-up rules are gone; the unlimited one stays.
        assert_eq!(f.rules().len(), 1);
        f.clear();
        assert!(f.decide(&call(Operation::CreateRoute, "x")).1.is_none());
    }

    #[test]
    fn targets_capabilities_and_first_failure_wins() {
        let f = FaultInjector::new();
        f.add(
            FaultRule::fail(
                Operation::EnsureLoadBalancer,
                InjectedError::Other("first".into()),
            )
            .for_target("ns/a"),
        );
        f.add(FaultRule::fail_capability(
            Capability::LoadBalancer,
            InjectedError::ImplementedElsewhere,
        ));
        let (_, err) = f.decide(&call(Operation::EnsureLoadBalancer, "ns/a"));
        let err = err.expect("fails");
        assert_eq!(err.kind(), ErrorKind::Other);
        assert!(err.to_string().contains("first"), "{err}");
        let (_, err) = f.decide(&call(Operation::EnsureLoadBalancer, "ns/b"));
        assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::ImplementedElsewhere));
        assert!(
            f.decide(&call(Operation::InstanceExists, "ns/a"))
                .1
                .is_none()
        );
    }

    #[test]
    fn delays_add_up_and_combine_with_a_failure() {
        let f = FaultInjector::new();
        f.add(FaultRule::delay_any(Duration::from_millis(100)));
        f.add(FaultRule::delay(Operation::DeleteRoute, Duration::from_millis(50)).once());
        f.add(FaultRule::fail(
            Operation::DeleteRoute,
            InjectedError::Retry(Duration::from_secs(7)),
        ));
        let (delay, err) = f.decide(&call(Operation::DeleteRoute, "10.0.0.0/24"));
        assert_eq!(delay, Duration::from_millis(150));
        let err = err.expect("fails");
        assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
        let (delay, _) = f.decide(&call(Operation::DeleteRoute, "10.0.0.0/24"));
        assert_eq!(delay, Duration::from_millis(100));
        assert_eq!(f.delayed(Operation::DeleteRoute), 3);
    }

    #[test]
    fn probabilistic_rules_are_reproducible_with_a_seed() {
        let run = |seed| {
            let f = FaultInjector::with_seed(seed);
            f.add(FaultRule::fail_any(InjectedError::Throttled).with_probability(0.3));
            (0..200)
                .map(|_| f.decide(&call(Operation::ListRoutes, "c")).1.is_some())
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        let hits = a.iter().filter(|h| **h).count();
        assert!((30..=90).contains(&hits), "{hits} of 200 at p=0.3");
        let never = FaultRule::fail_any(InjectedError::Timeout).with_probability(f64::NAN);
        assert_eq!(never.probability, 0.0);
        assert_eq!(
            FaultRule::fail_any(InjectedError::Timeout)
                .with_probability(3.0)
                .probability,
            1.0
        );
    }

    #[test]
    fn errors_map_to_their_kinds() {
        let c = call(Operation::InstanceMetadata, "fake://n1");
        let cases = [
            (InjectedError::Other("x".into()), ErrorKind::Other),
            (InjectedError::InstanceNotFound, ErrorKind::InstanceNotFound),
            (InjectedError::NotImplemented, ErrorKind::NotImplemented),
            (
                InjectedError::ImplementedElsewhere,
                ErrorKind::ImplementedElsewhere,
            ),
            (
                InjectedError::Retry(Duration::from_secs(1)),
                ErrorKind::Retry,
            ),
            (
                InjectedError::ThrottledFor(Duration::from_secs(2)),
                ErrorKind::Throttled,
            ),
            (InjectedError::Throttled, ErrorKind::Throttled),
            (InjectedError::Timeout, ErrorKind::Timeout),
        ];
        for (fault, kind) in cases {
            let err = injected_cloud_error(&fault, &c, Duration::ZERO);
            assert_eq!(err.kind(), kind, "{err}");
            // Every injected error names the call and the target it hit.
            assert!(
                err.to_string().starts_with(
                    "injected fault in instance-metadata-by-provider-id of \"fake://n1\": "
                ),
                "{err}"
            );
        }
        let throttled = injected_cloud_error(
            &InjectedError::ThrottledFor(Duration::from_secs(2)),
            &c,
            Duration::ZERO,
        );
        assert_eq!(throttled.retry_after(), Some(Duration::from_secs(2)));
        let other = injected_cloud_error(&InjectedError::Other("x".into()), &c, Duration::ZERO);
        assert_eq!(
            other.to_string(),
            "injected fault in instance-metadata-by-provider-id of \"fake://n1\": \
             injected failure of instance-metadata-by-provider-id: x"
        );
    }

    #[test]
    fn a_timeout_reports_the_injected_latency() {
        let f = FaultInjector::new();
        f.add(FaultRule::delay_any(Duration::from_millis(100)));
        f.add(FaultRule::fail(
            Operation::ListRoutes,
            InjectedError::Timeout,
        ));
        f.add(FaultRule::delay(
            Operation::ListRoutes,
            Duration::from_millis(50),
        ));
        let (delay, err) = f.decide(&call(Operation::ListRoutes, "kubernetes"));
        assert_eq!(delay, Duration::from_millis(150));
        let err = err.expect("fails");
        assert_eq!(
            ccm_core::find_cloud_error(&err).map(|e| e.to_string()),
            Some("cloud provider call list-routes timed out after 150ms".to_owned())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn wraps_a_provider_with_latency_and_failures_in_paused_time() {
        let cloud = crate::fake::cloud();
        let faults = Arc::new(FaultInjector::new());
        let provider = Arc::new(
            InterceptedProvider::new(Arc::new(cloud.clone()))
                .with_shared_interceptor(faults.clone()),
        );
        let v2 = Arc::clone(&provider)
            .instances_v2()
            .expect("the fake has InstancesV2");
        faults.add(FaultRule::delay(
            Operation::InstanceExists,
            Duration::from_secs(30),
        ));
        faults.add(
            FaultRule::fail(
                Operation::InstanceExists,
                InjectedError::Other("cloud api down".into()),
            )
            .times(2),
        );

        let start = Instant::now();
        let node = node(crate::fake::RUNNING);
        for _ in 0..2 {
            let err = v2.instance_exists(&node).await.unwrap_err();
            assert!(err.to_string().contains("cloud api down"), "{err}");
        }
        assert!(v2.instance_exists(&node).await.expect("third call passes"));
        assert_eq!(start.elapsed(), Duration::from_secs(90));
        // Failed calls never reached the provider; the delayed one did.
        assert_eq!(
            cloud.call_count(ccm_provider_fake::Operation::InstanceExists),
            1
        );
        assert_eq!(faults.failed(Operation::InstanceExists), 2);
        assert_eq!(faults.delayed(Operation::InstanceExists), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_reaches_the_caller_through_the_wrapper() {
        let faults = Arc::new(FaultInjector::from_spec("create=retry:42s*1").expect("valid spec"));
        let provider: Arc<dyn CloudProvider> = Arc::new(
            InterceptedProvider::new(Arc::new(crate::fake::cloud()))
                .with_shared_interceptor(faults.clone()),
        );
        let lb = Arc::clone(&provider)
            .load_balancer()
            .expect("the fake has load balancers");
        let mut service = k8s_openapi::api::core::v1::Service::default();
        service.metadata.name = Some("web".into());
        service.metadata.namespace = Some("default".into());
        let err = lb
            .ensure_load_balancer("kubernetes", &service, &[])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Retry);
        assert_eq!(err.retry_after(), Some(Duration::from_secs(42)));
        let status = lb
            .ensure_load_balancer("kubernetes", &service, &[])
            .await
            .expect("second ensure passes");
        assert!(status.ingress.is_some());
    }

    #[test]
    fn specs_parse() {
        let rules = parse_spec(
            " create=retry:5s*1 ; instance-exists/fake://n1=not-found*3;cap:routes=error@0.25; *=latency:200ms*always ;",
        )
        .expect("valid");
        assert_eq!(rules.len(), 4);
        assert_eq!(
            rules[0].operations,
            OperationMatch::One(Operation::EnsureLoadBalancer)
        );
        assert_eq!(rules[0].times, Times::Once);
        assert_eq!(
            rules[0].effect,
            FaultEffect::Fail(InjectedError::Retry(Duration::from_secs(5)))
        );
        assert_eq!(rules[1].target.as_deref(), Some("fake://n1"));
        assert_eq!(rules[1].times, Times::N(3));
        assert_eq!(
            rules[2].operations,
            OperationMatch::Capability(Capability::Routes)
        );
        assert_eq!(rules[2].probability, 0.25);
        assert_eq!(
            rules[2].effect,
            FaultEffect::Fail(InjectedError::Other("injected cloud failure".into()))
        );
        assert_eq!(rules[3].operations, OperationMatch::Any);
        assert_eq!(rules[3].times, Times::Always);
        assert_eq!(
            parse_spec("list-routes=throttled:2s").expect("valid")[0].effect,
            FaultEffect::Fail(InjectedError::ThrottledFor(Duration::from_secs(2)))
        );
        assert_eq!(
            parse_spec("list-routes=throttled").expect("valid")[0].effect,
            FaultEffect::Fail(InjectedError::Throttled)
        );
        assert!(parse_spec("").expect("empty is fine").is_empty());
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, needle) in [
            ("create", "no '='"),
            ("nope=error", "unknown operation \"nope\""),
            ("cap:disks=error", "unknown capability"),
            ("create=explode", "unknown effect"),
            ("create=retry", "needs a duration"),
            ("create=retry:soon", "duration \"soon\""),
            ("create=timeout:5s", "takes no argument"),
            ("create=error*x", "count \"x\""),
            ("create=error@2", "not between 0 and 1"),
            ("create=error@often", "not a number"),
            ("create/=error", "target after '/' is empty"),
        ] {
            let err = parse_spec(spec).unwrap_err();
            assert_eq!(err.rule, spec);
            assert!(err.reason.contains(needle), "{spec}: {}", err.reason);
            assert!(err.to_string().contains("for example create=retry:5s*1"));
        }
    }
}
