//! One admission request, as Go's `WebhookHandler.ServeHTTP` answers it (see the [parent module](super)): a 400
//! unless `Content-Type: application/json` and a non-empty `admission.k8s.io/v1` `AdmissionReview` with a request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use kube::core::TypeMeta;
use kube::core::admission::{AdmissionReview, META_API_VERSION_V1, META_KIND};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tokio_util::task::AbortOnDropHandle;

use super::{AdmissionRequest, DynamicObject, WebhookContext, WebhookDescriptor};
use crate::serving::{TEXT_PLAIN, reply};
use ccm_core::runtime::metrics::SharedRegistry;

/// Go's buckets of `cloud_provider_webhook_request_duration_seconds`.
const DURATION_BUCKETS: [f64; 8] = [0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0];

type Labels = Vec<(String, String)>;

/// `cloud_provider_webhook_request_total{code,webhook}` and `cloud_provider_webhook_request_duration_seconds`
/// (Go's names, labels and buckets). Unlike Go, which counts only failed requests (a bug: its success path sets no
/// code), answered requests are counted too, with code `200`.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    total: Family<Labels, Counter>,
    duration: Family<Labels, Histogram>,
}

impl WebhookMetrics {
    /// Create the families and register them into `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        WebhookMetrics {
            total: registry.registered(
                "cloud_provider_webhook_request",
                "Number of admission requests handled by the cloud provider webhooks, by HTTP code and webhook",
                Family::default(),
            ),
            duration: registry.registered(
                "cloud_provider_webhook_request_duration_seconds",
                "Duration of admission requests handled by the cloud provider webhooks, by HTTP code and webhook",
                Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            ),
        }
    }

    fn record(&self, code: StatusCode, webhook: &str, took: Duration) {
        let labels = vec![
            ("code".to_owned(), code.as_u16().to_string()),
            ("webhook".to_owned(), webhook.to_owned()),
        ];
        self.total.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }
}

#[derive(Clone)]
struct Hook {
    descriptor: Arc<WebhookDescriptor>,
    context: WebhookContext,
    metrics: WebhookMetrics,
}

/// The routes of the enabled webhooks; every other path is a 404.
pub(super) fn router(
    enabled: &[WebhookDescriptor],
    context: WebhookContext,
    metrics: WebhookMetrics,
) -> Router {
    let mut router = Router::new();
    for descriptor in enabled {
        let hook = Hook {
            descriptor: Arc::new(descriptor.clone()),
            context: context.clone(),
            metrics: metrics.clone(),
        };
        router = router.route(&descriptor.path, any(serve).with_state(hook));
    }
    router
}

async fn serve(State(hook): State<Hook>, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let name = hook.descriptor.name.clone();
    let (status, response) = match answer(&hook, &headers, &body).await {
        Ok(review) => {
            let json = [(header::CONTENT_TYPE, "application/json")];
            (StatusCode::OK, (json, review).into_response())
        }
        Err((status, message)) => {
            tracing::warn!(webhook = %name, code = status.as_u16(), error = %message, "admission request failed");
            (status, reply(status, TEXT_PLAIN, false, message + "\n"))
        }
    };
    hook.metrics.record(status, &name, started.elapsed());
    response
}

/// Decode, call the handler, encode; `Err((status, message))` for what Go answers with an error.
async fn answer(
    hook: &Hook,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Vec<u8>, (StatusCode, String)> {
    let request = decode(headers, body).map_err(|m| (StatusCode::BAD_REQUEST, m))?;
    let uid = request.uid.clone();
    let descriptor = &hook.descriptor;
    tracing::debug!(webhook = %descriptor.name, %uid, operation = ?request.operation, "admission request");
    let call = (descriptor.handler)(hook.context.clone(), request);
    let internal = |message: String| (StatusCode::INTERNAL_SERVER_ERROR, message);
    // A task of its own: a panicking handler ends only its request; it is aborted when not awaited any more.
    let task = AbortOnDropHandle::new(tokio::spawn(call));
    let outcome = match tokio::time::timeout(descriptor.timeout, task).await {
        Err(_) => Err(format!(
            "the webhook {:?} did not answer within {:?}",
            descriptor.name, descriptor.timeout
        )),
        Ok(Err(join)) => {
            let why = if join.is_panic() {
                "it panicked"
            } else {
                "it was cancelled"
            };
            Err(format!("the webhook {:?} failed: {why}", descriptor.name))
        }
        Ok(Ok(result)) => result.map_err(|err| ccm_core::error::report(&*err)),
    };
    let mut response =
        outcome.map_err(|why| internal(format!("error generating admission response: {why}")))?;
    response.uid = uid;
    let review = AdmissionReview::<DynamicObject> {
        types: TypeMeta {
            api_version: META_API_VERSION_V1.to_owned(),
            kind: META_KIND.to_owned(),
        },
        request: None,
        response: Some(response),
    };
    serde_json::to_vec(&review)
        .map_err(|e| internal(format!("error encoding the admission response: {e}")))
}

/// Go's `parseRequest`, message for message.
fn decode(headers: &HeaderMap, body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, String> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if content_type != "application/json" {
        return Err(format!(
            "Content-Type: {content_type:?} should be \"application/json\""
        ));
    }
    if body.is_empty() {
        return Err("admission request HTTP body is empty".to_owned());
    }
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
        .map_err(|e| format!("could not deserialize incoming admission review: {e}"))?;
    review
        .try_into()
        .map_err(|_| "admission review can't be used: Request field is nil".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::AdmissionResponse;
    use axum::http::HeaderValue;

    fn json_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers
    }

    fn review_body(uid: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Service"},
                "resource": {"group": "", "version": "v1", "resource": "services"},
                "name": "web",
                "namespace": "default",
                "operation": "CREATE",
                "userInfo": {"username": "admin"},
                "object": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}},
                "dryRun": false
            }
        }))
        .unwrap()
    }

    #[test]
    fn bad_requests_get_gos_messages() {
        let mut text = HeaderMap::new();
        text.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert_eq!(
            decode(&text, b"{}").unwrap_err(),
            "Content-Type: \"text/plain\" should be \"application/json\""
        );
        assert_eq!(
            decode(&json_headers(), b"").unwrap_err(),
            "admission request HTTP body is empty"
        );
        assert!(
            decode(&json_headers(), b"{nope")
                .unwrap_err()
                .starts_with("could not deserialize incoming admission review: ")
        );
        assert_eq!(
            decode(
                &json_headers(),
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#
            )
            .unwrap_err(),
            "admission review can't be used: Request field is nil"
        );
        let request = decode(&json_headers(), &review_body("u-1")).unwrap();
        assert_eq!(request.uid, "u-1");
        assert_eq!(request.name, "web");
    }

    /// A hook around `descriptor` whose context's client is never used (it points at a closed port).
    fn hook(descriptor: WebhookDescriptor, registry: &SharedRegistry) -> Hook {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let provider: Arc<dyn ccm_core::provider::CloudProvider> =
            Arc::new(ccm_provider_fake::FakeCloud::new());
        Hook {
            descriptor: Arc::new(descriptor),
            context: WebhookContext::new(provider, client),
            metrics: WebhookMetrics::register(registry),
        }
    }

    #[tokio::test]
    async fn answers_carry_the_request_uid_and_are_counted() {
        let registry = SharedRegistry::new();
        let deny = WebhookDescriptor::new("deny", "/deny", |ctx, request| async move {
            let name = ctx.provider().provider_name().to_owned();
            Ok(AdmissionResponse::from(&request).deny(format!("no, says {name}")))
        });
        let hook = hook(deny, &registry);
        let body = answer(&hook, &json_headers(), &review_body("u-2"))
            .await
            .unwrap();
        let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(review["response"]["uid"], "u-2");
        assert_eq!(review["response"]["allowed"], false);
        assert_eq!(review["response"]["status"]["message"], "no, says fake");

        let response = serve(
            State(hook.clone()),
            json_headers(),
            Bytes::from(review_body("u-3")),
        )
        .await;
        assert_eq!(response.status(), StatusCode::OK);
        let response = serve(
            State(hook),
            HeaderMap::new(),
            Bytes::from(review_body("u-4")),
        )
        .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let text = registry.encode();
        assert!(
            text.contains(r#"cloud_provider_webhook_request_total{code="200",webhook="deny"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"cloud_provider_webhook_request_total{code="400",webhook="deny"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"cloud_provider_webhook_request_duration_seconds_bucket{le="0.25",code="200",webhook="deny"} 1"#), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn failing_panicking_and_slow_handlers_are_clean_errors() {
        let registry = SharedRegistry::new();
        let failing = WebhookDescriptor::new("failing", "/f", |_ctx, _request| async move {
            Err::<AdmissionResponse, ccm_core::BoxError>("the cloud is down".into())
        });
        let panicking = WebhookDescriptor::new("panicking", "/p", |_ctx, request| async move {
            if request.uid.starts_with('u') {
                panic!("handler bug");
            }
            Ok(AdmissionResponse::from(&request))
        });
        let slow = WebhookDescriptor::new("slow", "/s", |_ctx, request| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(AdmissionResponse::from(&request))
        })
        .with_timeout(Duration::from_secs(2));
        let cases = [
            (
                failing,
                "error generating admission response: the cloud is down",
            ),
            (
                panicking,
                "error generating admission response: the webhook \"panicking\" failed: it panicked",
            ),
            (
                slow,
                "error generating admission response: the webhook \"slow\" did not answer within 2s",
            ),
        ];
        for (descriptor, message) in cases {
            let hook = hook(descriptor, &registry);
            let (status, got) = answer(&hook, &json_headers(), &review_body("u-5"))
                .await
                .unwrap_err();
            assert_eq!(
                (status, got.as_str()),
                (StatusCode::INTERNAL_SERVER_ERROR, message)
            );
        }
    }
}
