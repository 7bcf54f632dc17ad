//! What becomes of an emitted Event, decided without I/O: client-go's event correlator, re-implemented.
//!
//! Three steps, in client-go's order:
//!
//! 1. **Aggregation**: events that differ only in their message (same source, object, type, reason, reporting
//!    controller and instance) are counted per distinct message within [`AGGREGATE_WINDOW`]; from the
//!    [`AGGREGATE_MAX_EVENTS`]th distinct message on, they are folded into one event whose message is
//!    `"(combined from similar events): "` followed by the newest message.
//! 2. **Counting**: an event identical to one seen before (same key, message included) becomes an update of
//!    that earlier object: same name, `count + 1`, the first occurrence's `firstTimestamp`, a new
//!    `lastTimestamp`.
//! 3. **Spam filter**: each source and object may emit [`SPAM_BURST`] events, refilled at one every
//!    [`SPAM_REFILL`]; events past that are skipped (they were still counted, as in client-go).
//!
//! The three caches hold at most [`CACHE_ENTRIES`] keys each and forget the least recently used. A key is kept as
//! 128 bits of SipHash, keyed at random when the correlator is made, of the strings client-go joins into it: 16
//! bytes rather than the 100 to 150 bytes of the joined key of an event about a Node. Two distinct keys share a
//! digest with a probability of 2<sup>-128</sup> (below 2<sup>-104</sup> for any pair in a full cache).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::num::NonZeroUsize;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use lru::LruCache;
use tokio::time::Instant;

use crate::runtime::ratelimit::TokenBucket;

/// How many keys each cache keeps (client-go: `maxLruCacheEntries`).
pub const CACHE_ENTRIES: usize = 4096;
/// Distinct messages within [`AGGREGATE_WINDOW`] from which similar events are combined.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long a group of similar events stays open after its newest member.
pub const AGGREGATE_WINDOW: Duration = Duration::from_secs(600);
/// Events one source may emit about one object at once.
pub const SPAM_BURST: u32 = 25;
/// After the burst, one more event per source and object every this long.
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// The prefix of a combined event's message.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// An Event as a controller asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Emission {
    /// The object the event is about.
    pub regarding: ObjectReference,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// The reason (Go's reason strings, see `names::events`).
    pub reason: String,
    /// The message.
    pub message: String,
    /// `source.component` and `reportingComponent`.
    pub component: String,
    /// `reportingInstance`, this replica.
    pub instance: Option<String>,
}

/// What to write for one emission.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlated {
    /// A new Event object.
    Create(Event),
    /// A repeat of the Event object with this name: write its `count`, `lastTimestamp` and `message`.
    Update(Event),
    /// Dropped by the spam filter.
    Skip,
}

/// A cache key: the [digest](Correlator::digest) of the parts client-go joins into it.
type Key = u128;

#[derive(Debug)]
struct Group {
    /// The digests of the distinct messages in the window (at most [`AGGREGATE_MAX_EVENTS`]).
    messages: Vec<Key>,
    last: Instant,
}

#[derive(Debug, Clone)]
struct Seen {
    name: String,
    namespace: String,
    count: i32,
    first: Timestamp,
}

/// client-go's `EventCorrelator`: aggregation, counting and the per-object spam filter.
#[derive(Debug)]
pub struct Correlator {
    groups: LruCache<Key, Group>,
    seen: LruCache<Key, Seen>,
    spam: LruCache<Key, TokenBucket>,
    /// The two SipHash keys of [`digest`](Self::digest).
    hashers: (RandomState, RandomState),
}

impl Default for Correlator {
    fn default() -> Self {
        Self::with_capacity(CACHE_ENTRIES)
    }
}

/// The object's kind, namespace, name, uid and API version: the parts of client-go's object key.
fn object_parts(r: &ObjectReference) -> [&str; 5] {
    [
        r.kind.as_deref().unwrap_or_default(),
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default(),
        r.uid.as_deref().unwrap_or_default(),
        r.api_version.as_deref().unwrap_or_default(),
    ]
}

impl Correlator {
    /// A correlator whose caches hold `capacity` keys each.
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Correlator {
            groups: LruCache::new(capacity),
            seen: LruCache::new(capacity),
            spam: LruCache::new(capacity),
            hashers: (RandomState::new(), RandomState::new()),
        }
    }

    /// 128 bits identifying the sequence `parts`: two SipHash-1-3 digests under independent random keys. `str`
    /// hashes its bytes and a terminator, so ("ab", "c") and ("a", "bc") differ.
    fn digest(&self, parts: &[&str]) -> Key {
        let half = |state: &RandomState| {
            let mut hasher = state.build_hasher();
            parts.len().hash(&mut hasher);
            for part in parts {
                part.hash(&mut hasher);
            }
            hasher.finish()
        };
        (u128::from(half(&self.hashers.0)) << 64) | u128::from(half(&self.hashers.1))
    }

    /// Keys currently remembered by the counting cache.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }

    /// Decide what to write for `emission`, observed at `now` (monotonic, for the windows) and `wall` (the
    /// Event's timestamps).
    pub fn correlate(&mut self, emission: &Emission, now: Instant, wall: Timestamp) -> Correlated {
        let instance = emission.instance.as_deref().unwrap_or_default();
        let object = object_parts(&emission.regarding);
        let field_path = emission.regarding.field_path.as_deref().unwrap_or_default();
        let group_parts = [
            emission.component.as_str(),
            object[0],
            object[1],
            object[2],
            object[3],
            object[4],
            emission.type_,
            &emission.reason,
            instance,
        ];
        let group_key = self.digest(&group_parts);
        let message_key = self.digest(&[&emission.message]);

        // 1. Aggregation.
        let group = self.groups.get_or_insert_mut(group_key, || Group {
            messages: Vec::new(),
            last: now,
        });
        if now.saturating_duration_since(group.last) > AGGREGATE_WINDOW {
            // the group closed: a new one starts
            group.messages.clear();
        }
        if !group.messages.contains(&message_key) {
            group.messages.push(message_key);
        }
        group.last = now;
        let combined = group.messages.len() >= AGGREGATE_MAX_EVENTS;
        if combined {
            // Keep the set from growing past the threshold: one member out, so the group stays combined.
            if let Some(other) = group.messages.iter().position(|m| *m != message_key) {
                group.messages.swap_remove(other);
            }
        }
        let (message, key) = if combined {
            (
                format!("{COMBINED_PREFIX}{}", emission.message),
                self.digest(&[&group_parts[..], &["combined"]].concat()),
            )
        } else {
            (
                emission.message.clone(),
                self.digest(&[&group_parts[..], &[field_path, &emission.message]].concat()),
            )
        };

        // 2. Counting.
        let mut event = new_event(emission, message, wall);
        let correlated = match self.seen.get_mut(&key) {
            Some(seen) => {
                seen.count = seen.count.saturating_add(1);
                event.metadata.name = Some(seen.name.clone());
                event.metadata.namespace = Some(seen.namespace.clone());
                event.count = Some(seen.count);
                event.first_timestamp = Some(Time(seen.first));
                Correlated::Update(event)
            }
            None => {
                self.seen.put(
                    key,
                    Seen {
                        name: event.metadata.name.clone().unwrap_or_default(),
                        namespace: event.metadata.namespace.clone().unwrap_or_default(),
                        count: 1,
                        first: wall,
                    },
                );
                Correlated::Create(event)
            }
        };

        // 3. Spam filter, per source and object.
        let spam_key =
            self.digest(&[&[emission.component.as_str(), instance][..], &object[..]].concat());
        let bucket = self.spam.get_or_insert_mut(spam_key, || {
            TokenBucket::new(1.0 / SPAM_REFILL.as_secs_f64(), SPAM_BURST, now)
        });
        if bucket.try_take(now).is_ok() {
            correlated
        } else {
            Correlated::Skip
        }
    }
}

/// A `core/v1` Event as Go's recorder makes it: named `<object>.<unix nanoseconds in hex>`, in the object's
/// namespace (`default` for cluster-scoped objects), with `count` 1 and both timestamps set.
fn new_event(emission: &Emission, message: String, wall: Timestamp) -> Event {
    let object = emission.regarding.name.as_deref().unwrap_or("unknown");
    let namespace = emission
        .regarding
        .namespace
        .as_deref()
        .filter(|ns| !ns.is_empty())
        .unwrap_or("default");
    let nanos = u128::try_from(wall.as_nanosecond()).unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{object}.{nanos:x}")),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: emission.regarding.clone(),
        reason: Some(emission.reason.clone()),
        message: Some(message),
        type_: Some(emission.type_.to_owned()),
        count: Some(1),
        first_timestamp: Some(Time(wall)),
        last_timestamp: Some(Time(wall)),
        source: Some(EventSource {
            component: Some(emission.component.clone()),
            host: None,
        }),
        reporting_component: Some(emission.component.clone()),
        reporting_instance: emission.instance.clone(),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        }
    }

    fn emission(object: &str, reason: &str, message: &str) -> Emission {
        Emission {
            regarding: node(object),
            type_: "Normal",
            reason: reason.into(),
            message: message.into(),
            component: "cloud-node-controller".into(),
            instance: Some("ccm-0".into()),
        }
    }

    struct Clock {
        now: Instant,
        wall: Timestamp,
    }

    impl Clock {
        fn new() -> Self {
            Clock {
                now: Instant::now(),
                wall: Timestamp::from_second(1_700_000_000).unwrap(),
            }
        }
        fn advance(&mut self, d: Duration) {
            self.now += d;
            self.wall = self.wall.checked_add(d).unwrap();
        }
    }

    fn created(c: Correlated) -> Event {
        match c {
            Correlated::Create(e) => e,
            other => panic!("expected a create, got {other:?}"),
        }
    }

    fn updated(c: Correlated) -> Event {
        match c {
            Correlated::Update(e) => e,
            other => panic!("expected an update, got {other:?}"),
        }
    }

    #[test]
    fn a_first_event_is_created_as_go_writes_it() {
        let mut c = Correlator::default();
        let clock = Clock::new();
        let e = created(c.correlate(
            &emission("n1", "Synced", "Node synced successfully"),
            clock.now,
            clock.wall,
        ));
        assert_eq!(
            e.metadata.name.as_deref(),
            Some(format!("n1.{:x}", 1_700_000_000u128 * 1_000_000_000).as_str())
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(e.count, Some(1));
        assert_eq!(e.first_timestamp, e.last_timestamp);
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(
            e.source.as_ref().and_then(|s| s.component.as_deref()),
            Some("cloud-node-controller")
        );
        assert_eq!(
            e.reporting_component.as_deref(),
            Some("cloud-node-controller")
        );
        assert_eq!(e.reporting_instance.as_deref(), Some("ccm-0"));
        assert_eq!(e.involved_object, node("n1"));
    }

    #[test]
    fn namespaced_objects_keep_their_namespace() {
        let mut c = Correlator::default();
        let clock = Clock::new();
        let mut em = emission("web", "EnsuringLoadBalancer", "Ensuring load balancer");
        em.regarding.kind = Some("Service".into());
        em.regarding.namespace = Some("shop".into());
        let e = created(c.correlate(&em, clock.now, clock.wall));
        assert_eq!(e.metadata.namespace.as_deref(), Some("shop"));
    }

    #[test]
    fn repeats_update_one_object_with_a_growing_count() {
        let mut c = Correlator::default();
        let mut clock = Clock::new();
        let em = emission("n1", "MissingProviderID", "no providerID");
        let first = created(c.correlate(&em, clock.now, clock.wall));
        for n in 2..=12 {
            clock.advance(Duration::from_millis(800));
            let e = updated(c.correlate(&em, clock.now, clock.wall));
            assert_eq!(e.metadata.name, first.metadata.name);
            assert_eq!(e.count, Some(n));
            assert_eq!(e.first_timestamp, first.first_timestamp);
            assert_eq!(e.last_timestamp, Some(Time(clock.wall)));
        }
        assert_eq!(c.remembered(), 1);
    }

    #[test]
    fn different_reasons_objects_components_and_messages_are_different_events() {
        let mut c = Correlator::default();
        let clock = Clock::new();
        let base = emission("n1", "Synced", "m");
        let mut other_component = base.clone();
        other_component.component = "cloud-node-lifecycle-controller".into();
        let mut other_type = base.clone();
        other_type.type_ = "Warning";
        for em in [
            base.clone(),
            emission("n2", "Synced", "m"),
            emission("n1", "Other", "m"),
            emission("n1", "Synced", "m2"),
            other_component,
            other_type,
        ] {
            created(c.correlate(&em, clock.now, clock.wall));
        }
        updated(c.correlate(&base, clock.now, clock.wall));
    }

    #[test]
    fn keys_keep_the_boundaries_between_their_parts() {
        // The caches keep digests of the parts: moving a character from one part to the next is another event,
        // as it was another joined key in client-go.
        let mut c = Correlator::default();
        let clock = Clock::new();
        let mut split = emission("n1", "Sync", "edm");
        created(c.correlate(&split, clock.now, clock.wall));
        split.reason = "Synce".into();
        split.message = "dm".into();
        created(c.correlate(&split, clock.now, clock.wall));
        let mut path = emission("n1", "Sync", "edm");
        path.regarding.field_path = Some("edm".into());
        path.message = String::new();
        created(c.correlate(&path, clock.now, clock.wall));
        // and the digests are stable within one correlator
        updated(c.correlate(&emission("n1", "Sync", "edm"), clock.now, clock.wall));
    }

    #[test]
    fn ten_distinct_messages_are_combined_into_one_event() {
        let mut c = Correlator::default();
        let mut clock = Clock::new();
        for i in 0..9 {
            clock.advance(Duration::from_secs(1));
            let e = created(c.correlate(
                &emission("n1", "SyncFailed", &format!("error {i}")),
                clock.now,
                clock.wall,
            ));
            assert_eq!(e.message, Some(format!("error {i}")));
        }
        clock.advance(Duration::from_secs(1));
        let combined = created(c.correlate(
            &emission("n1", "SyncFailed", "error 9"),
            clock.now,
            clock.wall,
        ));
        assert_eq!(
            combined.message.as_deref(),
            Some("(combined from similar events): error 9")
        );
        // Later distinct messages update the combined object, with the newest text.
        clock.advance(Duration::from_secs(1));
        let again = updated(c.correlate(
            &emission("n1", "SyncFailed", "error 10"),
            clock.now,
            clock.wall,
        ));
        assert_eq!(again.metadata.name, combined.metadata.name);
        assert_eq!(again.count, Some(2));
        assert_eq!(
            again.message.as_deref(),
            Some("(combined from similar events): error 10")
        );
    }

    #[test]
    fn the_aggregation_window_closes_after_ten_quiet_minutes() {
        let mut c = Correlator::default();
        let mut clock = Clock::new();
        for i in 0..9 {
            created(c.correlate(
                &emission("n1", "R", &format!("m{i}")),
                clock.now,
                clock.wall,
            ));
        }
        clock.advance(AGGREGATE_WINDOW + Duration::from_secs(1));
        let e = created(c.correlate(&emission("n1", "R", "m9"), clock.now, clock.wall));
        assert_eq!(
            e.message.as_deref(),
            Some("m9"),
            "a new group, not combined"
        );
    }

    #[test]
    fn the_spam_filter_allows_a_burst_per_object_then_one_per_five_minutes() {
        let mut c = Correlator::default();
        let mut clock = Clock::new();
        let mut allowed = 0;
        for i in 0..40 {
            // Distinct reasons, so neither counting nor aggregation hides the limit.
            let em = emission("n1", &format!("R{i}"), "m");
            if !matches!(c.correlate(&em, clock.now, clock.wall), Correlated::Skip) {
                allowed += 1;
            }
        }
        assert_eq!(allowed, SPAM_BURST);
        // Another object has its own budget.
        assert!(matches!(
            c.correlate(&emission("n2", "R", "m"), clock.now, clock.wall),
            Correlated::Create(_)
        ));
        clock.advance(SPAM_REFILL);
        assert!(!matches!(
            c.correlate(&emission("n1", "late", "m"), clock.now, clock.wall),
            Correlated::Skip
        ));
        assert!(matches!(
            c.correlate(&emission("n1", "later", "m"), clock.now, clock.wall),
            Correlated::Skip
        ));
    }

    #[test]
    fn skipped_repeats_are_still_counted() {
        let mut c = Correlator::default();
        let clock = Clock::new();
        let em = emission("n1", "R", "m");
        for _ in 0..SPAM_BURST {
            assert!(!matches!(
                c.correlate(&em, clock.now, clock.wall),
                Correlated::Skip
            ));
        }
        assert_eq!(c.correlate(&em, clock.now, clock.wall), Correlated::Skip);
        let mut later = clock;
        later.advance(SPAM_REFILL);
        let e = updated(c.correlate(&em, later.now, later.wall));
        assert_eq!(e.count, Some(i32::try_from(SPAM_BURST).unwrap() + 2));
    }

    #[test]
    fn the_caches_forget_the_least_recently_used_keys() {
        let mut c = Correlator::with_capacity(3);
        let clock = Clock::new();
        for object in ["a", "b", "c"] {
            created(c.correlate(&emission(object, "R", "m"), clock.now, clock.wall));
        }
        // "a" is used again, so "b" is now the oldest and goes first.
        updated(c.correlate(&emission("a", "R", "m"), clock.now, clock.wall));
        created(c.correlate(&emission("d", "R", "m"), clock.now, clock.wall));
        assert_eq!(c.remembered(), 3);
        updated(c.correlate(&emission("a", "R", "m"), clock.now, clock.wall));
        created(c.correlate(&emission("b", "R", "m"), clock.now, clock.wall));
    }

    #[test]
    fn many_keys_keep_the_lru_bounded() {
        let mut c = Correlator::with_capacity(8);
        let clock = Clock::new();
        for i in 0..10_000 {
            let em = emission(&format!("n{}", i % 50), "R", "m");
            c.correlate(&em, clock.now, clock.wall);
            c.correlate(
                &emission(&format!("n{}", i % 7), "R", "m"),
                clock.now,
                clock.wall,
            );
        }
        assert!(c.remembered() <= 8);
    }

    #[test]
    fn odd_references_do_not_panic() {
        let mut c = Correlator::default();
        let clock = Clock::new();
        let em = Emission {
            regarding: ObjectReference::default(),
            type_: "Warning",
            reason: String::new(),
            message: String::new(),
            component: String::new(),
            instance: None,
        };
        let e = created(c.correlate(&em, clock.now, clock.wall));
        assert!(e.metadata.name.unwrap().starts_with("unknown."));
    }
}
