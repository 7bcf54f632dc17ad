//! The leadership fence on the named clients against a real kube-apiserver: while the fence is closed a write is
//! refused before it is sent (a counting layer under the factory sees nothing, and the object does not exist),
//! reads still pass, and Event writes are dropped unsent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::client::{ClientError, ClientFactory};
use ccm_core::fence::{FenceClosed, LeadershipFence, is_fenced};
use ccm_core::names;
use ccm_core::runtime::events::EventSink;
use ccm_core::runtime::events::metrics::Outcome;
use ccm_core::runtime::metrics::SharedRegistry;
use ccm_testenv::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference};
use kube::api::{Api, ListParams, PostParams};
use kube::client::Body;
use tokio::time::Instant;

/// A client over the test apiserver that counts the writes reaching it.
fn counting(inner: kube::Client, writes: Arc<AtomicUsize>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let inner = inner.clone();
        if crate::client::is_write(request.method()) {
            writes.fetch_add(1, Ordering::SeqCst);
        }
        async move { inner.send(request).await }
    });
    kube::Client::new(service, "default")
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn writes_are_refused_unsent_while_the_fence_is_closed() {
    let env = TestEnv::shared().await;
    let writes = Arc::new(AtomicUsize::new(0));
    let fence = LeadershipFence::new();
    let factory = ClientFactory::from_client(
        counting(env.client(), writes.clone()),
        -1.0,
        0,
        "fence-test",
    )
    .with_fence(fence.clone());
    let client = factory.client("service-controller");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (before, during, after) = (
        env.unique_name("before"),
        env.unique_name("during"),
        env.unique_name("after"),
    );

    // Not confirmed yet: refused, nothing sent, and the read that follows passes.
    let err = api
        .create(&PostParams::default(), &config_map(&before))
        .await
        .unwrap_err();
    assert!(is_fenced(&err), "{err:?}");
    assert!(
        err.to_string()
            .contains("leadership not confirmed: refusing to write (POST"),
        "{err}"
    );
    assert_eq!(writes.load(Ordering::SeqCst), 0);
    assert!(
        api.get_opt(&before).await.unwrap().is_none(),
        "never reached the apiserver"
    );

    // Confirmed: writes go through.
    fence.confirm(Instant::now(), Duration::from_secs(10));
    api.create(&PostParams::default(), &config_map(&before))
        .await
        .unwrap();
    assert_eq!(writes.load(Ordering::SeqCst), 1);

    // The last confirmation is older than it is trusted for (a frozen process): refused.
    let stale = LeadershipFence::new();
    stale.confirm(
        Instant::now() - Duration::from_secs(11),
        Duration::from_secs(10),
    );
    let stale_api: Api<ConfigMap> = Api::namespaced(
        ClientFactory::from_client(
            counting(env.client(), writes.clone()),
            -1.0,
            0,
            "fence-test",
        )
        .with_fence(stale)
        .client("service-controller"),
        "default",
    );
    let err = stale_api
        .create(&PostParams::default(), &config_map(&during))
        .await
        .unwrap_err();
    let refused = find_refusal(&err).expect("a fence refusal");
    assert!(matches!(
        refused,
        ClientError::Fenced {
            reason: FenceClosed::Expired { .. },
            ..
        }
    ));
    assert!(
        stale_api.get_opt(&before).await.unwrap().is_some(),
        "reads pass"
    );
    assert_eq!(writes.load(Ordering::SeqCst), 1);

    // Leadership lost: every kind of write is refused.
    fence.revoke();
    let err = api
        .create(&PostParams::default(), &config_map(&after))
        .await
        .unwrap_err();
    assert!(is_fenced(&err));
    let err = api.delete(&before, &Default::default()).await.unwrap_err();
    assert!(is_fenced(&err));
    assert_eq!(
        writes.load(Ordering::SeqCst),
        1,
        "nothing sent after the revocation"
    );
    let admin: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    assert!(admin.get_opt(&after).await.unwrap().is_none());
    assert!(admin.get_opt(&during).await.unwrap().is_none());
    assert!(
        admin.get_opt(&before).await.unwrap().is_some(),
        "the delete was not sent"
    );
}

fn find_refusal<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a ClientError> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<ClientError>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

#[tokio::test]
async fn events_are_dropped_unsent_after_leadership_is_lost() {
    let env = TestEnv::shared().await;
    let writes = Arc::new(AtomicUsize::new(0));
    let fence = LeadershipFence::new();
    fence.confirm(Instant::now(), Duration::from_secs(10));
    fence.revoke();
    let factory = ClientFactory::from_client(
        counting(env.client(), writes.clone()),
        -1.0,
        0,
        "fence-test",
    )
    .with_fence(fence);
    let (_, events_client) = factory.client_with_events("service-controller", None);
    let sink = EventSink::new().with_metrics(&SharedRegistry::new());
    let component = names::components::SERVICE_CONTROLLER;
    let recorder = sink.recorder(events_client, component, Some("ccm-0".into()));
    let service = env.unique_name("svc");
    let regarding = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        namespace: Some("default".into()),
        name: Some(service.clone()),
        uid: Some(format!("{service}-uid")),
        ..ObjectReference::default()
    };
    recorder.normal(&regarding, "EnsuringLoadBalancer", "Ensuring load balancer");
    tokio::time::timeout(Duration::from_secs(30), sink.flush())
        .await
        .expect("the writer gave up at once");
    let metrics = sink.metrics().expect("metrics");
    assert_eq!(metrics.total(component, Outcome::Fenced), 1);
    assert_eq!(
        metrics.total(component, Outcome::Failed),
        0,
        "not retried as a failure"
    );
    assert_eq!(writes.load(Ordering::SeqCst), 0);
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let found = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={service}")))
        .await
        .unwrap();
    assert!(found.items.is_empty(), "no Event reached the apiserver");
}

/// The fence decision alone, without an API server.
mod decision {
    use std::time::Duration;

    use ccm_core::fence::{FenceClosed, is_fenced};
    use tokio::time::Instant;

    use http::{Method, Request};

    use crate::client::{ClientError, is_write, refusal};
    use ccm_core::fence::LeadershipFence;

    fn request(method: Method) -> Request<()> {
        Request::builder()
            .method(method)
            .uri("/api/v1/namespaces/default/events?fieldManager=x")
            .body(())
            .unwrap()
    }

    #[test]
    fn only_reads_are_not_writes() {
        for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert!(!is_write(&method), "{method}");
        }
        for method in [
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::from_bytes(b"CUSTOM").unwrap(),
        ] {
            assert!(is_write(&method), "{method}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn writes_are_refused_while_the_fence_is_closed() {
        let fence = LeadershipFence::new();
        assert!(
            refusal(&fence, &request(Method::GET)).is_none(),
            "reads pass"
        );
        let err = refusal(&fence, &request(Method::POST)).expect("refused");
        assert!(matches!(
            err,
            ClientError::Fenced {
                reason: FenceClosed::NotConfirmed,
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "leadership not confirmed: refusing to write (POST /api/v1/namespaces/default/events): the lease has \
             not been acquired yet: wait until this replica leads"
        );
        assert!(is_fenced(&err), "recognisable through its source");

        fence.confirm(Instant::now(), Duration::from_secs(10));
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(refusal(&fence, &request(method)).is_none());
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(matches!(
            refusal(&fence, &request(Method::PATCH)),
            Some(ClientError::Fenced {
                reason: FenceClosed::Expired { .. },
                ..
            })
        ));
        fence.revoke();
        assert!(matches!(
            refusal(&fence, &request(Method::DELETE)),
            Some(ClientError::Fenced {
                reason: FenceClosed::Revoked,
                ..
            })
        ));
        assert!(refusal(&fence, &request(Method::GET)).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unfenced_client_writes_at_any_time() {
        let fence = LeadershipFence::unfenced();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(refusal(&fence, &request(Method::POST)).is_none());
    }
}
