//! Leader election against a real kube-apiserver (`ccm-testenv`): several electors on one Lease.
//!
//! Each test uses its own namespace and Lease. Timings are short (lease 3 s, renew 2 s, retry
//! 1 s) unless a test needs to tell a release from an expiry.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ccm_leaderelection::{LeaderElector, LeaderHandle, LeaderState, StepDownReason};
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use kube::client::Body;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_secs(1);
/// client-go's longest candidate pause: 2.2 retry periods.
const MAX_PAUSE: Duration = Duration::from_millis(2200);

struct Replica {
    handle: LeaderHandle,
    token: CancellationToken,
}

fn start(client: Client, ns: &str, name: &str, identity: &str, lease: Duration) -> Replica {
    start_with(client, ns, name, identity, lease, RENEW)
}

fn start_with(
    client: Client,
    ns: &str,
    name: &str,
    identity: &str,
    lease: Duration,
    renew: Duration,
) -> Replica {
    let token = CancellationToken::new();
    let handle = LeaderElector::builder(client, ns, name)
        .identity(identity)
        .lease_duration(lease)
        .renew_deadline(renew)
        .retry_period(RETRY)
        .build()
        .expect("valid test configuration")
        .run(token.clone());
    Replica { handle, token }
}

fn three(env: &TestEnv, ns: &str, name: &str, lease: Duration) -> Vec<Replica> {
    ["a", "b", "c"]
        .into_iter()
        .map(|id| start(env.client(), ns, name, &format!("replica-{id}"), lease))
        .collect()
}

/// Waits until exactly one replica leads, and returns its index.
async fn the_leader(replicas: &[Replica], timeout: Duration) -> usize {
    wait_for("exactly one leader", timeout, || async {
        let leading: Vec<usize> = (0..replicas.len())
            .filter(|&i| replicas[i].handle.is_leading())
            .collect();
        (leading.len() == 1).then(|| leading[0])
    })
    .await
    .expect("a leader is elected")
}

/// Waits until one of `replicas` other than `except` leads; returns its index.
async fn new_leader(replicas: &[Replica], except: usize, timeout: Duration) -> usize {
    wait_for("a new leader", timeout, || async {
        (0..replicas.len()).find(|&i| i != except && replicas[i].handle.is_leading())
    })
    .await
    .expect("another replica takes over")
}

async fn lease_spec(api: &Api<Lease>, name: &str) -> LeaseSpec {
    api.get(name)
        .await
        .expect("lease readable")
        .spec
        .expect("lease has a spec")
}

async fn stop_all(replicas: Vec<Replica>) {
    for replica in &replicas {
        replica.token.cancel();
    }
    for replica in replicas {
        // An aborted replica reports its abort; all others stop cleanly.
        let _ = replica.handle.join().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_of_three_leads() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("le-one").await;
    let name = env.unique_name("lease");
    // A roomier renew deadline than the other tests: this one asserts that nothing changes
    // hands, which a slow apiserver on a loaded machine must not break.
    let replicas: Vec<Replica> = ["a", "b", "c"]
        .into_iter()
        .map(|id| {
            let identity = format!("replica-{id}");
            start_with(env.client(), &ns, &name, &identity, 2 * LEASE, 2 * RENEW)
        })
        .collect();
    let leader = the_leader(&replicas, Duration::from_secs(30)).await;
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);
    let identity = replicas[leader].handle.identity().to_owned();

    // For several renew deadlines: the same single leader, recorded in the Lease, and the
    // followers know it.
    let observed = Instant::now();
    while observed.elapsed() < 3 * LEASE {
        let leading: Vec<usize> = (0..3)
            .filter(|&i| replicas[i].handle.is_leading())
            .collect();
        assert_eq!(leading, [leader], "exactly one stable leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let spec = lease_spec(&leases, &name).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(identity.as_str()));
    assert_eq!(
        spec.lease_transitions,
        Some(0),
        "created by the leader, never changed hands"
    );
    for (i, replica) in replicas.iter().enumerate().filter(|(i, _)| *i != leader) {
        assert_eq!(
            *replica.handle.state().borrow(),
            LeaderState::Following {
                holder: identity.clone()
            },
            "replica {i}"
        );
    }
    stop_all(replicas).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_after_its_lease_expires() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("le-kill").await;
    let name = env.unique_name("lease");
    let replicas = three(env, &ns, &name, LEASE);
    let leader = the_leader(&replicas, Duration::from_secs(30)).await;
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);

    replicas[leader].handle.abort(); // no release, like SIGKILL
    let killed = Instant::now();
    assert_eq!(
        replicas[leader].handle.lost().await,
        StepDownReason::Aborted
    );
    let last = lease_spec(&leases, &name).await;

    // The followers watch the Lease: they saw the last renewal when it was written and try the
    // moment it runs out, a lease duration later (client-go: at the next jittered poll after
    // that, and counted from a read up to 2.2 retry periods after the renewal).
    let next = new_leader(&replicas, leader, LEASE + Duration::from_secs(5)).await;
    let failover = killed.elapsed();
    assert!(
        failover <= LEASE + Duration::from_secs(1),
        "failover took {failover:?}, more than the lease duration + 1 s"
    );
    let spec = lease_spec(&leases, &name).await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(replicas[next].handle.identity())
    );
    assert_eq!(
        spec.lease_transitions,
        Some(last.lease_transitions.unwrap_or(0) + 1)
    );
    // Never before the old lease could have expired (both times come from this machine's clock).
    let (Some(MicroTime(acquired)), Some(MicroTime(last_renewal))) =
        (spec.acquire_time, last.renew_time)
    else {
        panic!("lease times are set");
    };
    let gap = acquired.duration_since(last_renewal);
    assert!(
        gap.as_secs_f64() >= LEASE.as_secs_f64(),
        "taken over {gap:?} after the last renewal"
    );
    assert!(
        gap.as_secs_f64() <= LEASE.as_secs_f64() + 0.5,
        "taken over {gap:?} after the last renewal: the expiry was noticed late"
    );
    stop_all(replicas).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_over_at_once() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("le-release").await;
    let name = env.unique_name("lease");
    // A long lease, so that a take-over by expiry could not pass the time check below.
    let lease = Duration::from_secs(20);
    let mut replicas = three(env, &ns, &name, lease);
    let leader = the_leader(&replicas, Duration::from_secs(60)).await;
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);
    let before = lease_spec(&leases, &name).await;

    let old = replicas.remove(leader);
    old.token.cancel();
    let reason = old.handle.join().await.expect("clean stop");
    assert_eq!(reason, StepDownReason::Cancelled);
    let released_at = Instant::now();
    let released = lease_spec(&leases, &name).await;
    // (The new leader may already have written the lease; then it holds it.)
    if released.holder_identity.as_deref() == Some("") {
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.lease_transitions, before.lease_transitions);
    }

    let next = the_leader(&replicas, 2 * MAX_PAUSE + Duration::from_secs(1)).await;
    let took = released_at.elapsed();
    // The followers' watch shows the release when it is written: they try at once, not at
    // their next jittered poll (1 to 2.2 retry periods later).
    assert!(
        took < RETRY,
        "failover took {took:?}, more than a retry period after the release"
    );
    let spec = lease_spec(&leases, &name).await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(replicas[next].handle.identity())
    );
    assert_eq!(
        spec.lease_transitions,
        Some(before.lease_transitions.unwrap_or(0) + 1)
    );
    stop_all(replicas).await;
}

/// A client whose requests hang forever while `cut` is set (a black-holed apiserver).
fn switchable_client(inner: Client, cut: Arc<AtomicBool>) -> Client {
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let inner = inner.clone();
        let cut = cut.clone();
        async move {
            if cut.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            inner.send(request).await
        }
    });
    Client::new(service, "default")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_apiserver_steps_down_before_anyone_takes_over() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("le-cut").await;
    let name = env.unique_name("lease");
    let cut = Arc::new(AtomicBool::new(false));
    let isolated = start(
        switchable_client(env.client(), cut.clone()),
        &ns,
        &name,
        "isolated",
        LEASE,
    );
    tokio::time::timeout(Duration::from_secs(30), isolated.handle.wait_leading())
        .await
        .expect("the first replica leads in time")
        .expect("leads");
    let others = vec![
        start(env.client(), &ns, &name, "replica-b", LEASE),
        start(env.client(), &ns, &name, "replica-c", LEASE),
    ];
    wait_for(
        "followers to see the leader",
        Duration::from_secs(10),
        || async {
            others
                .iter()
                .all(|r| {
                    *r.handle.state().borrow()
                        == LeaderState::Following {
                            holder: "isolated".into(),
                        }
                })
                .then_some(())
        },
    )
    .await
    .expect("followers follow");

    cut.store(true, Ordering::SeqCst);
    let cut_at = Instant::now();
    let reason = tokio::time::timeout(
        RENEW + RETRY + Duration::from_secs(2),
        isolated.handle.lost(),
    )
    .await
    .expect("steps down within the renew deadline");
    let stepped_down = Instant::now();
    assert_eq!(reason, StepDownReason::RenewDeadlineExceeded);
    assert!(stepped_down - cut_at <= RENEW + RETRY + Duration::from_millis(500));
    assert!(!isolated.handle.is_leading());

    let next = new_leader(
        &others,
        usize::MAX,
        LEASE + 2 * MAX_PAUSE + Duration::from_secs(5),
    )
    .await;
    let took_over = Instant::now();
    assert!(
        stepped_down < took_over,
        "no overlap: the old leader stopped first"
    );
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);
    let spec = lease_spec(&leases, &name).await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(others[next].handle.identity())
    );
    assert!(!isolated.handle.is_leading(), "never leads again");

    isolated.token.cancel();
    // Its loop has already ended (no release after a lost renewal); only the "stopped leading"
    // event may still be pending, bounded by the API timeout.
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(15), isolated.handle.join())
            .await
            .expect("join is bounded")
            .expect("clean stop"),
        StepDownReason::RenewDeadlineExceeded
    );
    stop_all(others).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_has_exactly_the_fields_client_go_writes() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("le-fields").await;
    let name = env.unique_name("lease");
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);

    // A Go replica held it (labels and annotations of its own), and is gone: not renewed.
    let go_held = Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([("owner".to_owned(), "go-ccm".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("go-ccm_6f1c".into()),
            lease_duration_seconds: Some(3),
            acquire_time: Some(MicroTime(Timestamp::now())),
            renew_time: Some(MicroTime(Timestamp::now())),
            lease_transitions: Some(4),
            ..LeaseSpec::default()
        }),
    };
    leases
        .create(&PostParams::default(), &go_held)
        .await
        .expect("create the Go lease");

    let replica = start(env.client(), &ns, &name, "rust-ccm_1", LEASE);
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), replica.handle.wait_leading())
        .await
        .expect("takes over")
        .expect("leads");
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "waited for the Go lease to expire"
    );

    // Read the raw JSON, as any client would see it.
    let raw: Value = env
        .client()
        .request(
            http::Request::get(format!(
                "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"
            ))
            .body(Vec::new())
            .expect("request"),
        )
        .await
        .expect("raw lease");
    let spec = raw["spec"].as_object().expect("spec object");
    let mut keys: Vec<&str> = spec.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "acquireTime",
            "holderIdentity",
            "leaseDurationSeconds",
            "leaseTransitions",
            "renewTime"
        ]
    );
    assert_eq!(spec["holderIdentity"], "rust-ccm_1");
    assert_eq!(spec["leaseDurationSeconds"], 3);
    assert_eq!(
        spec["leaseTransitions"], 5,
        "holder change from the Go replica"
    );
    for key in ["acquireTime", "renewTime"] {
        let value = spec[key].as_str().expect("a string");
        assert!(is_micro_time(value), "{key} = {value:?} is a MicroTime");
    }
    assert_eq!(
        raw["metadata"]["labels"]["owner"], "go-ccm",
        "metadata preserved"
    );

    // Renewals keep acquireTime and transitions.
    let acquired = spec["acquireTime"].clone();
    let renewed = wait_for("a renewal", Duration::from_secs(10), || async {
        let s = lease_spec(&leases, &name).await;
        (serde_json::to_value(&s.renew_time).ok()? != raw["spec"]["renewTime"]).then_some(s)
    })
    .await
    .expect("renews");
    assert_eq!(
        serde_json::to_value(&renewed.acquire_time).expect("json"),
        acquired
    );
    assert_eq!(renewed.lease_transitions, Some(5));

    // Release: client-go's record, still five fields, holder present but empty.
    replica.token.cancel();
    assert_eq!(
        replica.handle.join().await.expect("clean stop"),
        StepDownReason::Cancelled
    );
    let raw: Value = env
        .client()
        .request(
            http::Request::get(format!(
                "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"
            ))
            .body(Vec::new())
            .expect("request"),
        )
        .await
        .expect("raw lease");
    assert_eq!(raw["spec"]["holderIdentity"], "");
    assert_eq!(raw["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(raw["spec"]["leaseTransitions"], 5);
    assert_eq!(raw["spec"]["acquireTime"], raw["spec"]["renewTime"]);

    // The events on the Lease: core/v1, as Go's recorder writes them, through the kit's recorder.
    let events: Api<Event> = Api::namespaced(env.client(), &ns);
    let notes = wait_for(
        "both leader election events",
        Duration::from_secs(10),
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            let mut notes: Vec<String> = list
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("LeaderElection"))
                .filter(|e| e.type_.as_deref() == Some("Normal"))
                .filter(|e| {
                    let r = &e.involved_object;
                    r.kind.as_deref() == Some("Lease")
                        && r.api_version.as_deref() == Some("coordination.k8s.io/v1")
                        && r.name.as_deref() == Some(name.as_str())
                        && r.namespace.as_deref() == Some(ns.as_str())
                })
                .filter(|e| {
                    e.source.as_ref().and_then(|s| s.component.as_deref())
                        == Some("cloud-controller-manager")
                })
                .filter_map(|e| e.message.clone())
                .collect();
            notes.sort();
            (notes.len() == 2).then_some(notes)
        },
    )
    .await
    .expect("events recorded");
    assert_eq!(
        notes,
        ["rust-ccm_1 became leader", "rust-ccm_1 stopped leading"]
    );
}

/// `2006-01-02T15:04:05.000000Z`: RFC 3339 in UTC with exactly six fractional digits.
fn is_micro_time(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.len() == 27
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            10 => *b == b'T',
            13 | 16 => *b == b':',
            19 => *b == b'.',
            26 => *b == b'Z',
            _ => b.is_ascii_digit(),
        })
        && value.parse::<Timestamp>().is_ok()
}
