//! The Acme example provider runs the conformance suite from its own test file, as a vendor would: one test per
//! clause, plus a check of the whole report.

#[path = "../examples/custom_provider/acme.rs"]
mod acme;

use ccm_conformance::{Clause, run_all};
use ccm_core::intercept::Capability;

ccm_conformance::provider_conformance_tests!(acme::factory);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_conforms_and_only_its_missing_capabilities_are_skipped() {
    let report = run_all(acme::factory).await;
    assert_eq!(report.provider, "acme");
    assert!(report.is_success(), "{report}");
    // V1 instances, zones and clusters are declared absent: not applicable, not skipped.
    for clause in report.not_applicable() {
        assert!(
            matches!(
                clause.capability(),
                Some(Capability::Instances | Capability::Zones)
            ),
            "{clause} is not applicable:\n{report}"
        );
    }
    // Only the error clauses that need an ErrorInjector (which the example leaves out) are skipped.
    assert_eq!(
        report.skipped(),
        [
            Clause::ErrorsLoadBalancerKindSurvivesWrapping,
            Clause::ErrorsRoutesKindSurvivesWrapping
        ],
        "{report}"
    );
    let passed = report.passed();
    assert!(
        passed.contains(&Clause::LoadBalancerUpdateReplacesHosts),
        "{report}"
    );
    assert!(
        passed.contains(&Clause::InstancesV2StoppedInstanceExists),
        "{report}"
    );
    assert!(passed.contains(&Clause::RoutesScopedToCluster), "{report}");
}
