//! The election loop against a scripted, in-memory Lease API (a `tower-test` mock service behind
//! a real `kube::Client`), with paused time: deterministic timing of acquisition, renewal,
//! step-down and release.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};

use ccm_core::fence::{FenceClosed, LeadershipFence};
use ccm_leaderelection::{
    LeaderElectionMetrics, LeaderElector, LeaderElectorBuilder, LeaderHandle, LeaderState,
    StepDownReason,
};
use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::client::Body;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower_test::mock::SendResponse;

/// The fake's response bodies: whole JSON documents, or the endless stream of a watch.
type MockBody = UnsyncBoxBody<Bytes, Infallible>;

const NS: &str = "kube-system";
const NAME: &str = "cloud-controller-manager";
const ME: &str = "me_1";
const OTHER: &str = "other_2";
const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
/// core/v1 Events, as Go's recorder (and the kit's) writes them.
const EVENTS_PATH: &str = "/api/v1/namespaces/kube-system/events";
const SECOND: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Mode {
    /// Answer like an apiserver.
    #[default]
    Serve,
    /// Answer every request with 500.
    Fail,
    /// Never answer (a black-holed apiserver).
    Hang,
}

#[derive(Clone, Debug)]
struct Logged {
    at: Instant,
    method: Method,
    path: String,
    body: Value,
    query: String,
}

#[derive(Default)]
struct State {
    lease: Option<Lease>,
    resource_version: u64,
    mode: Mode,
    events_mode: Mode,
    requests: Vec<Logged>,
    /// The list and watch requests on the Lease collection (the candidates' watch), apart from `requests`.
    collection_requests: Vec<Logged>,
    /// The open watches: each gets a JSON line per change of the Lease.
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
    events: Vec<Value>,
    /// Another replica writes the lease (holder = this) just before the next lease write.
    steal_before_next_write: Option<String>,
    /// The next lease write is applied but never answered.
    apply_and_hang_next_write: bool,
    hung: Vec<SendResponse<Response<MockBody>>>,
}

/// An in-memory apiserver for one Lease plus the events endpoint.
#[derive(Clone, Default)]
struct FakeApi(Arc<Mutex<State>>);

impl FakeApi {
    fn start() -> (Client, FakeApi) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<MockBody>>();
        let fake = FakeApi::default();
        let server = fake.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                server.serve(request, send).await;
            }
        });
        (Client::new(service, "default"), fake)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn serve(&self, request: Request<Body>, send: SendResponse<Response<MockBody>>) {
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.expect("request body");
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let path = parts.uri.path().to_owned();
        let mut st = self.state();
        let logged = Logged {
            at: Instant::now(),
            method: parts.method.clone(),
            path: path.clone(),
            body: body.clone(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
        };
        let collection = parts.method == Method::GET && path == LEASE_PATH;
        if collection {
            st.collection_requests.push(logged);
        } else {
            st.requests.push(logged);
        }
        let is_event = path.starts_with(EVENTS_PATH);
        match if is_event { st.events_mode } else { st.mode } {
            Mode::Hang => return st.hung.push(send),
            Mode::Fail => return send.send_response(status(500, "InternalError")),
            Mode::Serve => {}
        }
        if is_event {
            st.events.push(body.clone());
            return send.send_response(reply(201, &body));
        }
        if collection {
            let watch = parts.uri.query().is_some_and(|q| q.contains("watch=true"));
            return send.send_response(if watch { st.watch() } else { st.list() });
        }
        let response = match parts.method {
            Method::GET => match &st.lease {
                Some(lease) => reply(200, lease),
                None => status(404, "NotFound"),
            },
            Method::POST => {
                if st.lease.is_some() {
                    status(409, "AlreadyExists")
                } else {
                    let lease: Lease = serde_json::from_value(body).expect("a Lease");
                    st.store(lease);
                    if std::mem::take(&mut st.apply_and_hang_next_write) {
                        return st.hung.push(send);
                    }
                    reply(201, st.lease.as_ref().expect("stored"))
                }
            }
            Method::PUT => {
                if let Some(thief) = st.steal_before_next_write.take() {
                    let mut lease = st.lease.clone().expect("a lease to steal");
                    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                    spec.holder_identity = Some(thief);
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                    st.store(lease);
                }
                let lease: Lease = serde_json::from_value(body).expect("a Lease");
                let current = st
                    .lease
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone());
                if st.lease.is_none() {
                    status(404, "NotFound")
                } else if lease.metadata.resource_version != current {
                    status(409, "Conflict")
                } else {
                    st.store(lease);
                    if std::mem::take(&mut st.apply_and_hang_next_write) {
                        return st.hung.push(send);
                    }
                    reply(200, st.lease.as_ref().expect("stored"))
                }
            }
            other => panic!("unexpected {other} {path}"),
        };
        send.send_response(response);
    }

    /// Another replica (or a human) writes the lease spec.
    fn write_spec(&self, spec: LeaseSpec) {
        let mut st = self.state();
        let mut lease = st.lease.clone().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                namespace: Some(NS.into()),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        lease.spec = Some(spec);
        st.store(lease);
    }

    /// Changes only the metadata (labels) of the lease: a new resourceVersion, same record.
    fn touch_labels(&self) {
        let mut st = self.state();
        let mut lease = st.lease.clone().expect("a lease");
        lease.metadata.labels = Some([("touched".to_owned(), "yes".to_owned())].into());
        st.store(lease);
    }

    fn spec(&self) -> LeaseSpec {
        self.state()
            .lease
            .as_ref()
            .and_then(|l| l.spec.clone())
            .expect("a lease")
    }

    fn set_mode(&self, mode: Mode) {
        self.state().mode = mode;
    }

    fn requests(&self) -> Vec<Logged> {
        self.state().requests.clone()
    }

    /// Lease requests strictly after `since`.
    fn lease_requests_since(&self, since: Instant) -> Vec<Logged> {
        self.requests()
            .into_iter()
            .filter(|r| r.at > since && r.path.starts_with(LEASE_PATH))
            .collect()
    }

    /// The message of every recorded event, after checking the fields common to all (client-go's
    /// `LeaderElection` Event on the Lease, core/v1).
    fn events(&self) -> Vec<String> {
        self.state()
            .events
            .iter()
            .map(|e| {
                assert_eq!(e["reason"], "LeaderElection");
                assert_eq!(e["type"], "Normal");
                assert_eq!(e["source"]["component"], "cloud-controller-manager");
                assert_eq!(e["reportingComponent"], "cloud-controller-manager");
                assert_eq!(e["reportingInstance"], ME);
                assert_eq!(e["involvedObject"]["kind"], "Lease");
                assert_eq!(e["involvedObject"]["apiVersion"], "coordination.k8s.io/v1");
                assert_eq!(e["involvedObject"]["name"], NAME);
                assert_eq!(e["involvedObject"]["namespace"], NS);
                e["message"].as_str().expect("a message").to_owned()
            })
            .collect()
    }
}

impl State {
    fn store(&mut self, mut lease: Lease) {
        self.resource_version += 1;
        lease.metadata.resource_version = Some(self.resource_version.to_string());
        lease.metadata.uid.get_or_insert_with(|| "uid-1".to_owned());
        let mut line = serde_json::to_vec(&json!({"type": "MODIFIED", "object": &lease}))
            .expect("serializable");
        line.push(b'\n');
        let line = Bytes::from(line);
        self.watchers.retain(|w| w.send(line.clone()).is_ok());
        self.lease = Some(lease);
    }

    /// The list of a watcher: the Lease (if any) at the current resourceVersion.
    fn list(&self) -> Response<MockBody> {
        reply(
            200,
            &json!({
                "kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1",
                "metadata": {"resourceVersion": self.resource_version.to_string()},
                "items": self.lease.iter().collect::<Vec<_>>(),
            }),
        )
    }

    /// A watch from now on: one JSON line per change, never ending.
    fn watch(&mut self) -> Response<MockBody> {
        let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
        self.watchers.push(tx);
        let frames = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|line| (Ok::<_, Infallible>(http_body::Frame::data(line)), rx))
        });
        Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(StreamBody::new(frames).boxed_unsync())
            .expect("response")
    }
}

fn reply(code: u16, body: &impl k8s_openapi::serde::Serialize) -> Response<MockBody> {
    let bytes = Bytes::from(serde_json::to_vec(body).expect("serializable"));
    Response::builder()
        .status(StatusCode::from_u16(code).expect("status code"))
        .header("content-type", "application/json")
        .body(Full::new(bytes).boxed_unsync())
        .expect("response")
}

fn status(code: u16, reason: &str) -> Response<MockBody> {
    reply(
        code,
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("fake apiserver: {reason}"), "reason": reason, "code": code,
        }),
    )
}

fn held_by(holder: &str, renew: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(holder.to_owned()),
        lease_duration_seconds: Some(15),
        acquire_time: Some(MicroTime(renew)),
        renew_time: Some(MicroTime(renew)),
        lease_transitions: Some(3),
        ..LeaseSpec::default()
    }
}

fn builder(client: Client) -> LeaderElectorBuilder {
    LeaderElector::builder(client, NS, NAME).identity(ME)
}

async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {limit:?}"))
}

async fn lead(handle: &LeaderHandle) -> Instant {
    within(Duration::from_secs(60), "leading", handle.wait_leading())
        .await
        .expect("leads");
    Instant::now()
}

#[tokio::test(start_paused = true)]
async fn creates_an_absent_lease_and_leads() {
    let (client, fake) = FakeApi::start();
    let mut registry = Registry::default();
    let metrics = LeaderElectionMetrics::register(&mut registry);
    let token = CancellationToken::new();
    let handle = builder(client)
        .metrics(metrics.clone())
        .build()
        .unwrap()
        .run(token.clone());
    assert_eq!(handle.identity(), ME);
    let t0 = lead(&handle).await;
    assert!(handle.is_leading());
    assert_eq!(metrics.master_status(NAME), Some(1));
    let spec = fake.spec();
    assert_eq!(spec.holder_identity.as_deref(), Some(ME));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(spec.acquire_time, spec.renew_time);
    let first = fake.requests();
    assert_eq!(first[0].method, Method::GET);
    assert_eq!(first[1].method, Method::POST);
    assert_eq!(first[1].path, LEASE_PATH);
    assert_eq!(
        first[1].body["spec"],
        json!({
            "holderIdentity": ME,
            "leaseDurationSeconds": 15,
            "acquireTime": spec.acquire_time,
            "renewTime": spec.renew_time,
            "leaseTransitions": 0,
        }),
        "exactly the fields client-go writes"
    );
    assert!(t0.elapsed().is_zero(), "the first attempt is immediate");
    token.cancel();
    assert_eq!(handle.join().await.unwrap(), StepDownReason::Cancelled);
    assert_eq!(metrics.master_status(NAME), Some(0));
}

#[tokio::test(start_paused = true)]
async fn the_leader_renews_every_retry_period_with_optimistic_updates() {
    let (client, fake) = FakeApi::start();
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    let t0 = lead(&handle).await;
    let acquired = fake.spec();
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    let renewals = fake.lease_requests_since(t0);
    let times: Vec<Duration> = renewals.iter().map(|r| r.at - t0).collect();
    assert_eq!(
        times,
        (1..=5).map(|i| 2 * i * SECOND).collect::<Vec<_>>(),
        "{renewals:?}"
    );
    assert!(
        renewals.iter().all(|r| r.method == Method::PUT),
        "fast path: no reads"
    );
    let renewed = fake.spec();
    assert_eq!(
        renewed.acquire_time, acquired.acquire_time,
        "acquireTime is kept"
    );
    assert_eq!(renewed.lease_transitions, Some(0));
    assert!(renewed.renew_time > acquired.renew_time, "renewTime moves");
    assert!(handle.health().is_healthy());
    token.cancel();
    handle.join().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_follower_waits_a_full_lease_duration_measured_locally() {
    for (case, renew) in [
        ("in sync", Timestamp::now()),
        (
            "holder clock 1 h ahead",
            Timestamp::now() + SignedDuration::from_hours(1),
        ),
        (
            "holder clock 1 h behind",
            Timestamp::now() - SignedDuration::from_hours(1),
        ),
    ] {
        let (client, fake) = FakeApi::start();
        fake.write_spec(held_by(OTHER, renew));
        let token = CancellationToken::new();
        let t0 = Instant::now();
        let handle = builder(client).build().unwrap().run(token.clone());
        let mut state = handle.state();
        within(
            SECOND,
            "following",
            state.wait_for(|s| *s != LeaderState::Unknown),
        )
        .await
        .unwrap();
        assert_eq!(
            *state.borrow(),
            LeaderState::Following {
                holder: OTHER.into()
            },
            "{case}"
        );
        let took_over = lead(&handle).await - t0;
        // The lease runs out 15 s after it was first observed; the candidate tries again at that
        // instant (client-go: at its next jittered try, up to 2.2 retry periods later).
        assert!(
            took_over >= Duration::from_secs(15) && took_over <= Duration::from_millis(15_010),
            "{case}: took over after {took_over:?}"
        );
        // Candidate retries are jittered between 1 and 2.2 retry periods (inclusive: tokio's
        // timers round deadlines up to the millisecond), except the last, at the lease's expiry.
        let gets: Vec<Instant> = fake
            .requests()
            .iter()
            .filter(|r| r.method == Method::GET)
            .map(|r| r.at)
            .collect();
        let gaps: Vec<Duration> = gets.windows(2).map(|pair| pair[1] - pair[0]).collect();
        let (last, earlier) = gaps.split_last().expect("several tries");
        for gap in earlier {
            assert!(
                *gap >= 2 * SECOND && *gap <= Duration::from_millis(4400),
                "{case}: {gap:?}"
            );
        }
        assert!(*last <= Duration::from_millis(4400), "{case}: {last:?}");
        let spec = fake.spec();
        assert_eq!(spec.holder_identity.as_deref(), Some(ME));
        assert_eq!(
            spec.lease_transitions,
            Some(4),
            "{case}: holder change is a transition"
        );
        assert_ne!(
            spec.acquire_time,
            Some(MicroTime(renew)),
            "{case}: new acquireTime"
        );
        token.cancel();
        handle.join().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_follower_never_steals_from_a_renewing_holder() {
    let (client, fake) = FakeApi::start();
    fake.write_spec(held_by(OTHER, Timestamp::now()));
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    // The other replica renews every 2 s for a minute (with a wall clock far in the past).
    let start = Instant::now();
    for i in 1..=30 {
        tokio::time::sleep_until(start + 2 * i * SECOND).await;
        fake.write_spec(held_by(
            OTHER,
            Timestamp::now() - SignedDuration::from_hours(2)
                + SignedDuration::from_secs(i64::from(i)),
        ));
        assert_eq!(
            *handle.state().borrow(),
            LeaderState::Following {
                holder: OTHER.into()
            }
        );
    }
    assert!(
        fake.requests().iter().all(|r| r.method == Method::GET),
        "never wrote the lease"
    );
    // It stops renewing. The follower saw the last change through its watch when it was written
    // (client-go: at its next read, up to 2.2 retry periods later) and tries at the instant the
    // lease runs out: exactly one lease duration after the last renewal.
    let stopped = Instant::now();
    let took_over = lead(&handle).await - stopped;
    assert_eq!(took_over, Duration::from_secs(15), "{took_over:?}");
    token.cancel();
    handle.join().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_candidate_watches_only_its_lease_and_stops_watching_once_it_leads() {
    let (client, fake) = FakeApi::start();
    fake.write_spec(held_by(OTHER, Timestamp::now()));
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    tokio::time::sleep(SECOND).await;
    let watches: Vec<Logged> = fake.state().collection_requests.clone();
    assert!(
        watches.iter().any(|r| r.query.contains("watch=true")),
        "a watch: {watches:?}"
    );
    for request in &watches {
        assert!(
            request
                .query
                .contains(&format!("fieldSelector=metadata.name%3D{NAME}")),
            "only the one Lease: {request:?}"
        );
    }
    assert_eq!(fake.state().watchers.len(), 1, "one open watch");
    lead(&handle).await;
    fake.touch_labels();
    tokio::task::yield_now().await;
    assert!(
        fake.state().watchers.is_empty(),
        "the leader does not watch (it renews on client-go's timing)"
    );
    token.cancel();
    handle.join().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_watched_release_is_taken_over_at_once() {
    let (client, fake) = FakeApi::start();
    fake.write_spec(held_by(OTHER, Timestamp::now()));
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    // Between two jittered polls (the first comes 2 to 4.4 s after the start).
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let mut released = held_by("", Timestamp::now());
    released.lease_duration_seconds = Some(1);
    fake.write_spec(released);
    let released_at = Instant::now();
    let took_over = lead(&handle).await - released_at;
    assert_eq!(
        took_over,
        Duration::ZERO,
        "the release is seen when written, not at the next poll"
    );
    assert_eq!(fake.spec().lease_transitions, Some(4));
    token.cancel();
    handle.join().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn losing_the_acquisition_race_is_not_an_error() {
    let (client, fake) = FakeApi::start();
    let mut free = held_by("", Timestamp::now());
    free.holder_identity = Some(String::new());
    fake.write_spec(free);
    fake.state().steal_before_next_write = Some(OTHER.into());
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    let mut state = handle.state();
    within(
        Duration::from_secs(10),
        "following the winner",
        state.wait_for(|s| matches!(s, LeaderState::Following { .. })),
    )
    .await
    .unwrap();
    assert_eq!(
        *state.borrow(),
        LeaderState::Following {
            holder: OTHER.into()
        }
    );
    let methods: Vec<Method> = fake.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(
        methods,
        [Method::GET, Method::PUT, Method::GET],
        "409, then a fresh read"
    );
    assert_eq!(fake.spec().holder_identity.as_deref(), Some(OTHER));
    token.cancel();
    assert_eq!(handle.join().await.unwrap(), StepDownReason::Cancelled);
    assert_eq!(
        fake.spec().holder_identity.as_deref(),
        Some(OTHER),
        "nothing to release"
    );
}

#[tokio::test(start_paused = true)]
async fn failing_renewals_step_down_at_the_renew_deadline() {
    let (client, fake) = FakeApi::start();
    let mut registry = Registry::default();
    let metrics = LeaderElectionMetrics::register(&mut registry);
    let token = CancellationToken::new();
    let handle = builder(client)
        .metrics(metrics.clone())
        .build()
        .unwrap()
        .run(token.clone());
    let t0 = lead(&handle).await;
    fake.set_mode(Mode::Fail);
    let reason = within(Duration::from_secs(30), "step-down", handle.lost()).await;
    assert_eq!(reason, StepDownReason::RenewDeadlineExceeded);
    assert_eq!(
        t0.elapsed(),
        Duration::from_secs(10),
        "renew deadline after the last success"
    );
    assert!(!handle.is_leading());
    assert_eq!(metrics.master_status(NAME), Some(0));
    // Retried every retry period meanwhile: fast-path PUT then GET at 2, 4, 6 and 8 s.
    let attempts: Vec<(Duration, Method)> = fake
        .lease_requests_since(t0)
        .iter()
        .map(|r| (r.at - t0, r.method.clone()))
        .collect();
    let expected: Vec<(Duration, Method)> = (1..=4)
        .flat_map(|i| [(2 * i * SECOND, Method::PUT), (2 * i * SECOND, Method::GET)])
        .collect();
    assert_eq!(attempts, expected);
    fake.set_mode(Mode::Serve);
    assert_eq!(
        handle.join().await.unwrap(),
        StepDownReason::RenewDeadlineExceeded
    );
    assert_eq!(
        fake.spec().holder_identity.as_deref(),
        Some(ME),
        "not released: the lease expires while leader-only work stops"
    );
    let after: Vec<Method> = fake
        .lease_requests_since(t0 + Duration::from_secs(10))
        .iter()
        .map(|r| r.method.clone())
        .collect();
    assert!(
        after.is_empty(),
        "no lease writes after stepping down: {after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hung_apiserver_cannot_stall_the_step_down() {
    let (client, fake) = FakeApi::start();
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    let t0 = lead(&handle).await;
    fake.set_mode(Mode::Hang);
    let reason = within(Duration::from_secs(30), "step-down", handle.lost()).await;
    assert_eq!(reason, StepDownReason::RenewDeadlineExceeded);
    assert_eq!(t0.elapsed(), Duration::from_secs(10));
    // The first renewal's PUT hung until the 5 s API timeout, its GET until the deadline.
    let attempts: Vec<(Duration, Method)> = fake
        .lease_requests_since(t0)
        .iter()
        .map(|r| (r.at - t0, r.method.clone()))
        .collect();
    assert_eq!(
        attempts,
        [(2 * SECOND, Method::PUT), (7 * SECOND, Method::GET)]
    );
    assert_eq!(*handle.state().borrow(), LeaderState::Stopped { reason });
    // The "stopped leading" event is bounded by the API timeout too.
    within(Duration::from_secs(6), "join", handle.join())
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn seeing_another_holder_steps_down_at_once() {
    let (client, fake) = FakeApi::start();
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    let t0 = lead(&handle).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    fake.write_spec(held_by(OTHER, Timestamp::now()));
    let reason = within(Duration::from_secs(30), "step-down", handle.lost()).await;
    assert_eq!(
        reason,
        StepDownReason::HolderChanged {
            holder: OTHER.into()
        }
    );
    assert_eq!(t0.elapsed(), 4 * SECOND, "at the next renewal");
    assert_eq!(handle.join().await.unwrap(), reason);
    assert_eq!(
        fake.spec().holder_identity.as_deref(),
        Some(OTHER),
        "left alone"
    );
}

#[tokio::test(start_paused = true)]
async fn a_metadata_only_change_takes_the_slow_path_and_keeps_leading() {
    let (client, fake) = FakeApi::start();
    let mut registry = Registry::default();
    let metrics = LeaderElectionMetrics::register(&mut registry);
    let token = CancellationToken::new();
    let handle = builder(client)
        .metrics(metrics.clone())
        .build()
        .unwrap()
        .run(token.clone());
    let t0 = lead(&handle).await;
    fake.touch_labels();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let attempts: Vec<(Duration, Method)> = fake
        .lease_requests_since(t0)
        .iter()
        .map(|r| (r.at - t0, r.method.clone()))
        .collect();
    assert_eq!(
        attempts,
        [
            (2 * SECOND, Method::PUT),
            (2 * SECOND, Method::GET),
            (2 * SECOND, Method::PUT),
            (4 * SECOND, Method::PUT)
        ]
    );
    assert!(handle.is_leading());
    assert_eq!(metrics.slowpath_total(NAME), Some(1));
    let lease = fake.state().lease.clone().expect("lease");
    assert_eq!(
        lease.metadata.labels.map(|l| l.len()),
        Some(1),
        "metadata is preserved"
    );
    token.cancel();
    handle.join().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn cancelling_releases_the_lease_like_client_go() {
    let (client, fake) = FakeApi::start();
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    lead(&handle).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = fake.spec();
    token.cancel();
    let reason = within(Duration::from_secs(15), "join", handle.join())
        .await
        .unwrap();
    assert_eq!(reason, StepDownReason::Cancelled);
    let released = fake.spec();
    assert_eq!(released.holder_identity.as_deref(), Some(""));
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, before.lease_transitions);
    assert!(released.renew_time.is_some() && released.acquire_time == released.renew_time);
    assert_eq!(
        fake.events(),
        [
            format!("{ME} became leader"),
            format!("{ME} stopped leading")
        ]
    );
    let requests = fake.requests();
    let stopped = requests
        .iter()
        .position(|r| {
            r.path.starts_with(EVENTS_PATH)
                && r.body["message"]
                    .as_str()
                    .is_some_and(|m| m.ends_with("stopped leading"))
        })
        .expect("the stopped-leading event");
    let release = requests
        .iter()
        .rposition(|r| r.method == Method::PUT)
        .expect("the release");
    assert!(
        stopped < release,
        "written while still holding the lease, before the release"
    );
}

#[tokio::test(start_paused = true)]
async fn release_can_be_disabled() {
    let (client, fake) = FakeApi::start();
    let token = CancellationToken::new();
    let handle = builder(client)
        .release_on_cancel(false)
        .build()
        .unwrap()
        .run(token.clone());
    lead(&handle).await;
    let before = fake.spec();
    token.cancel();
    assert_eq!(handle.join().await.unwrap(), StepDownReason::Cancelled);
    assert_eq!(fake.spec(), before, "left to expire");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_follower_writes_nothing() {
    let (client, fake) = FakeApi::start();
    fake.write_spec(held_by(OTHER, Timestamp::now()));
    let before = fake.spec();
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    tokio::time::sleep(Duration::from_secs(5)).await;
    token.cancel();
    assert_eq!(handle.wait_leading().await, Err(StepDownReason::Cancelled));
    assert_eq!(handle.lost().await, StepDownReason::Cancelled);
    assert_eq!(handle.join().await.unwrap(), StepDownReason::Cancelled);
    assert_eq!(fake.spec(), before);
    assert!(fake.requests().iter().all(|r| r.method == Method::GET));
}

#[tokio::test(start_paused = true)]
async fn a_write_that_landed_unanswered_is_released_on_cancel() {
    let (client, fake) = FakeApi::start();
    fake.state().apply_and_hang_next_write = true;
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    tokio::time::sleep(SECOND).await;
    assert_eq!(
        fake.spec().holder_identity.as_deref(),
        Some(ME),
        "created, answer lost"
    );
    assert!(!handle.is_leading());
    token.cancel();
    assert_eq!(handle.join().await.unwrap(), StepDownReason::Cancelled);
    assert_eq!(
        fake.spec().holder_identity.as_deref(),
        Some(""),
        "released anyway"
    );
}

#[tokio::test(start_paused = true)]
async fn event_failures_do_not_disturb_the_election() {
    let (client, fake) = FakeApi::start();
    fake.state().events_mode = Mode::Fail;
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    let t0 = lead(&handle).await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(handle.is_leading());
    assert_eq!(fake.lease_requests_since(t0).len(), 4);
    fake.state().events_mode = Mode::Hang;
    token.cancel();
    within(Duration::from_secs(10), "join", handle.join())
        .await
        .unwrap();
    assert_eq!(fake.spec().holder_identity.as_deref(), Some(""));
}

#[tokio::test(start_paused = true)]
async fn aborting_the_task_is_reported() {
    let (client, _fake) = FakeApi::start();
    let handle = builder(client)
        .build()
        .unwrap()
        .run(CancellationToken::new());
    lead(&handle).await;
    handle.abort();
    assert_eq!(handle.lost().await, StepDownReason::Aborted);
    assert!(matches!(
        handle.join().await,
        Err(ccm_leaderelection::Error::Task(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn invalid_configuration_is_rejected() {
    let (client, _fake) = FakeApi::start();
    let err = builder(client.clone())
        .lease_duration(Duration::from_secs(10))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("lease duration (10s) must be greater than the renew deadline (10s)"),
        "{err}"
    );
    let err = builder(client.clone()).identity("").build().unwrap_err();
    assert!(matches!(err, ccm_leaderelection::Error::EmptyIdentity));
    let err = LeaderElector::builder(client.clone(), "Kube-System", NAME)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("lease namespace"), "{err}");
    let err = builder(client)
        .api_timeout(Duration::from_secs(10))
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        ccm_leaderelection::Error::InvalidApiTimeout { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn the_fence_opens_on_acquisition_and_closes_before_the_lease_could_move() {
    let (client, fake) = FakeApi::start();
    let fence = LeadershipFence::new();
    let token = CancellationToken::new();
    let handle = builder(client)
        .fence(fence.clone())
        .build()
        .unwrap()
        .run(token.clone());
    assert_eq!(handle.fence().check(), Err(FenceClosed::NotConfirmed));
    let t0 = lead(&handle).await;
    assert!(fence.is_open(), "open once the lease is acquired");
    // Renewals at 2 s and 4 s succeed; from 5 s on the apiserver fails every request.
    tokio::time::sleep(Duration::from_secs(5)).await;
    fake.set_mode(Mode::Fail);
    let last_renewal_sent = t0 + 4 * SECOND;
    tokio::time::sleep_until(
        last_renewal_sent + Duration::from_secs(10) - Duration::from_millis(1),
    )
    .await;
    assert!(
        fence.is_open(),
        "open until renew deadline after the last accepted renewal was sent"
    );
    assert!(handle.is_leading());
    let reason = within(Duration::from_secs(30), "step-down", handle.lost()).await;
    assert_eq!(reason, StepDownReason::RenewDeadlineExceeded);
    assert_eq!(Instant::now(), last_renewal_sent + Duration::from_secs(10));
    assert_eq!(
        fence.check(),
        Err(FenceClosed::Revoked),
        "revoked when stepping down"
    );
    // A follower could take over 15 s (the lease duration) after the renewal it saw: 5 s after the fence closed.
    fake.set_mode(Mode::Serve);
    handle.join().await.unwrap();
    assert_eq!(fence.check(), Err(FenceClosed::Revoked), "never reopens");
}

#[tokio::test(start_paused = true)]
async fn a_frozen_leader_finds_its_fence_closed_before_its_elector_runs() {
    let (client, _fake) = FakeApi::start();
    let token = CancellationToken::new();
    let handle = builder(client).build().unwrap().run(token.clone());
    lead(&handle).await;
    let fence = handle.fence();
    assert!(fence.is_open());
    // A freeze longer than the lease: the monotonic clock jumps; a timer of a controller that fires first
    // sees the fence closed even though the elector has not yet noticed.
    let frozen = Instant::now() + Duration::from_secs(20);
    assert!(matches!(
        fence.check_at(frozen),
        Err(FenceClosed::Expired { .. })
    ));
    token.cancel();
    handle.join().await.unwrap();
    assert_eq!(fence.check(), Err(FenceClosed::Revoked));
}
