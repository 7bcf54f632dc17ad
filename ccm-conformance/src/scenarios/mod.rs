//! Controller-level conformance: the real controllers of this SDK (cloud node, node lifecycle, service, route)
//! run against a provider and a Kubernetes API server through short scenarios, each with a pass/fail result.
//!
//! Where the contract clauses call the provider directly, the scenarios check what a cluster sees: Nodes
//! initialized with the cloud's providerID, labels and addresses; Nodes of vanished instances deleted and
//! stopped ones tainted; Services getting a load-balancer ingress and releasing the load balancer on deletion;
//! routes created for pod CIDRs with `NetworkUnavailable=False`.
//!
//! Run them against a throw-away control plane (`cargo xtask controlplane start`, or `ccm-testenv`): they
//! create and delete Nodes named after the fixture's instances, a namespace and a Service. Every object carries
//! the label [`RUN_LABEL`] and the controllers only watch objects with it, so nothing else in the cluster is
//! touched. The route scenario uses a cluster name of its own (`ccm-conformance-<run id>`), so the route
//! controller cannot delete routes of a real cluster.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ccm_conformance::scenarios::{controller_scenarios, ScenarioOptions};
//!
//! # async fn demo(client: kube::Client) {
//! let subject = ccm_conformance::fake::subject();
//! let report = controller_scenarios(subject.provider.clone(), client, &ScenarioOptions::from_subject(&subject)).await;
//! println!("{report}");
//! assert!(report.is_success());
//! # }
//! ```

mod load_balancer;
mod node_initialization;
mod node_lifecycle;
mod routes;
mod world;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ccm_core::intercept::Capability;
use ccm_core::{CloudProvider, names};
use tokio::time::Instant;

use crate::context::Stop;
use crate::fixture::ConformanceFixture;
use crate::report::{Outcome, format_elapsed};
use crate::subject::{ConformanceSubject, LoadBalancerInspector};

use self::load_balancer::load_balancer;
use self::node_initialization::node_initialization;
use self::node_lifecycle::node_lifecycle;
use self::routes::routes;
use self::world::World;

/// The label on every object a scenario creates; its value is the scenario run's id, and the controllers
/// watch only Nodes with it.
pub const RUN_LABEL: &str = "conformance.ccm.example.com/run";

/// How often a scenario looks at the cluster and the cloud while waiting.
const POLL: Duration = Duration::from_millis(200);

/// One controller-level scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Scenario {
    /// A Node registered with the uninitialized taint gets the cloud's providerID, topology and instance-type
    /// labels and addresses, and loses the taint (cloud node controller).
    NodeInitialization,
    /// A NotReady Node whose instance is gone is deleted; a NotReady Node of a stopped instance gets the
    /// shutdown taint and keeps it until Ready; a Ready Node is left alone (cloud node lifecycle controller).
    NodeLifecycle,
    /// A `type: LoadBalancer` Service gets the finalizer and an ingress matching the cloud's, its backends
    /// follow the Nodes, and deleting it deletes the load balancer (service controller).
    LoadBalancer,
    /// A Node's pod CIDR gets a route and `NetworkUnavailable=False/RouteCreated`, a stale route in the
    /// cluster CIDR is removed, and deleting the Node removes its route (route controller).
    Routes,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 4] = [
        Scenario::NodeInitialization,
        Scenario::NodeLifecycle,
        Scenario::LoadBalancer,
        Scenario::Routes,
    ];

    /// A stable lower-case name (`node-initialization`, `node-lifecycle`, `load-balancer`, `routes`).
    pub fn id(self) -> &'static str {
        match self {
            Scenario::NodeInitialization => "node-initialization",
            Scenario::NodeLifecycle => "node-lifecycle",
            Scenario::LoadBalancer => "load-balancer",
            Scenario::Routes => "routes",
        }
    }

    /// The scenario with this [`id`](Scenario::id).
    pub fn from_id(id: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The controller the scenario exercises.
    pub fn controller(self) -> &'static str {
        match self {
            Scenario::NodeInitialization => names::controllers::CLOUD_NODE,
            Scenario::NodeLifecycle => names::controllers::CLOUD_NODE_LIFECYCLE,
            Scenario::LoadBalancer => names::controllers::SERVICE_LB,
            Scenario::Routes => names::controllers::NODE_ROUTE,
        }
    }

    fn short(self) -> &'static str {
        match self {
            Scenario::NodeInitialization => "init",
            Scenario::NodeLifecycle => "life",
            Scenario::LoadBalancer => "lb",
            Scenario::Routes => "route",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// What the scenarios need besides the provider and a client.
#[derive(Clone)]
#[non_exhaustive]
pub struct ScenarioOptions {
    /// The instances to use (running, stopped, unknown, backends, route target, route CIDRs), as for the
    /// contract clauses.
    pub fixture: ConformanceFixture,
    /// Reads load-balancer backends, if available (the backend steps are left out without it).
    pub inspector: Option<Arc<dyn LoadBalancerInspector>>,
    /// How long each awaited state may take (default 60 s).
    pub timeout: Duration,
    /// The `--cluster-cidr` of the route scenario; must contain the fixture's route CIDRs (default
    /// `10.244.0.0/16`).
    pub cluster_cidr: String,
    /// The cluster name of the route scenario (default `ccm-conformance-<run id>`, so no real cluster's routes
    /// are in its view).
    pub route_cluster_name: Option<String>,
    /// The scenarios to run (default: all).
    pub scenarios: Vec<Scenario>,
}

impl fmt::Debug for ScenarioOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScenarioOptions")
            .field("fixture", &self.fixture)
            .field("inspector", &self.inspector.is_some())
            .field("timeout", &self.timeout)
            .field("cluster_cidr", &self.cluster_cidr)
            .field("route_cluster_name", &self.route_cluster_name)
            .field("scenarios", &self.scenarios)
            .finish()
    }
}

impl ScenarioOptions {
    /// Options for `fixture`, with the defaults.
    pub fn new(fixture: ConformanceFixture) -> Self {
        ScenarioOptions {
            fixture,
            inspector: None,
            timeout: Duration::from_secs(60),
            cluster_cidr: "10.244.0.0/16".to_owned(),
            route_cluster_name: None,
            scenarios: Scenario::ALL.to_vec(),
        }
    }

    /// Options with the fixture and inspector of a conformance subject.
    pub fn from_subject(subject: &ConformanceSubject) -> Self {
        let mut options = Self::new(subject.fixture.clone());
        options.inspector = subject.inspector.clone();
        options
    }

    /// Set the inspector.
    pub fn with_inspector(mut self, inspector: Arc<dyn LoadBalancerInspector>) -> Self {
        self.inspector = Some(inspector);
        self
    }

    /// Set the wait limit.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Set the route scenario's cluster CIDR.
    pub fn with_cluster_cidr(mut self, cidr: impl Into<String>) -> Self {
        self.cluster_cidr = cidr.into();
        self
    }

    /// Set the route scenario's cluster name.
    pub fn with_route_cluster_name(mut self, name: impl Into<String>) -> Self {
        self.route_cluster_name = Some(name.into());
        self
    }

    /// Run only these scenarios.
    pub fn with_scenarios(mut self, scenarios: impl IntoIterator<Item = Scenario>) -> Self {
        self.scenarios = scenarios.into_iter().collect();
        self
    }
}

/// The outcome of one scenario, with the steps it got through.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScenarioResult {
    /// The scenario.
    pub scenario: Scenario,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took, clean-up included.
    pub elapsed: Duration,
    /// What was observed, in order (for a failure: everything before it).
    pub steps: Vec<String>,
}

impl ScenarioResult {
    /// True if the scenario passed.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Passed
    }
}

impl fmt::Display for ScenarioResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.outcome.label(), self.scenario)?;
        match &self.outcome {
            Outcome::Passed => Ok(()),
            Outcome::Failed { message } => write!(f, ": {message}"),
            Outcome::Skipped { reason } | Outcome::NotApplicable { reason } => {
                write!(f, ": {reason}")
            }
        }
    }
}

/// The results of [`controller_scenarios`]. Its `Display` is a table, one line per scenario (failures with
/// the steps that passed before), then a summary line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The provider's name.
    pub provider: String,
    /// One result per scenario run.
    pub results: Vec<ScenarioResult>,
}

impl ScenarioReport {
    /// True if no scenario failed.
    pub fn is_success(&self) -> bool {
        !self
            .results
            .iter()
            .any(|r| matches!(r.outcome, Outcome::Failed { .. }))
    }

    fn count(&self, label: &str) -> usize {
        self.results
            .iter()
            .filter(|r| r.outcome.label() == label)
            .count()
    }
}

impl fmt::Display for ScenarioReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "controller scenarios with provider {:?}", self.provider)?;
        writeln!(
            f,
            "  {:<7}  {:<19}  {:<31}  {:>8}",
            "RESULT", "SCENARIO", "CONTROLLER", "TIME"
        )?;
        for r in &self.results {
            writeln!(
                f,
                "  {:<7}  {:<19}  {:<31}  {:>8}",
                r.outcome.label(),
                r.scenario.id(),
                r.scenario.controller(),
                format_elapsed(r.elapsed)
            )?;
            match &r.outcome {
                Outcome::Passed => {}
                Outcome::Skipped { reason } | Outcome::NotApplicable { reason } => {
                    writeln!(f, "           {reason}")?;
                }
                Outcome::Failed { message } => {
                    for step in &r.steps {
                        writeln!(f, "           ok: {step}")?;
                    }
                    writeln!(f, "           FAILED: {message}")?;
                }
            }
        }
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.count("PASSED"),
            self.count("FAILED"),
            self.count("SKIPPED")
        )
    }
}

/// Run the scenarios of `options` one after the other, each with freshly built controllers over `client`.
///
/// Scenarios whose capability the provider lacks, or that need an instance the fixture does not name, are
/// skipped with the reason.
pub async fn controller_scenarios(
    provider: Arc<dyn CloudProvider>,
    client: kube::Client,
    options: &ScenarioOptions,
) -> ScenarioReport {
    let mut results = Vec::with_capacity(options.scenarios.len());
    for scenario in &options.scenarios {
        results.push(run_scenario(*scenario, provider.clone(), client.clone(), options).await);
    }
    ScenarioReport {
        provider: provider.provider_name().to_owned(),
        results,
    }
}

/// Run one scenario.
pub async fn run_scenario(
    scenario: Scenario,
    provider: Arc<dyn CloudProvider>,
    client: kube::Client,
    options: &ScenarioOptions,
) -> ScenarioResult {
    let started = Instant::now();
    let world = World::new(scenario, provider, client, options);
    let outcome = match required_capability(scenario, &world.provider) {
        Err(reason) => Err(Stop::Skip(reason)),
        Ok(()) => match scenario {
            Scenario::NodeInitialization => node_initialization(&world).await,
            Scenario::NodeLifecycle => node_lifecycle(&world).await,
            Scenario::LoadBalancer => load_balancer(&world).await,
            Scenario::Routes => routes(&world).await,
        },
    };
    world.cleanup().await;
    let outcome = match outcome {
        Ok(()) => Outcome::Passed,
        Err(Stop::Fail(message)) => Outcome::Failed { message },
        Err(Stop::Skip(reason)) => Outcome::Skipped { reason },
        Err(Stop::Declared(reason)) => Outcome::NotApplicable { reason },
    };
    tracing::info!(
        scenario = scenario.id(),
        outcome = outcome.label(),
        "controller scenario finished"
    );
    ScenarioResult {
        scenario,
        outcome,
        elapsed: started.elapsed(),
        steps: world.steps(),
    }
}

fn required_capability(
    scenario: Scenario,
    provider: &Arc<dyn CloudProvider>,
) -> Result<(), String> {
    let needs = match scenario {
        Scenario::NodeInitialization | Scenario::NodeLifecycle => {
            if Arc::clone(provider).instances_v2().is_some()
                || Arc::clone(provider).instances().is_some()
            {
                return Ok(());
            }
            "instances-v2 or instances"
        }
        Scenario::LoadBalancer => {
            if Capability::LoadBalancer.supported_by(provider) {
                return Ok(());
            }
            "load-balancer"
        }
        Scenario::Routes => {
            if Capability::Routes.supported_by(provider) {
                return Ok(());
            }
            "routes"
        }
    };
    Err(format!(
        "the provider does not support {needs}, so {} does not start",
        scenario.controller()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_ids_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::from_id(s.id()), Some(s));
            assert!(!s.controller().is_empty());
        }
        assert_eq!(Scenario::from_id("nope"), None);
    }

    #[test]
    fn report_table() {
        let report = ScenarioReport {
            provider: "fake".into(),
            results: vec![
                ScenarioResult {
                    scenario: Scenario::NodeInitialization,
                    outcome: Outcome::Passed,
                    elapsed: Duration::from_millis(1200),
                    steps: vec!["created".into()],
                },
                ScenarioResult {
                    scenario: Scenario::LoadBalancer,
                    outcome: Outcome::Failed {
                        message: "timed out".into(),
                    },
                    elapsed: Duration::from_secs(60),
                    steps: vec!["created Service".into()],
                },
                ScenarioResult {
                    scenario: Scenario::Routes,
                    outcome: Outcome::Skipped {
                        reason: "no routes".into(),
                    },
                    elapsed: Duration::ZERO,
                    steps: vec![],
                },
            ],
        };
        assert!(!report.is_success());
        let table = report.to_string();
        assert!(
            table.contains("PASSED   node-initialization  cloud-node-controller"),
            "{table}"
        );
        assert!(table.contains("ok: created Service"), "{table}");
        assert!(table.contains("FAILED: timed out"), "{table}");
        assert!(table.contains("           no routes"), "{table}");
        assert!(
            !table.contains("ok: created\n"),
            "passed scenarios list no steps: {table}"
        );
        assert!(table.ends_with("1 passed, 1 failed, 1 skipped"), "{table}");
    }
}
