//! The pure client-go election algorithm: no I/O, no clock reads.
//!
//! [`Election`] remembers the last lease record it observed and the *local monotonic* instant at
//! which that record last changed. Expiry of somebody else's lease is always judged from that
//! instant plus the `leaseDurationSeconds` of the observed record, never from the remote
//! `renewTime`, so wall-clock skew between replicas does not matter (only skew *rate* does).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

/// The election-relevant content of a Lease spec, compared field by field to detect a change
/// (client-go compares the JSON of its `LeaderElectionRecord`, which holds the same fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LeaseRecord {
    pub(crate) holder: String,
    pub(crate) lease_duration_seconds: i32,
    pub(crate) acquire_time: Option<Timestamp>,
    pub(crate) renew_time: Option<Timestamp>,
    pub(crate) transitions: i32,
    pub(crate) strategy: String,
    pub(crate) preferred_holder: String,
}

impl From<&LeaseSpec> for LeaseRecord {
    fn from(spec: &LeaseSpec) -> Self {
        Self {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or_default(),
            strategy: spec.strategy.clone().unwrap_or_default(),
            preferred_holder: spec.preferred_holder.clone().unwrap_or_default(),
        }
    }
}

/// A record and the local instant at which it was last seen to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observation {
    pub(crate) record: LeaseRecord,
    pub(crate) at: Instant,
}

impl Observation {
    /// The local instant at which this record's lease runs out.
    pub(crate) fn expires_at(&self) -> Instant {
        let seconds = u64::try_from(self.record.lease_duration_seconds).unwrap_or(0);
        self.at + Duration::from_secs(seconds)
    }
}

/// What to do after reading the Lease.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Action {
    /// The Lease does not exist: create it with this spec.
    Create(LeaseSpec),
    /// The Lease is free or expired: take it over with this spec (an optimistic update).
    Acquire(LeaseSpec),
    /// We hold the Lease: renew it with this spec (an optimistic update).
    Renew(LeaseSpec),
    /// Somebody else holds an unexpired Lease; it expires (by local observation) at `expires_at`.
    Wait { holder: String, expires_at: Instant },
}

/// The client-go election state machine for one identity.
#[derive(Clone, Debug)]
pub(crate) struct Election {
    identity: String,
    lease_duration_seconds: i32,
    observed: Option<Observation>,
}

impl Election {
    pub(crate) fn new(identity: impl Into<String>, lease_duration_seconds: i32) -> Self {
        Self {
            identity: identity.into(),
            lease_duration_seconds,
            observed: None,
        }
    }

    /// client-go's `IsLeader`: the last observed record names us as holder.
    pub(crate) fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.record.holder == self.identity)
    }

    /// client-go's `isLeaseValid`: the observed record has not expired by local observation.
    pub(crate) fn lease_valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|o| o.expires_at() > now)
    }

    /// Records a Lease read from the apiserver. The observation instant moves only when the
    /// election record changed, exactly like client-go.
    pub(crate) fn observe(&mut self, spec: &LeaseSpec, now: Instant) -> &Observation {
        let record = LeaseRecord::from(spec);
        let at = match &self.observed {
            Some(o) if o.record == record => o.at,
            _ => now,
        };
        self.observed.insert(Observation { record, at })
    }

    /// Records a Lease this replica has just written successfully (the apiserver's answer).
    pub(crate) fn wrote(&mut self, spec: &LeaseSpec, now: Instant) {
        self.observed = Some(Observation {
            record: LeaseRecord::from(spec),
            at: now,
        });
    }

    /// Forgets the observation (e.g. the Lease was deleted).
    pub(crate) fn forget(&mut self) {
        self.observed = None;
    }

    /// client-go's `tryAcquireOrRenew` decision after a read of the Lease (`None` = not found).
    pub(crate) fn step(
        &mut self,
        current: Option<&LeaseSpec>,
        now: Instant,
        wall: Timestamp,
    ) -> Action {
        let Some(current) = current else {
            return Action::Create(self.holding_spec(&LeaseSpec::default(), wall, false));
        };
        let observed = self.observe(current, now);
        let (holder, expires_at) = (observed.record.holder.clone(), observed.expires_at());
        if !holder.is_empty() && holder != self.identity && expires_at > now {
            return Action::Wait { holder, expires_at };
        }
        if self.is_leader() {
            Action::Renew(self.holding_spec(current, wall, false))
        } else {
            Action::Acquire(self.holding_spec(current, wall, true))
        }
    }

    /// client-go's fast path: while we lead and our lease is valid by local observation, renew
    /// the cached Lease without reading it first. `None` when the fast path does not apply.
    pub(crate) fn fast_renew(
        &self,
        cached: &LeaseSpec,
        now: Instant,
        wall: Timestamp,
    ) -> Option<LeaseSpec> {
        (self.is_leader() && self.lease_valid(now)).then(|| self.holding_spec(cached, wall, false))
    }

    /// client-go's release: empty holder, `leaseDurationSeconds: 1`, times set to now,
    /// transitions kept. `None` if `current` is not held by us (nothing to release).
    pub(crate) fn release_spec(&self, current: &LeaseSpec, wall: Timestamp) -> Option<LeaseSpec> {
        if current.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return None;
        }
        let mut spec = current.clone();
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(MicroTime(wall));
        spec.renew_time = Some(MicroTime(wall));
        spec.lease_transitions = Some(current.lease_transitions.unwrap_or_default());
        Some(spec)
    }

    /// Our spec over `current` (a default spec for a Lease we create: zero transitions). Renewing keeps the
    /// acquire time (set if missing) and transitions; taking over from somebody else (or from nobody) sets a
    /// new acquire time and counts one more transition. Fields we do not manage (`strategy`,
    /// `preferredHolder`) are kept.
    fn holding_spec(&self, current: &LeaseSpec, wall: Timestamp, takeover: bool) -> LeaseSpec {
        let kept_acquire_time = current.acquire_time.clone().filter(|_| !takeover);
        let transitions = current.lease_transitions.unwrap_or_default();
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: kept_acquire_time.or(Some(MicroTime(wall))),
            renew_time: Some(MicroTime(wall)),
            lease_transitions: Some(transitions.saturating_add(i32::from(takeover))),
            ..current.clone()
        }
    }
}

/// client-go's `wait.Jitter(period, factor)`: `period + uniform[0, factor) × period`.
/// `unit` is a random number in `[0, 1)`.
pub(crate) fn jittered(period: Duration, factor: f64, unit: f64) -> Duration {
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.0
    };
    period + period.mul_f64(factor * unit)
}

/// When a candidate tries next: at its jittered poll (`poll_at`), or earlier when the lease it saw held
/// runs out (`expires_at`) first.
pub(crate) fn next_try(poll_at: Instant, expires_at: Option<Instant>) -> Instant {
    expires_at.map_or(poll_at, |at| poll_at.min(at))
}

/// What a candidate learned from its watch on the Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Try at once: the Lease is gone, released (empty holder), names us, or has run out.
    Now,
    /// Somebody else holds it; by local observation it runs out at this instant.
    At(Instant),
}

impl Election {
    /// A candidate's reaction to a watch event: `Some(spec)` the Lease as it is now, `None` deleted.
    ///
    /// The record is observed exactly like a read (the local expiry clock restarts only when the record
    /// changed), so a candidate learns of every renewal when it happens instead of at its next poll, and
    /// its expiry instant is one lease duration after the holder's last write arrived here.
    pub(crate) fn watched(&mut self, current: Option<&LeaseSpec>, now: Instant) -> Wake {
        let Some(current) = current else {
            self.forget();
            return Wake::Now;
        };
        let observed = self.observe(current, now);
        let (free, expires_at) = (observed.record.holder.is_empty(), observed.expires_at());
        if free || self.is_leader() || expires_at <= now {
            Wake::Now
        } else {
            Wake::At(expires_at)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Election {
        /// The last observation, if any.
        pub(crate) fn observed(&self) -> Option<&Observation> {
            self.observed.as_ref()
        }
    }

    #[test]
    fn a_candidate_tries_again_when_the_lease_it_saw_runs_out() {
        let now = Instant::now();
        let poll = now + Duration::from_millis(2_200);
        assert_eq!(next_try(poll, None), poll, "no lease seen held");
        assert_eq!(
            next_try(poll, Some(now + Duration::from_secs(4))),
            poll,
            "a renewing holder: the lease runs out after the next poll"
        );
        assert_eq!(
            next_try(poll, Some(now + Duration::from_millis(700))),
            now + Duration::from_millis(700),
            "the lease runs out first: try then"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_watched_renewal_moves_the_expiry_to_one_lease_after_it_arrived() {
        let mut e = election();
        let t0 = Instant::now();
        assert_eq!(
            e.watched(Some(&held(OTHER, wall(0), 1)), t0),
            Wake::At(t0 + Duration::from_secs(15))
        );
        tokio::time::advance(Duration::from_millis(1_300)).await;
        let t1 = Instant::now();
        assert_eq!(
            e.watched(Some(&held(OTHER, wall(1), 1)), t1),
            Wake::At(t1 + Duration::from_secs(15)),
            "a renewal restarts the local clock when it arrives"
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(
            e.watched(Some(&held(OTHER, wall(1), 1)), Instant::now()),
            Wake::At(t1 + Duration::from_secs(15)),
            "the same record again (a relist, a metadata change) does not"
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(
            e.watched(Some(&held(OTHER, wall(1), 1)), Instant::now()),
            Wake::Now,
            "run out by local observation"
        );
        assert!(matches!(
            e.step(Some(&held(OTHER, wall(1), 1)), Instant::now(), wall(20)),
            Action::Acquire(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_watched_release_deletion_or_own_record_wakes_at_once() {
        let now = Instant::now();
        let mut e = election();
        let mut released = held("", wall(0), 2);
        released.lease_duration_seconds = Some(1);
        assert_eq!(e.watched(Some(&released), now), Wake::Now);
        let mut e = election();
        e.watched(Some(&held(OTHER, wall(0), 2)), now);
        assert_eq!(e.watched(None, now), Wake::Now);
        assert!(e.observed().is_none(), "a deleted Lease is forgotten");
        let mut e = election();
        assert_eq!(e.watched(Some(&held(ME, wall(0), 2)), now), Wake::Now);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// One watch event: after `delay_ms`, the Lease held by `holder` (0 = another replica, 1 = released,
        /// 2 = a third one) renewed at `renew` seconds with `duration` seconds, or deleted.
        #[derive(Clone, Debug)]
        struct Seen {
            delay_ms: u64,
            lease: Option<(u8, i64, i32)>,
        }

        fn seen() -> impl Strategy<Value = Seen> {
            (
                0u64..20_000,
                prop::option::weighted(0.9, (0u8..3, 0i64..4, 1i32..30)),
            )
                .prop_map(|(delay_ms, lease)| Seen { delay_ms, lease })
        }

        fn spec(holder: u8, renew: i64, duration: i32) -> LeaseSpec {
            let name = match holder {
                0 => OTHER,
                1 => "",
                _ => "third_3",
            };
            LeaseSpec {
                lease_duration_seconds: Some(duration),
                ..held(name, wall(renew), 0)
            }
        }

        proptest! {
            /// Whatever the watch delivers, a candidate is woken exactly when the last record it saw change runs
            /// out (one lease duration of that record after it arrived here), never earlier, and the decision at
            /// that instant is the same as a read's.
            #[test]
            fn the_wake_up_is_exactly_the_local_expiry(events in prop::collection::vec(seen(), 1..40)) {
                let start = std::time::Instant::now();
                let base = Instant::from_std(start);
                let mut e = election();
                let mut elapsed = Duration::ZERO;
                let mut changed: Option<(LeaseSpec, Instant)> = None;
                for event in events {
                    elapsed += Duration::from_millis(event.delay_ms);
                    let now = base + elapsed;
                    let current = event.lease.map(|(h, r, d)| spec(h, r, d));
                    match &current {
                        None => changed = None,
                        Some(s) => {
                            if changed.as_ref().is_none_or(|(c, _)| LeaseRecord::from(c) != LeaseRecord::from(s)) {
                                changed = Some((s.clone(), now));
                            }
                        }
                    }
                    let wake = e.watched(current.as_ref(), now);
                    match (&current, &changed) {
                        (Some(s), Some((_, at))) if s.holder_identity.as_deref() != Some("") => {
                            let secs = u64::try_from(s.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
                            let expiry = *at + Duration::from_secs(secs);
                            if expiry > now {
                                prop_assert_eq!(wake, Wake::At(expiry));
                                let mut probe = e.clone();
                                let is_wait = matches!(probe.step(Some(s), now, wall(0)), Action::Wait { .. });
                                prop_assert!(is_wait, "no takeover before the wake-up");
                            } else {
                                prop_assert_eq!(wake, Wake::Now);
                                let mut probe = e.clone();
                                let is_acquire = matches!(probe.step(Some(s), now, wall(0)), Action::Acquire(_));
                                prop_assert!(is_acquire, "a takeover at the wake-up");
                            }
                        }
                        _ => prop_assert_eq!(wake, Wake::Now),
                    }
                }
            }
        }
    }

    const ME: &str = "me_1";
    const OTHER: &str = "other_2";

    fn wall(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("valid timestamp")
    }

    fn held(holder: &str, renew: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(wall(-100))),
            renew_time: Some(MicroTime(renew)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    fn election() -> Election {
        Election::new(ME, 15)
    }

    #[tokio::test(start_paused = true)]
    async fn creates_an_absent_lease_with_zero_transitions() {
        let mut e = election();
        let action = e.step(None, Instant::now(), wall(0));
        let Action::Create(spec) = action else {
            panic!("expected create, got {action:?}")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some(ME));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(0));
        assert_eq!(spec.acquire_time, Some(MicroTime(wall(0))));
        assert_eq!(spec.renew_time, Some(MicroTime(wall(0))));
        assert_eq!(spec.strategy, None);
        assert_eq!(spec.preferred_holder, None);
        assert!(
            !e.is_leader(),
            "nothing is observed until the write succeeds"
        );
        e.wrote(&spec, Instant::now());
        assert!(e.is_leader());
    }

    #[tokio::test(start_paused = true)]
    async fn acquires_a_free_lease() {
        let mut e = election();
        let mut free = held("", wall(-50), 4);
        free.holder_identity = None;
        let action = e.step(Some(&free), Instant::now(), wall(0));
        let Action::Acquire(spec) = action else {
            panic!("expected acquire, got {action:?}")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some(ME));
        assert_eq!(
            spec.lease_transitions,
            Some(5),
            "a holder change counts as a transition"
        );
        assert_eq!(spec.acquire_time, Some(MicroTime(wall(0))));
        assert_eq!(spec.renew_time, Some(MicroTime(wall(0))));

        // An empty-string holder (a released lease) is free as well.
        let released = held("", wall(-1), 4);
        let mut e = election();
        assert!(matches!(
            e.step(Some(&released), Instant::now(), wall(0)),
            Action::Acquire(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_steal_an_unexpired_lease() {
        let mut e = election();
        let t0 = Instant::now();
        let lease = held(OTHER, wall(0), 1);
        let action = e.step(Some(&lease), t0, wall(0));
        assert_eq!(
            action,
            Action::Wait {
                holder: OTHER.to_owned(),
                expires_at: t0 + Duration::from_secs(15)
            }
        );
        tokio::time::advance(Duration::from_millis(14_999)).await;
        let action = e.step(Some(&lease), Instant::now(), wall(15));
        assert!(
            matches!(action, Action::Wait { .. }),
            "still valid at 14.999 s: {action:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn takes_over_after_expiry_measured_locally() {
        let mut e = election();
        let lease = held(OTHER, wall(0), 3);
        assert!(matches!(
            e.step(Some(&lease), Instant::now(), wall(0)),
            Action::Wait { .. }
        ));
        tokio::time::advance(Duration::from_secs(15)).await;
        let action = e.step(Some(&lease), Instant::now(), wall(15));
        let Action::Acquire(spec) = action else {
            panic!("expected takeover, got {action:?}")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some(ME));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(spec.acquire_time, Some(MicroTime(wall(15))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_remote_renew_time_in_the_future_does_not_delay_takeover() {
        // The holder's clock runs an hour ahead: its renewTime lies in our future. Expiry only
        // depends on when *we* last saw the record change.
        let mut e = election();
        let lease = held(OTHER, wall(3600), 0);
        assert!(matches!(
            e.step(Some(&lease), Instant::now(), wall(0)),
            Action::Wait { .. }
        ));
        tokio::time::advance(Duration::from_secs(16)).await;
        assert!(matches!(
            e.step(Some(&lease), Instant::now(), wall(16)),
            Action::Acquire(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_remote_renew_time_in_the_past_does_not_allow_stealing() {
        // The holder's clock runs an hour behind: its renewTime looks long expired, but the
        // record was only just observed, so the lease is valid for a full duration.
        let mut e = election();
        let lease = held(OTHER, wall(-3600), 0);
        assert!(matches!(
            e.step(Some(&lease), Instant::now(), wall(0)),
            Action::Wait { .. }
        ));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(matches!(
            e.step(Some(&lease), Instant::now(), wall(10)),
            Action::Wait { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn every_observed_change_restarts_the_local_expiry_clock() {
        let mut e = election();
        let t0 = Instant::now();
        e.step(Some(&held(OTHER, wall(0), 0)), t0, wall(0));
        tokio::time::advance(Duration::from_secs(10)).await;
        // The holder renewed (renewTime changed): observation time moves to t0 + 10 s.
        let renewed = held(OTHER, wall(10), 0);
        let action = e.step(Some(&renewed), Instant::now(), wall(10));
        assert_eq!(
            action,
            Action::Wait {
                holder: OTHER.to_owned(),
                expires_at: t0 + Duration::from_secs(25)
            }
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(matches!(
            e.step(Some(&renewed), Instant::now(), wall(20)),
            Action::Wait { .. }
        ));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(matches!(
            e.step(Some(&renewed), Instant::now(), wall(25)),
            Action::Acquire(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_uses_the_observed_records_lease_duration() {
        // A holder that declares 5 s expires after 5 s of observation, whatever our own duration.
        let mut e = election();
        let mut lease = held(OTHER, wall(0), 0);
        lease.lease_duration_seconds = Some(5);
        e.step(Some(&lease), Instant::now(), wall(0));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(matches!(
            e.step(Some(&lease), Instant::now(), wall(5)),
            Action::Acquire(_)
        ));

        // A record without leaseDurationSeconds is expired at once.
        let mut e = election();
        lease.lease_duration_seconds = None;
        assert!(matches!(
            e.step(Some(&lease), Instant::now(), wall(0)),
            Action::Acquire(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn renew_keeps_acquire_time_and_transitions() {
        let mut e = election();
        let mine = held(ME, wall(0), 7);
        let action = e.step(Some(&mine), Instant::now(), wall(2));
        let Action::Renew(spec) = action else {
            panic!("expected renew, got {action:?}")
        };
        assert_eq!(
            spec.acquire_time,
            Some(MicroTime(wall(-100))),
            "acquireTime is kept"
        );
        assert_eq!(spec.renew_time, Some(MicroTime(wall(2))));
        assert_eq!(spec.lease_transitions, Some(7), "no transition on renew");
        assert_eq!(spec.holder_identity.as_deref(), Some(ME));
    }

    #[tokio::test(start_paused = true)]
    async fn our_own_expired_lease_is_renewed_not_retaken() {
        let mut e = election();
        let mine = held(ME, wall(0), 2);
        e.step(Some(&mine), Instant::now(), wall(0));
        tokio::time::advance(Duration::from_secs(60)).await;
        let action = e.step(Some(&mine), Instant::now(), wall(60));
        let Action::Renew(spec) = action else {
            panic!("expected renew, got {action:?}")
        };
        assert_eq!(spec.lease_transitions, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn transitions_increment_only_on_holder_change() {
        let mut e = election();
        let t = Instant::now();
        let Action::Create(created) = e.step(None, t, wall(0)) else {
            panic!("create")
        };
        e.wrote(&created, t);
        let Action::Renew(renewed) = e.step(Some(&created), t, wall(2)) else {
            panic!("renew")
        };
        assert_eq!(renewed.lease_transitions, Some(0));
        e.wrote(&renewed, t);
        let Some(released) = e.release_spec(&renewed, wall(3)) else {
            panic!("release")
        };
        assert_eq!(
            released.lease_transitions,
            Some(0),
            "release keeps transitions"
        );
        e.wrote(&released, t);
        let Action::Acquire(again) = e.step(Some(&released), t, wall(4)) else {
            panic!("acquire")
        };
        assert_eq!(
            again.lease_transitions,
            Some(1),
            "re-acquiring after a release is a transition"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unmanaged_fields_are_preserved() {
        let mut e = election();
        let mut lease = held("", wall(0), 0);
        lease.strategy = Some("OldestEmulationVersion".to_owned());
        lease.preferred_holder = Some("someone".to_owned());
        let Action::Acquire(spec) = e.step(Some(&lease), Instant::now(), wall(0)) else {
            panic!("acquire")
        };
        assert_eq!(spec.strategy.as_deref(), Some("OldestEmulationVersion"));
        assert_eq!(spec.preferred_holder.as_deref(), Some("someone"));
        e.wrote(&spec, Instant::now());
        let Action::Renew(renewed) = e.step(Some(&spec), Instant::now(), wall(1)) else {
            panic!("renew")
        };
        assert_eq!(renewed.strategy.as_deref(), Some("OldestEmulationVersion"));
        let released = e.release_spec(&renewed, wall(2)).expect("held by us");
        assert_eq!(released.preferred_holder.as_deref(), Some("someone"));
    }

    #[tokio::test(start_paused = true)]
    async fn release_content_matches_client_go() {
        let e = election();
        let mine = held(ME, wall(0), 9);
        let spec = e.release_spec(&mine, wall(5)).expect("held by us");
        assert_eq!(
            spec.holder_identity.as_deref(),
            Some(""),
            "holder is cleared, not removed"
        );
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.lease_transitions, Some(9));
        assert_eq!(spec.acquire_time, Some(MicroTime(wall(5))));
        assert_eq!(spec.renew_time, Some(MicroTime(wall(5))));
        assert_eq!(
            e.release_spec(&held(OTHER, wall(0), 9), wall(5)),
            None,
            "not ours"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fast_path_applies_only_while_leading_with_a_valid_lease() {
        let mut e = election();
        let mine = held(ME, wall(0), 1);
        assert_eq!(
            e.fast_renew(&mine, Instant::now(), wall(0)),
            None,
            "nothing observed yet"
        );
        e.wrote(&mine, Instant::now());
        let spec = e
            .fast_renew(&mine, Instant::now(), wall(2))
            .expect("leading and valid");
        assert_eq!(spec.renew_time, Some(MicroTime(wall(2))));
        assert_eq!(spec.acquire_time, mine.acquire_time);
        assert_eq!(spec.lease_transitions, Some(1));
        tokio::time::advance(Duration::from_secs(15)).await;
        assert_eq!(
            e.fast_renew(&mine, Instant::now(), wall(15)),
            None,
            "expired locally"
        );

        let mut f = election();
        f.wrote(&held(OTHER, wall(0), 1), Instant::now());
        assert_eq!(
            f.fast_renew(&mine, Instant::now(), wall(0)),
            None,
            "not the holder"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn identical_reads_do_not_refresh_the_observation() {
        let mut e = election();
        let lease = held(OTHER, wall(0), 0);
        let t0 = Instant::now();
        e.observe(&lease, t0);
        tokio::time::advance(Duration::from_secs(3)).await;
        e.observe(&lease, Instant::now());
        assert_eq!(e.observed().map(|o| o.at), Some(t0));
        e.forget();
        assert!(e.observed().is_none());
        assert!(!e.lease_valid(Instant::now()));
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let period = Duration::from_secs(2);
        assert_eq!(jittered(period, 1.2, 0.0), period);
        assert_eq!(jittered(period, 1.2, 0.5), Duration::from_millis(3200));
        assert!(jittered(period, 1.2, 0.999_999) < Duration::from_millis(4400));
        assert_eq!(jittered(period, 1.2, f64::NAN), period);
        assert_eq!(jittered(period, 1.2, 7.0), Duration::from_millis(4400));
    }
}
