//! The CCM webhook server (Go's KEP-2699 `app.WebhookConfig`): admission webhooks a vendor registers by name with
//! [`CcmBuilder::register_webhook`](crate::CcmBuilder::register_webhook), enabled with `--webhooks` (the rules of
//! `--controllers`: `*`, `name`, `-name`, first mention wins; none by default, as in Go), served over HTTPS on
//! `--webhook-bind-address:--webhook-secure-port` (10260) with the `--webhook-tls-*` flags.
//!
//! A handler is an async function of a [`WebhookContext`] (the provider and a Kubernetes client) and the typed
//! [`AdmissionRequest`]; it answers with an [`AdmissionResponse`] (allow, deny with a message, or a JSON patch).
//! The server decodes the `AdmissionReview`, copies the request's UID into the answer and counts every request in
//! `cloud_provider_webhook_request_total{code,webhook}` and `cloud_provider_webhook_request_duration_seconds`. A
//! handler that returns an error, panics or does not answer within its timeout gets an HTTP 500 with the reason,
//! as Go answers a handler error; the API server then applies the webhook's `failurePolicy`.
//!
//! ```no_run
//! use ccm_app::webhook::{AdmissionResponse, WebhookDescriptor};
//!
//! let deny_untyped = WebhookDescriptor::new("lb-type", "/validate-lb-type", |_ctx, request| async move {
//!     let response = AdmissionResponse::from(&request);
//!     let typed = request.object.as_ref().and_then(|o| o.metadata.annotations.as_ref())
//!         .is_some_and(|a| a.contains_key("acme.example/lb-type"));
//!     Ok(if typed { response } else { response.deny("set acme.example/lb-type") })
//! });
//! # let registry = ccm_core::ProviderRegistry::new();
//! let builder = ccm_app::CloudControllerManager::builder(registry).register_webhook(deny_untyped);
//! ```

mod review;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ccm_core::BoxError;
use ccm_core::background::BackgroundTasks;
use ccm_core::provider::CloudProvider;
use ccm_core::runtime::metrics::SharedRegistry;
use futures::future::BoxFuture;

pub use kube::core::DynamicObject;
pub use kube::core::admission::{AdmissionRequest, AdmissionResponse};
pub(crate) use review::WebhookMetrics;

use crate::controllers::{CatalogError, ControllerCatalog};
use crate::options::{CcmOptions, ValidationError};
use crate::serving::PortFlags;
use crate::tls::TlsError;

/// How long a handler may take unless [`WebhookDescriptor::with_timeout`] says otherwise: below the API server's
/// default `timeoutSeconds` of 10, so the answer is the handler's timeout and not the API server's.
pub(crate) const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(8);

/// What a handler has at hand.
#[derive(Clone)]
pub struct WebhookContext {
    provider: Arc<dyn CloudProvider>,
    client: kube::Client,
}

impl std::fmt::Debug for WebhookContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookContext")
            .field("provider", &self.provider.provider_name())
            .finish_non_exhaustive()
    }
}

impl WebhookContext {
    /// A context with this provider and client (the runtime builds it; tests of a handler may too).
    pub(crate) fn new(provider: Arc<dyn CloudProvider>, client: kube::Client) -> Self {
        WebhookContext { provider, client }
    }

    /// The cloud provider. Webhooks run in every replica, leader or not (as in Go), so its calls are not fenced by
    /// leader election and not counted in the controllers' cloud budget.
    pub fn provider(&self) -> &Arc<dyn CloudProvider> {
        &self.provider
    }

    /// A Kubernetes client (user agent `.../cloud-controller-manager-webhook`).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

type HandlerFn = Arc<
    dyn Fn(
            WebhookContext,
            AdmissionRequest<DynamicObject>,
        ) -> BoxFuture<'static, Result<AdmissionResponse, BoxError>>
        + Send
        + Sync,
>;

/// One admission webhook: its name (for `--webhooks` and the metrics), the path it is served on, and its handler.
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct WebhookDescriptor {
    name: String,
    path: String,
    disabled_by_default: bool,
    timeout: Duration,
    #[educe(Debug(ignore))]
    handler: HandlerFn,
}

impl WebhookDescriptor {
    /// A webhook named `name`, served on `path` (which starts with `/`), answered by `handler`.
    pub fn new<F, Fut>(name: &str, path: &str, handler: F) -> Self
    where
        F: Fn(WebhookContext, AdmissionRequest<DynamicObject>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<AdmissionResponse, BoxError>> + Send + 'static,
    {
        WebhookDescriptor {
            name: name.to_owned(),
            path: path.to_owned(),
            disabled_by_default: false,
            timeout: DEFAULT_HANDLER_TIMEOUT,
            handler: Arc::new(move |ctx, request| Box::pin(handler(ctx, request))),
        }
    }

    /// Leave this webhook off under `--webhooks=*` (Go's `WebhooksDisabledByDefault`): it must be named.
    #[must_use]
    pub fn disabled_by_default(mut self) -> Self {
        self.disabled_by_default = true;
        self
    }

    /// How long the handler may take before the request is answered with an error (8 s by default).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Why the webhooks cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// A registration cannot be accepted (a programming error of the binary).
    #[error("invalid webhook registration: {0}")]
    Registration(String),
    /// The webhook port cannot be bound.
    #[error(
        "cannot listen on {address} for the webhooks: {source}; check --webhook-bind-address and \
         --webhook-secure-port"
    )]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The webhook port's certificate or TLS settings cannot be used.
    #[error("webhook port: {0}")]
    Tls(#[from] TlsError),
}

/// Check the registrations (names as `--controllers` names, paths starting with `/`, each once) and return the
/// catalog `--webhooks` is read with, else a [`WebhookError::Registration`] naming the problem.
pub(crate) fn catalog(webhooks: &[WebhookDescriptor]) -> Result<ControllerCatalog, WebhookError> {
    let mut paths = std::collections::BTreeSet::new();
    for webhook in webhooks {
        if !webhook.path.starts_with('/') || !paths.insert(webhook.path.as_str()) {
            return Err(WebhookError::Registration(format!(
                "the path {:?} of webhook {:?} must start with '/' and be used by one webhook only",
                webhook.path, webhook.name
            )));
        }
    }
    let no_aliases: &[&str] = &[];
    let entries = webhooks
        .iter()
        .map(|w| (w.name.as_str(), no_aliases, w.disabled_by_default));
    ControllerCatalog::new(entries).map_err(|e| {
        WebhookError::Registration(match e {
            CatalogError::Duplicate { name } => {
                format!("webhook name {name:?} is registered twice")
            }
            other => other.to_string().replace("controller", "webhook"),
        })
    })
}

/// The webhooks `--webhooks` enables, in registration order; else a [`ValidationError`] for `--webhooks` naming
/// every unknown webhook, or a [`WebhookError::Registration`].
pub(crate) fn enabled(
    webhooks: &[WebhookDescriptor],
    selection: &[String],
) -> Result<Vec<WebhookDescriptor>, Result<ValidationError, WebhookError>> {
    let catalog = catalog(webhooks).map_err(Err)?;
    let names = catalog.enabled(selection).map_err(|unknown| {
        let known = match catalog.names() {
            [] => "none".to_owned(),
            names => names.join(", "),
        };
        // (a name has no white space, so only the message's own words are replaced)
        let unknown = unknown
            .to_string()
            .replace("known controllers", "known webhooks");
        Ok(ValidationError::Invalid {
            setting: "webhooks",
            reason: format!("{unknown} (known webhooks: {known})"),
        })
    })?;
    Ok(webhooks
        .iter()
        .filter(|w| names.contains(&w.name))
        .cloned()
        .collect())
}

/// The running webhook server: where it listens and the certificate it serves (PEM, the `caBundle` of a
/// self-signed one).
#[derive(Debug, Clone)]
pub struct WebhookEndpoint {
    /// The address it listens on.
    pub address: SocketAddr,
    /// The default certificate as loaded at start.
    pub cert_pem: String,
}

/// Start the webhook server as the flags say, on `tasks` (it stops with them): `None` when `--webhook-secure-port`
/// is 0 or `--webhooks` enables none of `webhooks`; a [`WebhookError`] if the certificate, the TLS settings or the
/// port cannot be used.
pub(crate) async fn start_from_options(
    options: &CcmOptions,
    webhooks: &[WebhookDescriptor],
    context: WebhookContext,
    metrics: &SharedRegistry,
    tasks: &BackgroundTasks,
) -> Result<Option<WebhookEndpoint>, WebhookError> {
    let enabled = match enabled(webhooks, &options.webhooks) {
        Ok(enabled) => enabled,
        Err(Ok(invalid)) => return Err(WebhookError::Registration(invalid.to_string())),
        Err(Err(err)) => return Err(err),
    };
    for webhook in webhooks {
        if !enabled.iter().any(|e| e.name == webhook.name) {
            tracing::info!(webhook = %webhook.name, "webhook is disabled");
        }
    }
    if options.webhook_secure_port == 0 || enabled.is_empty() {
        if !webhooks.is_empty() {
            tracing::info!(
                port = options.webhook_secure_port,
                "no webhook enabled (--webhooks) or --webhook-secure-port=0: not serving webhooks"
            );
        }
        return Ok(None);
    }
    let flags = PortFlags::webhook(options);
    let (config, certs) = flags.tls(None)?;
    let cert_pem = certs.default_pem();
    let address = SocketAddr::new(flags.bind_address, flags.port);
    let bind_error = |source| WebhookError::Bind { address, source };
    let listener = flags.bind().map_err(bind_error)?;
    let router = review::router(&enabled, context, WebhookMetrics::register(metrics));
    let stop = tasks.shutdown_token();
    let (local, serving) =
        crate::serving::serve(listener, (config, certs), router, stop, "webhook")
            .map_err(bind_error)?;
    let names: Vec<&str> = enabled.iter().map(|w| w.name.as_str()).collect();
    tracing::info!(address = %local, webhooks = ?names, "serving admission webhooks over HTTPS");
    tasks.spawn("webhook-server", serving);
    Ok(Some(WebhookEndpoint {
        address: local,
        cert_pem,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    impl WebhookDescriptor {
        /// The name.
        pub(crate) fn name(&self) -> &str {
            &self.name
        }
    }

    fn hook(name: &str, path: &str) -> WebhookDescriptor {
        WebhookDescriptor::new(name, path, |_ctx, request| async move {
            Ok(AdmissionResponse::from(&request))
        })
    }

    fn list(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|e| (*e).to_owned()).collect()
    }

    fn names(selected: &[WebhookDescriptor]) -> Vec<&str> {
        selected.iter().map(WebhookDescriptor::name).collect()
    }

    #[test]
    fn webhooks_follow_the_controllers_rules() {
        let hooks = vec![
            hook("a", "/a"),
            hook("b", "/b"),
            hook("off", "/off").disabled_by_default(),
        ];
        let select = |entries: &[&str]| enabled(&hooks, &list(entries)).unwrap();
        assert!(select(&[]).is_empty(), "none by default, as in Go");
        assert_eq!(names(&select(&["*"])), ["a", "b"]);
        assert_eq!(names(&select(&["*", "-a", "off"])), ["b", "off"]);
        assert_eq!(names(&select(&["b"])), ["b"]);
        let Err(Ok(err)) = enabled(&hooks, &list(&["*", "-nope"])) else {
            panic!("an unknown webhook is a validation error");
        };
        assert_eq!(
            err.to_string(),
            "invalid --webhooks: \"nope\" is not in the list of known webhooks (known webhooks: a, b, off)"
        );
    }

    #[test]
    fn bad_registrations_are_refused() {
        for hooks in [
            vec![hook("a", "/a"), hook("a", "/b")],
            vec![hook("a", "/a"), hook("b", "/a")],
            vec![hook("a", "no-slash")],
            vec![hook("-a", "/a")],
        ] {
            let err = catalog(&hooks).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("invalid webhook registration: "),
                "{err}"
            );
        }
    }
}
