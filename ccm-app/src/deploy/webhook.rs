//! `webhook/webhook.yaml`: what exposes the CCM's admission webhooks (`crate::webhook`), off by default — a Service in front
//! of the webhook port and a sample `ValidatingWebhookConfiguration` with `failurePolicy: Ignore`. To turn them
//! on, add `--webhooks=...` to the CCM's arguments, set the configuration's `caBundle` to the CA of the webhook
//! certificate (the PEM of `--webhook-tls-cert-file`'s issuer, or of the self-signed pair in
//! `--webhook-cert-dir`), and apply the file (`docs/deployment.md`).

use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::{ManifestOptions, fill};

/// The Service port the API server calls (the container's port is `--webhook-secure-port`).
pub(crate) const SERVICE_PORT: i32 = 443;

/// One webhook of the sample configuration.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WebhookManifest {
    /// The webhook's name in the configuration: a fully qualified name such as `lb-type.acme.example`.
    pub name: String,
    /// The path the CCM serves it on (the path given to `crate::webhook::WebhookDescriptor::new`).
    pub path: String,
    /// What it is called for.
    pub rules: Vec<RuleWithOperations>,
}

impl WebhookManifest {
    /// The webhook `name` on `path`, called for `operations` (`CREATE`, `UPDATE`, ...) of `resources` in the API
    /// group `group` (`""` for the core group), every version.
    ///
    /// ```
    /// let hook = ccm_app::deploy::WebhookManifest::new("lb.acme.example", "/validate-lb", "", &["services"], &["CREATE"]);
    /// assert_eq!(hook.rules[0].resources.as_deref(), Some(&["services".to_owned()][..]));
    /// ```
    pub fn new(
        name: &str,
        path: &str,
        group: &str,
        resources: &[&str],
        operations: &[&str],
    ) -> Self {
        let strings = |items: &[&str]| items.iter().map(|i| (*i).to_owned()).collect();
        WebhookManifest {
            name: name.to_owned(),
            path: path.to_owned(),
            rules: vec![RuleWithOperations {
                api_groups: Some(vec![group.to_owned()]),
                api_versions: Some(vec!["*".to_owned()]),
                operations: Some(strings(operations)),
                resources: Some(strings(resources)),
                ..RuleWithOperations::default()
            }],
        }
    }
}

/// The name of the webhook Service and of the sample configuration: `<name>-webhook`.
pub(crate) fn webhook_service_name(options: &ManifestOptions) -> String {
    format!("{}-webhook", options.name)
}

/// The Service in front of the webhook port of the CCM's Pods.
pub(crate) fn webhook_service(options: &ManifestOptions) -> Service {
    fill(options, "webhookService", Value::Null)
}

/// The sample configuration: every webhook of `options.webhooks` through the Service, `failurePolicy: Ignore`
/// (a CCM that is down or not yet trusted blocks nothing), an empty `caBundle` to fill in.
pub(crate) fn validating_webhook_configuration(
    options: &ManifestOptions,
) -> ValidatingWebhookConfiguration {
    let webhooks: Vec<Value> = options
        .webhooks
        .iter()
        .map(|hook| {
            let values = json!({ "hookName": hook.name, "path": hook.path, "rules": hook.rules });
            fill(options, "webhook", values)
        })
        .collect();
    fill(
        options,
        "validatingWebhookConfiguration",
        json!({ "webhooks": webhooks }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    #[test]
    fn the_service_reaches_the_webhook_port_and_the_sample_ignores_failures() {
        let options =
            ManifestOptions::new("example.invalid/ccm:1").with_webhook(WebhookManifest::new(
                "lb.acme.example",
                "/validate-lb",
                "",
                &["services"],
                &["CREATE", "UPDATE"],
            ));
        let service = webhook_service(&options);
        let port = &service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
        assert_eq!(port.port, 443);
        assert_eq!(port.target_port, Some(IntOrString::Int(10260)));
        let config = validating_webhook_configuration(&options);
        let hook = &config.webhooks.as_ref().unwrap()[0];
        assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
        let target = hook.client_config.service.as_ref().unwrap();
        assert_eq!(
            (
                target.name.as_str(),
                target.namespace.as_str(),
                target.path.as_deref()
            ),
            (
                "cloud-controller-manager-webhook",
                "kube-system",
                Some("/validate-lb")
            )
        );
    }
}
