//! Kubernetes clients: the connection from `--kubeconfig` / `--master` (or the in-cluster configuration), and one
//! named client per user (each controller, the informers, leader election), each with its own user agent and its
//! own `--kube-api-qps` / `--kube-api-burst` token bucket, as each Go controller has its own clientset.
//!
//! The named clients share one connection pool.

use std::path::PathBuf;

use http::HeaderValue;
use http::header::USER_AGENT;
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::options::CcmOptions;
use crate::ratelimit::TokenBucketLayer;

/// Why the Kubernetes client cannot be built.
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
    let master = match &options.master {
        None => None,
        Some(value) => Some(parse_master(value)?),
    };
    let mut config = match (&options.kubeconfig, &master) {
        (Some(path), _) => {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| ClientError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
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

/// Makes named clients over one connection: each with its own user agent and token bucket.
#[derive(Clone)]
pub struct ClientFactory {
    base: kube::Client,
    qps: f32,
    burst: i32,
    agent_prefix: String,
}

impl std::fmt::Debug for ClientFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFactory")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("agent_prefix", &self.agent_prefix)
            .finish_non_exhaustive()
    }
}

impl ClientFactory {
    /// A factory over the connection `config` describes.
    ///
    /// # Errors
    ///
    /// [`ClientError::Build`] if kube cannot build a client from `config` (for example an `https` server without
    /// a TLS feature enabled).
    pub fn from_config(
        config: kube::Config,
        qps: f32,
        burst: i32,
        agent_prefix: &str,
    ) -> Result<Self, ClientError> {
        let base = kube::Client::try_from(config).map_err(ClientError::Build)?;
        Ok(Self::from_client(base, qps, burst, agent_prefix))
    }

    /// A factory over an existing client (its own layers stay in place).
    pub fn from_client(base: kube::Client, qps: f32, burst: i32, agent_prefix: &str) -> Self {
        ClientFactory {
            base,
            qps,
            burst,
            agent_prefix: agent_prefix.to_owned(),
        }
    }

    /// The user agent of the client `name`: `<prefix> <name>`-style, as Go's `rest.AddUserAgent`.
    pub fn user_agent(&self, name: &str) -> String {
        format!("{}/{name}", self.agent_prefix)
    }

    /// A new client named `name`: its own token bucket and user agent. Must be called inside a Tokio runtime.
    pub fn client(&self, name: &str) -> kube::Client {
        self.layered(name, &TokenBucketLayer::new(self.qps, self.burst))
    }

    /// A client named `name` and a second one for its Events over the same token bucket, at a lower priority:
    /// Event writes only use tokens the first client leaves free, so they never delay its object writes.
    pub fn client_with_events(&self, name: &str) -> (kube::Client, kube::Client) {
        let layer = TokenBucketLayer::new(self.qps, self.burst);
        (
            self.layered(name, &layer),
            self.layered(name, &layer.low_priority()),
        )
    }

    fn layered(&self, name: &str, layer: &TokenBucketLayer) -> kube::Client {
        let agent = HeaderValue::from_str(&self.user_agent(name))
            .unwrap_or_else(|_| HeaderValue::from_static("cloud-controller-manager"));
        let base = self.base.clone();
        let service = tower::ServiceBuilder::new()
            .layer(layer.clone())
            .map_request(move |mut request: http::Request<Body>| {
                request.headers_mut().insert(USER_AGENT, agent.clone());
                request
            })
            .service(tower::service_fn(move |request: http::Request<Body>| {
                let base = base.clone();
                async move { base.send(request).await }
            }));
        kube::Client::new(service, self.base.default_namespace().to_owned())
    }
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
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

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
