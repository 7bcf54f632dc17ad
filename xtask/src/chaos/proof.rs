//! The proof that there were never two leaders, from the API server's audit log.
//!
//! Pure functions over audit events (no I/O): [`Proof::from_events`] sorts the replicas'
//! successful requests into writes of the election Lease and *controller writes* (everything
//! else, minus the election's own events and the delegated-auth reviews), then [`Proof::check`]
//! reports every [`Violation`]. All times are the API server's clock (one server, one clock), in
//! microseconds since the Unix epoch.
//!
//! What is checked (docs/reliability.md restates it):
//!
//! 1. **Premature takeover**: a successful Lease write by replica B naming B the holder, when the
//!    previous successful Lease write named another replica A, must be *received* at least A's
//!    `leaseDurationSeconds` after A's write was received. Both client-go and our elector count
//!    expiry from when they *observed* A's record (after A's write) and write with the
//!    `resourceVersion` they read, so an earlier successful takeover is a broken election.
//! 2. **Overlap**: a controller write by replica A received while, per the Lease history, another
//!    replica held the Lease (the last Lease write before it named someone else).
//! 3. **In flight across a takeover**: a controller write by A received while A held the Lease but
//!    completed after another replica's takeover had been committed.
//! 4. **Unleased**: a controller write by A before any Lease write, or while the Lease was released
//!    (empty holder).
//! 5. **Expired**: a controller write by A while A was the recorded holder, but received more than
//!    the lease duration after A's last successful Lease write (A kept acting on an expired lease).
//!
//! Lease writes that fail (409 conflicts of lost races) are ignored: they changed nothing.

use ccm_testenv::audit::AuditEvent;

/// Slack for comparing two request times of the API server (timer and clock granularity).
pub const TOLERANCE_MICROS: i64 = 10_000;

/// The election Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseName {
    /// Its namespace (`kube-system`).
    pub namespace: String,
    /// Its name (`cloud-controller-manager`).
    pub name: String,
}

impl LeaseName {
    /// `kube-system/cloud-controller-manager`, the Lease both CCMs use by default.
    pub fn default_ccm() -> Self {
        Self {
            namespace: "kube-system".to_owned(),
            name: "cloud-controller-manager".to_owned(),
        }
    }
}

/// A successful write of the election Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseWrite {
    /// Who wrote it (the replica's user).
    pub user: String,
    /// `spec.holderIdentity` written (empty: released).
    pub holder: String,
    /// `spec.leaseDurationSeconds` written, in microseconds.
    pub duration_micros: i64,
    /// When the request was received.
    pub received: i64,
    /// When it completed.
    pub completed: i64,
}

impl LeaseWrite {
    /// The replica holding the Lease after this write (`None`: released).
    pub fn holder_user(&self) -> Option<&str> {
        (!self.holder.is_empty()).then_some(self.user.as_str())
    }
}

/// A successful write of anything but the election, by a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerWrite {
    /// Who wrote it.
    pub user: String,
    /// The verb.
    pub verb: String,
    /// `resource[/subresource] namespace/name`.
    pub object: String,
    /// When the request was received.
    pub received: i64,
    /// When it completed.
    pub completed: i64,
}

/// Something that must not happen with a correct election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A takeover of a Lease that was not yet expired.
    PrematureTakeover {
        /// The previous holder.
        from: String,
        /// The new holder.
        to: String,
        /// How long after the previous holder's last write the takeover came.
        after_micros: i64,
        /// The previous holder's lease duration.
        duration_micros: i64,
    },
    /// A controller write while another replica held the Lease.
    Overlap {
        /// The write.
        write: ControllerWrite,
        /// The holder at the time.
        holder: String,
    },
    /// A controller write that was still being processed when another replica took over.
    InFlightAcrossTakeover {
        /// The write.
        write: ControllerWrite,
        /// The new holder.
        holder: String,
    },
    /// A controller write while nobody, or before anybody, held the Lease.
    Unleased {
        /// The write.
        write: ControllerWrite,
    },
    /// A controller write by the recorded holder after its own lease had expired.
    Expired {
        /// The write.
        write: ControllerWrite,
        /// How long after its last Lease write.
        after_micros: i64,
    },
}

impl Violation {
    /// The controller write at fault, if the violation is about one.
    pub fn write(&self) -> Option<&ControllerWrite> {
        match self {
            Violation::PrematureTakeover { .. } => None,
            Violation::Overlap { write, .. }
            | Violation::InFlightAcrossTakeover { write, .. }
            | Violation::Unleased { write }
            | Violation::Expired { write, .. } => Some(write),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w =
            |w: &ControllerWrite| format!("{} {} {} at {}", w.user, w.verb, w.object, w.received);
        match self {
            Violation::PrematureTakeover {
                from,
                to,
                after_micros,
                duration_micros,
            } => write!(
                f,
                "premature takeover: {to} took the lease from {from} {after_micros} us after {from}'s \
                 last write (lease duration {duration_micros} us)"
            ),
            Violation::Overlap { write, holder } => {
                write!(f, "overlap: {} while {holder} held the lease", w(write))
            }
            Violation::InFlightAcrossTakeover { write, holder } => write!(
                f,
                "in flight across a takeover: {} completed at {} after {holder} took over",
                w(write),
                write.completed
            ),
            Violation::Unleased { write } => {
                write!(f, "unleased: {} while nobody held the lease", w(write))
            }
            Violation::Expired {
                write,
                after_micros,
            } => write!(
                f,
                "expired: {} {after_micros} us after its last lease write",
                w(write)
            ),
        }
    }
}

/// One replica's uninterrupted time as the recorded holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenure {
    /// The holder.
    pub user: String,
    /// When its acquiring write was received.
    pub acquired: i64,
    /// When its last renewal (or the acquisition) was received.
    pub last_renewed: i64,
}

/// A replica's requests sorted out of an audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proof {
    /// Successful writes of the election Lease, in order of reception.
    pub lease_writes: Vec<LeaseWrite>,
    /// Successful controller writes, in order of reception.
    pub writes: Vec<ControllerWrite>,
}

/// Whether `event` is one of the election's own writes: the Lease itself, or an Event about it
/// (both name those `<lease>.<suffix>`; client-go records "stopped leading" *after* losing the
/// lease, by design — our elector only while it still holds it, or never when its recorder is fenced).
fn is_election_event(event: &AuditEvent, lease: &LeaseName) -> bool {
    let Some(object) = &event.object_ref else {
        return false;
    };
    object.resource == "events"
        && object.namespace == lease.namespace
        && object
            .name
            .strip_prefix(lease.name.as_str())
            .is_some_and(|rest| rest.starts_with('.'))
}

fn is_lease(event: &AuditEvent, lease: &LeaseName) -> bool {
    event.object_ref.as_ref().is_some_and(|o| {
        o.resource == "leases"
            && o.api_group == "coordination.k8s.io"
            && o.namespace == lease.namespace
            && o.name == lease.name
    })
}

/// Token and access reviews of delegated authentication: answers, nothing is stored.
fn is_review(event: &AuditEvent) -> bool {
    event.object_ref.as_ref().is_some_and(|o| {
        o.api_group == "authentication.k8s.io" || o.api_group == "authorization.k8s.io"
    })
}

impl Proof {
    /// Sorts the successful mutating requests of `replicas` (user names) out of `events`.
    pub fn from_events(events: &[AuditEvent], replicas: &[String], lease: &LeaseName) -> Self {
        let mut proof = Proof::default();
        for event in events {
            if !event.succeeded() || !replicas.contains(&event.user.username) {
                continue;
            }
            if !matches!(
                event.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            ) {
                continue;
            }
            if is_lease(event, lease) {
                if event.verb == "delete" {
                    continue;
                }
                proof.lease_writes.push(LeaseWrite {
                    user: event.user.username.clone(),
                    holder: event
                        .request_str("/spec/holderIdentity")
                        .unwrap_or_default()
                        .to_owned(),
                    duration_micros: event
                        .request_i64("/spec/leaseDurationSeconds")
                        .unwrap_or(0)
                        .saturating_mul(1_000_000),
                    received: event.received_micros(),
                    completed: event.completed_micros(),
                });
            } else if !is_election_event(event, lease) && !is_review(event) {
                let object = event.object_ref.clone().unwrap_or_default();
                let resource = if object.subresource.is_empty() {
                    object.resource
                } else {
                    format!("{}/{}", object.resource, object.subresource)
                };
                proof.writes.push(ControllerWrite {
                    user: event.user.username.clone(),
                    verb: event.verb.clone(),
                    object: format!("{resource} {}/{}", object.namespace, object.name),
                    received: event.received_micros(),
                    completed: event.completed_micros(),
                });
            }
        }
        proof
            .lease_writes
            .sort_by_key(|w| (w.received, w.completed));
        proof.writes.sort_by_key(|w| (w.received, w.completed));
        proof
    }

    /// The holders in order: a new tenure starts when a write names a different holder.
    pub fn tenures(&self) -> Vec<Tenure> {
        let mut tenures: Vec<Tenure> = Vec::new();
        let mut current: Option<String> = None;
        for write in &self.lease_writes {
            let holder = write.holder_user().map(str::to_owned);
            match (&holder, &current) {
                (Some(h), Some(c)) if h == c => {
                    if let Some(last) = tenures.last_mut() {
                        last.last_renewed = write.received;
                    }
                }
                (Some(h), _) => tenures.push(Tenure {
                    user: h.clone(),
                    acquired: write.received,
                    last_renewed: write.received,
                }),
                (None, _) => {}
            }
            current = holder;
        }
        tenures
    }

    /// The last Lease write received at or before `at`.
    fn lease_state_at(&self, at: i64) -> Option<&LeaseWrite> {
        let index = self.lease_writes.partition_point(|w| w.received <= at);
        index.checked_sub(1).map(|i| &self.lease_writes[i])
    }

    /// The first takeover by someone other than `user` received after `at`: (holder, received).
    fn next_takeover_after(&self, at: i64, user: &str) -> Option<(&str, i64)> {
        let index = self.lease_writes.partition_point(|w| w.received <= at);
        self.lease_writes[index..]
            .iter()
            .find_map(|w| match w.holder_user() {
                Some(h) if h != user => Some((h, w.received)),
                _ => None,
            })
    }

    /// Every violation (see the module documentation), takeovers first, then writes in order.
    pub fn check(&self) -> Vec<Violation> {
        let mut violations = Vec::new();
        for pair in self.lease_writes.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            if let (Some(from), Some(to)) = (before.holder_user(), after.holder_user())
                && from != to
            {
                let after_micros = after.received - before.received;
                if after_micros + TOLERANCE_MICROS < before.duration_micros {
                    violations.push(Violation::PrematureTakeover {
                        from: from.to_owned(),
                        to: to.to_owned(),
                        after_micros,
                        duration_micros: before.duration_micros,
                    });
                }
            }
        }
        for write in &self.writes {
            let Some(state) = self.lease_state_at(write.received) else {
                violations.push(Violation::Unleased {
                    write: write.clone(),
                });
                continue;
            };
            match state.holder_user() {
                None => violations.push(Violation::Unleased {
                    write: write.clone(),
                }),
                Some(holder) if holder != write.user => violations.push(Violation::Overlap {
                    write: write.clone(),
                    holder: holder.to_owned(),
                }),
                Some(_) => {
                    let after_micros = write.received - state.received;
                    if after_micros > state.duration_micros + TOLERANCE_MICROS {
                        violations.push(Violation::Expired {
                            write: write.clone(),
                            after_micros,
                        });
                    } else if let Some((holder, taken)) =
                        self.next_takeover_after(write.received, &write.user)
                        && write.completed > taken + TOLERANCE_MICROS
                    {
                        violations.push(Violation::InFlightAcrossTakeover {
                            write: write.clone(),
                            holder: holder.to_owned(),
                        });
                    }
                }
            }
        }
        violations
    }

    /// Controller writes by `user` received at or after `from`.
    pub fn writes_by_since(&self, user: &str, from: i64) -> Vec<&ControllerWrite> {
        self.writes
            .iter()
            .filter(|w| w.user == user && w.received >= from)
            .collect()
    }

    /// For a fault hitting the leader at `at`: how long until another replica than `victim`
    /// acquired the Lease (received time of its write), if it did.
    pub fn failover_after(&self, at: i64, victim: &str) -> Option<i64> {
        self.next_takeover_after(at, victim)
            .map(|(_, taken)| taken - at)
    }

    /// The recorded holder at `at`, if any.
    pub fn holder_at(&self, at: i64) -> Option<&str> {
        self.lease_state_at(at).and_then(LeaseWrite::holder_user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000;

    /// The audit time (microseconds since the epoch) of `ms` milliseconds after the synthetic
    /// events' origin, 2026-11-23T14:00:00Z.
    fn at(ms: i64) -> i64 {
        let origin: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime =
            serde_json::from_value(serde_json::json!("2026-11-23T14:00:00.000000Z")).expect("time");
        origin.0.as_microsecond() + ms * 1000
    }

    /// A synthetic audit event, as the API server writes it.
    fn event(
        user: &str,
        verb: &str,
        object: &str,
        code: u16,
        at_ms: i64,
        body: &str,
    ) -> AuditEvent {
        let parts: Vec<&str> = object.split(':').collect();
        let (group, resource, namespace, name) = (parts[0], parts[1], parts[2], parts[3]);
        let stamp = |ms: i64| {
            format!(
                "2026-11-23T14:{:02}:{:02}.{:03}000Z",
                ms / 60_000,
                (ms / 1000) % 60,
                ms % 1000
            )
        };
        let body = if body.is_empty() {
            String::new()
        } else {
            format!(r#","requestObject":{body}"#)
        };
        let line = format!(
            r#"{{"auditID":"x","stage":"ResponseComplete","verb":"{verb}","user":{{"username":"{user}"}},"objectRef":{{"resource":"{resource}","namespace":"{namespace}","name":"{name}","apiGroup":"{group}"}},"responseStatus":{{"code":{code}}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}"{body}}}"#,
            stamp(at_ms),
            stamp(at_ms + 5)
        );
        serde_json::from_str(&line).expect("a valid synthetic event")
    }

    fn lease(user: &str, holder: &str, at_ms: i64) -> AuditEvent {
        lease_code(user, holder, at_ms, 200)
    }

    fn lease_code(user: &str, holder: &str, at_ms: i64, code: u16) -> AuditEvent {
        let body =
            format!(r#"{{"spec":{{"holderIdentity":"{holder}","leaseDurationSeconds":4}}}}"#);
        event(
            user,
            "update",
            "coordination.k8s.io:leases:kube-system:cloud-controller-manager",
            code,
            at_ms,
            &body,
        )
    }

    fn node_patch(user: &str, at_ms: i64) -> AuditEvent {
        event(user, "patch", ":nodes::n1", 200, at_ms, "")
    }

    fn replicas() -> Vec<String> {
        vec!["r1".to_owned(), "r2".to_owned()]
    }

    fn check(events: &[AuditEvent]) -> (Proof, Vec<Violation>) {
        let proof = Proof::from_events(events, &replicas(), &LeaseName::default_ccm());
        let violations = proof.check();
        (proof, violations)
    }

    #[test]
    fn a_clean_handover_has_no_violation() {
        let (proof, violations) = check(&[
            lease("r1", "r1_a", 0),
            node_patch("r1", 500),
            lease("r1", "r1_a", 1000),
            node_patch("r1", 1500),
            // r1 stops; r2 takes over 4 s after r1's last write.
            lease("r2", "r2_b", 5000),
            node_patch("r2", 5200),
        ]);
        assert_eq!(violations, []);
        let tenures = proof.tenures();
        assert_eq!(tenures.len(), 2);
        assert_eq!(
            (tenures[0].user.as_str(), tenures[0].last_renewed),
            ("r1", at(1000))
        );
        assert_eq!(
            (tenures[1].user.as_str(), tenures[1].acquired),
            ("r2", at(5000))
        );
        assert_eq!(proof.failover_after(at(2000), "r1"), Some(3 * SECOND));
        assert_eq!(proof.holder_at(at(4000)), Some("r1"));
        assert_eq!(proof.holder_at(at(6000)), Some("r2"));
        assert_eq!(proof.holder_at(at(-1)), None);
    }

    #[test]
    fn a_write_by_the_old_leader_after_a_takeover_is_an_overlap() {
        let (_, violations) = check(&[
            lease("r1", "r1_a", 0),
            lease("r2", "r2_b", 4500),
            // r1 was SIGSTOPped and writes once resumed: two leaders.
            node_patch("r1", 6000),
        ]);
        assert_eq!(violations.len(), 1, "{violations:?}");
        match &violations[0] {
            Violation::Overlap { write, holder } => {
                assert_eq!((write.user.as_str(), holder.as_str()), ("r1", "r2"));
                assert_eq!(write.object, "nodes /n1");
            }
            other => panic!("expected an overlap, got {other}"),
        }
        assert!(violations[0].to_string().starts_with("overlap: r1 patch"));
        assert_eq!(violations[0].write().map(|w| w.received), Some(at(6000)));
    }

    #[test]
    fn a_takeover_before_the_lease_expired_is_premature() {
        let (_, violations) = check(&[lease("r1", "r1_a", 0), lease("r2", "r2_b", 3000)]);
        assert_eq!(violations[0].write(), None);
        assert_eq!(
            violations,
            [Violation::PrematureTakeover {
                from: "r1".into(),
                to: "r2".into(),
                after_micros: 3 * SECOND,
                duration_micros: 4 * SECOND
            }]
        );
    }

    #[test]
    fn writes_without_a_lease_or_after_a_release_are_unleased() {
        let (_, violations) = check(&[
            node_patch("r1", 0),
            lease("r1", "r1_a", 100),
            lease("r1", "", 200),
            node_patch("r1", 300),
            // After a release, another replica takes over at once: not premature.
            lease("r2", "r2_b", 400),
        ]);
        assert_eq!(violations.len(), 2, "{violations:?}");
        assert!(
            violations
                .iter()
                .all(|v| matches!(v, Violation::Unleased { .. }))
        );
    }

    #[test]
    fn a_holder_acting_on_its_own_expired_lease_is_reported() {
        let (_, violations) = check(&[lease("r1", "r1_a", 0), node_patch("r1", 4500)]);
        assert!(
            matches!(&violations[..], [Violation::Expired { after_micros, .. }] if *after_micros == 4_500_000),
            "{violations:?}"
        );
    }

    #[test]
    fn a_write_completing_after_a_takeover_is_in_flight_across_it() {
        let mut slow = node_patch("r1", 3900);
        // Completed 1.2 s later, after r2's takeover at 4.0 s.
        let completed = "2026-11-23T14:00:05.100000Z";
        slow.stage_timestamp = serde_json::from_value(serde_json::json!(completed)).expect("time");
        let (_, violations) = check(&[lease("r1", "r1_a", 0), slow, lease("r2", "r2_b", 4000)]);
        assert!(
            matches!(&violations[..], [Violation::InFlightAcrossTakeover { holder, .. }] if holder == "r2"),
            "{violations:?}"
        );
    }

    #[test]
    fn failed_requests_election_events_reviews_and_strangers_are_not_controller_writes() {
        let (proof, violations) = check(&[
            lease("r1", "r1_a", 0),
            // r2's lost race: a conflict changes nothing.
            lease_code("r2", "r2_b", 100, 409),
            // r2's "stopped leading" event about the Lease, and a token review.
            event(
                "r2",
                "create",
                "events.k8s.io:events:kube-system:cloud-controller-manager.18a2b",
                201,
                200,
                "",
            ),
            event(
                "r2",
                "create",
                "authentication.k8s.io:tokenreviews::",
                201,
                300,
                "",
            ),
            // A failed node patch and the admin's node create.
            event("r2", "patch", ":nodes::n1", 409, 400, ""),
            event("admin", "create", ":nodes::n2", 201, 500, ""),
            // A get is not a write.
            event("r2", "get", ":nodes::n1", 200, 600, ""),
            // An event about a Service in kube-system is a controller write.
            event(
                "r1",
                "create",
                ":events:kube-system:web.18a2c",
                201,
                700,
                "",
            ),
        ]);
        assert_eq!(proof.lease_writes.len(), 1);
        assert_eq!(proof.writes.len(), 1, "{:?}", proof.writes);
        assert_eq!(proof.writes[0].object, "events kube-system/web.18a2c");
        assert_eq!(violations, []);
        assert!(proof.writes_by_since("r2", at(0)).is_empty());
        assert_eq!(proof.writes_by_since("r1", at(700)).len(), 1);
        assert!(proof.writes_by_since("r1", at(701)).is_empty());
    }

    #[test]
    fn no_takeover_means_no_failover() {
        let (proof, _) = check(&[lease("r1", "r1_a", 0), lease("r1", "r1_a", 1000)]);
        assert_eq!(proof.failover_after(at(500), "r1"), None);
        assert_eq!(proof.tenures().len(), 1);
    }
}
