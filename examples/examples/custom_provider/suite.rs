//! The conformance wiring of the Acme provider (what a vendor's `tests/conformance.rs` holds): a fresh cloud
//! for each clause from a test inventory, the fixture naming its machines and the capabilities Acme lacks on
//! purpose, an inspector reading load-balancer members, and an error injector arming the API's own errors.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_conformance::{
    ConformanceFixture, ConformanceSubject, ErrorInjector, InstanceRef, LoadBalancerInspector,
};
use ccm_core::intercept::{Capability, Operation};
use ccm_core::{BoxError, CloudProvider, ErrorKind, LoadBalancer};
use k8s_openapi::api::core::v1::Service;

use crate::acme::AcmeCloud;
use crate::api::{AcmeApi, ApiError, Call};

/// The region of the test cloud.
pub const REGION: &str = "acme-1";

/// The test inventory: `worker-1` to `worker-4`, `worker-2` stopped.
pub const INVENTORY: &str = "\
machines:
  - {id: i-0001, name: worker-1, zone: acme-1a, ip: 192.168.10.1, size: a1.small, running: true}
  - {id: i-0002, name: worker-2, zone: acme-1b, ip: 192.168.10.2, size: a1.small, running: false}
  - {id: i-0003, name: worker-3, zone: acme-1a, ip: 192.168.10.3, size: a1.large, running: true}
  - {id: i-0004, name: worker-4, zone: acme-1b, ip: 192.168.10.4, size: a1.large, running: true}
";

fn worker(n: u32) -> InstanceRef {
    InstanceRef::new(format!("worker-{n}"))
        .with_provider_id(format!("acme://{REGION}/i-{n:04}"))
        .with_internal_ip(format!("192.168.10.{n}"))
}

/// What the suite needs to know about the test cloud.
pub fn fixture() -> ConformanceFixture {
    ConformanceFixture::new()
        .with_running(worker(1))
        .with_stopped(worker(2))
        .with_unknown(InstanceRef::new("ghost").with_provider_id(format!("acme://{REGION}/i-9999")))
        .with_backend_nodes(vec![worker(1), worker(3), worker(4)])
        .with_call_timeout(Duration::from_secs(10))
        .with_ready_timeout(Duration::from_secs(10))
        .with_clause_timeout(Duration::from_secs(60))
        .without_capabilities([
            Capability::Instances,
            Capability::Zones,
            Capability::Clusters,
            Capability::Routes,
        ])
}

/// Reads a load balancer's members from the API.
struct AcmeInspector(Arc<AcmeCloud>, Arc<AcmeApi>);

#[async_trait]
impl LoadBalancerInspector for AcmeInspector {
    async fn backend_nodes(
        &self,
        cluster: &str,
        service: &Service,
    ) -> Result<Option<Vec<String>>, BoxError> {
        let name = self.0.get_load_balancer_name(cluster, service);
        Ok(self.1.get_load_balancer(&name).await?.map(|b| b.members))
    }
}

/// Arms the API's own error for the kind the suite asks for.
struct AcmeFaults(Arc<AcmeApi>);

#[async_trait]
impl ErrorInjector for AcmeFaults {
    async fn fail_next(&self, operation: Operation, kind: ErrorKind) -> Result<bool, BoxError> {
        let call = match operation {
            Operation::InstanceExists
            | Operation::InstanceMetadata
            | Operation::InstanceShutdown => Call::Describe,
            Operation::GetLoadBalancer => Call::GetLoadBalancer,
            Operation::EnsureLoadBalancer | Operation::UpdateLoadBalancer => Call::PutLoadBalancer,
            Operation::EnsureLoadBalancerDeleted => Call::DeleteLoadBalancer,
            _ => return Ok(false),
        };
        let error = match kind {
            ErrorKind::InstanceNotFound => ApiError::NotFound("machine".to_owned()),
            ErrorKind::Throttled => ApiError::RateLimited(Duration::from_secs(1)),
            ErrorKind::Retry => ApiError::Provisioning("lb".to_owned(), Duration::from_secs(1)),
            _ => return Ok(false),
        };
        self.0.fail_next(call, error);
        Ok(true)
    }
}

/// A fresh Acme cloud for one clause.
///
/// # Errors
///
/// If the test inventory does not parse.
pub async fn factory() -> Result<ConformanceSubject, ApiError> {
    let api = Arc::new(AcmeApi::connect(REGION, INVENTORY).await?);
    let cloud = Arc::new(AcmeCloud {
        api: Arc::clone(&api),
    });
    Ok(
        ConformanceSubject::new(Arc::clone(&cloud) as Arc<dyn CloudProvider>, fixture())
            .with_inspector(AcmeInspector(cloud, Arc::clone(&api)))
            .with_error_injector(AcmeFaults(api)),
    )
}
