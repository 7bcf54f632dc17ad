//! Property tests of ccm-core's pure parsers and decisions: Go durations, providerIDs, operation names,
//! load-balancer source ranges, the token bucket, the per-item backoff, the work-queue retry decision and the
//! events correlator. Each property runs `ccm_testenv::properties::DEFAULT_CASES` generated cases (or
//! `PROPTEST_CASES`); see docs/architecture.md, "Property tests".

use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::time::Duration;

use ccm_core::CloudError;
use ccm_core::duration::{
    GO_DURATION_PATTERN, GoDuration, MAX, format_go_duration, parse_go_duration,
};
use ccm_core::helpers::{ProviderId, load_balancer_source_ranges};
use ccm_core::intercept::Operation;
use ccm_core::names;
use ccm_core::runtime::events::correlator::{
    AGGREGATE_MAX_EVENTS, AGGREGATE_WINDOW, COMBINED_PREFIX, Correlated, Correlator, Emission,
    SPAM_BURST, SPAM_REFILL,
};
use ccm_core::runtime::ratelimit::TokenBucket;
use ccm_core::runtime::workers::{Action, Decision, apply, decide};
use ccm_core::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};
use ccm_testenv::properties::config;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{ObjectReference, Service, ServiceSpec};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use tokio::time::Instant;

// ---------------------------------------------------------------------------------------------------------
// Go durations
// ---------------------------------------------------------------------------------------------------------

/// Text near the duration grammar: digits, dots, signs, every unit letter, the two micro signs, blanks.
fn duration_like() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[-+0-9.nsuµμmhd ]{0,16}").expect("a valid regex")
}

/// Durations Go can hold, biased towards whole units (where the formatter takes its other branches).
fn go_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0..=MAX.as_nanos() as u64).prop_map(Duration::from_nanos),
        (0u64..1_000_000).prop_map(Duration::from_nanos),
        (0u64..100_000_000).prop_map(Duration::from_millis),
        (0u64..10_000_000).prop_map(Duration::from_secs),
        Just(MAX),
    ]
}

/// The schema's duration pattern as a generator: without its anchors, and with bounded repetitions (a subset of
/// its language, so every generated text still matches it), which keeps generation fast.
fn schema_pattern() -> String {
    GO_DURATION_PATTERN
        .trim_start_matches('^')
        .trim_end_matches('$')
        .replace("[0-9]+", "[0-9]{1,7}")
        .replace("[0-9]*", "[0-9]{0,4}")
        .replace("))+)", ")){1,4})")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn duration_parser_never_panics_and_stays_in_range(text in prop_oneof![any::<String>(), duration_like()]) {
        if let Ok(duration) = parse_go_duration(&text) {
            prop_assert!(duration <= MAX);
            prop_assert!(!text.is_empty() && !text.chars().any(char::is_whitespace));
        }
    }

    #[test]
    fn duration_errors_quote_the_text(text in duration_like()) {
        if let Err(err) = parse_go_duration(&text) {
            let message = err.to_string();
            prop_assert!(message.starts_with("invalid duration "), "{}", message);
            prop_assert!(message.contains(&format!("{text:?}")) || text.is_empty(), "{}", message);
        }
    }

    #[test]
    fn formatted_durations_parse_back(duration in go_duration()) {
        let text = format_go_duration(duration);
        prop_assert_eq!(parse_go_duration(&text), Ok(duration), "formatted as {}", text);
        let wrapped = GoDuration::from(duration);
        prop_assert_eq!(wrapped.to_string(), text.clone());
        prop_assert_eq!(text.parse::<GoDuration>().map(GoDuration::get), Ok(duration));
        let json = serde_json::to_string(&wrapped).unwrap();
        prop_assert_eq!(serde_json::from_str::<GoDuration>(&json).unwrap(), wrapped);
    }

    #[test]
    fn unit_sums_parse_to_their_sum(h in 0u64..10_000, m in 0u64..10_000, s in 0u64..10_000, ms in 0u64..10_000, us in 0u64..10_000, ns in 0u64..10_000, plus in any::<bool>()) {
        let text = format!("{}{h}h{m}m{s}s{ms}ms{us}us{ns}ns", if plus { "+" } else { "" });
        let expected = Duration::from_secs(h * 3600 + m * 60 + s)
            + Duration::from_millis(ms)
            + Duration::from_micros(us)
            + Duration::from_nanos(ns);
        prop_assert_eq!(parse_go_duration(&text), Ok(expected));
    }

    #[test]
    fn fractions_are_truncated_to_nanoseconds(whole in 0u64..1_000_000, fraction in "[0-9]{1,9}") {
        // `<whole>.<fraction>s` is exactly whole seconds plus the fraction's nanoseconds, cut (not rounded).
        let digits = format!("{fraction:0<9}");
        let nanos: u64 = digits.parse().unwrap();
        let text = format!("{whole}.{fraction}s");
        prop_assert_eq!(parse_go_duration(&text), Ok(Duration::from_secs(whole) + Duration::from_nanos(nanos)));
    }

    #[test]
    fn negative_durations_are_rejected_except_zero(duration in go_duration()) {
        let text = format!("-{}", format_go_duration(duration));
        let parsed = parse_go_duration(&text);
        if duration.is_zero() {
            prop_assert_eq!(parsed, Ok(Duration::ZERO));
        } else {
            prop_assert!(parsed.is_err(), "{} parsed as {:?}", text, parsed);
        }
    }

    #[test]
    fn the_schema_pattern_only_admits_what_the_parser_reads(
        text in proptest::string::string_regex(&schema_pattern()).expect("the pattern is a valid regex")
    ) {
        // The pattern leaves out the range check only: anything it admits parses or is too long.
        match parse_go_duration(&text) {
            Ok(_) => {}
            Err(err) => prop_assert!(
                err.to_string().contains("longer than the maximum"),
                "{:?} matches the schema pattern but: {}", text, err
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// providerIDs and operation names
// ---------------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn provider_ids_parse_back_to_their_text(text in prop_oneof![any::<String>(), "[a-z:/]{0,4}://?[a-z/:]{0,6}"]) {
        if let Ok(id) = ProviderId::parse(&text) {
            prop_assert_eq!(id.to_string(), text);
            prop_assert!(!id.provider().is_empty() && !id.provider().contains('/'));
            prop_assert!(!id.instance().is_empty());
        }
    }

    #[test]
    fn built_provider_ids_parse_into_their_parts(provider in "[a-z][a-z0-9.-]{0,12}", instance in "[^\\x00]{1,24}") {
        let id = ProviderId::parse(&format!("{provider}://{instance}")).unwrap();
        prop_assert_eq!(id.provider(), provider.as_str());
        prop_assert_eq!(id.instance(), instance.as_str());
    }

    #[test]
    fn operation_names_round_trip(name in prop_oneof![any::<String>(), "[a-z-]{1,12}"], index in 0..Operation::ALL.len()) {
        let op = Operation::ALL[index];
        prop_assert_eq!(Operation::from_name(op.as_str()), Some(op));
        if let Some(found) = Operation::from_name(&name) {
            prop_assert_eq!(found.as_str(), name.as_str());
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Load-balancer source ranges (spec field and annotation)
// ---------------------------------------------------------------------------------------------------------

prop_compose! {
    fn ip_net()(v4 in any::<bool>(), bits in any::<u128>(), len in 0u8..=128) -> IpNet {
        if v4 {
            IpNet::new(std::net::Ipv4Addr::from(bits as u32).into(), len % 33).unwrap()
        } else {
            IpNet::new(std::net::Ipv6Addr::from(bits).into(), len).unwrap()
        }
    }
}

fn service(spec_ranges: Option<Vec<String>>, annotation: Option<String>) -> Service {
    let mut svc = Service {
        spec: Some(ServiceSpec {
            load_balancer_source_ranges: spec_ranges,
            ..Default::default()
        }),
        ..Default::default()
    };
    svc.metadata.name = Some("svc".into());
    svc.metadata.namespace = Some("ns".into());
    svc.metadata.annotations = annotation.map(|a| {
        BTreeMap::from([(
            names::annotations::LOAD_BALANCER_SOURCE_RANGES.to_owned(),
            a,
        )])
    });
    svc
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn source_range_annotation_never_panics(annotation in prop_oneof![any::<String>(), "[0-9a-f:./, ]{0,30}"]) {
        match load_balancer_source_ranges(&service(None, Some(annotation.clone()))) {
            Ok(ranges) => prop_assert!(!ranges.is_empty()),
            Err(err) => {
                prop_assert!(annotation.contains(err.value.as_str()));
                prop_assert_eq!(err.origin, names::annotations::LOAD_BALANCER_SOURCE_RANGES);
            }
        }
    }

    #[test]
    fn valid_source_ranges_parse_back(
        nets in prop::collection::vec(ip_net(), 1..5),
        pad in "[ ]{0,2}",
        in_spec in any::<bool>(),
        other_annotation in prop::option::of("[0-9./]{0,12}"),
    ) {
        let texts: Vec<String> = nets.iter().map(|n| format!("{pad}{n}{pad}")).collect();
        let svc = if in_spec {
            // The spec field wins over any annotation.
            service(Some(texts), other_annotation)
        } else {
            service(None, Some(texts.join(",")))
        };
        prop_assert_eq!(load_balancer_source_ranges(&svc).unwrap(), nets);
    }

    #[test]
    fn no_source_ranges_allow_everything(blank in "[ \t]{0,3}") {
        let expected: Vec<IpNet> = vec!["0.0.0.0/0".parse().unwrap()];
        prop_assert_eq!(load_balancer_source_ranges(&service(None, Some(blank))).unwrap(), expected.clone());
        prop_assert_eq!(load_balancer_source_ranges(&service(Some(Vec::new()), None)).unwrap(), expected);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The token bucket and the per-item backoff
// ---------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum BucketOp {
    Reserve,
    TryTake,
    Tokens,
}

fn bucket_ops() -> impl Strategy<Value = Vec<(u64, BucketOp)>> {
    let op = prop_oneof![
        Just(BucketOp::Reserve),
        Just(BucketOp::TryTake),
        Just(BucketOp::Tokens)
    ];
    prop::collection::vec((prop_oneof![Just(0u64), 0u64..3_000], op), 0..60)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn token_bucket_never_grants_more_than_burst_plus_rate(qps in 0.05f64..200.0, burst in 0u32..40, ops in bucket_ops()) {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(qps, burst, start);
        let burst = f64::from(burst.max(1));
        let mut now = start;
        let mut granted = 0u32;
        let mut last_reserved_at = start;
        for (advance_ms, op) in ops {
            now += Duration::from_millis(advance_ms);
            // When a granted token may be used.
            let usable_at = match op {
                BucketOp::Reserve => {
                    let at = now + bucket.reserve(now);
                    // Reservations are served in order: their usable times never go back.
                    prop_assert!(at >= last_reserved_at);
                    last_reserved_at = at;
                    Some(at)
                }
                BucketOp::TryTake => match bucket.try_take(now) {
                    Ok(()) => {
                        // try_take never runs the bucket into debt.
                        prop_assert!(bucket.tokens(now) >= -1e-9);
                        Some(now)
                    }
                    Err(wait) => {
                        // Nobody else takes a token: after `wait` one is there.
                        let mut alone = bucket.clone();
                        prop_assert!(alone.try_take(now + wait + Duration::from_micros(1)).is_ok());
                        None
                    }
                },
                BucketOp::Tokens => {
                    prop_assert!(bucket.tokens(now) <= burst);
                    None
                }
            };
            if let Some(at) = usable_at {
                granted += 1;
                // The n-th token is usable no earlier than (n - burst) / qps after the start.
                let earliest = (f64::from(granted) - burst) / qps;
                prop_assert!(
                    at.duration_since(start).as_secs_f64() >= earliest - 1e-6,
                    "token {} usable after {:?}, earliest {}s", granted, at.duration_since(start), earliest
                );
            }
            prop_assert!(bucket.tokens(now) <= burst);
        }
    }

    #[test]
    fn try_take_never_delays_reservations(qps in 0.05f64..200.0, burst in 1u32..10, takes in 0usize..20) {
        // A caller that only uses try_take cannot push a reserving caller past the bucket's own schedule.
        let start = Instant::now();
        let mut shared = TokenBucket::new(qps, burst, start);
        for _ in 0..takes {
            let _ = shared.try_take(start);
        }
        let waited = shared.reserve(start);
        let mut fresh = TokenBucket::new(qps, burst, start);
        for _ in 0..burst.min(takes as u32) {
            fresh.reserve(start);
        }
        prop_assert_eq!(waited, fresh.reserve(start));
    }

    #[test]
    fn backoff_is_monotonic_and_bounded(base_ms in 0u64..10_000, max_ms in 0u64..1_000_000, failures in 0u32..80) {
        let (base, max) = (Duration::from_millis(base_ms), Duration::from_millis(max_ms));
        let backoff: ItemExponentialBackoff<&str> = ItemExponentialBackoff::new(base, max);
        let first = backoff.delay_for(0);
        prop_assert_eq!(first, base.min(max));
        let mut previous = first;
        for n in 1..=failures {
            let delay = backoff.delay_for(n);
            prop_assert!(delay >= previous, "delay {} < delay {}", n, n - 1);
            prop_assert!(delay <= max);
            prop_assert!(delay <= previous * 2 || delay == max);
            previous = delay;
        }
        // The limiter hands out exactly that sequence and forgets it on request.
        for n in 0..failures.min(10) {
            prop_assert_eq!(backoff.when(&"key"), backoff.delay_for(n));
            prop_assert_eq!(backoff.when(&"other"), backoff.delay_for(n));
        }
        prop_assert_eq!(backoff.num_requeues(&"key"), failures.min(10));
        backoff.forget(&"key");
        prop_assert_eq!(backoff.num_requeues(&"key"), 0);
        prop_assert_eq!(backoff.when(&"key"), first);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The work-queue retry decision
// ---------------------------------------------------------------------------------------------------------

/// A failure at the bottom of an error chain.
#[derive(Debug, Clone)]
enum Leaf {
    NotFound,
    NotImplemented,
    Elsewhere,
    Retry(Duration),
    Throttled(Option<Duration>),
    Message(String),
    Foreign(String),
}

/// A layer wrapped around it.
#[derive(Debug, Clone)]
enum Layer {
    Context(String),
    Foreign(String),
}

/// A non-ccm error type wrapping another error (as a controller's own error enum does).
#[derive(Debug)]
struct Wrapper(String, Box<dyn StdError + Send + Sync>);

impl std::fmt::Display for Wrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for Wrapper {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.1)
    }
}

fn delay() -> impl Strategy<Value = Duration> {
    (0u64..100_000).prop_map(Duration::from_millis)
}

fn leaf() -> impl Strategy<Value = Leaf> {
    prop_oneof![
        Just(Leaf::NotFound),
        Just(Leaf::NotImplemented),
        Just(Leaf::Elsewhere),
        delay().prop_map(Leaf::Retry),
        prop::option::of(delay()).prop_map(Leaf::Throttled),
        "[a-z ]{0,8}".prop_map(Leaf::Message),
        "[a-z ]{0,8}".prop_map(Leaf::Foreign),
    ]
}

fn layer() -> impl Strategy<Value = Layer> {
    prop_oneof![
        "[a-z]{0,6}".prop_map(Layer::Context),
        "[a-z]{0,6}".prop_map(Layer::Foreign)
    ]
}

fn build_chain(leaf: &Leaf, layers: &[Layer]) -> Box<dyn StdError + Send + Sync> {
    let mut error: Box<dyn StdError + Send + Sync> = match leaf {
        Leaf::NotFound => Box::new(CloudError::InstanceNotFound),
        Leaf::NotImplemented => Box::new(CloudError::NotImplemented),
        Leaf::Elsewhere => Box::new(CloudError::ImplementedElsewhere),
        Leaf::Retry(after) => Box::new(CloudError::retry("not ready", *after)),
        Leaf::Throttled(after) => Box::new(CloudError::Throttled {
            message: "slow down".into(),
            retry_after: *after,
        }),
        Leaf::Message(text) => Box::new(CloudError::message(text.clone())),
        Leaf::Foreign(text) => Box::new(std::io::Error::other(text.clone())),
    };
    for layer in layers {
        error = match layer {
            Layer::Context(context) => Box::new(CloudError::provider(context.clone(), error)),
            Layer::Foreign(context) => Box::new(Wrapper(context.clone(), error)),
        };
    }
    error
}

#[derive(Debug)]
struct Failed(Box<dyn StdError + Send + Sync>);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for Failed {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn retry_decision_follows_the_innermost_cloud_error(leaf in leaf(), layers in prop::collection::vec(layer(), 0..5)) {
        let result: Result<Action, Failed> = Err(Failed(build_chain(&leaf, &layers)));
        // Only a retry-after (or a throttling error with a delay) skips the backoff, however deeply wrapped.
        let expected = match leaf {
            Leaf::Retry(after) | Leaf::Throttled(Some(after)) => Decision::RetryAfter(after),
            _ => Decision::Backoff,
        };
        prop_assert_eq!(decide(&result), expected);
    }

    #[test]
    fn successes_always_forget(after in prop::option::of(delay())) {
        let (result, expected) = match after {
            None => (Ok(Action::Done), Decision::Forget),
            Some(d) => (Ok(Action::RequeueAfter(d)), Decision::ForgetAndRequeueAfter(d)),
        };
        prop_assert_eq!(decide::<std::io::Error>(&result), expected);
    }

    #[test]
    fn applying_decisions_counts_only_backoff_failures(decisions in prop::collection::vec(prop_oneof![
        Just(Decision::Forget),
        delay().prop_map(Decision::ForgetAndRequeueAfter),
        delay().prop_map(Decision::RetryAfter),
        Just(Decision::Backoff),
    ], 0..20)) {
        let queue: WorkQueue<String> =
            WorkQueue::new("properties", ItemExponentialBackoff::new(Duration::from_millis(5), Duration::from_secs(1000)));
        let key = "key".to_owned();
        let mut failures = 0u32;
        for decision in decisions {
            apply(&queue, &key, decision);
            failures = match decision {
                Decision::Forget | Decision::ForgetAndRequeueAfter(_) => 0,
                Decision::RetryAfter(_) => failures,
                Decision::Backoff => failures + 1,
            };
            prop_assert_eq!(queue.num_requeues(&key), failures);
            if !matches!(decision, Decision::Forget) {
                // Every requeueing decision leaves the key waiting or queued (asked in this order: a wait that
                // ends between the two questions moves the key to the queue, never back).
                prop_assert!(queue.waiting_deadline(&key).is_some() || queue.len() == 1);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// The events correlator
// ---------------------------------------------------------------------------------------------------------

prop_compose! {
    /// One emission from small pools, so keys repeat: `components` sources, `objects` objects, 2 types,
    /// `reasons` reasons, 12 messages.
    fn emission(components: usize, objects: usize, reasons: usize)(component in 0..components, object in 0..objects, warning in any::<bool>(), reason in 0..reasons, message in 0..12usize) -> Emission {
        Emission {
            regarding: ObjectReference {
                kind: Some("Node".into()),
                name: Some(format!("node-{object}")),
                uid: Some(format!("uid-{object}")),
                api_version: Some("v1".into()),
                ..Default::default()
            },
            type_: if warning { "Warning" } else { "Normal" },
            reason: format!("Reason{reason}"),
            message: format!("message {message}"),
            component: format!("controller-{component}"),
            instance: None,
        }
    }
}

/// Emissions with the seconds since the previous one: mostly in the same second, so the spam filter and the
/// aggregation limit are reached.
fn emissions(
    components: usize,
    objects: usize,
    reasons: usize,
    max: usize,
) -> impl Strategy<Value = Vec<(u64, Emission)>> {
    prop::collection::vec(
        (
            prop_oneof![3 => Just(0u64), 1 => 0u64..700],
            emission(components, objects, reasons),
        ),
        0..max,
    )
}

fn run_correlator(capacity: usize, steps: &[(u64, Emission)]) -> Vec<Correlated> {
    let mut correlator = Correlator::with_capacity(capacity);
    let start = Instant::now();
    let mut now = start;
    let mut wall_nanos: i128 = 1_700_000_000_000_000_000;
    steps
        .iter()
        .map(|(advance_secs, emission)| {
            now += Duration::from_secs(*advance_secs);
            wall_nanos += i128::from(*advance_secs) * 1_000_000_000 + 1;
            let result = correlator.correlate(
                emission,
                now,
                Timestamp::from_nanosecond(wall_nanos).unwrap(),
            );
            assert!(correlator.remembered() <= capacity.max(1));
            result
        })
        .collect()
}

/// Every written Event: `count` 1 on a new name, and a higher `count` on every update of a name.
fn check_counts(results: &[Correlated]) -> Result<(), TestCaseError> {
    let mut counts: HashMap<String, i32> = HashMap::new();
    for result in results {
        let (event, created) = match result {
            Correlated::Create(event) => (event, true),
            Correlated::Update(event) => (event, false),
            Correlated::Skip => continue,
        };
        let name = event.metadata.name.clone().unwrap();
        let count = event.count.unwrap();
        if created {
            prop_assert_eq!(count, 1);
            prop_assert!(
                !counts.contains_key(&name),
                "a second Create named {}",
                name
            );
        } else if let Some(previous) = counts.get(&name) {
            prop_assert!(
                count > *previous,
                "{} went from {} to {}",
                name,
                previous,
                count
            );
        }
        prop_assert!(
            event.first_timestamp.as_ref().unwrap().0 <= event.last_timestamp.as_ref().unwrap().0
        );
        counts.insert(name, count);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn correlation_with_tiny_caches_is_deterministic_and_counts_never_decrease(capacity in 1usize..6, steps in emissions(2, 2, 2, 25)) {
        let results = run_correlator(capacity, &steps);
        check_counts(&results)?;
        prop_assert_eq!(run_correlator(capacity, &steps), results);
    }

    #[test]
    fn correlator_counts_combines_and_filters_spam(steps in emissions(1, 1, 1, 45)) {
        let results = run_correlator(4096, &steps);
        check_counts(&results)?;
        let mut elapsed = 0u64;
        let mut written: HashMap<Option<String>, u64> = HashMap::new();
        // Seconds since each group (object, type, reason) was last seen, and its distinct messages meanwhile.
        let mut groups: HashMap<String, (u64, std::collections::HashSet<String>)> = HashMap::new();
        for ((advance, emission), result) in steps.iter().zip(&results) {
            elapsed += advance;
            let group = format!("{:?}/{}/{}", emission.regarding.name, emission.type_, emission.reason);
            let (last, seen) = groups.entry(group).or_insert_with(|| (elapsed, Default::default()));
            if elapsed - *last > AGGREGATE_WINDOW.as_secs() {
                seen.clear();
            }
            *last = elapsed;
            let new = seen.insert(emission.message.clone());
            let (Correlated::Create(event) | Correlated::Update(event)) = result else {
                continue;
            };
            // Spam filter: at most the burst, plus one per refill period since the start, per source and object.
            let n = written.entry(emission.regarding.name.clone()).or_default();
            *n += 1;
            prop_assert!(*n <= u64::from(SPAM_BURST) + elapsed / SPAM_REFILL.as_secs());
            // Aggregation: the message as given or combined; a message new to a group that has seen
            // AGGREGATE_MAX_EVENTS distinct messages in its window is combined (client-go keeps the set one short
            // after that, so a repeat of a remembered message may still go out uncombined, as in Go).
            let message = event.message.clone().unwrap();
            let combined = format!("{COMBINED_PREFIX}{}", emission.message);
            prop_assert!(message == emission.message || message == combined, "{:?} for {:?}", message, emission.message);
            if new && seen.len() >= AGGREGATE_MAX_EVENTS {
                prop_assert_eq!(message, combined);
            }
        }
    }
}
