//! The Acme example provider runs the conformance suite from its own test file, as a vendor would: one test per
//! clause (strict mode passes: every capability Acme lacks is declared), a check of the whole report, and its
//! factory with the vendor flag `--acme-region`.

#[path = "../examples/custom_provider/acme.rs"]
mod acme;
#[path = "../examples/custom_provider/api.rs"]
mod api;
#[path = "../examples/custom_provider/suite.rs"]
mod suite;

use std::sync::Arc;

use ccm_conformance::faults::FaultInjector;
use ccm_conformance::{Clause, run_all};
use ccm_core::intercept::{Capability, InterceptedProvider};
use ccm_core::{CloudProvider, ErrorKind, ProviderSettings, VendorSettings};
use clap::Parser as _;

ccm_conformance::provider_conformance_tests!(suite::factory);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_conforms_and_only_its_absent_capabilities_are_not_applicable() {
    let report = run_all(suite::factory).await;
    assert_eq!(report.provider, "acme");
    assert!(report.is_success(), "{report}");
    assert!(report.skipped().is_empty(), "{report}");
    for clause in report.not_applicable() {
        // Acme does not list its load balancers: a starting controller ensures every Service, as Go's does.
        assert!(
            clause == Clause::LoadBalancerListingReportsEnsured
                || matches!(
                    clause.capability(),
                    Some(Capability::Instances | Capability::Zones | Capability::Routes)
                ),
            "{clause} is not applicable:\n{report}"
        );
    }
    let passed = report.passed();
    for clause in [
        Clause::LoadBalancerUpdateReplacesHosts,
        Clause::InstancesV2StoppedInstanceExists,
        Clause::ErrorsLoadBalancerKindSurvivesWrapping,
        Clause::ErrorsInstancesV2KindSurvivesWrapping,
    ] {
        assert!(passed.contains(&clause), "{clause}: {report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_conforms_through_a_flaky_cloud() {
    // The first ensures answer "retry after", every call is slowed down: the provider still conforms. (The
    // error-kind clause is left out: its own injected errors would meet the interceptor's first.)
    let flaky = || async {
        let faults = FaultInjector::from_spec("create=retry:100ms*3; *=latency:5ms")?;
        let mut subject = suite::factory()
            .await?
            .map_provider(|p| Arc::new(InterceptedProvider::new(p).with_interceptor(faults)));
        subject.injector = None;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(subject)
    };
    let report = run_all(flaky).await;
    assert!(report.failed().is_empty(), "{report}");
    assert!(
        report
            .passed()
            .contains(&Clause::LoadBalancerEnsureIsIdempotent),
        "{report}"
    );
}

/// The flags of the Acme CCM (`main.rs` adds them with `with_vendor_args::<AcmeArgs>()`).
#[derive(Debug, clap::Parser)]
struct Cli {
    #[command(flatten)]
    acme: acme::AcmeArgs,
}

fn offline_client() -> kube::Client {
    kube::Client::new(
        tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                "offline",
            ))
        }),
        "default",
    )
}

#[tokio::test]
async fn the_factory_reads_the_region_flag_and_the_inventory() {
    let args = Cli::try_parse_from(["acme-ccm", "--acme-region=acme-2"]).unwrap();
    let settings = ProviderSettings::new(offline_client())
        .with_cloud_config(suite::INVENTORY.as_bytes().to_vec())
        .with_vendor(VendorSettings::new().with_args(args.acme));
    let cloud: Arc<dyn CloudProvider> = acme::factory(settings).await.unwrap();
    let v2 = Arc::clone(&cloud).instances_v2().unwrap();
    let node = ccm_conformance::InstanceRef::new("worker-3").node_without_provider_id();
    let found = v2.instance_metadata(&node).await.unwrap();
    let ccm_core::InstanceLookup::Found(metadata) = found else {
        panic!("worker-3 is in the inventory: {found:?}");
    };
    assert_eq!(metadata.provider_id, "acme://acme-2/i-0003");
    assert_eq!(metadata.region, "acme-2");
    assert_eq!(metadata.instance_type, "a1.large");

    // An old providerID of another region is not this cloud's machine; an unknown one is InstanceNotFound.
    let elsewhere =
        ccm_conformance::InstanceRef::new("worker-3").with_provider_id("acme://acme-1/i-0003");
    assert!(v2.instance_metadata(&elsewhere.node()).await.is_err());
    let ghost = ccm_conformance::InstanceRef::new("ghost").with_provider_id("acme://acme-2/i-9999");
    let err = v2.instance_metadata(&ghost.node()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InstanceNotFound, "{err}");
    assert!(!v2.instance_exists(&ghost.node()).await.unwrap());

    // The inventory the example's docs run it with.
    let shipped = ProviderSettings::new(offline_client())
        .with_cloud_config(include_bytes!("../acme-inventory.yaml").to_vec());
    let cloud = acme::factory(shipped).await.unwrap();
    let v2 = Arc::clone(&cloud).instances_v2().unwrap();
    let worker = ccm_conformance::InstanceRef::new("worker-1").node_without_provider_id();
    assert!(v2.instance_exists(&worker).await.unwrap());

    let defaults = Cli::try_parse_from(["acme-ccm"]).unwrap();
    assert_eq!(defaults.acme.region, "acme-1");
    let no_config = ProviderSettings::new(offline_client());
    let err = acme::factory(no_config).await.err().unwrap();
    assert!(err.to_string().contains("--cloud-config"), "{err}");
    let bad = ProviderSettings::new(offline_client()).with_cloud_config(b"machines: 3".to_vec());
    let err = acme::factory(bad).await.err().unwrap();
    assert!(
        err.to_string().starts_with("400 bad request: inventory"),
        "{err}"
    );
}

#[test]
fn the_acme_ccm_lists_its_flag_under_its_own_heading() {
    let builder = ccm_app::CloudControllerManager::builder(ccm_core::ProviderRegistry::new())
        .with_vendor_args::<acme::AcmeArgs>()
        .with_command_name("acme-ccm")
        .with_about("The Acme cloud controller manager.");
    let help = builder.command().render_long_help().to_string();
    // The CCM's description, not the doc comment of AcmeArgs.
    assert!(
        help.starts_with("The Acme cloud controller manager."),
        "{help}"
    );
    let heading = help.find("\nAcme:\n").expect("an Acme section");
    assert!(help[heading..].contains("--acme-region <REGION>"), "{help}");
    assert!(help[heading..].contains("ACME_REGION"), "{help}");
}
