//! The admin server on `--bind-address:--secure-port`: `/healthz`, `/livez`, `/readyz` (each with per-check
//! paths), `/metrics` and `/configz`, over HTTPS, behind delegated authentication and authorization
//! ([`crate::auth`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ccm_core::runtime::metrics::SharedRegistry;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::auth::DelegatedAuth;
use crate::client::{KUBE_API_CLIENT_CONFIGZ, KubeApiLimits};
use crate::health::{Endpoint, HealthChecks, parse_query};
use crate::options::CcmOptions;
use crate::serving::{PortFlags, TEXT_PLAIN, reply};

/// The content type of `/metrics` (prometheus-client writes OpenMetrics text).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the admin server cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The address cannot be bound.
    #[error(
        "cannot listen on {address} for the secure port: {source}; check --bind-address and --secure-port"
    )]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A listener handed to the builder cannot be used.
    #[error("cannot use the given admin listener: {0}")]
    Listener(#[source] std::io::Error),
    /// The serving certificate cannot be set up.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// Delegated authentication or authorization cannot be set up.
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthError),
}

/// What the handlers read; `configz` is the `/configz` document (JSON).
#[derive(Clone)]
struct AdminState {
    checks: HealthChecks,
    metrics: SharedRegistry,
    configz: Arc<String>,
}

/// The admin routes, behind the authentication and authorization of `auth`.
fn router(state: AdminState, auth: Arc<DelegatedAuth>) -> Router {
    let mut router = Router::new();
    for &endpoint in Endpoint::ALL {
        router = router
            .route(
                &format!("/{}", endpoint.name()),
                get(move |State(state), uri: Uri| async move { report(&state, endpoint, &uri) }),
            )
            .route(
                &format!("/{}/{{check}}", endpoint.name()),
                get(move |State(state), Path(check): Path<String>| async move {
                    one(&state, endpoint, &check)
                }),
            );
    }
    router
        .route("/metrics", get(metrics))
        .route("/configz", get(configz))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            auth,
            crate::auth::middleware,
        ))
}

fn plain(status: StatusCode, body: String) -> Response {
    reply(status, TEXT_PLAIN, true, body)
}

fn report(state: &AdminState, endpoint: Endpoint, uri: &Uri) -> Response {
    let (verbose, exclude) = parse_query(uri.query());
    let report = state.checks.report(endpoint, &exclude);
    let status = if report.healthy() {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    plain(status, report.render(verbose))
}

fn one(state: &AdminState, endpoint: Endpoint, check: &str) -> Response {
    match state.checks.check_one(endpoint, check) {
        None => plain(
            StatusCode::NOT_FOUND,
            format!("no {} check named {check:?}\n", endpoint.name()),
        ),
        Some(Ok(())) => plain(StatusCode::OK, "ok".to_owned()),
        Some(Err(reason)) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        state.metrics.encode(),
    )
}

async fn configz(State(state): State<AdminState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.configz.as_str().to_owned(),
    )
}

/// A running admin server.
#[derive(Debug)]
pub(crate) struct AdminServer {
    /// The address the server listens on.
    pub(crate) local_addr: SocketAddr,
    /// The serving certificate (PEM).
    pub(crate) cert_pem: String,
    /// Stops serving and re-reading the certificate files, also when the server is dropped.
    stop: DropGuard,
    task: JoinHandle<()>,
}

impl AdminServer {
    /// Stop accepting connections, let open requests finish (up to 5 s), and return.
    pub(crate) async fn stop(self) {
        drop(self.stop);
        let mut task = self.task;
        if tokio::time::timeout(std::time::Duration::from_secs(5), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

/// Serve the admin endpoints as the flags say (or on `listener`): TLS from `--tls-cert-file` (re-read when it
/// changes) or a self-signed certificate, `--tls-sni-cert-key` certificates, `--tls-curve-preferences`, delegated
/// authentication and authorization, `/configz` with the settings and the Kubernetes API client `limits`; `None`
/// with `--secure-port=0` and no listener; an error if the TLS settings, the certificate, delegated auth or the
/// listener cannot be set up.
pub(crate) async fn start_from_options(
    options: &CcmOptions,
    limits: &KubeApiLimits,
    listener: Option<std::net::TcpListener>,
    checks: &HealthChecks,
    metrics: &SharedRegistry,
) -> Result<Option<AdminServer>, AdminError> {
    if listener.is_none() && options.secure_port == 0 {
        tracing::info!("--secure-port=0: not serving /healthz, /readyz, /livez, /metrics");
        return Ok(None);
    }
    let flags = PortFlags::secure(options);
    let auth = DelegatedAuth::from_options(options, metrics).await?;
    let (config, certs) = flags.tls(Some(auth.client_cert_verifier()))?;
    // The settings as given (`kubeApiQps: auto`), and beside them the Kubernetes API client limit in force.
    let configz = serde_json::json!({
        "cloudcontrollermanager.config.k8s.io": options.to_settings(),
        KUBE_API_CLIENT_CONFIGZ: limits.to_json(),
    });
    let state = AdminState {
        checks: checks.clone(),
        metrics: metrics.clone(),
        configz: Arc::new(configz.to_string()),
    };
    let listener = match listener {
        Some(listener) => {
            listener
                .set_nonblocking(true)
                .map_err(AdminError::Listener)?;
            tokio::net::TcpListener::from_std(listener).map_err(AdminError::Listener)?
        }
        None => {
            let address = SocketAddr::new(options.bind_address, options.secure_port);
            flags
                .bind()
                .map_err(|source| AdminError::Bind { address, source })?
        }
    };
    let stop = CancellationToken::new();
    let (local_addr, serving) = crate::serving::serve(
        listener,
        (config, certs.clone()),
        router(state, auth),
        stop.clone(),
        "secure",
    )
    .map_err(AdminError::Listener)?;
    let task = tokio::spawn(serving);
    tracing::info!(address = %local_addr, "serving /healthz, /livez, /readyz, /metrics and /configz over HTTPS");
    Ok(Some(AdminServer {
        local_addr,
        cert_pem: certs.default_pem(),
        stop: stop.drop_guard(),
        task,
    }))
}
