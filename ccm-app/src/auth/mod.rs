//! Delegated authentication and authorization of the secure port, as Go's controller managers do it
//! (`DelegatingAuthenticationOptions` / `DelegatingAuthorizationOptions` with `RemoteKubeConfigFileOptional`).
//!
//! Every request is first authenticated, in Go's order:
//!
//! 1. a client certificate signed by the request-header CA (`--requestheader-client-ca-file`, or the cluster's
//!    from the `kube-system/extension-apiserver-authentication` ConfigMap) whose common name is allowed
//!    (`--requestheader-allowed-names`, empty allows any) is a proxy: the user it names in the username headers;
//! 2. a client certificate signed by the client CA (`--client-ca-file`, or the ConfigMap's): its common name, in
//!    the groups of its organizations;
//! 3. a bearer token: a TokenReview (client from `--authentication-kubeconfig`, or in-cluster), the answer kept
//!    for `--authentication-token-webhook-cache-ttl`;
//! 4. no credentials: `system:anonymous` in `system:unauthenticated`.
//!
//! Credentials that are presented but fail (an untrusted certificate, a rejected token) get a 401. Then the user is
//! authorized: `system:masters` always, the `--authorization-always-allow-paths` for anyone, anything else by a
//! SubjectAccessReview of the non-resource path and verb (client from `--authorization-kubeconfig`, or in-cluster;
//! answers kept for the authorized/unauthorized TTLs); a denial gets a 403 with Go's Status body.
//!
//! Without a kubeconfig and outside a cluster, as in Go: a warning, no token or ConfigMap lookup, and only the
//! always-allowed paths and `system:masters` are allowed. The ConfigMap is watched, as in Go: rotated CAs apply
//! without a restart (the private `trust` module).

pub mod cache;
pub mod decide;
pub mod review;
mod trust;
pub mod x509;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use ccm_core::runtime::metrics::SharedRegistry;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::server::danger::ClientCertVerifier;

use crate::options::CcmOptions;
use crate::serving::{TEXT_PLAIN, reply};
use crate::tls::PeerCertificates;
use decide::{
    AUTHENTICATION_CONFIGMAP_NAME, AUTHENTICATION_CONFIGMAP_NAMESPACE, AUTHENTICATION_READER_ROLE,
    AlwaysAllowPaths, ClusterAuthentication, RequestHeaderNames, UserInfo,
};
use review::{AccessQuestion, AccessReviewer, ReviewMetrics, TokenReviewer};
use tokio_util::sync::CancellationToken;
use trust::{FromCluster, Trust, TrustCell};
use x509::{CaBundle, RequestClientCert};

/// Why delegated authentication or authorization cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A kubeconfig flag names a file that cannot be used.
    #[error("cannot use --{flag} {path}: {reason}")]
    Kubeconfig {
        /// The flag.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A CA file cannot be read or holds no usable CA.
    #[error("cannot load --{flag} {path}: {reason}")]
    CaFile {
        /// The flag.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The extension-apiserver-authentication ConfigMap cannot be read or used.
    #[error(
        "cannot read the client CAs from configmap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/\
         {AUTHENTICATION_CONFIGMAP_NAME}: {reason}; bind the CCM's account to the role \
         {AUTHENTICATION_READER_ROLE} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}, or set \
         --authentication-tolerate-lookup-failure, or give --client-ca-file and --requestheader-client-ca-file"
    )]
    Lookup {
        /// What went wrong.
        reason: String,
    },
    /// `--authorization-always-allow-paths` is invalid.
    #[error("invalid --authorization-always-allow-paths: {reason}")]
    AllowPaths {
        /// What is wrong with the list.
        reason: String,
    },
}

/// The `Content-Type` of the Status bodies of the 401 and 403 answers.
const JSON: &str = "application/json";

/// The secure port's authenticators and authorizers, built from the flags ([`DelegatedAuth::from_options`]).
#[derive(Debug)]
pub struct DelegatedAuth {
    trust: Arc<TrustCell>,
    /// Whether some of the trust comes from the cluster's ConfigMap (and may appear later).
    from_cluster: FromCluster,
    tokens: Option<TokenReviewer>,
    always_allow: AlwaysAllowPaths,
    access: Option<AccessReviewer>,
    provider: Arc<CryptoProvider>,
    /// Stops following the ConfigMap when the last handle is dropped.
    _follow: Option<tokio_util::sync::DropGuard>,
}

/// The client of a delegated-auth kubeconfig flag: the file when given, else the in-cluster configuration, else
/// none (with a warning), as Go's `RemoteKubeConfigFileOptional`.
async fn delegated_client(
    flag: &'static str,
    path: Option<&Path>,
    without: &str,
) -> Result<Option<kube::Client>, AuthError> {
    let error = |reason: String| AuthError::Kubeconfig {
        flag,
        path: path.map(Path::to_path_buf).unwrap_or_default(),
        reason,
    };
    let config = match path {
        Some(path) => crate::client::config_from_file(path)
            .await
            .map_err(|e| error(e.to_string()))?,
        None => match kube::Config::incluster() {
            Ok(config) => config,
            Err(err) => {
                tracing::warn!(error = %err, "no --{flag} and no in-cluster configuration: {without}");
                return Ok(None);
            }
        },
    };
    kube::Client::try_from(config)
        .map(Some)
        .map_err(|e| error(e.to_string()))
}

fn ca_file(
    flag: &'static str,
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<CaBundle, AuthError> {
    let error = |reason: String| AuthError::CaFile {
        flag,
        path: path.to_owned(),
        reason,
    };
    let pem = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    CaBundle::from_pem(&pem, provider).map_err(error)
}

/// Read the extension-apiserver-authentication ConfigMap: absent is not an error (nothing to trust).
async fn lookup(client: &kube::Client) -> Result<ClusterAuthentication, AuthError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), AUTHENTICATION_CONFIGMAP_NAMESPACE);
    let lookup_err = |reason: String| AuthError::Lookup { reason };
    match api.get_opt(AUTHENTICATION_CONFIGMAP_NAME).await {
        Ok(Some(map)) => {
            decide::parse_cluster_authentication(&map.data.unwrap_or_default()).map_err(lookup_err)
        }
        Ok(None) => {
            tracing::warn!(
                "configmap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP_NAME} does not exist: \
                 no client certificate is trusted unless --client-ca-file or --requestheader-client-ca-file is set"
            );
            Ok(ClusterAuthentication::default())
        }
        Err(err) => Err(lookup_err(err.to_string())),
    }
}

impl DelegatedAuth {
    /// Build the authenticators and authorizers the flags describe, reading the CA files and, unless
    /// `--authentication-skip-lookup`, the cluster's ConfigMap for the CAs not given; the review counters are
    /// registered in `metrics`.
    ///
    /// # Errors
    ///
    /// [`AuthError`] naming the flag, file or lookup that failed.
    pub async fn from_options(
        options: &CcmOptions,
        metrics: &SharedRegistry,
    ) -> Result<Arc<Self>, AuthError> {
        let always_allow = AlwaysAllowPaths::parse(&options.authorization_always_allow_paths)
            .map_err(|e| AuthError::AllowPaths {
                reason: e.to_string(),
            })?;
        let provider = Arc::new(ring::default_provider());
        let review_metrics = ReviewMetrics::register(metrics);
        let authn_client = delegated_client(
            "authentication-kubeconfig",
            options.authentication_kubeconfig.as_deref(),
            "bearer tokens are not checked and the cluster's client CAs are not read",
        )
        .await?;

        let client_ca = options
            .client_ca_file
            .as_deref()
            .map(|path| ca_file("client-ca-file", path, &provider))
            .transpose()?;
        let request_header = options
            .requestheader_client_ca_file
            .as_deref()
            .map(|path| ca_file("requestheader-client-ca-file", path, &provider))
            .transpose()?
            .map(|ca| {
                let names = RequestHeaderNames {
                    allowed_names: options.requestheader_allowed_names.clone(),
                    username_headers: options.requestheader_username_headers.clone(),
                    uid_headers: options.requestheader_uid_headers.clone(),
                    group_headers: options.requestheader_group_headers.clone(),
                    extra_prefixes: options.requestheader_extra_headers_prefix.clone(),
                };
                (ca, names)
            });
        let from_cluster = FromCluster {
            client_ca: client_ca.is_none(),
            request_header: request_header.is_none(),
        };
        let given = Trust {
            client_ca,
            request_header,
        };
        let mut trust = given.clone();
        let mut follow = None;
        if from_cluster.any()
            && !options.authentication_skip_lookup
            && let Some(client) = &authn_client
        {
            match lookup(client).await.and_then(|cluster| {
                let bundles = trust::cluster_trust(cluster.clone(), &provider)
                    .map_err(|reason| AuthError::Lookup { reason })?;
                Ok((cluster, bundles))
            }) {
                Ok((cluster, bundles)) => {
                    trust = given.merged(bundles, from_cluster);
                    follow = Some(cluster);
                }
                Err(err) if options.authentication_tolerate_lookup_failure => {
                    tracing::warn!(
                        error = %err,
                        "continuing without the cluster's client CAs (requests may be treated as anonymous)"
                    );
                    follow = Some(ClusterAuthentication::default());
                }
                Err(err) => return Err(err),
            }
        }
        let trust_cell = Arc::new(TrustCell::new(Arc::new(trust.clone())));
        let follow = follow.zip(authn_client.as_ref()).map(|(last, client)| {
            let stop = CancellationToken::new();
            tokio::spawn(trust::follow(
                Api::namespaced(client.clone(), AUTHENTICATION_CONFIGMAP_NAMESPACE),
                AUTHENTICATION_CONFIGMAP_NAME,
                trust_cell.clone(),
                from_cluster,
                last,
                provider.clone(),
                stop.clone(),
            ));
            stop.drop_guard()
        });

        let token_ttl = options.authentication_token_webhook_cache_ttl;
        let tokens = authn_client
            .map(|client| TokenReviewer::new(client, (token_ttl, token_ttl), review_metrics.authn));
        let access = delegated_client(
            "authorization-kubeconfig",
            options.authorization_kubeconfig.as_deref(),
            "only the --authorization-always-allow-paths and system:masters are allowed",
        )
        .await?
        .map(|client| {
            let ttls = (
                options.authorization_webhook_cache_authorized_ttl,
                options.authorization_webhook_cache_unauthorized_ttl,
            );
            AccessReviewer::new(client, ttls, review_metrics.authz)
        });
        tracing::info!(
            client_certificates = trust.client_ca.is_some(),
            request_header = trust.request_header.is_some(),
            follows_configmap = follow.is_some(),
            token_review = tokens.is_some(),
            subject_access_review = access.is_some(),
            "the secure port authenticates and authorizes requests"
        );
        Ok(Arc::new(DelegatedAuth {
            trust: trust_cell,
            from_cluster: follow
                .as_ref()
                .map_or_else(FromCluster::default, |_| from_cluster),
            tokens,
            always_allow,
            access,
            provider,
            _follow: follow,
        }))
    }

    /// The TLS verifier that asks clients for a certificate issued by a trusted CA, naming the CAs in force now;
    /// when CAs may come from the cluster's ConfigMap later, it asks even while none is trusted yet.
    pub fn client_cert_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        let trust = self.trust.borrow();
        let bundles: Vec<&CaBundle> = trust
            .client_ca
            .iter()
            .chain(trust.request_header.as_ref().map(|(ca, _)| ca))
            .collect();
        Arc::new(RequestClientCert::new(
            &bundles,
            self.from_cluster.any(),
            &self.provider,
        ))
    }

    /// Who sent a request with client chain `chain` and `headers`; the anonymous user without credentials.
    ///
    /// # Errors
    ///
    /// Why the credentials it carries were rejected (answer 401).
    pub async fn authenticate(
        &self,
        chain: &[CertificateDer<'static>],
        headers: &http::HeaderMap,
    ) -> Result<UserInfo, String> {
        let trust = self.trust.borrow().clone();
        let mut errors = Vec::new();
        if !chain.is_empty() {
            if let Some((ca, names)) = &trust.request_header {
                match ca.verify(chain).and_then(|()| x509::subject(&chain[0])) {
                    Ok(subject) if names.allows_proxy(&subject.common_name) => {
                        if let Some(user) = names.user(headers) {
                            return Ok(user);
                        }
                    }
                    Ok(subject) => errors.push(format!(
                        "x509: subject with cn={} is not in the allowed list",
                        subject.common_name
                    )),
                    Err(err) => errors.push(err),
                }
            }
            if let Some(ca) = &trust.client_ca {
                match ca.verify(chain).and_then(|()| x509::subject(&chain[0])) {
                    Ok(subject) if !subject.common_name.is_empty() => {
                        return Ok(UserInfo::authenticated(
                            &subject.common_name,
                            subject.organizations,
                        ));
                    }
                    Ok(_) => {}
                    Err(err) => errors.push(err),
                }
            }
        }
        if let (Some(token), Some(reviewer)) = (decide::bearer_token(headers), &self.tokens) {
            match reviewer.review(token).await {
                Ok(Some(user)) => return Ok(user),
                Ok(None) => errors.push("invalid bearer token".to_owned()),
                Err(err) => errors.push(err),
            }
        }
        if errors.is_empty() {
            Ok(UserInfo::anonymous())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Whether `user` may `verb` `path`, and the reason of a denial.
    ///
    /// # Errors
    ///
    /// Why the SubjectAccessReview could not be made (answer 500).
    pub async fn authorize(
        &self,
        user: &UserInfo,
        verb: &str,
        path: &str,
    ) -> Result<review::AccessAnswer, String> {
        if decide::is_privileged(user) || self.always_allow.allows(path) {
            return Ok(review::AccessAnswer {
                allowed: true,
                ..review::AccessAnswer::default()
            });
        }
        let Some(access) = &self.access else {
            return Ok(review::AccessAnswer::default());
        };
        let question = AccessQuestion {
            user: user.clone(),
            verb: verb.to_owned(),
            path: path.to_owned(),
        };
        access.review(&question).await
    }
}

/// The admin router's middleware: authenticate, authorize, then serve (401, 403 or 500 otherwise).
pub(crate) async fn middleware(
    State(auth): State<Arc<DelegatedAuth>>,
    mut request: Request,
    next: Next,
) -> Response {
    let chain = request
        .extensions()
        .get::<ConnectInfo<PeerCertificates>>()
        .map(|ConnectInfo(peer)| peer.0.clone())
        .unwrap_or_default();
    let user = match auth.authenticate(&chain, request.headers()).await {
        Ok(user) => user,
        Err(reason) => {
            tracing::debug!(path = %request.uri().path(), %reason, "unable to authenticate the request");
            return reply(
                StatusCode::UNAUTHORIZED,
                JSON,
                true,
                decide::unauthorized_body(),
            );
        }
    };
    if let Some((_, names)) = &auth.trust.borrow().request_header {
        names.strip(request.headers_mut());
    }
    request.headers_mut().remove(header::AUTHORIZATION);
    let verb = decide::verb(request.method());
    let path = request.uri().path().to_owned();
    match auth.authorize(&user, &verb, &path).await {
        Ok(answer) if answer.allowed => next.run(request).await,
        Ok(answer) => {
            tracing::debug!(user = %user.name, %verb, %path, reason = %answer.reason, "forbidden");
            reply(
                StatusCode::FORBIDDEN,
                JSON,
                true,
                decide::forbidden_body(&user.name, &verb, &path, &answer.reason),
            )
        }
        Err(err) => {
            let body = decide::internal_error_body(&request.uri().to_string(), &err);
            reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT_PLAIN, false, body)
        }
    }
}
