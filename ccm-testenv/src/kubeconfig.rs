//! Rendering of kubeconfig files with embedded certificate data.

use base64::Engine as _;

/// What a kubeconfig with one cluster, one user and one context holds.
#[derive(Debug, Clone)]
pub struct KubeconfigSpec<'a> {
    /// Name of the cluster, user and context entries (e.g. `ccm-testenv`).
    pub name: &'a str,
    /// API server URL, e.g. `https://127.0.0.1:6443`.
    pub server: &'a str,
    /// PEM of the CA that signed the server certificate.
    pub ca_pem: &'a str,
    /// PEM client certificate of the user.
    pub client_cert_pem: &'a str,
    /// PEM private key of the user.
    pub client_key_pem: &'a str,
}

/// Renders `spec` as a kubeconfig YAML document (certificate data embedded as base64), readable
/// by `kubectl`, client-go and `kube::Config`.
///
/// ```
/// use ccm_testenv::kubeconfig::{render, KubeconfigSpec};
///
/// let yaml = render(&KubeconfigSpec {
///     name: "ccm-testenv",
///     server: "https://127.0.0.1:6443",
///     ca_pem: "ca",
///     client_cert_pem: "cert",
///     client_key_pem: "key",
/// });
/// assert!(yaml.contains("current-context: \"ccm-testenv\""));
/// ```
pub fn render(spec: &KubeconfigSpec<'_>) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let user = format!(
        "    client-certificate-data: {cert}\n    client-key-data: {key}\n",
        cert = b64(spec.client_cert_pem),
        key = b64(spec.client_key_pem),
    );
    document(spec.name, spec.server, spec.ca_pem, &user)
}

/// Renders a kubeconfig whose user authenticates with a bearer `token` (for example a
/// ServiceAccount token from a TokenRequest), for `server` signed by the CA `ca_pem`.
///
/// ```
/// use ccm_testenv::kubeconfig::render_token;
///
/// let yaml = render_token("ccm", "https://127.0.0.1:6443", "ca", "secret-token");
/// assert!(yaml.contains("token: \"secret-token\""));
/// ```
pub fn render_token(name: &str, server: &str, ca_pem: &str, token: &str) -> String {
    document(
        name,
        server,
        ca_pem,
        &format!("    token: {}\n", quote(token)),
    )
}

/// One cluster, one user (whose fields are `user`, already indented) and one context, all named
/// `name`.
fn document(name: &str, server: &str, ca_pem: &str, user: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let name = quote(name);
    format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {name}
  user:
{user}contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}
current-context: {name}
"#,
        server = quote(server),
    )
}

/// A YAML double-quoted scalar; JSON string escaping is valid YAML.
fn quote(value: &str) -> String {
    serde_json::Value::String(value.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> KubeconfigSpec<'static> {
        KubeconfigSpec {
            name: "ccm-testenv",
            server: "https://127.0.0.1:43210",
            ca_pem: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n",
            client_cert_pem: "-----BEGIN CERTIFICATE-----\nME\n-----END CERTIFICATE-----\n",
            client_key_pem: "-----BEGIN PRIVATE KEY-----\nK\n-----END PRIVATE KEY-----\n",
        }
    }

    #[test]
    fn kube_parses_rendered_kubeconfig() {
        let yaml = render(&spec());
        let parsed = kube::config::Kubeconfig::from_yaml(&yaml).expect("valid kubeconfig");
        assert_eq!(parsed.current_context.as_deref(), Some("ccm-testenv"));
        assert_eq!(parsed.clusters.len(), 1);
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:43210"));
        let ca = cluster
            .certificate_authority_data
            .as_deref()
            .expect("ca data");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(ca)
            .expect("base64");
        assert_eq!(decoded, spec().ca_pem.as_bytes());
        let user = parsed.auth_infos[0].auth_info.as_ref().expect("user");
        let cert = user.client_certificate_data.as_deref().expect("cert data");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(cert)
            .expect("base64");
        assert_eq!(decoded, spec().client_cert_pem.as_bytes());
        assert!(user.client_key_data.is_some());
        let context = parsed.contexts[0].context.as_ref().expect("context");
        assert_eq!(context.cluster, "ccm-testenv");
        assert_eq!(context.user.as_deref(), Some("ccm-testenv"));
    }

    #[test]
    fn token_kubeconfigs_carry_the_token() {
        let yaml = render_token("sa", "https://127.0.0.1:1", "ca-pem", "t0k3n");
        let parsed = kube::config::Kubeconfig::from_yaml(&yaml).expect("valid kubeconfig");
        let user = parsed.auth_infos[0].auth_info.as_ref().expect("user");
        assert!(user.client_certificate_data.is_none());
        assert!(user.token.is_some(), "the token is the user's credential");
        assert!(yaml.contains("    token: \"t0k3n\"\n"), "{yaml}");
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:1"));
    }

    #[test]
    fn names_with_special_characters_are_quoted() {
        let mut spec = spec();
        spec.name = "a: b # c";
        let yaml = render(&spec);
        let parsed = kube::config::Kubeconfig::from_yaml(&yaml).expect("valid kubeconfig");
        assert_eq!(parsed.current_context.as_deref(), Some("a: b # c"));
        assert_eq!(parsed.clusters[0].name, "a: b # c");
    }
}
