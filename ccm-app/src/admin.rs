//! The admin server on `--bind-address:--secure-port`: `/healthz`, `/livez`, `/readyz` (each with per-check
//! paths), `/metrics` and `/configz`, over HTTPS, behind delegated authentication and authorization
//! ([`crate::auth`]) when [`AdminState::auth`] is set.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ccm_core::runtime::metrics::SharedRegistry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::DelegatedAuth;
use crate::client::{KUBE_API_CLIENT_CONFIGZ, KubeApiLimits};
use crate::health::{Endpoint, HealthChecks, parse_query};
use crate::options::CcmOptions;
use crate::serving::certs::RELOAD_INTERVAL;
use crate::serving::{PortFlags, TEXT_PLAIN, reply};
use crate::tls::{PeerCertificates, ServingCert, TlsListener};

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

/// What the handlers read.
#[derive(Clone)]
pub struct AdminState {
    /// The health checks.
    pub checks: HealthChecks,
    /// The metrics registry.
    pub metrics: SharedRegistry,
    /// The `/configz` document (JSON).
    pub configz: Arc<String>,
    /// Who may read what; `None` serves everyone (only for embedding and tests: the runtime always sets it).
    pub auth: Option<DelegatedAuth>,
}

impl std::fmt::Debug for AdminState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminState")
            .field("checks", &self.checks)
            .finish_non_exhaustive()
    }
}

/// The admin routes, behind the authentication and authorization of `state.auth` when set.
pub fn router(state: AdminState) -> Router {
    let auth = state.auth.clone();
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
    let router = router
        .route("/metrics", get(metrics))
        .route("/configz", get(configz))
        .with_state(state);
    match auth {
        Some(auth) => router.layer(axum::middleware::from_fn_with_state(
            auth,
            crate::auth::middleware,
        )),
        None => router,
    }
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

async fn metrics(State(state): State<AdminState>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        state.metrics.encode(),
    )
        .into_response()
}

async fn configz(State(state): State<AdminState>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        state.configz.as_str().to_owned(),
    )
        .into_response()
}

/// A running admin server.
#[derive(Debug)]
pub struct AdminServer {
    local_addr: SocketAddr,
    cert_pem: String,
    stop: CancellationToken,
    task: JoinHandle<()>,
    /// Stops re-reading the certificate files when the server is dropped or stopped.
    reload: Option<tokio_util::sync::DropGuard>,
}

impl AdminServer {
    /// Serve `state` over HTTPS on `listener` with `cert`, until [`stop`](Self::stop).
    ///
    /// # Errors
    ///
    /// [`AdminError::Listener`] if the listener cannot be used.
    pub fn start(
        listener: tokio::net::TcpListener,
        cert: &ServingCert,
        state: AdminState,
    ) -> Result<Self, AdminError> {
        let local_addr = listener.local_addr().map_err(AdminError::Listener)?;
        let tls = TlsListener::new(listener, cert).map_err(AdminError::Listener)?;
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        let app = router(state).into_make_service_with_connect_info::<PeerCertificates>();
        let task = tokio::spawn(async move {
            if let Err(err) = axum::serve(tls, app).with_graceful_shutdown(shutdown).await {
                tracing::error!(error = %err, "the secure port stopped serving");
            }
        });
        tracing::info!(address = %local_addr, "serving /healthz, /livez, /readyz, /metrics and /configz over HTTPS");
        Ok(AdminServer {
            local_addr,
            cert_pem: cert.cert_pem.clone(),
            stop,
            task,
            reload: None,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The serving certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Stop accepting connections, let open requests finish (up to 5 s), and return.
    pub async fn stop(self) {
        self.stop.cancel();
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
/// changes) or a self-signed certificate, `--tls-sni-cert-key` certificates, `--tls-curve-preferences`, delegated authentication and authorization, `/configz` with the settings and the Kubernetes API
/// client `limits`; `None` with `--secure-port=0` and no listener.
///
/// # Errors
/// If the TLS settings, the certificate, delegated auth or the listener cannot be set up.
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
    let auth = DelegatedAuth::from_options(options, metrics)
        .await
        .map_err(AdminError::from)?;
    let (cert, certs) = flags
        .tls(Some(auth.client_cert_verifier()))
        .map_err(AdminError::from)?;
    let reload = CancellationToken::new();
    certs.watch(RELOAD_INTERVAL, reload.clone(), "secure");
    // The settings as given (`kubeApiQps: auto`), and beside them the Kubernetes API client limit in force.
    let configz = serde_json::json!({
        "cloudcontrollermanager.config.k8s.io": options.to_settings(),
        KUBE_API_CLIENT_CONFIGZ: limits.to_json(),
    });
    let state = AdminState {
        checks: checks.clone(),
        metrics: metrics.clone(),
        configz: Arc::new(configz.to_string()),
        auth: Some(auth),
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
    let mut server = AdminServer::start(listener, &cert, state)?;
    server.reload = Some(reload.drop_guard());
    Ok(Some(server))
}
