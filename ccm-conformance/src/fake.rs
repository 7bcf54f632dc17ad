//! The suite's subject for the fake cloud of `ccm-provider-fake`: a cloud with a running, a stopped and two
//! more backend instances, the matching fixture, an inspector reading the fake's load balancers, and an error
//! injector arming the fake's faults.
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
use ccm_core::helpers::service_key;
use ccm_core::intercept::Operation;
use ccm_core::{BoxError, ErrorKind};
use ccm_provider_fake::{FakeCloud, FakeInstance, Fault, InjectedError};
use k8s_openapi::api::core::v1::Service;

use crate::fixture::{ConformanceFixture, InstanceRef};
use crate::subject::{ConformanceSubject, ErrorInjector, LoadBalancerInspector};

/// The prefix of the instance names of [`cloud`] and [`fixture`].
pub const DEFAULT_PREFIX: &str = "conformance";
/// The running instance's node name.
pub const RUNNING: &str = "conformance-running";
/// The stopped instance's node name.
pub const STOPPED: &str = "conformance-stopped";
/// The other backend instances' node names.
pub const BACKENDS: [&str; 2] = ["conformance-backend-1", "conformance-backend-2"];

/// Name suffix, internal IP and external IP of each instance, running first, then stopped, then the backends.
const INSTANCES: [(&str, &str, &str); 4] = [
    ("running", "10.0.0.11", "198.51.100.11"),
    ("stopped", "10.0.0.12", "198.51.100.12"),
    ("backend-1", "10.0.0.13", "198.51.100.13"),
    ("backend-2", "10.0.0.14", "198.51.100.14"),
];

fn provider_id(name: &str) -> String {
    format!("{}://{name}", ccm_provider_fake::PROVIDER_NAME)
}

/// A fake cloud holding the instances [`fixture`] names: every capability on (load-balancer listings one per
/// page, so that every listing is paginated), [`STOPPED`] shut down.
pub fn cloud() -> FakeCloud {
    cloud_with_prefix(DEFAULT_PREFIX)
}

/// Like [`cloud`], with instances named `<prefix>-running`, `<prefix>-stopped`, `<prefix>-backend-1` and
/// `<prefix>-backend-2` (for runs that share a Kubernetes API server, where Node names must be unique).
pub fn cloud_with_prefix(prefix: &str) -> FakeCloud {
    let cloud = FakeCloud::new();
    for (suffix, internal, external) in INSTANCES {
        let name = format!("{prefix}-{suffix}");
        cloud.add_instance(
            FakeInstance::new(name.as_str())
                .with_internal_ip(internal)
                .with_external_ip(external)
                .with_hostname(name.as_str())
                .with_instance_type("fake.medium")
                .with_zone("zone-a", "region-1")
                .with_label("conformance.example.com/pool", "default")
                .with_shutdown(suffix == "stopped"),
        );
    }
    cloud.set_listing(Some(1));
    cloud
}

/// The fixture describing [`cloud`]: the running and stopped instances, three backend nodes, short time
/// limits (the fake answers at once). The unknown instance is left to the suite's default.
pub fn fixture() -> ConformanceFixture {
    fixture_with_prefix(DEFAULT_PREFIX)
}

/// The fixture describing [`cloud_with_prefix`] with the same prefix.
pub fn fixture_with_prefix(prefix: &str) -> ConformanceFixture {
    let refs: Vec<InstanceRef> = INSTANCES
        .iter()
        .map(|(suffix, internal, _)| {
            let name = format!("{prefix}-{suffix}");
            InstanceRef::new(name.as_str())
                .with_provider_id(provider_id(&name))
                .with_internal_ip(*internal)
                .with_address("Hostname", name.as_str())
        })
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

/// Arms a [`FakeCloud`]'s faults: the next call of the operation fails with the fake's error of that kind.
#[derive(Debug, Clone)]
pub struct FakeErrorInjector(pub FakeCloud);

#[async_trait]
impl ErrorInjector for FakeErrorInjector {
    async fn fail_next(&self, operation: Operation, kind: ErrorKind) -> Result<bool, BoxError> {
        let error = match kind {
            ErrorKind::InstanceNotFound => InjectedError::InstanceNotFound,
            ErrorKind::NotImplemented => InjectedError::NotImplemented,
            ErrorKind::ImplementedElsewhere => InjectedError::ImplementedElsewhere,
            ErrorKind::Retry => InjectedError::Retry(Duration::from_secs(1)),
            ErrorKind::Throttled => InjectedError::Throttled,
            ErrorKind::Timeout => InjectedError::Timeout,
            ErrorKind::Other => {
                InjectedError::Other("injected by the conformance suite".to_owned())
            }
            _ => return Ok(false),
        };
        self.0.inject(operation, Fault::once(error));
        Ok(true)
    }
}

/// A subject for `cloud` (built by [`cloud`], or changed afterwards), with [`fixture`], a [`FakeInspector`]
/// and a [`FakeErrorInjector`].
pub fn subject_for(cloud: FakeCloud) -> ConformanceSubject {
    ConformanceSubject::new(Arc::new(cloud.clone()), fixture())
        .with_inspector(FakeInspector(cloud.clone()))
        .with_error_injector(FakeErrorInjector(cloud))
}

/// A subject for a fresh [`cloud_with_prefix`] with the matching fixture, a [`FakeInspector`] and a
/// [`FakeErrorInjector`]; returns the cloud too, to inspect or change it.
pub fn subject_with_prefix(prefix: &str) -> (FakeCloud, ConformanceSubject) {
    let cloud = cloud_with_prefix(prefix);
    let subject = ConformanceSubject::new(Arc::new(cloud.clone()), fixture_with_prefix(prefix))
        .with_inspector(FakeInspector(cloud.clone()))
        .with_error_injector(FakeErrorInjector(cloud.clone()));
    (cloud, subject)
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
