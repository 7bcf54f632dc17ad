//! LoadBalancer Services for tests that run a service controller against the test control plane: a Service as a
//! test writes one, its ingress, and waiting for the load balancer. The one copy of this harness for the service
//! controller's tests; the other harnesses' Service builders can move here.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;

use crate::{WaitError, wait_for};

/// A `type: LoadBalancer` Service as a test writes it: selector `app=<name>`, the ports and labels a test gives
/// it, in the namespace a test gives it (none: the namespace of the `Api` it is created through).
///
/// ```
/// use ccm_testenv::services::TestService;
///
/// let svc = TestService::load_balancer("web").with_tcp_port("http", 80, Some(8080)).into_service();
/// let spec = svc.spec.unwrap();
/// assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
/// assert_eq!(spec.ports.unwrap()[0].port, 80);
/// ```
#[derive(Debug, Clone)]
pub struct TestService {
    service: Service,
}

impl TestService {
    /// The LoadBalancer Service `name`, selecting the pods labelled `app=<name>`, without ports.
    pub fn load_balancer(name: &str) -> Self {
        let mut service = Service {
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".to_owned()),
                selector: Some(BTreeMap::from([("app".to_owned(), name.to_owned())])),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        service.metadata.name = Some(name.to_owned());
        TestService { service }
    }

    /// Puts the Service in `namespace`.
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.service.metadata.namespace = Some(namespace.to_owned());
        self
    }

    /// Adds the label `key=value`.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        let labels = self
            .service
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new);
        labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets the pod selector to `key=value` (instead of `app=<name>`).
    pub fn with_selector(mut self, key: &str, value: &str) -> Self {
        let spec = self.service.spec.get_or_insert_with(ServiceSpec::default);
        spec.selector = Some(BTreeMap::from([(key.to_owned(), value.to_owned())]));
        self
    }

    /// Adds the TCP port `name` on `port`, to `target_port` on the pods (none: the same as `port`).
    pub fn with_tcp_port(mut self, name: &str, port: i32, target_port: Option<i32>) -> Self {
        let spec = self.service.spec.get_or_insert_with(ServiceSpec::default);
        spec.ports.get_or_insert_with(Vec::new).push(ServicePort {
            name: Some(name.to_owned()),
            protocol: Some("TCP".to_owned()),
            port,
            target_port: target_port.map(IntOrString::Int),
            ..ServicePort::default()
        });
        self
    }

    /// The Service.
    pub fn into_service(self) -> Service {
        self.service
    }
}

/// The IP of the first ingress point in the Service's `status.loadBalancer`, if any.
///
/// ```
/// use ccm_testenv::services::{TestService, ingress_ip};
///
/// assert_eq!(ingress_ip(&TestService::load_balancer("web").into_service()), None);
/// ```
pub fn ingress_ip(service: &Service) -> Option<String> {
    let status = service.status.as_ref()?.load_balancer.as_ref()?;
    status.ingress.as_ref()?.first()?.ip.clone()
}

/// Waits until the Service `name` (read through `services`) shows an ingress IP in its status, and returns it;
/// read errors count as "not yet".
///
/// ```no_run
/// use std::time::Duration;
/// use ccm_testenv::services::wait_for_ingress;
/// use k8s_openapi::api::core::v1::Service;
/// use kube::Api;
///
/// # async fn demo(services: Api<Service>) -> Result<(), ccm_testenv::WaitError> {
/// let ip = wait_for_ingress(&services, "web", Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`WaitError`] when no ingress IP appears within `timeout`.
pub async fn wait_for_ingress(
    services: &Api<Service>,
    name: &str,
    timeout: Duration,
) -> Result<String, WaitError> {
    wait_for(&format!("ingress of {name}"), timeout, || async {
        let service = services.get_opt(name).await.ok().flatten()?;
        ingress_ip(&service)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};

    #[test]
    fn a_test_service_is_a_load_balancer_with_what_the_test_gives_it() {
        let svc = TestService::load_balancer("web")
            .in_namespace("ns")
            .with_label("run", "r1")
            .with_tcp_port("http", 80, Some(8080))
            .with_tcp_port("https", 443, None)
            .into_service();
        assert_eq!(svc.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(svc.metadata.labels.unwrap()["run"], "r1");
        let spec = svc.spec.unwrap();
        assert_eq!(spec.selector.unwrap()["app"], "web");
        let ports = spec.ports.unwrap();
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].target_port, Some(IntOrString::Int(8080)));
        assert_eq!((ports[1].port, ports[1].target_port.clone()), (443, None));
        let selected = TestService::load_balancer("web").with_selector("tier", "front");
        let selector = selected.into_service().spec.unwrap().selector.unwrap();
        assert_eq!(
            selector,
            BTreeMap::from([("tier".to_owned(), "front".to_owned())])
        );
    }

    #[test]
    fn the_ingress_ip_is_the_first_ingress_point() {
        let mut svc = TestService::load_balancer("web").into_service();
        assert_eq!(ingress_ip(&svc), None);
        let point = |ip: &str| LoadBalancerIngress {
            ip: Some(ip.to_owned()),
            ..LoadBalancerIngress::default()
        };
        svc.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![point("203.0.113.1"), point("203.0.113.2")]),
            }),
            ..ServiceStatus::default()
        });
        assert_eq!(ingress_ip(&svc).as_deref(), Some("203.0.113.1"));
    }
}
