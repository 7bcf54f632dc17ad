//! `--use-service-account-credentials`: each controller acts as its own ServiceAccount in `kube-system`, as Go's
//! `SAControllerClientBuilder` does: the CCM's own identity creates the account if it is missing and asks the
//! TokenRequest API (`serviceaccounts/token`, `create`) for its tokens ([`issuer`]); [`run_refresher`] keeps a
//! [`TokenSource`] current.

use std::sync::Arc;
use std::time::Duration;

use ccm_core::names;
use ccm_core::runtime::workqueue::ItemExponentialBackoff;
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The namespace of the controllers' ServiceAccounts (Go's `kube-system`).
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "kube-system";

/// The lifetime asked for each token (Go's client builder asks for one hour).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// The share of a token's lifetime after which the next token is requested.
pub const REFRESH_FRACTION: f64 = 0.8;

/// The first delay after a failed token request; it doubles up to [`MAX_RETRY_DELAY`].
pub const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);

/// The longest delay between two failed token requests.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// The ServiceAccount of the controller `controller`: Go's `cloud-node-controller`,
/// `cloud-node-lifecycle-controller`, `service-controller` and `route-controller`, else the controller's name.
pub fn service_account_name(controller: &str) -> &str {
    match controller {
        names::controllers::SERVICE_LB => "service-controller",
        names::controllers::NODE_ROUTE => "route-controller",
        other => other,
    }
}

/// When to ask for the next token, counted from when a token of `lifetime` was received.
pub fn refresh_delay(lifetime: Duration) -> Duration {
    lifetime.mul_f64(REFRESH_FRACTION)
}

/// The delay before retry number `attempt` (0 for the first retry): doubling from [`FIRST_RETRY_DELAY`], at most
/// [`MAX_RETRY_DELAY`].
pub fn retry_delay(attempt: u32) -> Duration {
    ItemExponentialBackoff::<()>::new(FIRST_RETRY_DELAY, MAX_RETRY_DELAY).delay_for(attempt)
}

/// Why a request cannot be authenticated as a controller's ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No token has been received yet.
    #[error(
        "no token yet for ServiceAccount {namespace}/{name}; the CCM's own identity needs create on serviceaccounts \
         and serviceaccounts/token in {namespace} (deploy/controller-rbac.yaml)"
    )]
    NotYet {
        /// The account's namespace.
        namespace: String,
        /// The account.
        name: String,
    },
    /// The last token expired and no new one could be obtained.
    #[error(
        "the token of ServiceAccount {namespace}/{name} expired and could not be renewed; check the CCM's log for \
         the token request errors"
    )]
    Expired {
        /// The account's namespace.
        namespace: String,
        /// The account.
        name: String,
    },
}

/// A token and the instant it stops being valid; its `Debug` leaves the token out.
#[derive(Clone, PartialEq, Eq, educe::Educe)]
#[educe(Debug)]
pub struct Token {
    /// The bearer token.
    #[educe(Debug(ignore))]
    pub value: String,
    /// When it expires.
    pub expires_at: Instant,
}

/// The current token of one ServiceAccount, updated by [`run_refresher`].
#[derive(Debug, Clone)]
pub struct TokenSource {
    namespace: String,
    name: String,
    current: watch::Receiver<Option<Token>>,
}

impl TokenSource {
    /// A source with no token yet, and the sender [`run_refresher`] publishes to.
    pub fn new(namespace: &str, name: &str) -> (Self, watch::Sender<Option<Token>>) {
        let (tx, rx) = watch::channel(None);
        (
            TokenSource {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                current: rx,
            },
            tx,
        )
    }

    /// The token to send now.
    ///
    /// # Errors
    ///
    /// [`TokenError`] if there is none yet or the last one has expired (it is never sent).
    pub fn bearer(&self) -> Result<String, TokenError> {
        match &*self.current.borrow() {
            None => Err(TokenError::NotYet {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
            }),
            Some(token) if Instant::now() >= token.expires_at => Err(TokenError::Expired {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
            }),
            Some(token) => Ok(token.value.clone()),
        }
    }

    /// Set the current token as the bearer token of `request`, so a client built on this source uses each renewed
    /// token without being rebuilt.
    ///
    /// # Errors
    ///
    /// [`TokenError`] (as [`kube::Error::Service`]) if there is no valid token: the request must not be sent.
    pub fn authorize<B>(&self, request: &mut http::Request<B>) -> Result<(), kube::Error> {
        let token = self
            .bearer()
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            kube::Error::Service(
                format!(
                    "the token of ServiceAccount {}/{} is not a valid header value",
                    self.namespace, self.name
                )
                .into(),
            )
        })?;
        value.set_sensitive(true);
        request
            .headers_mut()
            .insert(http::header::AUTHORIZATION, value);
        Ok(())
    }

    /// Wait until a token is available (or `cancel` fires; then `false`).
    pub async fn ready(&self, cancel: &CancellationToken) -> bool {
        let mut rx = self.current.clone();
        let ready = cancel.run_until_cancelled(rx.wait_for(Option::is_some));
        ready.await.is_some_and(|result| result.is_ok())
    }
}

/// Something that issues tokens of one ServiceAccount ([`issuer`] with the API, a fake in tests): each call
/// requests one token, valid until its `expires_at` (counted from when it was asked for).
pub type Issuer = Arc<dyn Fn() -> BoxFuture<'static, Result<Token, kube::Error>> + Send + Sync>;

/// The issuer of ServiceAccount `namespace/name` through `client` (the CCM's own identity): creates the account
/// if it is missing, then requests a token of [`TOKEN_LIFETIME`].
pub fn issuer(client: kube::Client, namespace: &str, name: &str) -> Issuer {
    let namespace = namespace.to_owned();
    let name = name.to_owned();
    Arc::new(move || {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let name = name.clone();
        Box::pin(async move {
            let asked = Instant::now();
            if accounts.get_opt(&name).await?.is_none() {
                let mut account = ServiceAccount::default();
                account.metadata.name = Some(name.clone());
                match accounts.create(&PostParams::default(), &account).await {
                    Ok(_) => {
                        tracing::info!(service_account = %name, "created the controller's ServiceAccount")
                    }
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(err) => return Err(err),
                }
            }
            let request = TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
                    ..TokenRequestSpec::default()
                }),
                ..TokenRequest::default()
            };
            let answer = accounts
                .create_token_request(&name, &PostParams::default(), &request)
                .await?;
            let granted = answer
                .spec
                .and_then(|s| s.expiration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map_or(TOKEN_LIFETIME, Duration::from_secs);
            let value = answer.status.and_then(|s| s.token).unwrap_or_default();
            if value.is_empty() {
                return Err(kube::Error::Service(
                    format!("the TokenRequest for ServiceAccount {name} returned no token").into(),
                ));
            }
            Ok(Token {
                value,
                expires_at: asked + granted,
            })
        })
    })
}

/// Keep `tx` supplied with valid tokens from `issue` until `cancel` fires: a new token at [`refresh_delay`] of
/// the lifetime of the last one; after a failure, retries at [`retry_delay`] (the last token stays in use while it
/// is valid; [`TokenSource::bearer`] refuses it once it has expired).
pub async fn run_refresher(
    name: String,
    issue: Issuer,
    tx: watch::Sender<Option<Token>>,
    cancel: CancellationToken,
) {
    let mut failures: u32 = 0;
    let refresh = async {
        loop {
            let asked = Instant::now();
            let next = match issue().await {
                Ok(token) => {
                    failures = 0;
                    let lifetime = token.expires_at.saturating_duration_since(asked);
                    tracing::debug!(service_account = %name, ?lifetime, "received a token");
                    let _ = tx.send(Some(token));
                    refresh_delay(lifetime)
                }
                Err(error) => {
                    let delay = retry_delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(service_account = %name, %error, retry_in = ?delay, "cannot get a token for the controller's ServiceAccount");
                    delay
                }
            };
            tokio::time::sleep_until(asked + next).await;
        }
    };
    cancel.run_until_cancelled(refresh).await;
}

/// A running source for ServiceAccount `name` in [`SERVICE_ACCOUNT_NAMESPACE`], fed through `main` (the CCM's
/// own client) until `cancel` fires.
pub fn start(main: kube::Client, name: &str, cancel: CancellationToken) -> TokenSource {
    let (source, tx) = TokenSource::new(SERVICE_ACCOUNT_NAMESPACE, name);
    let issue = issuer(main, SERVICE_ACCOUNT_NAMESPACE, name);
    tokio::spawn(run_refresher(name.to_owned(), issue, tx, cancel));
    source
}

/// A controller's own identity for [`crate::client::ClientFactory::client_with_events`]: the connection
/// without credentials and the ServiceAccount's tokens (`None`: the CCM's own client).
pub type Identity<'a> = Option<(&'a kube::Client, &'a TokenSource)>;

/// The connection configuration `config` without its credentials (client certificate, token, exec plugin, ...):
/// what the controllers' own clients are sent over, with a ServiceAccount token added per request.
pub fn without_credentials(config: &kube::Config) -> kube::Config {
    let mut config = config.clone();
    config.auth_info = kube::config::AuthInfo::default();
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn go_names() {
        assert_eq!(
            service_account_name("cloud-node-controller"),
            "cloud-node-controller"
        );
        assert_eq!(
            service_account_name("cloud-node-lifecycle-controller"),
            "cloud-node-lifecycle-controller"
        );
        assert_eq!(
            service_account_name("service-lb-controller"),
            "service-controller"
        );
        assert_eq!(
            service_account_name("node-route-controller"),
            "route-controller"
        );
        assert_eq!(
            service_account_name("tagging-controller"),
            "tagging-controller"
        );
    }

    #[test]
    fn delays() {
        assert_eq!(
            refresh_delay(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            refresh_delay(Duration::from_secs(600)),
            Duration::from_secs(480)
        );
        let retries: Vec<u64> = (0..8).map(|a| retry_delay(a).as_secs()).collect();
        assert_eq!(retries, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }

    /// An issuer answering from a script: `Some(lifetime)` issues `token-<n>`, `None` fails.
    fn scripted(script: Vec<Option<u64>>) -> (Issuer, Arc<AtomicU32>, Arc<Mutex<Vec<Instant>>>) {
        let calls = Arc::new(AtomicU32::new(0));
        let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let (c, t) = (calls.clone(), times.clone());
        let issue: Issuer = Arc::new(move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            t.lock().unwrap().push(Instant::now());
            let step = script
                .get(n as usize)
                .copied()
                .flatten()
                .ok_or_else(|| kube::Error::Service("refused".into()));
            let asked = Instant::now();
            Box::pin(async move {
                let lifetime = step?;
                Ok(Token {
                    value: format!("token-{n}"),
                    expires_at: asked + Duration::from_secs(lifetime),
                })
            })
        });
        (issue, calls, times)
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_renewed_at_80_percent_and_failures_retried_with_backoff() {
        let start = Instant::now();
        // 100 s tokens; the third request fails twice before succeeding
        let (issue, calls, times) = scripted(vec![Some(100), Some(100), None, None, Some(100)]);
        let (source, tx) = TokenSource::new("kube-system", "route-controller");
        assert!(matches!(source.bearer(), Err(TokenError::NotYet { .. })));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run_refresher(
            "route-controller".into(),
            issue,
            tx,
            cancel.clone(),
        ));
        assert!(source.ready(&cancel).await);
        assert_eq!(source.bearer().unwrap(), "token-0");

        tokio::time::sleep(Duration::from_secs(79)).await;
        assert_eq!(
            source.bearer().unwrap(),
            "token-0",
            "not renewed before 80 s"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(source.bearer().unwrap(), "token-1", "renewed at 80 s");
        // token-1 was received at 80 s: the next request at 160 s fails, then at 161 s, then succeeds at 163 s
        tokio::time::sleep(Duration::from_secs(80)).await;
        assert_eq!(
            source.bearer().unwrap(),
            "token-1",
            "still valid until 180 s"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(source.bearer().unwrap(), "token-4");
        let offsets: Vec<u64> = times
            .lock()
            .unwrap()
            .iter()
            .map(|t| (*t - start).as_secs())
            .collect();
        assert_eq!(offsets, [0, 80, 160, 161, 163]);
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_token_is_never_sent() {
        // one 10 s token, then every request fails
        let (issue, _calls, _times) = scripted(vec![Some(10)]);
        let (source, tx) = TokenSource::new("kube-system", "service-controller");
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run_refresher(
            "service-controller".into(),
            issue,
            tx,
            cancel.clone(),
        ));
        assert!(source.ready(&cancel).await);
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert_eq!(
            source.bearer().unwrap(),
            "token-0",
            "valid while retries fail"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let err = source.bearer().unwrap_err();
        assert!(matches!(err, TokenError::Expired { .. }));
        assert_eq!(
            err.to_string(),
            "the token of ServiceAccount kube-system/service-controller expired and could not be renewed; check \
             the CCM's log for the token request errors"
        );
        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn requests_carry_the_current_token_and_none_without_one() {
        let (source, tx) = TokenSource::new("kube-system", "route-controller");
        let mut request = http::Request::get("/api").body(()).unwrap();
        let err = source.authorize(&mut request).unwrap_err();
        assert!(
            err.to_string()
                .contains("no token yet for ServiceAccount kube-system/route-controller")
        );
        assert!(request.headers().get(http::header::AUTHORIZATION).is_none());
        let expires_at = Instant::now() + Duration::from_secs(10);
        tx.send(Some(Token {
            value: "one".into(),
            expires_at,
        }))
        .unwrap();
        source.authorize(&mut request).unwrap();
        tx.send(Some(Token {
            value: "two".into(),
            expires_at,
        }))
        .unwrap();
        source.authorize(&mut request).unwrap();
        let header = request.headers().get(http::header::AUTHORIZATION).unwrap();
        assert_eq!(header, "Bearer two", "the renewed token, same source");
        assert!(header.is_sensitive());
        tokio::time::sleep(Duration::from_secs(10)).await;
        let mut late = http::Request::get("/api").body(()).unwrap();
        assert!(source.authorize(&mut late).is_err(), "expired: not sent");
        assert!(late.headers().get(http::header::AUTHORIZATION).is_none());
    }

    #[test]
    fn credentials_are_removed_from_the_connection() {
        let mut config = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
        config.auth_info.token = Some("secret".to_owned().into());
        config.auth_info.client_key_data = Some("key".to_owned().into());
        let bare = without_credentials(&config);
        assert!(bare.auth_info.token.is_none());
        assert!(bare.auth_info.client_key_data.is_none());
        assert_eq!(bare.cluster_url, config.cluster_url);
    }
}
