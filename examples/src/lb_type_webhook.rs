//! An admission webhook of the reference CCM (`ccm_app::webhook`): a validating webhook that rejects a
//! LoadBalancer Service whose annotation [`LOAD_BALANCER_TYPE_ANNOTATION`] names a load-balancer type the fake
//! cloud does not have ([`LOAD_BALANCER_TYPES`]), or any typed LoadBalancer Service when the provider offers no
//! load balancers. Enabled with `--webhooks=*` (or `--webhooks=load-balancer-type`); the API server calls it
//! through a `ValidatingWebhookConfiguration` (`deploy/` has a sample, off by default).

use ccm_app::webhook::{
    AdmissionRequest, AdmissionResponse, DynamicObject, WebhookContext, WebhookDescriptor,
};
use ccm_core::BoxError;
use k8s_openapi::api::core::v1::Service;

/// The webhook's name in `--webhooks` and in the metrics.
pub const NAME: &str = "load-balancer-type";

/// Its name in a `ValidatingWebhookConfiguration`.
pub const CONFIGURATION_NAME: &str = "load-balancer-type.fake.ccm-rs.io";

/// The path it is served on.
pub const PATH: &str = "/validate-load-balancer-type";

/// The Service annotation naming the load-balancer type.
pub const LOAD_BALANCER_TYPE_ANNOTATION: &str = "fake.ccm-rs.io/load-balancer-type";

/// The load-balancer types of the fake cloud.
pub const LOAD_BALANCER_TYPES: &[&str] = &["network", "application"];

/// The webhook, for [`ccm_app::CcmBuilder::register_webhook`].
pub fn descriptor() -> WebhookDescriptor {
    WebhookDescriptor::new(NAME, PATH, review)
}

/// Its entry in the sample `ValidatingWebhookConfiguration` of `deploy/webhook/webhook.yaml`: Service creates and updates.
pub fn manifest() -> ccm_app::deploy::WebhookManifest {
    ccm_app::deploy::WebhookManifest::new(
        CONFIGURATION_NAME,
        PATH,
        "",
        &["services"],
        &["CREATE", "UPDATE"],
    )
}

/// Allow or deny one admission request.
///
/// # Errors
///
/// If the object in the request is not a Service.
pub async fn review(
    ctx: WebhookContext,
    request: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, BoxError> {
    let response = AdmissionResponse::from(&request);
    // DELETE has no object; other kinds are not this webhook's business.
    let Some(object) = &request.object else {
        return Ok(response);
    };
    if request.kind.kind != "Service" {
        return Ok(response);
    }
    let service: Service = object.clone().try_parse()?;
    Ok(
        match decide(&service, ctx.provider().clone().load_balancer().is_some()) {
            Ok(()) => response,
            Err(reason) => response.deny(reason),
        },
    )
}

/// The decision: `Err(message)` to deny. Only LoadBalancer Services with the annotation are checked.
///
/// ```
/// use examples::lb_type_webhook::{LOAD_BALANCER_TYPE_ANNOTATION, decide};
/// let mut service = k8s_openapi::api::core::v1::Service::default();
/// service.spec.get_or_insert_default().type_ = Some("LoadBalancer".to_owned());
/// service.metadata.annotations = Some([(LOAD_BALANCER_TYPE_ANNOTATION.to_owned(), "gateway".to_owned())].into());
/// assert!(decide(&service, true).unwrap_err().contains("\"gateway\""));
/// ```
///
/// # Errors
///
/// The message the API server shows the client.
pub fn decide(service: &Service, cloud_has_load_balancers: bool) -> Result<(), String> {
    let is_load_balancer = service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_some_and(|t| t == "LoadBalancer");
    let requested = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LOAD_BALANCER_TYPE_ANNOTATION));
    let (true, Some(requested)) = (is_load_balancer, requested) else {
        return Ok(());
    };
    if !cloud_has_load_balancers {
        return Err(format!(
            "the fake cloud offers no load balancers, so the load-balancer type {requested:?} \
             ({LOAD_BALANCER_TYPE_ANNOTATION}) cannot be provided"
        ));
    }
    if LOAD_BALANCER_TYPES.contains(&requested.as_str()) {
        return Ok(());
    }
    Err(format!(
        "the fake cloud has no load-balancer type {requested:?} ({LOAD_BALANCER_TYPE_ANNOTATION}); use one of: {}",
        LOAD_BALANCER_TYPES.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(type_: &str, annotation: Option<&str>) -> Service {
        let mut service = Service::default();
        service.spec.get_or_insert_default().type_ = Some(type_.to_owned());
        service.metadata.annotations =
            annotation.map(|a| [(LOAD_BALANCER_TYPE_ANNOTATION.to_owned(), a.to_owned())].into());
        service
    }

    #[test]
    fn decisions() {
        assert_eq!(
            decide(&service("LoadBalancer", Some("network")), true),
            Ok(())
        );
        assert_eq!(decide(&service("LoadBalancer", None), true), Ok(()));
        assert_eq!(decide(&service("ClusterIP", Some("gateway")), true), Ok(()));
        assert_eq!(
            decide(&service("LoadBalancer", Some("gateway")), true).unwrap_err(),
            "the fake cloud has no load-balancer type \"gateway\" (fake.ccm-rs.io/load-balancer-type); use one of: \
             network, application"
        );
        assert!(
            decide(&service("LoadBalancer", Some("network")), false)
                .unwrap_err()
                .starts_with("the fake cloud offers no load balancers")
        );
    }
}
