//! The delegated reviews: bearer tokens checked with a TokenReview and requests authorized with a
//! SubjectAccessReview, each answer kept for its TTL, and counted in Go's
//! `apiserver_delegated_authn_request_total{code}` / `apiserver_delegated_authz_request_total{code}`.

use std::time::Duration;

use ccm_core::runtime::metrics::SharedRegistry;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::cache::{DEFAULT_CAPACITY, TtlCache};
use super::decide::UserInfo;

type CodeFamily = Family<Vec<(String, String)>, Counter>;

/// The counters of delegated reviews, by HTTP status code (`<error>` when the API server gave none).
#[derive(Debug, Clone, Default)]
pub struct ReviewMetrics {
    authn: CodeFamily,
    authz: CodeFamily,
}

impl ReviewMetrics {
    /// Register the two counters in `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        let metrics = ReviewMetrics::default();
        registry.register(
            "apiserver_delegated_authn_request",
            "Number of HTTP requests partitioned by status code, for delegated authentication (TokenReview)",
            metrics.authn.clone(),
        );
        registry.register(
            "apiserver_delegated_authz_request",
            "Number of HTTP requests partitioned by status code, for delegated authorization \
             (SubjectAccessReview)",
            metrics.authz.clone(),
        );
        metrics
    }
}

fn count(family: &CodeFamily, result: &Result<impl Sized, kube::Error>) {
    let code = match result {
        Ok(_) => "201".to_owned(),
        Err(kube::Error::Api(status)) => status.code.to_string(),
        Err(_) => "<error>".to_owned(),
    };
    family.get_or_create(&vec![("code".to_owned(), code)]).inc();
}

/// Bearer tokens checked with TokenReviews; answers (authenticated or not) kept for the TTL, keyed by the
/// token's SHA-256 so tokens are not held in memory.
#[derive(Debug)]
pub struct TokenReviewer {
    api: Api<TokenReview>,
    ttl: Duration,
    cache: TtlCache<Vec<u8>, Option<UserInfo>>,
    metrics: ReviewMetrics,
}

impl TokenReviewer {
    /// Review tokens with `client`, keeping answers for `ttl`.
    pub fn new(client: kube::Client, ttl: Duration, metrics: ReviewMetrics) -> Self {
        TokenReviewer {
            api: Api::all(client),
            ttl,
            cache: TtlCache::new(DEFAULT_CAPACITY),
            metrics,
        }
    }

    /// Who `token` belongs to, `None` if the API server does not accept it.
    ///
    /// # Errors
    ///
    /// A message when the TokenReview cannot be made (not cached).
    pub async fn review(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let key = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .to_vec();
        if let Some(answer) = self.cache.get(&key) {
            return Ok(answer);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let result = self.api.create(&PostParams::default(), &review).await;
        count(&self.metrics.authn, &result);
        let status = result
            .map_err(|e| format!("the TokenReview failed: {e}"))?
            .status
            .unwrap_or_default();
        let answer = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => {
                let mut info = UserInfo {
                    name: user.username.unwrap_or_default(),
                    uid: user.uid.unwrap_or_default(),
                    groups: user.groups.unwrap_or_default(),
                    extra: user.extra.unwrap_or_default(),
                };
                info.add_authenticated_group();
                Some(info)
            }
            _ => None,
        };
        self.cache.insert(key, answer.clone(), self.ttl);
        Ok(answer)
    }
}

/// What a SubjectAccessReview is asked: a user, a verb and a non-resource path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccessQuestion {
    /// Who asks.
    pub user: UserInfo,
    /// The verb (`get`).
    pub verb: String,
    /// The path (`/metrics`).
    pub path: String,
}

/// An authorizer's answer: allowed or not, and the reason it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessAnswer {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// The reason given (may be empty).
    pub reason: String,
}

/// Non-resource requests authorized with SubjectAccessReviews; allowing and denying answers kept for their own
/// TTL.
#[derive(Debug)]
pub struct AccessReviewer {
    api: Api<SubjectAccessReview>,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: TtlCache<AccessQuestion, AccessAnswer>,
    metrics: ReviewMetrics,
}

impl AccessReviewer {
    /// Ask with `client`, keeping allowing answers for `allowed_ttl` and denying ones for `denied_ttl`.
    pub fn new(
        client: kube::Client,
        allowed_ttl: Duration,
        denied_ttl: Duration,
        metrics: ReviewMetrics,
    ) -> Self {
        AccessReviewer {
            api: Api::all(client),
            allowed_ttl,
            denied_ttl,
            cache: TtlCache::new(DEFAULT_CAPACITY),
            metrics,
        }
    }

    /// The answer to `question`.
    ///
    /// # Errors
    ///
    /// A message when the SubjectAccessReview cannot be made (not cached).
    pub async fn review(&self, question: &AccessQuestion) -> Result<AccessAnswer, String> {
        if let Some(answer) = self.cache.get(question) {
            return Ok(answer);
        }
        let user = &question.user;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(question.path.clone()),
                    verb: Some(question.verb.clone()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let result = self.api.create(&PostParams::default(), &review).await;
        count(&self.metrics.authz, &result);
        let status = result
            .map_err(|e| format!("the SubjectAccessReview failed: {e}"))?
            .status
            .unwrap_or_default();
        let allowed = status.allowed && !status.denied.unwrap_or(false);
        let answer = AccessAnswer {
            allowed,
            reason: status.reason.unwrap_or_default(),
        };
        if !allowed && let Some(error) = status.evaluation_error.filter(|e| !e.is_empty()) {
            tracing::debug!(user = %user.name, path = %question.path, error = %error,
                "the SubjectAccessReview reported an evaluation error");
        }
        let ttl = if allowed {
            self.allowed_ttl
        } else {
            self.denied_ttl
        };
        self.cache.insert(question.clone(), answer.clone(), ttl);
        Ok(answer)
    }
}
