//! The SDK's provider conformance suite against the `{{name}}` provider: one test per clause (`cargo test`;
//! `CCM_CONFORMANCE_STRICT=1 cargo test` also fails any clause skipped without being declared absent).
//!
//! Each clause gets a fresh cloud from [`subject`]: the provider over an in-memory backend with the machines the
//! fixture names. When the backend is your real cloud's SDK, point the fixture at machines of a test account.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_conformance::{
    ConformanceFixture, ConformanceSubject, ErrorInjector, InstanceRef, LoadBalancerInspector,
};
use ccm_core::intercept::{Capability, Operation};
use ccm_core::{BoxError, CloudError, ErrorKind, LoadBalancer};
use k8s_openapi::api::core::v1::Service;
use {{crate_ident}}::{Backend, {{type_name}}};

const REGION: &str = "region-1";

const INVENTORY: &str = "\
worker-1 i-0001 zone-a 10.0.0.1 small running
worker-2 i-0002 zone-b 10.0.0.2 small stopped
worker-3 i-0003 zone-a 10.0.0.3 large running
worker-4 i-0004 zone-b 10.0.0.4 large running
";

fn worker(n: u32) -> InstanceRef {
    InstanceRef::new(format!("worker-{n}"))
        .with_provider_id(format!("{{name}}://{REGION}/i-{n:04}"))
        .with_internal_ip(format!("10.0.0.{n}"))
}

/// The machines the suite uses, and the capabilities the provider lacks on purpose.
fn fixture() -> ConformanceFixture {
    ConformanceFixture::new()
        .with_running(worker(1))
        .with_stopped(worker(2))
        .with_unknown(InstanceRef::new("ghost").with_provider_id(format!("{{name}}://{REGION}/i-9999")))
        .with_backend_nodes(vec![worker(1), worker(3), worker(4)])
        .with_call_timeout(Duration::from_secs(10))
        .without_capabilities([
            Capability::Instances,
            Capability::Zones,
            Capability::Clusters,
            Capability::Routes,
        ])
}

/// Reads a load balancer's members from the cloud (what the provider traits cannot report).
struct Inspector(Arc<{{type_name}}>, Arc<Backend>);

#[async_trait]
impl LoadBalancerInspector for Inspector {
    async fn backend_nodes(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<Vec<String>>, BoxError> {
        Ok(self.1.members(&self.0.get_load_balancer_name(cluster, service)))
    }
}

/// Makes the cloud fail the next call of an operation with its error for a kind. With a real SDK, make its test
/// double answer the cloud's own error (HTTP 404, 429, ...) so the provider's translation is checked.
struct Faults(Arc<Backend>);

#[async_trait]
impl ErrorInjector for Faults {
    async fn fail_next(&self, operation: Operation, kind: ErrorKind) -> Result<bool, BoxError> {
        let error = match kind {
            ErrorKind::InstanceNotFound => CloudError::InstanceNotFound,
            ErrorKind::NotImplemented => CloudError::NotImplemented,
            ErrorKind::Retry => CloudError::retry("provisioning", Duration::from_secs(1)),
            ErrorKind::Throttled => CloudError::Throttled {
                message: "rate limit exceeded".to_owned(),
                retry_after: Some(Duration::from_secs(1)),
            },
            _ => return Ok(false),
        };
        self.0.fail_next(operation, error.context("in-memory cloud"));
        Ok(true)
    }
}

/// A fresh cloud for one clause.
async fn subject() -> Result<ConformanceSubject, BoxError> {
    let backend = Arc::new(Backend::from_inventory(INVENTORY)?);
    let cloud = Arc::new({{type_name}}::new(REGION, Arc::clone(&backend)));
    Ok(ConformanceSubject::new(cloud.clone(), fixture())
        .with_inspector(Inspector(cloud, Arc::clone(&backend)))
        .with_error_injector(Faults(backend)))
}

ccm_conformance::provider_conformance_tests!(subject);
