//! Kubernetes clients: the connection the flags describe ([`kube_config`]) and one named client per user (each
//! controller, the informers, leader election) from a [`ClientFactory`], each with its own user agent, its own
//! `--kube-api-qps` / `--kube-api-burst` token bucket (as each Go controller has its own clientset; the limits in
//! force are [`KubeApiLimits`]) and the retry of 429 answers after their `Retry-After` ([`crate::retry`]), all
//! over one connection pool.

use std::path::PathBuf;
use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT;
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use ccm_core::fence::LeadershipFence;
use ccm_core::runtime::metrics::SharedRegistry;

use crate::options::{CcmOptions, DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS, KubeApiLimit};
use crate::ratelimit::{Throttle, effective_limits};
use crate::retry::RetryAfterLayer;
use crate::service_accounts::Identity;

/// The response header an API server with API Priority and Fairness sets on every request it classified: the UID
/// of the FlowSchema that matched.
pub const APF_FLOW_SCHEMA_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// The header with the UID of the priority level the request was assigned to.
pub const APF_PRIORITY_LEVEL_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";
/// How long start-up waits for the API Priority and Fairness detection before assuming there is none.
pub const APF_DETECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// The `/configz` key under which the Kubernetes API client limit in force is served ([`KubeApiLimits::to_json`]),
/// beside `cloudcontrollermanager.config.k8s.io`.
pub const KUBE_API_CLIENT_CONFIGZ: &str = "kubeApiClient";

/// How `--kube-api-qps` / `--kube-api-burst` were given; shown as `auto` or `explicit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display)]
#[strum(serialize_all = "lowercase")]
pub enum KubeApiLimitMode {
    /// Neither flag set: decided from the API server (APF or not).
    Auto,
    /// At least one flag set: honoured exactly (the other one at Go's default).
    Explicit,
}

/// The client-side limit of every named client: each has its own token bucket of `qps`/`burst`, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KubeApiLimits {
    /// How the limits were decided.
    pub mode: KubeApiLimitMode,
    /// Whether the API server runs API Priority and Fairness; `None` when it was not asked (explicit limits) or
    /// did not answer.
    pub apf: Option<bool>,
    /// Requests per second per client; `None`: no client-side limit.
    pub qps: Option<f32>,
    /// The burst of each bucket (meaningless without `qps`).
    pub burst: u32,
}

impl KubeApiLimits {
    /// Whether the decision needs to know about APF: only when neither flag is set.
    pub fn needs_apf(qps: KubeApiLimit<f32>, burst: KubeApiLimit<i32>) -> bool {
        qps == KubeApiLimit::Auto && burst == KubeApiLimit::Auto
    }

    /// The decision, a pure function of the two settings and what was detected:
    ///
    /// - both unset (Auto): no limit when `apf == Some(true)`; Go's 20/30 otherwise (no APF, or unknown);
    /// - otherwise the values set, the other at Go's default (20 or 30), with client-go's rules: `qps == 0` → 5,
    ///   `burst == 0` → 10, `qps < 0` → no limit.
    pub fn decide(qps: KubeApiLimit<f32>, burst: KubeApiLimit<i32>, apf: Option<bool>) -> Self {
        let auto = Self::needs_apf(qps, burst);
        let (qps, burst) = if auto && apf == Some(true) {
            (None, 0)
        } else {
            effective_limits(
                qps.value().unwrap_or(DEFAULT_KUBE_API_QPS),
                burst.value().unwrap_or(DEFAULT_KUBE_API_BURST),
            )
        };
        KubeApiLimits {
            mode: if auto {
                KubeApiLimitMode::Auto
            } else {
                KubeApiLimitMode::Explicit
            },
            apf: apf.filter(|_| auto),
            qps,
            burst: if qps.is_some() { burst } else { 0 },
        }
    }

    /// Decide the limits of `options`, asking the API server behind `client` about APF (once, bounded by
    /// [`APF_DETECTION_TIMEOUT`]) only when both flags are unset, and log the decision.
    pub async fn resolve(client: &kube::Client, options: &CcmOptions) -> Self {
        let (qps, burst) = (options.kube_api_qps, options.kube_api_burst);
        let apf = if Self::needs_apf(qps, burst) {
            match tokio::time::timeout(APF_DETECTION_TIMEOUT, detect_apf(client)).await {
                Ok(Ok(apf)) => Some(apf),
                Ok(Err(error)) => {
                    tracing::warn!(%error, "cannot tell whether the API server runs API Priority and Fairness; limiting each client to Go's 20/30");
                    None
                }
                Err(_) => {
                    tracing::warn!(timeout = ?APF_DETECTION_TIMEOUT, "the API server did not answer the API Priority and Fairness detection; limiting each client to Go's 20/30");
                    None
                }
            }
        } else {
            None
        };
        let limits = Self::decide(qps, burst, apf);
        limits.log();
        limits
    }

    /// The token bucket of one client.
    pub fn throttle(&self) -> Throttle {
        // No `qps`: a negative rate, no bucket.
        Throttle::new(
            self.qps.unwrap_or(-1.0),
            i32::try_from(self.burst).unwrap_or(i32::MAX),
        )
    }

    /// `unlimited` or the rate.
    pub fn qps_text(&self) -> String {
        self.qps
            .map_or("unlimited".to_owned(), |qps| qps.to_string())
    }

    /// `unlimited` or the burst.
    pub fn burst_text(&self) -> String {
        self.qps
            .map_or("unlimited".to_owned(), |_| self.burst.to_string())
    }

    /// `true`, `false` or `unknown` (not asked, or no answer).
    pub fn apf_text(&self) -> &'static str {
        self.apf
            .map_or("unknown", |apf| if apf { "true" } else { "false" })
    }

    /// The start-up log line: `kubernetes API client limit mode=auto apf=true qps=unlimited burst=unlimited`.
    pub fn log(&self) {
        tracing::info!(
            mode = %self.mode,
            apf = %self.apf_text(),
            qps = %self.qps_text(),
            burst = %self.burst_text(),
            "kubernetes API client limit"
        );
    }

    /// What `/configz` serves beside the settings: `{"mode": "auto", "apf": true, "qps": "unlimited", "burst":
    /// "unlimited"}` (`apf` is `null` when unknown; `qps`/`burst` are numbers when limited).
    pub fn to_json(self) -> serde_json::Value {
        let unlimited = serde_json::json!("unlimited");
        serde_json::json!({
            "mode": self.mode.to_string(),
            "apf": self.apf,
            "qps": self.qps.map_or(unlimited.clone(), |qps| serde_json::json!(qps)),
            "burst": self.qps.map_or(unlimited, |_| serde_json::json!(self.burst)),
        })
    }
}

/// Whether the API server behind `client` runs API Priority and Fairness: one `GET /version`, whose answer carries
/// the [`APF_FLOW_SCHEMA_HEADER`] and [`APF_PRIORITY_LEVEL_HEADER`] headers if it does (as Flux detects it).
///
/// # Errors
///
/// The request's, or a non-success status.
pub async fn detect_apf(client: &kube::Client) -> Result<bool, kube::Error> {
    let request = http::Request::get("/version")
        .body(Body::empty())
        .map_err(kube::Error::HttpError)?;
    let response = client.send(request).await?;
    let status = response.status();
    if !status.is_success() {
        return Err(kube::Error::Service(
            format!("GET /version answered {status}").into(),
        ));
    }
    Ok(has_apf_headers(response.headers()))
}

/// Whether an answer carries the API Priority and Fairness headers.
pub fn has_apf_headers(headers: &http::HeaderMap) -> bool {
    headers.contains_key(APF_FLOW_SCHEMA_HEADER) || headers.contains_key(APF_PRIORITY_LEVEL_HEADER)
}

/// Why the Kubernetes client cannot be built, or why it refused a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The kubeconfig file cannot be read or used.
    #[error("cannot use kubeconfig {path}: {source}; check --kubeconfig")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither flag was given and neither the in-cluster configuration nor a default kubeconfig is available.
    #[error(
        "cannot find the Kubernetes API server: not running in a cluster ({in_cluster}) and no default kubeconfig \
         ({infer}); set --kubeconfig or --master"
    )]
    NoConfig {
        /// Why the in-cluster configuration failed.
        in_cluster: String,
        /// Why the default kubeconfig failed.
        infer: String,
    },
    /// `--master` is not a URL.
    #[error("invalid --master {value:?}: {reason}")]
    Master {
        /// The value given.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A write was refused before it was sent: leadership is not confirmed (see `ClientFactory::with_fence`).
    #[error("leadership not confirmed: refusing to write ({method} {path}): {reason}")]
    Fenced {
        /// The request method.
        method: String,
        /// The request path.
        path: String,
        /// Why the fence is closed.
        #[source]
        reason: ccm_core::fence::FenceClosed,
    },
    /// The client cannot be built from the configuration.
    #[error("cannot build the Kubernetes client: {0}")]
    Build(#[source] kube::Error),
}

/// Build the `kube::Config` the flags describe: `--kubeconfig` (its current context), with the server replaced by
/// `--master` when given; `--master` alone; or, with neither, the in-cluster configuration, falling back to the
/// default kubeconfig (`$KUBECONFIG`, `~/.kube/config`).
///
/// # Errors
///
/// [`ClientError`] naming the flag at fault.
pub async fn kube_config(options: &CcmOptions) -> Result<kube::Config, ClientError> {
    let master = options.master.as_deref().map(parse_master).transpose()?;
    let mut config = match (&options.kubeconfig, &master) {
        (Some(path), _) => {
            config_from_file(path)
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?
        }
        (None, Some(url)) => kube::Config::new(url.clone()),
        (None, None) => match kube::Config::incluster() {
            Ok(config) => config,
            Err(in_cluster) => {
                tracing::warn!(
                    error = %in_cluster,
                    "neither --kubeconfig nor --master was specified and the in-cluster configuration is not \
                     available; trying the default kubeconfig"
                );
                kube::Config::infer()
                    .await
                    .map_err(|infer| ClientError::NoConfig {
                        in_cluster: in_cluster.to_string(),
                        infer: infer.to_string(),
                    })?
            }
        },
    };
    if let Some(url) = master {
        config.cluster_url = url;
    }
    Ok(config)
}

/// The client configuration of the kubeconfig file at `path`.
pub(crate) async fn config_from_file(
    path: &std::path::Path,
) -> Result<kube::Config, kube::config::KubeconfigError> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await
}

fn parse_master(value: &str) -> Result<http::Uri, ClientError> {
    let invalid = |reason: &str| ClientError::Master {
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: http::Uri = value
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    match uri.scheme_str() {
        Some("https" | "http") if uri.host().is_some() => Ok(uri),
        _ => Err(invalid("expected a URL such as https://10.0.0.1:6443")),
    }
}

/// The client of the connection `config` describes, without kube-rs's own retry of 429/503/504 (the named clients
/// retry with [`RetryAfterLayer`], above their token bucket).
///
/// # Errors
///
/// [`ClientError::Build`] if kube cannot build a client from `config` (for example an `https` server without a
/// TLS feature enabled).
pub fn base_client(mut config: kube::Config) -> Result<kube::Client, ClientError> {
    config.default_retry = false;
    kube::Client::try_from(config).map_err(ClientError::Build)
}

/// Makes named clients over one connection: each with its own user agent, token bucket and 429 retry.
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct ClientFactory {
    #[educe(Debug(ignore))]
    base: kube::Client,
    limits: KubeApiLimits,
    agent_prefix: String,
    throttled: Family<Vec<(String, String)>, Counter>,
    fence: Option<LeadershipFence>,
}

impl ClientFactory {
    /// A factory over an existing client (its own layers stay in place) with decided limits
    /// ([`KubeApiLimits::resolve`]).
    pub fn new(base: kube::Client, limits: KubeApiLimits, agent_prefix: &str) -> Self {
        ClientFactory {
            base,
            limits,
            agent_prefix: agent_prefix.to_owned(),
            throttled: Family::default(),
            fence: None,
        }
    }

    /// The same factory, whose clients made from now on refuse every write ([`is_write`]: anything but `GET`,
    /// `HEAD` and `OPTIONS`; watches are `GET`s) with [`ClientError::Fenced`] while `fence` is closed, as the last
    /// step before sending (after the token bucket and the 429 retries), so nothing reaches the API server; reads
    /// pass, so a follower's informers keep their caches warm. Make the leader-election client before, so that the
    /// Lease requests are not fenced. See [`ccm_core::fence`] for when the fence is open, and
    /// `docs/leader-election.md` in the repository.
    pub fn with_fence(mut self, fence: LeadershipFence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> &KubeApiLimits {
        &self.limits
    }

    /// Register `rest_client_requests_throttled_total{client}`: the 429 answers each named client received.
    pub fn register_metrics(&self, registry: &SharedRegistry) {
        registry.register(
            "rest_client_requests_throttled",
            "Number of 429 (Too Many Requests) answers from the API server, per named client",
            self.throttled.clone(),
        );
    }

    /// A new client named `name`, with its own token bucket and user agent; must be called inside a Tokio runtime.
    /// Leader election gets one (`leader-election`): a bucket no other client takes from, so Lease renewals never
    /// wait behind controller traffic.
    pub fn client(&self, name: &str) -> kube::Client {
        self.layered(name, self.limits.throttle(), None)
    }

    /// A client named `name` and a second one for its Events over the same token bucket, at a lower priority:
    /// Event writes only use tokens the first client leaves free, so they never delay its object writes. With
    /// `Some((connection, tokens))`, both act as a controller's own ServiceAccount
    /// ([`crate::service_accounts::TokenSource::authorize`] on `connection`).
    pub fn client_with_events(
        &self,
        name: &str,
        identity: Identity<'_>,
    ) -> (kube::Client, kube::Client) {
        let throttle = self.limits.throttle();
        let events = throttle.low_priority();
        (
            self.layered(name, throttle, identity),
            self.layered(name, events, identity),
        )
    }

    fn layered(&self, name: &str, throttle: Throttle, identity: Identity<'_>) -> kube::Client {
        // `<prefix>/<name>`, as Go's `rest.AddUserAgent`.
        let agent = HeaderValue::from_str(&format!("{}/{name}", self.agent_prefix))
            .unwrap_or_else(|_| HeaderValue::from_static("cloud-controller-manager"));
        let (base, tokens) = (
            identity.map_or(&self.base, |(c, _)| c).clone(),
            identity.map(|(_, t)| t.clone()),
        );
        let fence = self.fence.clone();
        let throttled = self
            .throttled
            .get_or_create(&vec![("client".to_owned(), name.to_owned())])
            .clone();
        let service = tower::ServiceBuilder::new()
            .map_request(move |mut request: http::Request<Body>| {
                request.headers_mut().insert(USER_AGENT, agent.clone());
                request
            })
            .layer(RetryAfterLayer::new().count_throttled(throttled))
            .service_fn(move |mut request: http::Request<Body>| {
                let (base, tokens) = (base.clone(), tokens.clone());
                let (fence, throttle) = (fence.clone(), throttle.clone());
                async move {
                    // A retry waits for a token like a new request.
                    throttle.acquire().await;
                    if let Some(refused) = fence.and_then(|fence| refusal(&fence, &request)) {
                        return Err(kube::Error::Service(Box::new(refused)));
                    }
                    // As a controller's own ServiceAccount: a request without a valid token fails unsent.
                    if let Some(tokens) = tokens {
                        tokens.authorize(&mut request)?;
                    }
                    base.send(request).await
                }
            });
        kube::Client::new(service, self.base.default_namespace().to_owned())
    }
}

/// Whether a request with this method changes state on the API server (and so must pass the fence).
pub fn is_write(method: &http::Method) -> bool {
    !matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

/// The refusal of `request` if it is a write and `fence` is closed now; `None` if it may be sent.
fn refusal<B>(fence: &LeadershipFence, request: &http::Request<B>) -> Option<ClientError> {
    if !is_write(request.method()) {
        return None;
    }
    fence.check().err().map(|reason| ClientError::Fenced {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        reason,
    })
}

/// `<command>/<version> (<os>/<arch>) ccm-rs`: the user-agent prefix (Go: `<command>/<version> (<os>/<arch>)
/// kubernetes/<commit>`).
pub fn user_agent_prefix(command: &str, version: &str) -> String {
    format!(
        "{command}/v{} ({}/{}) ccm-rs",
        version.trim_start_matches('v'),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

#[cfg(test)]
mod apiserver_tests;
#[cfg(test)]
mod fence_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    impl KubeApiLimits {
        /// Explicit limits with client-go's rules (`qps < 0`: none).
        pub(crate) fn explicit(qps: f32, burst: i32) -> Self {
            Self::decide(qps.into(), burst.into(), None)
        }
    }

    impl ClientFactory {
        /// A factory over an existing client (its own layers stay in place), with explicit limits.
        pub(crate) fn from_client(
            base: kube::Client,
            qps: f32,
            burst: i32,
            agent_prefix: &str,
        ) -> Self {
            Self::new(base, KubeApiLimits::explicit(qps, burst), agent_prefix)
        }
    }

    #[test]
    fn the_limit_mode_decision() {
        use KubeApiLimit::{Auto, Value};
        let auto = KubeApiLimits::decide(Auto, Auto, Some(true));
        assert_eq!(
            auto,
            KubeApiLimits {
                mode: KubeApiLimitMode::Auto,
                apf: Some(true),
                qps: None,
                burst: 0
            }
        );
        assert!(!auto.throttle().is_limited());
        // without APF, or when the API server did not say: Go's 20/30
        for apf in [Some(false), None] {
            let go = KubeApiLimits::decide(Auto, Auto, apf);
            assert_eq!(
                (go.mode, go.apf, go.qps, go.burst),
                (KubeApiLimitMode::Auto, apf, Some(20.0), 30)
            );
            assert!(go.throttle().is_limited());
        }
        // set: honoured exactly, whatever the API server runs; the other flag at Go's default
        let explicit = |qps, burst| {
            let limits = KubeApiLimits::decide(qps, burst, Some(true));
            assert_eq!(limits.mode, KubeApiLimitMode::Explicit);
            assert_eq!(limits.apf, None, "not asked");
            (limits.qps, limits.burst)
        };
        assert_eq!(explicit(Value(20.0), Value(30)), (Some(20.0), 30));
        assert_eq!(explicit(Value(100.0), Auto), (Some(100.0), 30));
        assert_eq!(explicit(Auto, Value(100)), (Some(20.0), 100));
        assert_eq!(
            explicit(Value(0.0), Value(0)),
            (Some(5.0), 10),
            "client-go's defaults"
        );
        assert_eq!(explicit(Value(-1.0), Value(30)), (None, 0), "-1: no limit");
        assert_eq!(explicit(Value(-1.0), Auto), (None, 0));
        assert_eq!(
            KubeApiLimits::explicit(4.0, 2),
            KubeApiLimits::decide(Value(4.0), Value(2), None)
        );
        assert!(KubeApiLimits::needs_apf(Auto, Auto));
        assert!(!KubeApiLimits::needs_apf(Value(20.0), Auto));
        assert!(!KubeApiLimits::needs_apf(Auto, Value(30)));
    }

    #[test]
    fn the_limits_as_configz_and_log_show_them() {
        let auto = KubeApiLimits::decide(KubeApiLimit::Auto, KubeApiLimit::Auto, Some(true));
        assert_eq!(
            auto.to_json(),
            serde_json::json!({"mode": "auto", "apf": true, "qps": "unlimited", "burst": "unlimited"})
        );
        assert_eq!(
            (auto.qps_text(), auto.apf_text()),
            ("unlimited".to_owned(), "true")
        );
        let unknown = KubeApiLimits::decide(KubeApiLimit::Auto, KubeApiLimit::Auto, None);
        assert_eq!(
            unknown.to_json(),
            serde_json::json!({"mode": "auto", "apf": null, "qps": 20.0, "burst": 30})
        );
        let explicit = KubeApiLimits::explicit(20.0, 30);
        assert_eq!(
            explicit.to_json(),
            serde_json::json!({"mode": "explicit", "apf": null, "qps": 20.0, "burst": 30})
        );
        assert_eq!(
            (explicit.qps_text(), explicit.burst_text()),
            ("20".to_owned(), "30".to_owned())
        );
    }

    #[test]
    fn the_start_up_log_line_says_which_mode_is_in_force() {
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            KubeApiLimits::decide(KubeApiLimit::Auto, KubeApiLimit::Auto, Some(true)).log();
            KubeApiLimits::explicit(20.0, 30).log();
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains(
                "kubernetes API client limit mode=auto apf=true qps=unlimited burst=unlimited"
            ),
            "{text}"
        );
        assert!(
            text.contains("kubernetes API client limit mode=explicit apf=unknown qps=20 burst=30"),
            "{text}"
        );
    }

    /// A client whose server answers every request with `status` and `headers`.
    fn answering(status: u16, headers: &'static [(&'static str, &'static str)]) -> kube::Client {
        kube::Client::new(
            tower::service_fn(move |_: http::Request<Body>| async move {
                let mut response = http::Response::builder().status(status);
                for (name, value) in headers {
                    response = response.header(*name, *value);
                }
                Ok::<_, std::convert::Infallible>(
                    response.body(Body::from(b"{}".to_vec())).unwrap(),
                )
            }),
            "default",
        )
    }

    #[tokio::test]
    async fn apf_is_detected_from_the_response_headers() {
        let apf = answering(
            200,
            &[
                (APF_FLOW_SCHEMA_HEADER, "0a9b"),
                (APF_PRIORITY_LEVEL_HEADER, "1c2d"),
            ],
        );
        assert!(detect_apf(&apf).await.unwrap());
        assert!(!detect_apf(&answering(200, &[])).await.unwrap());
        assert!(detect_apf(&answering(403, &[])).await.is_err());

        let options = CcmOptions::default();
        let limits = KubeApiLimits::resolve(&apf, &options).await;
        assert_eq!(
            (limits.mode, limits.apf, limits.qps),
            (KubeApiLimitMode::Auto, Some(true), None)
        );
        let limits = KubeApiLimits::resolve(&answering(200, &[]), &options).await;
        assert_eq!((limits.apf, limits.qps), (Some(false), Some(20.0)));
        let limits = KubeApiLimits::resolve(&answering(500, &[]), &options).await;
        assert_eq!(
            (limits.apf, limits.qps),
            (None, Some(20.0)),
            "no answer: Go's limit"
        );
        let options = CcmOptions {
            kube_api_qps: 50.0.into(),
            ..CcmOptions::default()
        };
        let limits = KubeApiLimits::resolve(&apf, &options).await;
        assert_eq!(
            (limits.mode, limits.apf, limits.qps, limits.burst),
            (KubeApiLimitMode::Explicit, None, Some(50.0), 30)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn named_clients_retry_a_429_and_count_it() {
        let calls = Arc::new(Mutex::new(0_u32));
        let counter = calls.clone();
        let base = kube::Client::new(
            tower::service_fn(move |_: http::Request<Body>| {
                let n = {
                    let mut calls = counter.lock().unwrap();
                    *calls += 1;
                    *calls
                };
                async move {
                    let status = if n == 1 { 429 } else { 200 };
                    Ok::<_, std::convert::Infallible>(
                        http::Response::builder()
                            .status(status)
                            .header(http::header::RETRY_AFTER, "1")
                            .body(Body::from(b"ok".to_vec()))
                            .unwrap(),
                    )
                }
            }),
            "default",
        );
        let factory = ClientFactory::new(
            base,
            KubeApiLimits::decide(KubeApiLimit::Auto, KubeApiLimit::Auto, Some(true)),
            "test",
        );
        let registry = SharedRegistry::new();
        factory.register_metrics(&registry);
        let client = factory.client("leader-election");
        let text = client
            .request_text(http::Request::get("/healthz").body(Vec::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(text, "ok");
        assert_eq!(*calls.lock().unwrap(), 2);
        assert!(
            registry
                .encode()
                .contains(r#"rest_client_requests_throttled_total{client="leader-election"} 1"#),
            "{}",
            registry.encode()
        );
    }

    #[test]
    fn master_urls() {
        assert!(parse_master("https://10.0.0.1:6443").is_ok());
        assert!(parse_master("http://localhost:8080").is_ok());
        for bad in ["10.0.0.1:6443", "not a url", "ftp://x", "https://"] {
            let err = parse_master(bad).unwrap_err();
            assert!(
                err.to_string().starts_with("invalid --master"),
                "{bad}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn kubeconfig_errors_name_the_file() {
        let options = CcmOptions {
            kubeconfig: Some("/nonexistent/kubeconfig".into()),
            ..CcmOptions::default()
        };
        let err = kube_config(&options).await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot use kubeconfig /nonexistent/kubeconfig"),
            "{err}"
        );
        let options = CcmOptions {
            master: Some("nope".into()),
            ..CcmOptions::default()
        };
        assert!(matches!(
            kube_config(&options).await,
            Err(ClientError::Master { .. })
        ));
    }

    #[tokio::test]
    async fn master_overrides_the_kubeconfig_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://1.2.3.4:6443\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: abc\n",
        )
        .unwrap();
        let mut options = CcmOptions {
            kubeconfig: Some(path),
            ..CcmOptions::default()
        };
        let config = kube_config(&options).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://1.2.3.4:6443/");
        options.master = Some("https://5.6.7.8:443".into());
        let config = kube_config(&options).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://5.6.7.8:443/");
    }

    #[tokio::test]
    async fn named_clients_send_their_user_agent() {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let record = seen.clone();
        let base = kube::Client::new(
            tower::service_fn(move |request: http::Request<Body>| {
                let agent = request
                    .headers()
                    .get(USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                record.lock().unwrap().push(agent);
                async move {
                    Ok::<_, std::convert::Infallible>(
                        http::Response::builder()
                            .status(200)
                            .body(Body::from(b"ok".to_vec()))
                            .unwrap(),
                    )
                }
            }),
            "default",
        );
        let prefix = user_agent_prefix("cloud-controller-manager", "0.1.0");
        assert!(
            prefix.starts_with("cloud-controller-manager/v0.1.0 ("),
            "{prefix}"
        );
        let factory = ClientFactory::from_client(base, 20.0, 30, &prefix);
        let client = factory.client("service-controller");
        let text = client
            .request_text(http::Request::get("/healthz").body(Vec::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(text, "ok");
        assert_eq!(
            seen.lock().unwrap().as_slice(),
            [format!("{prefix}/service-controller")]
        );
    }
}
