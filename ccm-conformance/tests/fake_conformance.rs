//! The fake cloud passes every clause: once as one test per clause (the vendor's way), once as a report.

use std::collections::BTreeSet;
use std::sync::Arc;

use ccm_conformance::{Clause, ConformanceSubject, Outcome, fake, run_all};
use ccm_core::intercept::Capability;
use ccm_provider_fake::Capability as FakeCapability;

ccm_conformance::provider_conformance_tests!(fake::factory);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_passes_every_clause() {
    let report = run_all(fake::factory).await;
    assert_eq!(report.provider, "fake");
    assert_eq!(report.results.len(), Clause::ALL.len());
    assert!(report.is_complete(), "{report}");
}

/// A fake with some capabilities switched off.
fn fake_without(capabilities: &[FakeCapability]) -> ConformanceSubject {
    let cloud = fake::cloud();
    for cap in capabilities {
        cloud.set_capability(*cap, false);
    }
    fake::subject_for(cloud)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_capabilities_are_skipped_with_the_reason_never_passed() {
    let report =
        run_all(|| async { fake_without(&[FakeCapability::LoadBalancer, FakeCapability::Routes]) })
            .await;
    assert!(report.is_success(), "{report}");
    let skipped: BTreeSet<Clause> = report.skipped().into_iter().collect();
    let expected: BTreeSet<Clause> = Clause::ALL
        .iter()
        .copied()
        .filter(|c| {
            matches!(
                c.capability(),
                Some(Capability::LoadBalancer | Capability::Routes)
            )
        })
        .collect();
    assert_eq!(skipped, expected, "{report}");
    let result = report
        .result(Clause::LoadBalancerEnsureReturnsStatus)
        .expect("ran");
    assert_eq!(
        result.outcome,
        Outcome::Skipped {
            reason: "the provider does not support load-balancer (CloudProvider::load_balancer() returned None); if that is on purpose, declare it with ConformanceFixture::without(Capability::LoadBalancer)".into()
        }
    );
    let routes = report.result(Clause::RoutesScopedToCluster).expect("ran");
    assert!(
        matches!(&routes.outcome, Outcome::Skipped { reason } if reason.contains("CloudProvider::routes()")),
        "{routes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_declared_absent_are_not_applicable_and_complete() {
    let report = run_all(|| async {
        let mut subject = fake_without(&[FakeCapability::LoadBalancer, FakeCapability::Routes]);
        subject.fixture = subject
            .fixture
            .without_capabilities([Capability::LoadBalancer, Capability::Routes]);
        subject
    })
    .await;
    assert!(report.is_complete(), "{report}");
    let not_applicable: BTreeSet<Clause> = report.not_applicable().into_iter().collect();
    let expected: BTreeSet<Clause> = Clause::ALL
        .iter()
        .copied()
        .filter(|c| {
            matches!(
                c.capability(),
                Some(Capability::LoadBalancer | Capability::Routes)
            )
        })
        .collect();
    assert_eq!(not_applicable, expected, "{report}");
    assert_eq!(
        report.result(Clause::RoutesScopedToCluster).expect("ran").outcome,
        Outcome::NotApplicable {
            reason: "the provider declares routes absent on purpose (CloudProvider::routes() returns None)".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_declared_absent_that_is_present_fails() {
    let report = run_all(|| async {
        let mut subject = fake::subject();
        subject.fixture = subject.fixture.without(Capability::Zones);
        subject
    })
    .await;
    let failed: BTreeSet<Clause> = report.failed().into_iter().collect();
    assert_eq!(
        failed,
        BTreeSet::from([
            Clause::ProviderCapabilitiesMatchDeclaration,
            Clause::ZonesByProviderIdAndNameAgree,
            Clause::ErrorsZonesKindSurvivesWrapping,
        ]),
        "{report}"
    );
    let zones = report
        .result(Clause::ZonesByProviderIdAndNameAgree)
        .expect("ran");
    assert!(
        zones.to_string().contains(
            "the fixture declares zones absent (ConformanceFixture::without), but CloudProvider::zones() returned Some"
        ),
        "{zones}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expected_capability_that_is_missing_fails() {
    let report = run_all(|| async {
        let mut subject = fake_without(&[FakeCapability::InstancesV2]);
        subject.fixture = subject.fixture.expect_capability(Capability::InstancesV2);
        subject
    })
    .await;
    let failed: BTreeSet<Clause> = report.failed().into_iter().collect();
    let v2: BTreeSet<Clause> = Clause::ALL
        .iter()
        .copied()
        .filter(|c| c.capability() == Some(Capability::InstancesV2))
        .chain([Clause::ProviderCapabilitiesMatchDeclaration])
        .collect();
    assert_eq!(failed, v2, "{report}");
    let declaration = report
        .result(Clause::ProviderCapabilitiesMatchDeclaration)
        .expect("ran");
    assert!(
        declaration.to_string().contains(
            "instances-v2 is expected (ConformanceFixture::expect_capability) but CloudProvider::instances_v2() returns None"
        ),
        "{declaration}"
    );
    let result = report
        .result(Clause::InstancesV2RunningInstanceExists)
        .expect("ran");
    assert!(
        result
            .to_string()
            .contains("the fixture expects the instances-v2 capability, but CloudProvider::instances_v2() returned None"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_gaps_and_explicit_skips_are_reported() {
    let report = run_all(|| async {
        let mut subject = fake::subject();
        subject.fixture.stopped = None;
        subject.fixture.backend_nodes.truncate(1);
        subject.inspector = None;
        subject.fixture = subject
            .fixture
            .skip(Clause::RoutesScopedToCluster, "one cluster per route table");
        subject
    })
    .await;
    assert!(report.is_success(), "{report}");
    let reason = |clause| match &report.result(clause).expect("ran").outcome {
        Outcome::Skipped { reason } => reason.clone(),
        other => panic!("{clause} was {other:?}, not skipped"),
    };
    assert!(reason(Clause::InstancesV2StoppedInstanceExists).contains("with_stopped"));
    assert!(reason(Clause::InstancesShutdownIsReported).contains("no stopped instance"));
    assert!(reason(Clause::LoadBalancerEnsureSetsHosts).contains("LoadBalancerInspector"));
    // A clause the fixture skips with a reason is declared not applicable, which strict mode accepts.
    assert_eq!(
        report
            .result(Clause::RoutesScopedToCluster)
            .expect("ran")
            .outcome,
        Outcome::NotApplicable {
            reason: "skipped by the fixture: one cluster per route table".into()
        }
    );
    // With an inspector but a single backend, the host clauses need more nodes.
    let report = run_all(|| async {
        let mut subject = fake::subject();
        subject.fixture.backend_nodes.truncate(1);
        subject
    })
    .await;
    match &report
        .result(Clause::LoadBalancerUpdateReplacesHosts)
        .expect("ran")
        .outcome
    {
        Outcome::Skipped { reason } => {
            assert!(reason.contains("at least two backend nodes"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_factory_fails_the_clause_with_its_error() {
    let report = ccm_conformance::run_clauses(&[Clause::ProviderNameIsValid], || async {
        Err::<ConformanceSubject, _>(std::io::Error::other("no credentials for the acme api"))
    })
    .await;
    let result = report.result(Clause::ProviderNameIsValid).expect("ran");
    assert_eq!(
        result.outcome,
        Outcome::Failed {
            message: "the factory could not create the provider under test: no credentials for the acme api".into()
        }
    );
    assert_eq!(report.provider, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_cleans_up_what_it_created() {
    let cloud = fake::cloud();
    let report = run_all(|| {
        let cloud = cloud.clone();
        async move { fake::subject_for(cloud) }
    })
    .await;
    assert!(report.is_complete(), "{report}");
    assert!(
        cloud.load_balancers().is_empty(),
        "{:?}",
        cloud.load_balancers()
    );
    assert!(cloud.routes().is_empty(), "{:?}", cloud.routes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_wrapped_in_interceptors_still_conforms() {
    let report = run_all(|| async {
        fake::subject().map_provider(|p| {
            Arc::new(
                ccm_core::intercept::InterceptedProvider::new(p)
                    .with_call_timeout(std::time::Duration::from_secs(5)),
            )
        })
    })
    .await;
    assert!(report.is_complete(), "{report}");
}
