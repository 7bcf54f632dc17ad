//! Honouring the API server's "not now": a tower layer that retries a request answered with 429 Too Many Requests
//! (API Priority and Fairness rejecting it) after the answer's `Retry-After`, as client-go does, instead of failing
//! it or re-sending it at once.
//!
//! | answer | retried after |
//! |---|---|
//! | 429 | `Retry-After` seconds (1 s without a usable header), at most [`DEFAULT_MAX_WAIT`] (10 s) |
//! | 503, 504 | the same (kube-rs retried these too) |
//! | any other 5xx with `Retry-After` | `Retry-After` (client-go's rule) |
//! | anything else | not retried |
//!
//! A request is retried at most [`DEFAULT_MAX_RETRIES`] times (10, client-go's default), then the last answer is
//! returned. The layer is tower's retry middleware above the client's token bucket: tower sends each retry through
//! a fresh clone of the service below, so every retry takes a token like a new request (client-go throttles every
//! attempt). Watches (their caller re-lists and re-watches) and requests whose body cannot be sent twice are never
//! retried; kube-rs builds every body from a buffer (small JSON), so in practice every other request can be. Every
//! 429 is counted in `rest_client_requests_throttled_total{client}`.

use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderMap, Request, Response, StatusCode};
use kube::client::Body;
use prometheus_client::metrics::counter::Counter;
use tower::Layer;
use tower::retry::{Policy, Retry};

/// client-go's default number of retries of one request (`rest.Request`'s `maxRetries`).
pub const DEFAULT_MAX_RETRIES: u32 = 10;
/// The longest one wait may be, whatever `Retry-After` says.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(10);
/// The wait after a 429, 503 or 504 without a usable `Retry-After`.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(1);

/// The layer, and the retry policy of one request; see the [module](self).
#[derive(Debug, Clone)]
pub struct RetryAfterLayer {
    max_retries: u32,
    max_wait: Duration,
    throttled: Option<Counter>,
    /// The retries of the request this copy of the policy follows (tower copies the policy for each request).
    retries: u32,
}

impl RetryAfterLayer {
    /// Up to 10 retries, each wait at most 10 s.
    pub fn new() -> Self {
        RetryAfterLayer {
            max_retries: DEFAULT_MAX_RETRIES,
            max_wait: DEFAULT_MAX_WAIT,
            throttled: None,
            retries: 0,
        }
    }

    /// Count every 429 answer in `counter`.
    pub fn count_throttled(mut self, counter: Counter) -> Self {
        self.throttled = Some(counter);
        self
    }

    /// How long to wait before retrying a request answered with `status` and `headers`; `None`: do not retry.
    /// A pure function of the answer and the cap.
    pub fn wait_for(&self, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        let retry_after = headers
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            // "0" would mean "at once": never hammer the server
            .filter(|seconds| *seconds > 0)
            .map(Duration::from_secs);
        let retried = matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS
                | StatusCode::SERVICE_UNAVAILABLE
                | StatusCode::GATEWAY_TIMEOUT
        ) || (status.is_server_error() && headers.contains_key(RETRY_AFTER));
        retried.then(|| retry_after.unwrap_or(DEFAULT_WAIT).min(self.max_wait))
    }
}

/// A watch (`?watch=true`, `?watch=1`, or a legacy `/watch/` path): never retried.
fn is_watch<B>(request: &Request<B>) -> bool {
    let query_watch = request.uri().query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    });
    query_watch || request.uri().path().contains("/watch/")
}

impl<S> Layer<S> for RetryAfterLayer {
    type Service = Retry<RetryAfterLayer, S>;
    fn layer(&self, inner: S) -> Self::Service {
        Retry::new(self.clone(), inner)
    }
}

impl<B, E> Policy<Request<Body>, Response<B>, E> for RetryAfterLayer {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<B>, E>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        let status = response.status();
        if status == StatusCode::TOO_MANY_REQUESTS
            && let Some(counter) = &self.throttled
        {
            counter.inc();
        }
        let wait = self.wait_for(status, response.headers())?;
        if is_watch(request) {
            return None;
        }
        let (retries, uri) = (self.retries, request.uri().to_string());
        if retries >= self.max_retries {
            tracing::debug!(
                status = status.as_u16(),
                retries,
                uri,
                "the API server still asks to retry; giving up"
            );
            return None;
        }
        self.retries += 1;
        tracing::debug!(
            status = status.as_u16(),
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            retry = self.retries,
            uri,
            "the API server asks to retry later; waiting"
        );
        Some(tokio::time::sleep(wait))
    }

    /// A copy of `request` to send again, if its body can be sent twice.
    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        let mut copy = Request::new(request.body().try_clone()?);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;
    use tower::{Service, ServiceExt};

    impl RetryAfterLayer {
        /// At most `retries` retries of one request.
        pub(crate) fn max_retries(mut self, retries: u32) -> Self {
            self.max_retries = retries;
            self
        }

        /// Wait at most `wait` before one retry.
        pub(crate) fn max_wait(mut self, wait: Duration) -> Self {
            self.max_wait = wait;
            self
        }
    }

    fn answer(status: u16, retry_after: Option<&str>) -> Response<()> {
        let mut builder = Response::builder().status(status);
        if let Some(value) = retry_after {
            builder = builder.header(RETRY_AFTER, value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn which_answers_are_retried_and_after_how_long() {
        let layer = RetryAfterLayer::new();
        let wait = |status: u16, retry_after: Option<&str>| {
            let a = answer(status, retry_after);
            layer.wait_for(a.status(), a.headers())
        };
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(wait(429, Some("3")), secs(3));
        assert_eq!(wait(429, None), secs(1), "the default without the header");
        assert_eq!(wait(429, Some("0")), secs(1), "never at once");
        assert_eq!(wait(429, Some("soon")), secs(1), "an HTTP date is not read");
        assert_eq!(wait(429, Some("3600")), secs(10), "capped");
        assert_eq!(wait(503, None), secs(1));
        assert_eq!(wait(504, Some("2")), secs(2));
        assert_eq!(
            wait(500, Some("2")),
            secs(2),
            "client-go: any 5xx with Retry-After"
        );
        assert_eq!(wait(500, None), None);
        for status in [200, 201, 400, 401, 403, 404, 409, 422] {
            assert_eq!(wait(status, Some("1")), None, "{status}");
        }
        let short = RetryAfterLayer::new().max_wait(Duration::from_millis(500));
        let a = answer(429, Some("5"));
        assert_eq!(
            short.wait_for(a.status(), a.headers()),
            Some(Duration::from_millis(500))
        );
    }

    #[test]
    fn watches_are_recognized() {
        let req = |uri: &str| Request::get(uri).body(()).unwrap();
        assert!(is_watch(&req("/api/v1/nodes?watch=true&resourceVersion=1")));
        assert!(is_watch(&req("/api/v1/nodes?resourceVersion=1&watch=1")));
        assert!(is_watch(&req("/api/v1/watch/nodes")));
        assert!(!is_watch(&req("/api/v1/nodes?watch=false")));
        assert!(!is_watch(&req("/api/v1/nodes?labelSelector=watch%3Dtrue")));
        assert!(!is_watch(&req("/api/v1/nodes/watcher")));
    }

    /// A fake API server: answers from `script` in turn (then 200), and records when each request came and its body.
    #[derive(Clone)]
    struct Server {
        script: Arc<Mutex<Vec<Response<()>>>>,
        seen: Arc<Mutex<Vec<(Instant, String)>>>,
    }

    impl Server {
        fn new(script: Vec<Response<()>>) -> Self {
            Server {
                script: Arc::new(Mutex::new(script.into_iter().rev().collect())),
                seen: Arc::default(),
            }
        }

        fn service(
            &self,
        ) -> impl Service<
            Request<Body>,
            Response = Response<()>,
            Error = kube::Error,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static {
            let server = self.clone();
            tower::service_fn(move |request: Request<Body>| {
                let server = server.clone();
                async move {
                    let body = request.into_body().collect_bytes().await?;
                    server
                        .seen
                        .lock()
                        .unwrap()
                        .push((Instant::now(), String::from_utf8_lossy(&body).into_owned()));
                    let next = server.script.lock().unwrap().pop();
                    Ok(next.unwrap_or_else(|| answer(200, None)))
                }
            })
        }

        fn times(&self, start: Instant) -> Vec<Duration> {
            self.seen
                .lock()
                .unwrap()
                .iter()
                .map(|(at, _)| *at - start)
                .collect()
        }
    }

    fn patch() -> Request<Body> {
        Request::patch("/api/v1/nodes/a")
            .body(Body::from(br#"{"spec":{}}"#.to_vec()))
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_is_retried_after_its_retry_after_with_the_same_body() {
        let server = Server::new(vec![answer(429, Some("2")), answer(429, None)]);
        let counter = Counter::default();
        let layer = RetryAfterLayer::new().count_throttled(counter.clone());
        let start = Instant::now();
        let response = layer
            .layer(server.service())
            .oneshot(patch())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        // at once, after Retry-After (2 s), after the 1 s default
        assert_eq!(
            server.times(start),
            [
                Duration::ZERO,
                Duration::from_secs(2),
                Duration::from_secs(3)
            ]
        );
        let bodies: Vec<String> = server
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| b.clone())
            .collect();
        assert_eq!(bodies, vec![r#"{"spec":{}}"#.to_owned(); 3]);
        assert_eq!(counter.get(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_bounded_and_the_last_answer_is_returned() {
        let server = Server::new((0..20).map(|_| answer(429, Some("60"))).collect());
        let counter = Counter::default();
        let layer = RetryAfterLayer::new().count_throttled(counter.clone());
        let start = Instant::now();
        let response = layer
            .layer(server.service())
            .oneshot(patch())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let times = server.times(start);
        // the first attempt and 10 retries, 10 s apart (60 s capped)
        assert_eq!(times.len(), 11);
        for (i, at) in times.iter().enumerate() {
            assert_eq!(*at, Duration::from_secs(10 * i as u64));
        }
        assert_eq!(counter.get(), 11);
        let server = Server::new(vec![answer(429, None); 3]);
        let response = RetryAfterLayer::new()
            .max_retries(1)
            .layer(server.service())
            .oneshot(patch())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(server.times(start).len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn watches_and_other_errors_are_not_retried() {
        let server = Server::new(vec![answer(429, Some("1"))]);
        let counter = Counter::default();
        let watch = Request::get("/api/v1/nodes?watch=true")
            .body(Body::empty())
            .unwrap();
        let response = RetryAfterLayer::new()
            .count_throttled(counter.clone())
            .layer(server.service())
            .oneshot(watch)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(server.seen.lock().unwrap().len(), 1);
        assert_eq!(counter.get(), 1, "counted, not retried");

        let server = Server::new(vec![answer(409, None), answer(500, None)]);
        let mut service = RetryAfterLayer::new().layer(server.service());
        for want in [409, 500, 200] {
            let response = service.ready().await.unwrap().call(patch()).await.unwrap();
            assert_eq!(response.status().as_u16(), want);
        }
        assert_eq!(server.seen.lock().unwrap().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_wait_for_the_token_bucket_below() {
        // A bucket of one request every 2 s, burst 1, below the retry layer: a retry takes a token too, so it
        // leaves 2 s after the previous attempt although Retry-After says 1 s.
        let server = Server::new(vec![answer(429, Some("1")); 2]);
        let bucket = crate::ratelimit::Throttle::new(0.5, 1);
        let inner = server.service();
        let service = tower::ServiceBuilder::new()
            .layer(RetryAfterLayer::new())
            .service_fn(move |request: Request<Body>| {
                let (bucket, inner) = (bucket.clone(), inner.clone());
                async move {
                    bucket.acquire().await;
                    inner.oneshot(request).await
                }
            });
        let start = Instant::now();
        let response = service.oneshot(patch()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            server.times(start),
            [
                Duration::ZERO,
                Duration::from_secs(2),
                Duration::from_secs(4)
            ]
        );
    }
}
