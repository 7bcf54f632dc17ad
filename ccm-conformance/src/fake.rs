//! The suite's subject for the fake cloud of `ccm-provider-fake`: a cloud with a running, a stopped and two
//! more backend instances, the matching fixture, and an inspector reading the fake's load balancers.
//!
//! ```no_run
//! # async fn demo() {
//! let report = ccm_conformance::run_all(ccm_conformance::fake::factory).await;
//! assert!(report.is_complete(), "{report}");
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::BoxError;
use ccm_core::helpers::service_key;
use ccm_provider_fake::{FakeCloud, FakeInstance};
use k8s_openapi::api::core::v1::Service;

use crate::fixture::{ConformanceFixture, ConformanceSubject, InstanceRef, LoadBalancerInspector};

/// The running instance's node name.
pub const RUNNING: &str = "conformance-running";
/// The stopped instance's node name.
pub const STOPPED: &str = "conformance-stopped";
/// The other backend instances' node names.
pub const BACKENDS: [&str; 2] = ["conformance-backend-1", "conformance-backend-2"];

/// Node name, internal IP and external IP of each instance of [`cloud`].
const INSTANCES: [(&str, &str, &str); 4] = [
    (RUNNING, "10.0.0.11", "198.51.100.11"),
    (STOPPED, "10.0.0.12", "198.51.100.12"),
    (BACKENDS[0], "10.0.0.13", "198.51.100.13"),
    (BACKENDS[1], "10.0.0.14", "198.51.100.14"),
];

fn provider_id(name: &str) -> String {
    format!("{}://{name}", ccm_provider_fake::PROVIDER_NAME)
}

fn instance_ref(name: &str, internal_ip: &str) -> InstanceRef {
    InstanceRef::new(name)
        .with_provider_id(provider_id(name))
        .with_internal_ip(internal_ip)
        .with_address("Hostname", name)
}

/// A fake cloud holding the instances [`fixture`] names: every capability on, [`STOPPED`] shut down.
pub fn cloud() -> FakeCloud {
    let cloud = FakeCloud::new();
    for (name, internal, external) in INSTANCES {
        cloud.add_instance(
            FakeInstance::new(name)
                .with_internal_ip(internal)
                .with_external_ip(external)
                .with_hostname(name)
                .with_instance_type("fake.medium")
                .with_zone("zone-a", "region-1")
                .with_label("conformance.example.com/pool", "default")
                .with_shutdown(name == STOPPED),
        );
    }
    cloud
}

/// The fixture describing [`cloud`]: the running and stopped instances, three backend nodes, short time
/// limits (the fake answers at once). The unknown instance is left to the suite's default.
pub fn fixture() -> ConformanceFixture {
    let refs: Vec<InstanceRef> = INSTANCES
        .iter()
        .map(|(name, internal, _)| instance_ref(name, internal))
        .collect();
    let backends = vec![refs[0].clone(), refs[2].clone(), refs[3].clone()];
    ConformanceFixture::new()
        .with_running(refs[0].clone())
        .with_stopped(refs[1].clone())
        .with_backend_nodes(backends)
        .with_call_timeout(Duration::from_secs(10))
        .with_ready_timeout(Duration::from_secs(30))
        .with_clause_timeout(Duration::from_secs(60))
}

/// Reads the backends of a [`FakeCloud`]'s load balancers.
#[derive(Debug, Clone)]
pub struct FakeInspector(pub FakeCloud);

#[async_trait]
impl LoadBalancerInspector for FakeInspector {
    async fn backend_nodes(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<Vec<String>>, BoxError> {
        Ok(self
            .0
            .load_balancer(&service_key(service))
            .map(|lb| lb.hosts))
    }
}

/// A subject for `cloud` (built by [`cloud`], or changed afterwards), with [`fixture`] and a
/// [`FakeInspector`].
pub fn subject_for(cloud: FakeCloud) -> ConformanceSubject {
    ConformanceSubject::new(Arc::new(cloud.clone()), fixture()).with_inspector(FakeInspector(cloud))
}

/// A subject for a fresh [`cloud`].
pub fn subject() -> ConformanceSubject {
    subject_for(cloud())
}

/// A factory for [`run_all`](crate::run_all) and [`provider_conformance_tests!`](crate::provider_conformance_tests):
/// a fresh [`subject`] each time.
pub async fn factory() -> ConformanceSubject {
    subject()
}
