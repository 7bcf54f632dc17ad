//! The leadership fence on the Kubernetes clients of the controllers and the Event writer.
//!
//! A [`ClientFactory`](crate::client::ClientFactory) given a fence
//! ([`with_fence`](crate::client::ClientFactory::with_fence)) refuses every mutating request (anything but `GET`,
//! `HEAD` and `OPTIONS`; watches are `GET`s) while the fence is closed, with [`ClientError::Fenced`], as the last
//! step before the request would be sent: after its token bucket and its 429 retries. Nothing reaches the API
//! server. Reads pass: a follower's informers keep their caches warm. The leader-election client is made before
//! the fence is installed, so the Lease requests themselves are never fenced.
//!
//! See [`ccm_core::fence`] for when the fence is open, and `docs/leader-election.md` in the repository.

use ccm_core::fence::LeadershipFence;
use http::{Method, Request};

use crate::client::ClientError;

/// Whether a request with this method changes state on the API server (and so must pass the fence).
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The refusal of `request` if it is a write and `fence` is closed now; `None` if it may be sent.
pub fn refusal<B>(fence: &LeadershipFence, request: &Request<B>) -> Option<ClientError> {
    if !is_write(request.method()) {
        return None;
    }
    fence.check().err().map(|reason| ClientError::Fenced {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ccm_core::fence::{FenceClosed, is_fenced};
    use tokio::time::Instant;

    use super::*;

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
