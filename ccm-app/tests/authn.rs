//! The secure port's delegated authentication and authorization against a real kube-apiserver: anonymous
//! requests, ServiceAccount tokens (TokenReview) with and without the RBAC right to read `/metrics`
//! (SubjectAccessReview), how many reviews 100 scrapes cost, client certificates of `--client-ca-file`, and the
//! front proxy's request headers (CA and allowed names read from the cluster's extension-apiserver-authentication
//! ConfigMap).

mod support;

use std::net::SocketAddr;
use std::time::Instant;

use ccm_testenv::pki::CertificateAuthority;
use ccm_testenv::{TestEnv, wait_for};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

use support::*;

/// A running CCM with delegated authentication through the test apiserver.
struct Secured {
    addr: SocketAddr,
    cert: String,
    shutdown: CancellationToken,
    running: ccm_app::RunningCcm,
}

impl Secured {
    async fn get(&self, path: &str, credentials: Credentials<'_>) -> (u16, String) {
        https_get_as(self.addr, &self.cert, path, credentials).await
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(TIMEOUT, self.running.wait())
            .await
            .expect("stops in time")
            .expect("clean exit");
    }
}

/// Start a CCM whose secure port authenticates with the admin kubeconfig (TokenReview, SubjectAccessReview, the
/// ConfigMap), trusting `client_ca_file` for client certificates, plus `extra` flags.
async fn start(env: &TestEnv, prefix: &str, extra: &[String]) -> Secured {
    let ns = env.namespace(prefix).await;
    let label = env.unique_name(prefix);
    let (_cloud, registry) = fake_cloud(&[]);
    let builder = ccm(registry, env.client());
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let mut args: Vec<String> = flags(&label, &ns, prefix)
        .into_iter()
        .filter(|a| a != ALLOW_ADMIN_PATHS)
        .collect();
    args.extend([
        "--leader-elect=false".to_owned(),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
    ]);
    args.extend(extra.iter().cloned());
    let options = builder.parse_args(args).expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    Secured {
        addr: running.admin_addr().expect("serving"),
        cert: running
            .admin_certificate_pem()
            .expect("a certificate")
            .to_owned(),
        shutdown,
        running,
    }
}

const ANONYMOUS_METRICS_FORBIDDEN: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\
\"status\":\"Failure\",\"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/metrics\\\"\",\
\"reason\":\"Forbidden\",\"details\":{},\"code\":403}\n";

const UNAUTHORIZED: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";

fn forbidden_message(user: &str, path: &str) -> String {
    format!("forbidden: User \\\"{user}\\\" cannot get path \\\"{path}\\\"")
}

/// A ClusterRole allowing `get` on `/metrics`, bound to the ServiceAccount; returns the role's name.
async fn grant_metrics(env: &TestEnv, namespace: &str, account: &str) -> String {
    let name = env.unique_name("metrics-reader");
    let post = PostParams::default();
    Api::<ClusterRole>::all(env.client())
        .create(
            &post,
            &ClusterRole {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                rules: Some(vec![PolicyRule {
                    non_resource_urls: Some(vec!["/metrics".to_owned()]),
                    verbs: vec!["get".to_owned()],
                    ..PolicyRule::default()
                }]),
                ..ClusterRole::default()
            },
        )
        .await
        .expect("create the ClusterRole");
    Api::<ClusterRoleBinding>::all(env.client())
        .create(
            &post,
            &ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".to_owned()),
                    kind: "ClusterRole".to_owned(),
                    name: name.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: account.to_owned(),
                    namespace: Some(namespace.to_owned()),
                    ..Subject::default()
                }]),
            },
        )
        .await
        .expect("create the ClusterRoleBinding");
    name
}

async fn revoke(env: &TestEnv, name: &str) {
    let _ = Api::<ClusterRoleBinding>::all(env.client())
        .delete(name, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRole>::all(env.client())
        .delete(name, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn tokens_are_reviewed_authorized_and_cached() {
    let env = TestEnv::shared().await;
    let secured = start(
        env,
        "authn-token",
        // a short denial cache, so the grant below is seen quickly
        &["--authorization-webhook-cache-unauthorized-ttl=1s".to_owned()],
    )
    .await;

    // no credentials: system:anonymous, allowed on the health paths only
    for path in ["/healthz", "/livez"] {
        assert_eq!(
            secured.get(path, Credentials::default()).await,
            (200, "ok".to_owned()),
            "{path}"
        );
    }
    assert_eq!(
        secured.get("/metrics", Credentials::default()).await,
        (403, ANONYMOUS_METRICS_FORBIDDEN.to_owned())
    );
    let (status, body) = secured.get("/configz", Credentials::default()).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&forbidden_message("system:anonymous", "/configz")),
        "{body}"
    );

    // a token the apiserver rejects: 401, even on a health path (as Go)
    let bad = [("Authorization", "Bearer not-a-valid-token")];
    let bad = Credentials {
        headers: &bad,
        ..Credentials::default()
    };
    assert_eq!(
        secured.get("/metrics", bad).await,
        (401, UNAUTHORIZED.to_owned())
    );
    assert_eq!(
        secured.get("/healthz", bad).await,
        (401, UNAUTHORIZED.to_owned())
    );

    // a ServiceAccount without the right to read /metrics: 403 naming it
    let ns = env.namespace("authn-sa").await;
    let token = service_account_token(env, &ns, "scraper").await;
    let header = format!("Bearer {token}");
    let headers = [("Authorization", header.as_str())];
    let with_token = Credentials {
        headers: &headers,
        ..Credentials::default()
    };
    let user = format!("system:serviceaccount:{ns}:scraper");
    let forbidden = wait_for("the token to be accepted", TIMEOUT, || async {
        let (status, body) = secured.get("/metrics", with_token).await;
        (status == 403).then_some(body)
    })
    .await
    .expect("403 for the ServiceAccount");
    assert!(
        forbidden.contains(&forbidden_message(&user, "/metrics")),
        "{forbidden}"
    );

    // with a ClusterRole allowing get on /metrics: 200
    let role = grant_metrics(env, &ns, "scraper").await;
    wait_for("the grant to take effect", TIMEOUT, || async {
        (secured.get("/metrics", with_token).await.0 == 200).then_some(())
    })
    .await
    .expect("200 once granted");

    // 100 scrapes with one token cost at most a handful of reviews: the answers are cached for 10s
    let (_, before) = secured.get("/metrics", with_token).await;
    let started = Instant::now();
    for _ in 0..100 {
        let (status, body) = secured.get("/metrics", with_token).await;
        assert_eq!(status, 200, "{body}");
    }
    let took = started.elapsed();
    let (_, after) = secured.get("/metrics", with_token).await;
    let reviews = |text: &str, name: &str| {
        metric(text, &format!("{name}_total{{code=\"201\"}}")).unwrap_or(0.0)
    };
    let token_reviews = reviews(&after, "apiserver_delegated_authn_request")
        - reviews(&before, "apiserver_delegated_authn_request");
    let access_reviews = reviews(&after, "apiserver_delegated_authz_request")
        - reviews(&before, "apiserver_delegated_authz_request");
    println!(
        "100 scrapes in {took:?}: {token_reviews} TokenReviews, {access_reviews} SubjectAccessReviews"
    );
    let allowed = 1.0 + (took.as_secs_f64() / 10.0).ceil();
    assert!(
        token_reviews <= allowed,
        "{token_reviews} TokenReviews in {took:?}"
    );
    assert!(
        access_reviews <= allowed,
        "{access_reviews} SubjectAccessReviews in {took:?}"
    );
    assert!(
        reviews(&after, "apiserver_delegated_authn_request") >= 1.0,
        "the first review was counted"
    );

    revoke(env, &role).await;
    secured.stop().await;
}

#[tokio::test]
async fn client_certificates_and_the_front_proxy() {
    let env = TestEnv::shared().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let client_ca = CertificateAuthority::generate().expect("a client CA");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, client_ca.cert_pem()).expect("write the client CA");
    // The request-header CA and names come from the cluster's ConfigMap (no --requestheader-client-ca-file).
    let secured = start(
        env,
        "authn-cert",
        &[format!("--client-ca-file={}", ca_file.display())],
    )
    .await;

    // a certificate of --client-ca-file authenticates as its common name, in the groups of its organizations
    let user = client_ca
        .issue_client("cert-user", &["devs"])
        .expect("issue");
    let as_user = (user.cert_pem.as_str(), user.key_pem.as_str());
    let (status, body) = secured
        .get(
            "/metrics",
            Credentials {
                client_cert: Some(as_user),
                ..Credentials::default()
            },
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&forbidden_message("cert-user", "/metrics")),
        "{body}"
    );
    let admin = client_ca
        .issue_client("cert-admin", &["system:masters"])
        .expect("issue");
    let (status, body) = secured
        .get(
            "/configz",
            Credentials {
                client_cert: Some((&admin.cert_pem, &admin.key_pem)),
                ..Credentials::default()
            },
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"clientCaFile\""), "{body}");

    // the front proxy (its certificate is signed by the ConfigMap's request-header CA and named in its allowed
    // names) names the user and groups in headers
    let proxy_cert = std::fs::read_to_string(&env.env().front_proxy_cert).expect("proxy cert");
    let proxy_key = std::fs::read_to_string(&env.env().front_proxy_key).expect("proxy key");
    let as_proxy = Some((proxy_cert.as_str(), proxy_key.as_str()));
    let masters = [
        ("X-Remote-User", "proxied-admin"),
        ("X-Remote-Group", "system:masters"),
    ];
    let (status, body) = secured
        .get(
            "/metrics",
            Credentials {
                client_cert: as_proxy,
                headers: &masters,
            },
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let plain = [("X-Remote-User", "proxied-user")];
    let (status, body) = secured
        .get(
            "/metrics",
            Credentials {
                client_cert: as_proxy,
                headers: &plain,
            },
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&forbidden_message("proxied-user", "/metrics")),
        "{body}"
    );

    // the same headers over a certificate that is not the proxy's are ignored: the certificate's own identity
    let (status, body) = secured
        .get(
            "/metrics",
            Credentials {
                client_cert: Some(as_user),
                headers: &masters,
            },
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&forbidden_message("cert-user", "/metrics")),
        "{body}"
    );

    // a certificate no trusted CA signed: 401 (the handshake itself succeeds, as with Go)
    let stranger = CertificateAuthority::generate()
        .expect("another CA")
        .issue_client("stranger", &["system:masters"])
        .expect("issue");
    let (status, body) = secured
        .get(
            "/metrics",
            Credentials {
                client_cert: Some((&stranger.cert_pem, &stranger.key_pem)),
                headers: &masters,
            },
        )
        .await;
    assert_eq!((status, body.as_str()), (401, UNAUTHORIZED), "{body}");

    secured.stop().await;
}

#[tokio::test]
async fn without_a_delegated_kubeconfig_only_always_allowed_paths_and_masters_pass() {
    let env = TestEnv::shared().await;
    let ns = env.namespace("authn-none").await;
    let label = env.unique_name("authn-none");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let client_ca = CertificateAuthority::generate().expect("a client CA");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, client_ca.cert_pem()).expect("write the client CA");
    let (_cloud, registry) = fake_cloud(&[]);
    let builder = ccm(registry, env.client());
    let mut args: Vec<String> = flags(&label, &ns, "none")
        .into_iter()
        .filter(|a| a != ALLOW_ADMIN_PATHS)
        .collect();
    args.push("--leader-elect=false".to_owned());
    args.push(format!("--client-ca-file={}", ca_file.display()));
    args.push("--authorization-always-allow-paths=/healthz,/readyz,/livez,/healthz/*".to_owned());
    let options = builder.parse_args(args).expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("start");
    let addr = running.admin_addr().expect("serving");
    let cert = running.admin_certificate_pem().expect("cert").to_owned();

    assert_eq!(
        https_get(addr, &cert, "/healthz").await,
        (200, "ok".to_owned())
    );
    assert_eq!(
        https_get(addr, &cert, "/healthz/ping").await,
        (200, "ok".to_owned())
    );
    assert_eq!(
        https_get(addr, &cert, "/metrics").await,
        (403, ANONYMOUS_METRICS_FORBIDDEN.to_owned())
    );
    // a bearer token is not checked without a TokenReview client: the request stays anonymous
    let headers = [("Authorization", "Bearer whatever")];
    let (status, body) = https_get_as(
        addr,
        &cert,
        "/metrics",
        Credentials {
            headers: &headers,
            ..Credentials::default()
        },
    )
    .await;
    assert_eq!((status, body.as_str()), (403, ANONYMOUS_METRICS_FORBIDDEN));
    let admin = client_ca
        .issue_client("cert-admin", &["system:masters"])
        .expect("issue");
    let (status, _) = https_get_as(
        addr,
        &cert,
        "/metrics",
        Credentials {
            client_cert: Some((&admin.cert_pem, &admin.key_pem)),
            ..Credentials::default()
        },
    )
    .await;
    assert_eq!(status, 200);

    shutdown.cancel();
    tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("stops in time")
        .expect("clean exit");
}

#[tokio::test]
async fn a_configmap_lookup_without_rights_is_fatal_unless_tolerated() {
    let env = TestEnv::shared().await;
    // a kubeconfig for a user without any RBAC rights
    let ca_pem = std::fs::read_to_string(&env.env().ca_cert).expect("the test CA");
    let ca_key = std::fs::read_to_string(&env.env().ca_key).expect("the test CA key");
    let ca = CertificateAuthority::from_pem(&ca_pem, &ca_key).expect("the test CA");
    let nobody = ca
        .issue_client(&env.unique_name("nobody"), &[])
        .expect("issue");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("nobody.kubeconfig");
    std::fs::write(
        &kubeconfig,
        ccm_testenv::kubeconfig::render(&ccm_testenv::kubeconfig::KubeconfigSpec {
            name: "nobody",
            server: &env.env().server,
            ca_pem: &ca_pem,
            client_cert_pem: &nobody.cert_pem,
            client_key_pem: &nobody.key_pem,
        }),
    )
    .expect("write the kubeconfig");
    let ns = env.namespace("authn-lookup").await;
    let label = env.unique_name("authn-lookup");
    let args = |tolerate: bool| {
        let mut args: Vec<String> = flags(&label, &ns, "lookup")
            .into_iter()
            .filter(|a| a != ALLOW_ADMIN_PATHS)
            .collect();
        args.push("--leader-elect=false".to_owned());
        args.push(format!(
            "--authentication-kubeconfig={}",
            kubeconfig.display()
        ));
        if tolerate {
            args.push("--authentication-tolerate-lookup-failure".to_owned());
        }
        args
    };

    // the ConfigMap cannot be read (403): the CCM does not start, and says what to do
    let (_cloud, registry) = fake_cloud(&[]);
    let builder = ccm(registry, env.client());
    let options = builder.parse_args(args(false)).expect("flags");
    let err = match builder.start(options, CancellationToken::new()).await {
        Ok(_) => panic!("started although the ConfigMap cannot be read"),
        Err(err) => err.to_string(),
    };
    assert!(
        err.contains(
            "cannot read the client CAs from configmap kube-system/extension-apiserver-authentication"
        ) && err.contains("extension-apiserver-authentication-reader")
            && err.contains("--authentication-tolerate-lookup-failure"),
        "{err}"
    );

    // tolerated: it starts; health paths answer, and a token it cannot review is rejected (401)
    let (_cloud, registry) = fake_cloud(&[]);
    let builder = ccm(registry, env.client());
    let options = builder.parse_args(args(true)).expect("flags");
    let shutdown = CancellationToken::new();
    let running = builder
        .start(options, shutdown.clone())
        .await
        .expect("starts when the lookup failure is tolerated");
    let addr = running.admin_addr().expect("serving");
    let cert = running.admin_certificate_pem().expect("cert").to_owned();
    assert_eq!(
        https_get(addr, &cert, "/healthz").await,
        (200, "ok".to_owned())
    );
    let headers = [("Authorization", "Bearer some-token")];
    let (status, body) = https_get_as(
        addr,
        &cert,
        "/healthz",
        Credentials {
            headers: &headers,
            ..Credentials::default()
        },
    )
    .await;
    assert_eq!((status, body.as_str()), (401, UNAUTHORIZED));
    shutdown.cancel();
    tokio::time::timeout(TIMEOUT, running.wait())
        .await
        .expect("stops in time")
        .expect("clean exit");
}
