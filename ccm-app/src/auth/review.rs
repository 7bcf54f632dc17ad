//! The delegated reviews: bearer tokens checked with a TokenReview and requests authorized with a
//! SubjectAccessReview, each answer kept for its TTL, and counted in Go's
//! `apiserver_delegated_authn_request_total{code}` / `apiserver_delegated_authz_request_total{code}`.

use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use ccm_core::runtime::metrics::SharedRegistry;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::cache::{DEFAULT_CAPACITY, TtlCache};
use super::decide::UserInfo;

/// Requests counted by HTTP status code (`<error>` when the API server gave none).
pub type CodeFamily = Family<Vec<(String, String)>, Counter>;

/// The counters of delegated reviews: TokenReviews (`authn`) and SubjectAccessReviews (`authz`).
#[derive(Debug, Clone, Default)]
pub struct ReviewMetrics {
    /// `apiserver_delegated_authn_request_total{code}`.
    pub authn: CodeFamily,
    /// `apiserver_delegated_authz_request_total{code}`.
    pub authz: CodeFamily,
}

impl ReviewMetrics {
    /// Register the two counters in `registry`.
    pub fn register(registry: &SharedRegistry) -> Self {
        ReviewMetrics {
            authn: registry.registered(
                "apiserver_delegated_authn_request",
                "Number of HTTP requests partitioned by status code, for delegated authentication (TokenReview)",
                Family::default(),
            ),
            authz: registry.registered(
                "apiserver_delegated_authz_request",
                "Number of HTTP requests partitioned by status code, for delegated authorization \
                 (SubjectAccessReview)",
                Family::default(),
            ),
        }
    }
}

/// One kind of delegated review: created through `api`, each answer kept for the TTL of its kind (allowing or
/// denying), every request counted by its code in `requests`.
#[derive(Debug)]
pub struct Reviews<R, K, V> {
    api: Api<R>,
    ttls: (Duration, Duration),
    cache: TtlCache<K, V>,
    requests: CodeFamily,
}

/// Bearer tokens checked with TokenReviews, answers keyed by the token's SHA-256 so tokens are not held in memory.
pub type TokenReviewer = Reviews<TokenReview, Vec<u8>, Option<UserInfo>>;

/// Non-resource requests authorized with SubjectAccessReviews.
pub type AccessReviewer = Reviews<SubjectAccessReview, AccessQuestion, AccessAnswer>;

impl<R, K, V> Reviews<R, K, V>
where
    R: kube::Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
    K: Eq + Hash + Clone,
    V: Clone,
{
    /// Review with `client`, keeping allowing answers for `ttls.0` and denying ones for `ttls.1`, counting the
    /// requests in `requests`.
    pub fn new(client: kube::Client, ttls: (Duration, Duration), requests: CodeFamily) -> Self {
        Reviews {
            api: Api::all(client),
            ttls,
            cache: TtlCache::new(DEFAULT_CAPACITY),
            requests,
        }
    }

    /// The answer kept for `key`, else the one `answer` reads (with whether it allows) from the review `review`
    /// creates, kept for its TTL.
    async fn ask(
        &self,
        key: K,
        review: impl FnOnce() -> R,
        answer: impl FnOnce(R) -> (V, bool),
    ) -> Result<V, String> {
        if let Some(answer) = self.cache.get(&key) {
            return Ok(answer);
        }
        let result = self.api.create(&PostParams::default(), &review()).await;
        let code = match &result {
            Ok(_) => "201".to_owned(),
            Err(kube::Error::Api(status)) => status.code.to_string(),
            Err(_) => "<error>".to_owned(),
        };
        self.requests
            .get_or_create(&vec![("code".to_owned(), code)])
            .inc();
        let created = result.map_err(|e| format!("the {} failed: {e}", R::kind(&())))?;
        let (answer, allowed) = answer(created);
        let ttl = if allowed { self.ttls.0 } else { self.ttls.1 };
        self.cache.insert(key, answer.clone(), ttl);
        Ok(answer)
    }
}

impl TokenReviewer {
    /// Who `token` belongs to, `None` if the API server does not accept it.
    ///
    /// # Errors
    ///
    /// A message when the TokenReview cannot be made (not cached).
    pub async fn review(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let key = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .to_vec();
        let review = || TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        self.ask(key, review, |review| {
            let status = review.status.unwrap_or_default();
            let user = status.user.filter(|_| status.authenticated == Some(true));
            let answer = user.map(|user| UserInfo {
                uid: user.uid.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
                ..UserInfo::authenticated(
                    &user.username.unwrap_or_default(),
                    user.groups.unwrap_or_default(),
                )
            });
            let authenticated = answer.is_some();
            (answer, authenticated)
        })
        .await
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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessAnswer {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// The reason given (may be empty).
    pub reason: String,
}

impl AccessReviewer {
    /// The answer to `question`.
    ///
    /// # Errors
    ///
    /// A message when the SubjectAccessReview cannot be made (not cached).
    pub async fn review(&self, question: &AccessQuestion) -> Result<AccessAnswer, String> {
        let user = &question.user;
        let review = || SubjectAccessReview {
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
        self.ask(question.clone(), review, |review| {
            let status = review.status.unwrap_or_default();
            let allowed = status.allowed && !status.denied.unwrap_or(false);
            if !allowed && let Some(error) = status.evaluation_error.filter(|e| !e.is_empty()) {
                tracing::debug!(user = %user.name, path = %question.path, error = %error,
                    "the SubjectAccessReview reported an evaluation error");
            }
            let reason = status.reason.unwrap_or_default();
            (AccessAnswer { allowed, reason }, allowed)
        })
        .await
    }
}
