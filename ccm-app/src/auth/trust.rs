//! The CAs the secure port trusts for client certificates, and keeping the cluster's current.
//!
//! The client CA and the request-header (front-proxy) CA with its names come from the flags or, for those not
//! given, from the `kube-system/extension-apiserver-authentication` ConfigMap. As Go's controller managers do,
//! the ConfigMap is watched, not read once: when the API server rotates a CA or the request-header names change,
//! the new values apply to the next request without a restart. A ConfigMap that cannot be used (a bad PEM, a
//! list that is not JSON) or that is deleted leaves the last good values in force, with a warning.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_util::sync::CancellationToken;

use super::decide::{self, ClusterAuthentication, RequestHeaderNames};
use super::x509::CaBundle;

/// The request-header CA and the names a proxy it signed may use.
pub(crate) type RequestHeader = (CaBundle, RequestHeaderNames);

/// What client certificates are trusted with.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trust {
    /// Client certificates signed by these CAs authenticate as their subject.
    pub(crate) client_ca: Option<CaBundle>,
    /// Proxies whose certificates these CAs signed name the user in headers.
    pub(crate) request_header: Option<RequestHeader>,
}

/// Which parts of the [`Trust`] come from the cluster's ConfigMap (the flags did not give them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FromCluster {
    /// No `--client-ca-file`.
    pub(crate) client_ca: bool,
    /// No `--requestheader-client-ca-file`.
    pub(crate) request_header: bool,
}

impl FromCluster {
    /// Whether anything comes from the cluster.
    pub(crate) fn any(self) -> bool {
        self.client_ca || self.request_header
    }
}

impl Trust {
    /// `self` with the parts that come from the cluster (`from`) replaced by `cluster`'s.
    pub(crate) fn merged(&self, cluster: Trust, from: FromCluster) -> Trust {
        Trust {
            client_ca: if from.client_ca {
                cluster.client_ca
            } else {
                self.client_ca.clone()
            },
            request_header: if from.request_header {
                cluster.request_header
            } else {
                self.request_header.clone()
            },
        }
    }
}

/// The CA bundles of what the ConfigMap says, else the key whose PEM bundle holds no usable CA, and why.
pub(crate) fn cluster_trust(
    cluster: ClusterAuthentication,
    provider: &Arc<CryptoProvider>,
) -> Result<Trust, String> {
    let bundle = |key: &str, pem: Option<String>| -> Result<Option<CaBundle>, String> {
        pem.map(|pem| {
            CaBundle::from_pem(&pem, provider).map_err(|reason| format!("{key}: {reason}"))
        })
        .transpose()
    };
    let client_ca = bundle("client-ca-file", cluster.client_ca)?;
    let request_header = bundle("requestheader-client-ca-file", cluster.requestheader_ca)?
        .map(|ca| (ca, cluster.requestheader));
    Ok(Trust {
        client_ca,
        request_header,
    })
}

/// The trust in force, shared by the authenticator and the task that follows the ConfigMap.
pub(crate) type TrustCell = watch::Sender<Arc<Trust>>;

/// Follows ConfigMap `name` of `api` until `stop` is cancelled: each new version that parses replaces the parts
/// of `cell`'s trust that come from the cluster (`from`); `last` is what the trust was built from. Watch errors
/// are retried with kube's default backoff.
pub(crate) async fn follow(
    api: Api<ConfigMap>,
    name: &str,
    cell: Arc<TrustCell>,
    from: FromCluster,
    mut last: ClusterAuthentication,
    provider: Arc<CryptoProvider>,
    stop: CancellationToken,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher(api, config).default_backoff().applied_objects();
    let mut stream = std::pin::pin!(stream);
    let follow = async {
        while let Some(next) = stream.next().await {
            let map = match next {
                Ok(map) => map,
                Err(err) => {
                    tracing::warn!(configmap = name, error = %err, "cannot watch the cluster's client CAs; retrying");
                    continue;
                }
            };
            let usable = match decide::parse_cluster_authentication(&map.data.unwrap_or_default()) {
                Ok(parsed) if parsed == last => continue,
                Ok(parsed) => cluster_trust(parsed.clone(), &provider).map(|trust| (parsed, trust)),
                Err(err) => Err(err),
            };
            match usable {
                Ok((parsed, trust)) => {
                    cell.send_modify(|current| *current = Arc::new(current.merged(trust, from)));
                    last = parsed;
                    tracing::info!(
                        configmap = name,
                        "the cluster's client CAs changed; the secure port uses the new ones"
                    );
                }
                Err(err) => {
                    tracing::warn!(configmap = name, error = %err, "ignoring an unusable client-CA ConfigMap; keeping the CAs in force");
                }
            }
        }
    };
    stop.run_until_cancelled(follow).await;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use ccm_testenv::TestEnv;
    use ccm_testenv::pki::CertificateAuthority;
    use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
    use tokio_rustls::rustls::crypto::ring;
    use tokio_rustls::rustls::pki_types::CertificateDer;

    use super::*;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(ring::default_provider())
    }

    fn bundle(ca: &CertificateAuthority) -> CaBundle {
        CaBundle::from_pem(ca.cert_pem(), &provider()).expect("a CA bundle")
    }

    /// A client certificate (DER) that `ca` issued.
    fn leaf(ca: &CertificateAuthority, user: &str) -> CertificateDer<'static> {
        let issued = ca.issue_client(user, &[]).expect("a client certificate");
        let der = ccm_testenv::pki::pem_certificates_to_der(&issued.cert_pem).expect("DER");
        CertificateDer::from(der[0].clone())
    }

    fn names(allowed: &str) -> RequestHeaderNames {
        RequestHeaderNames {
            allowed_names: vec![allowed.to_owned()],
            ..RequestHeaderNames::default()
        }
    }

    #[test]
    fn only_the_parts_from_the_cluster_are_replaced() {
        let flag = CertificateAuthority::generate().unwrap();
        let cluster = CertificateAuthority::generate().unwrap();
        let given = Trust {
            client_ca: Some(bundle(&flag)),
            request_header: Some((bundle(&flag), names("flag-proxy"))),
        };
        let from_cluster = Trust {
            client_ca: Some(bundle(&cluster)),
            request_header: Some((bundle(&cluster), names("cluster-proxy"))),
        };
        let only_request_header = FromCluster {
            client_ca: false,
            request_header: true,
        };
        assert!(only_request_header.any() && !FromCluster::default().any());
        let merged = given.merged(from_cluster.clone(), only_request_header);
        let client = merged.client_ca.expect("the flag's client CA");
        assert_eq!(client.verify(&[leaf(&flag, "alice")]), Ok(()));
        let (proxy_ca, proxy_names) = merged.request_header.expect("the cluster's proxy CA");
        assert_eq!(proxy_ca.verify(&[leaf(&cluster, "proxy")]), Ok(()));
        assert_eq!(proxy_names, names("cluster-proxy"));

        let nothing = given.merged(
            Trust::default(),
            FromCluster {
                client_ca: true,
                request_header: true,
            },
        );
        assert!(nothing.client_ca.is_none() && nothing.request_header.is_none());
    }

    #[test]
    fn a_configmap_with_a_bad_pem_names_its_key() {
        let bad = ClusterAuthentication {
            requestheader_ca: Some("not a certificate".to_owned()),
            ..ClusterAuthentication::default()
        };
        let err = cluster_trust(bad, &provider()).unwrap_err();
        assert!(err.starts_with("requestheader-client-ca-file: "), "{err}");
        let empty = cluster_trust(ClusterAuthentication::default(), &provider()).unwrap();
        assert!(empty.client_ca.is_none() && empty.request_header.is_none());
    }

    fn config_map(name: &str, client_ca: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                "client-ca-file".to_owned(),
                client_ca.to_owned(),
            )])),
            ..ConfigMap::default()
        }
    }

    /// Polls until `cell`'s client CA verifies `cert`, or panics after 30 s.
    async fn wait_trusted(cell: &TrustCell, ca: &CertificateAuthority, what: &str) {
        let leaf = leaf(ca, "someone");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let trusted = cell
                .borrow()
                .client_ca
                .as_ref()
                .is_some_and(|b| b.verify(std::slice::from_ref(&leaf)).is_ok());
            if trusted {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: not trusted within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn a_rotated_ca_in_the_configmap_is_trusted_without_a_restart_and_a_bad_one_is_ignored() {
        let env = TestEnv::shared().await;
        let namespace = env.namespace("trust").await;
        let api: Api<ConfigMap> = Api::namespaced(env.client(), &namespace);
        let first = CertificateAuthority::generate().unwrap();
        let second = CertificateAuthority::generate().unwrap();
        let name = "extension-apiserver-authentication";
        api.create(&PostParams::default(), &config_map(name, first.cert_pem()))
            .await
            .expect("create the ConfigMap");
        let last = ClusterAuthentication {
            client_ca: Some(first.cert_pem().to_owned()),
            ..ClusterAuthentication::default()
        };
        let cell = Arc::new(TrustCell::new(Arc::new(
            cluster_trust(last.clone(), &provider()).unwrap(),
        )));
        let stop = CancellationToken::new();
        let from = FromCluster {
            client_ca: true,
            request_header: true,
        };
        let task = tokio::spawn(follow(
            api.clone(),
            name,
            cell.clone(),
            from,
            last,
            provider(),
            stop.clone(),
        ));
        wait_trusted(&cell, &first, "the first CA").await;

        let patch = |pem: String| serde_json::json!({"data": {"client-ca-file": pem}});
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(patch(second.cert_pem().to_owned())),
        )
        .await
        .expect("rotate the CA");
        wait_trusted(&cell, &second, "the rotated CA").await;
        let old = leaf(&first, "someone");
        assert!(
            cell.borrow()
                .client_ca
                .as_ref()
                .unwrap()
                .verify(&[old])
                .is_err(),
            "the old CA is no longer trusted"
        );

        // A broken bundle keeps the CA in force; the next good one applies.
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(patch("garbage".to_owned())),
        )
        .await
        .expect("break the CA");
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(patch(first.cert_pem().to_owned())),
        )
        .await
        .expect("rotate back");
        wait_trusted(&cell, &first, "the CA after a broken one").await;

        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follower stops when cancelled")
            .expect("the follower does not panic");
    }
}
