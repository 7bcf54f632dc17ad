//! The controller scenarios against the real kube-apiserver (ccm-testenv) and the fake cloud.

use std::sync::Arc;
use std::time::Duration;

use ccm_conformance::Outcome;
use ccm_conformance::faults::{FaultInjector, FaultRule, InjectedError};
use ccm_conformance::scenarios::{Scenario, ScenarioOptions, controller_scenarios, run_scenario};
use ccm_core::CloudProvider;
use ccm_core::intercept::{InterceptedProvider, Operation};
use ccm_provider_fake::Capability;
use ccm_testenv::TestEnv;

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "ccm_conformance=debug,warn".into()),
        )
        .with_test_writer()
        .try_init();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_passes_every_scenario() {
    init_tracing();
    let env = TestEnv::shared().await;
    let (cloud, subject) = ccm_conformance::fake::subject_with_prefix(&env.unique_name("sc"));
    let options = ScenarioOptions::from_subject(&subject);
    let report = controller_scenarios(subject.provider.clone(), env.client(), &options).await;
    println!("{report}");
    assert_eq!(report.results.len(), Scenario::ALL.len());
    assert!(report.results.iter().all(|r| r.passed()), "{report}");
    // Everything the scenarios made in the cloud is gone again.
    assert!(
        cloud.load_balancers().is_empty(),
        "{:?}",
        cloud.load_balancers()
    );
    assert!(cloud.routes().is_empty(), "{:?}", cloud.routes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_converge_under_injected_cloud_faults() {
    init_tracing();
    let env = TestEnv::shared().await;
    let (_cloud, subject) = ccm_conformance::fake::subject_with_prefix(&env.unique_name("flt"));
    // Faults only on calls the controllers make (the scenarios themselves never call these operations).
    let faults = Arc::new(FaultInjector::new());
    let down = || InjectedError::Other("cloud api unavailable".into());
    faults.add(FaultRule::fail(Operation::InstanceExists, down()).times(3));
    faults.add(FaultRule::fail(Operation::InstanceShutdown, down()).times(2));
    faults.add(
        FaultRule::fail(
            Operation::EnsureLoadBalancer,
            InjectedError::Retry(Duration::from_millis(500)),
        )
        .times(2),
    );
    faults.add(FaultRule::fail(Operation::UpdateLoadBalancer, down()).once());
    // The route to the Node's pod CIDR (the first fixture CIDR) fails once.
    let pod_cidr = subject.fixture.route_cidrs[0].clone();
    faults.add(
        FaultRule::fail(Operation::CreateRoute, down())
            .for_target(pod_cidr)
            .once(),
    );
    faults.add(FaultRule::delay(
        Operation::CreateRoute,
        Duration::from_millis(300),
    ));
    let provider: Arc<dyn CloudProvider> = Arc::new(
        InterceptedProvider::new(subject.provider.clone()).with_shared_interceptor(faults.clone()),
    );
    let options = ScenarioOptions::from_subject(&subject).with_scenarios([
        Scenario::NodeLifecycle,
        Scenario::LoadBalancer,
        Scenario::Routes,
    ]);
    let report = controller_scenarios(provider, env.client(), &options).await;
    assert!(report.is_success(), "{report}");
    assert_eq!(faults.failed(Operation::InstanceExists), 3);
    assert_eq!(faults.failed(Operation::InstanceShutdown), 2);
    assert_eq!(faults.failed(Operation::EnsureLoadBalancer), 2);
    assert_eq!(faults.failed(Operation::UpdateLoadBalancer), 1);
    assert_eq!(faults.failed(Operation::CreateRoute), 1);
    assert!(faults.delayed(Operation::CreateRoute) >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_capability_skips_its_scenario() {
    init_tracing();
    let env = TestEnv::shared().await;
    let (cloud, subject) = ccm_conformance::fake::subject_with_prefix(&env.unique_name("cap"));
    cloud.set_capability(Capability::Routes, false);
    let options = ScenarioOptions::from_subject(&subject);
    let result = run_scenario(
        Scenario::Routes,
        subject.provider.clone(),
        env.client(),
        &options,
    )
    .await;
    assert_eq!(
        result.outcome,
        Outcome::Skipped {
            reason: "the provider does not support routes, so node-route-controller does not start"
                .into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_provider_fails_its_scenario_with_what_was_seen() {
    init_tracing();
    let env = TestEnv::shared().await;
    let (cloud, subject) = ccm_conformance::fake::subject_with_prefix(&env.unique_name("brk"));
    // The stopped instance is terminated behind the suite's back: its Node must go, not get tainted.
    let stopped = subject
        .fixture
        .stopped
        .clone()
        .expect("the fake fixture has a stopped instance");
    cloud.remove_instance(&stopped.node_name);
    let options = ScenarioOptions::from_subject(&subject).with_timeout(Duration::from_secs(5));
    let result = run_scenario(
        Scenario::NodeLifecycle,
        subject.provider.clone(),
        env.client(),
        &options,
    )
    .await;
    match &result.outcome {
        Outcome::Failed { message } => assert!(
            message.contains(&format!(
                "Node {} (instance stopped, NotReady)",
                stopped.node_name
            )) && message.contains("the Node was deleted, but a stopped instance still exists"),
            "{message}"
        ),
        other => panic!("{other:?}: {result}"),
    }
    assert!(
        result.steps.iter().any(|s| s.contains("to be deleted")),
        "{:?}",
        result.steps
    );
}
