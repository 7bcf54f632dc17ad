//! A V2-only provider written the way a vendor writes one (an inventory API with its own error type, a
//! provider translating its answers) passes the suite strictly once it declares the capabilities it lacks; and
//! each deliberate bug of the vendor's list is caught by the clause that names it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ccm_conformance::{
    Clause, ClauseInfo, ConformanceFixture, ConformanceSubject, ErrorInjector, InstanceRef,
    Outcome, per_clause, run_all, run_clause,
};
use ccm_core::helpers::{node_name, node_provider_id};
use ccm_core::intercept::{Capability, Operation};
use ccm_core::{
    BoxError, CloudError, CloudProvider, ErrorKind, InstanceLookup, InstanceMetadata, InstancesV2,
};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

const PROVIDER: &str = "inventory";

/// The inventory API's own error type, as a vendor SDK has one.
#[derive(Debug, Clone)]
enum ApiError {
    NoSuchMachine(String),
    RateLimited,
    Unsupported(&'static str),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::NoSuchMachine(name) => write!(f, "inventory: no machine {name}"),
            ApiError::RateLimited => f.write_str("inventory: 429 slow down"),
            ApiError::Unsupported(what) => write!(f, "inventory: {what} is not supported"),
        }
    }
}

impl std::error::Error for ApiError {}

#[derive(Debug, Clone)]
struct Machine {
    id: String,
    running: bool,
    ip: String,
}

/// The inventory API: machines by name, and errors armed for the next call of an operation.
#[derive(Debug, Default)]
struct Inventory {
    machines: BTreeMap<String, Machine>,
    armed: Mutex<Vec<(Operation, ApiError)>>,
}

impl Inventory {
    fn new() -> Self {
        let mut machines = BTreeMap::new();
        for (name, running, ip) in [
            ("inv-running", true, "10.1.0.1"),
            ("inv-stopped", false, "10.1.0.2"),
        ] {
            let id = format!("i-{name}");
            let ip = ip.to_owned();
            machines.insert(name.to_owned(), Machine { id, running, ip });
        }
        Inventory {
            machines,
            armed: Mutex::default(),
        }
    }

    /// The machine behind a Node: by providerID if it has one, else by name.
    fn describe(&self, op: Operation, node: &Node) -> Result<Machine, ApiError> {
        let mut armed = self.armed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = armed.iter().position(|(armed_op, _)| *armed_op == op) {
            return Err(armed.remove(i).1);
        }
        let by_id = node_provider_id(node)
            .strip_prefix("inventory://")
            .and_then(|id| self.machines.values().find(|m| m.id == id));
        let by_name = || self.machines.get(node_name(node));
        match (node_provider_id(node), by_id) {
            (_, Some(machine)) => Ok(machine.clone()),
            ("", None) => by_name()
                .cloned()
                .ok_or_else(|| ApiError::NoSuchMachine(node_name(node).to_owned())),
            (pid, None) => Err(ApiError::NoSuchMachine(pid.to_owned())),
        }
    }
}

/// One bug each, from the list of the vendor who first wired the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bug {
    /// `instance_metadata` of an unknown machine fails with a text error instead of `InstanceNotFound`.
    TextNotFound,
    /// `instance_metadata` of an unknown machine answers a skip: the "skip forever" trap.
    SkipUnknown,
    /// `instance_metadata` of an unknown machine invents metadata.
    MetadataForUnknown,
    /// Every API error but "no such machine" is wrapped as a plain provider error: its kind is lost.
    LostKind,
    /// `instance_shutdown` answers false for a stopped machine.
    WrongShutdown,
    /// `instance_exists` answers false for a stopped machine.
    StoppedDoesNotExist,
    /// `instance_exists` of an unknown machine fails instead of answering false.
    UnknownExistsFails,
}

/// The vendor's provider: InstancesV2 only.
#[derive(Clone)]
struct InventoryCloud {
    api: Arc<Inventory>,
    bug: Option<Bug>,
}

impl InventoryCloud {
    fn is(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }

    /// The API's error as a `CloudError` with the right kind (unless the bug loses it).
    fn translate(&self, err: ApiError) -> CloudError {
        match err {
            ApiError::NoSuchMachine(_) => CloudError::InstanceNotFound,
            _ if self.is(Bug::LostKind) => CloudError::provider("calling the inventory api", err),
            ApiError::RateLimited => CloudError::Throttled {
                message: err.to_string(),
                retry_after: None,
            },
            ApiError::Unsupported(_) => CloudError::NotImplemented,
        }
    }
}

impl CloudProvider for InventoryCloud {
    fn provider_name(&self) -> &str {
        PROVIDER
    }
    fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
        Some(self)
    }
}

#[async_trait]
impl InstancesV2 for InventoryCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self.api.describe(Operation::InstanceExists, node) {
            Ok(machine) => Ok(machine.running || !self.is(Bug::StoppedDoesNotExist)),
            Err(ApiError::NoSuchMachine(name)) if self.is(Bug::UnknownExistsFails) => Err(
                CloudError::provider("describing machines", ApiError::NoSuchMachine(name)),
            ),
            Err(ApiError::NoSuchMachine(_)) => Ok(false),
            Err(err) => Err(self.translate(err)),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let machine = self
            .api
            .describe(Operation::InstanceShutdown, node)
            .map_err(|err| self.translate(err))?;
        Ok(!machine.running && !self.is(Bug::WrongShutdown))
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
        match self.api.describe(Operation::InstanceMetadata, node) {
            Ok(machine) => Ok(InstanceLookup::Found(
                InstanceMetadata::new(format!("{PROVIDER}://{}", machine.id))
                    .with_instance_type("inv.small")
                    .with_zone("zone-1")
                    .with_region("region-1")
                    .with_addresses(vec![NodeAddress {
                        type_: "InternalIP".to_owned(),
                        address: machine.ip,
                    }]),
            )),
            Err(ApiError::NoSuchMachine(name)) if self.is(Bug::TextNotFound) => {
                Err(CloudError::message(format!("machine {name} not found")))
            }
            Err(ApiError::NoSuchMachine(_)) if self.is(Bug::SkipUnknown) => {
                Ok(InstanceLookup::skip("not one of ours"))
            }
            Err(ApiError::NoSuchMachine(name)) if self.is(Bug::MetadataForUnknown) => Ok(
                InstanceLookup::Found(InstanceMetadata::new(format!("{PROVIDER}://{name}"))),
            ),
            Err(err) => Err(self.translate(err)),
        }
    }
}

/// Arms the inventory API with its own errors.
struct InventoryFaults(Arc<Inventory>);

#[async_trait]
impl ErrorInjector for InventoryFaults {
    async fn fail_next(&self, operation: Operation, kind: ErrorKind) -> Result<bool, BoxError> {
        let error = match kind {
            ErrorKind::InstanceNotFound => ApiError::NoSuchMachine("armed".to_owned()),
            ErrorKind::Throttled => ApiError::RateLimited,
            ErrorKind::NotImplemented => ApiError::Unsupported("this call"),
            _ => return Ok(false),
        };
        self.0
            .armed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((operation, error));
        Ok(true)
    }
}

fn instance(name: &str) -> InstanceRef {
    InstanceRef::new(name).with_provider_id(format!("{PROVIDER}://i-{name}"))
}

/// The fixture a V2-only vendor writes: its machines, and every other capability declared absent.
fn fixture() -> ConformanceFixture {
    ConformanceFixture::new()
        .with_running(instance("inv-running"))
        .with_stopped(instance("inv-stopped"))
        .without_capabilities([
            Capability::Instances,
            Capability::Zones,
            Capability::LoadBalancer,
            Capability::Routes,
            Capability::Clusters,
        ])
}

fn subject(bug: Option<Bug>) -> ConformanceSubject {
    let api = Arc::new(Inventory::new());
    let cloud = InventoryCloud {
        api: api.clone(),
        bug,
    };
    ConformanceSubject::new(Arc::new(cloud), fixture()).with_error_injector(InventoryFaults(api))
}

async fn correct() -> ConformanceSubject {
    subject(None)
}

/// The correct provider, one test per clause: run with `CCM_CONFORMANCE_STRICT=1` they all pass.
mod strict {
    ccm_conformance::provider_conformance_tests!(super::correct);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_only_provider_that_declares_what_it_lacks_passes_strictly() {
    let report = run_all(correct).await;
    report.assert_complete();
    assert!(report.skipped().is_empty(), "{report}");
    let passed: BTreeSet<Clause> = report.passed().into_iter().collect();
    for clause in Clause::ALL {
        match clause.capability() {
            None | Some(Capability::InstancesV2) => {
                assert!(passed.contains(clause), "{clause} did not pass:\n{report}");
            }
            Some(_) => assert!(
                report.not_applicable().contains(clause),
                "{clause} is not N/A:\n{report}"
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_declarations_strict_mode_fails_the_undeclared_skips() {
    let report = run_all(|| async {
        let mut subject = subject(None);
        subject.fixture.absent_capabilities.clear();
        subject
    })
    .await;
    assert!(report.is_success(), "{report}");
    assert!(!report.is_complete(), "{report}");
    let skipped: BTreeSet<Clause> = report.skipped().into_iter().collect();
    let other: BTreeSet<Clause> = Clause::ALL
        .iter()
        .copied()
        .filter(|c| {
            c.capability()
                .is_some_and(|cap| cap != Capability::InstancesV2)
        })
        .collect();
    assert_eq!(skipped, other, "{report}");
    let strict = std::panic::catch_unwind(|| report.assert_complete()).unwrap_err();
    let message = strict.downcast_ref::<String>().expect("a message");
    assert!(
        message.contains("declare it with ConformanceFixture::without(Capability::Routes)"),
        "{message}"
    );
}

/// Run the suite against the provider with `bug` and check that exactly `expected` fail, each with a message
/// containing its needle, and nothing is skipped.
async fn assert_caught(bug: Bug, expected: &[(Clause, &str)]) {
    let report = run_all(move || async move { subject(Some(bug)) }).await;
    let failed: BTreeSet<Clause> = report.failed().into_iter().collect();
    let want: BTreeSet<Clause> = expected.iter().map(|(c, _)| *c).collect();
    assert_eq!(failed, want, "{bug:?} failed the wrong clauses:\n{report}");
    assert!(report.skipped().is_empty(), "{bug:?}:\n{report}");
    for (clause, needle) in expected {
        let shown = report.result(*clause).expect("ran").to_string();
        assert!(
            shown.contains(needle),
            "{bug:?}: {shown:?} lacks {needle:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_error_instead_of_instance_not_found_is_caught() {
    assert_caught(
        Bug::TextNotFound,
        &[
            (
                Clause::InstancesV2UnknownInstanceMetadataNotFound,
                "(kind other), not InstanceNotFound",
            ),
            (
                Clause::ErrorsInstancesV2KindSurvivesWrapping,
                "(kind other): CloudError::kind() must be instance_not_found",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skip_for_an_unknown_instance_is_caught_with_why_it_matters() {
    assert_caught(
        Bug::SkipUnknown,
        &[
            (
                Clause::InstancesV2UnknownInstanceMetadataNotFound,
                "the node controller would skip the Node forever, so it would never be initialized, and never learn that its instance is gone",
            ),
            (
                Clause::ErrorsInstancesV2KindSurvivesWrapping,
                "instead of failing, so there is no error whose kind could be checked",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_for_an_unknown_instance_is_caught() {
    assert_caught(
        Bug::MetadataForUnknown,
        &[
            (
                Clause::InstancesV2UnknownInstanceMetadataNotFound,
                "would initialize a Node for a machine that is not there",
            ),
            (
                Clause::ErrorsInstancesV2KindSurvivesWrapping,
                "answered metadata instead of failing",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_kind_lost_through_wrapping_is_caught() {
    assert_caught(
        Bug::LostKind,
        &[(
            Clause::ErrorsInstancesV2KindSurvivesWrapping,
            "instance_exists of the running node inv-running (providerID inventory://i-inv-running) failed with \"calling the inventory api",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_shutdown_answer_is_caught() {
    assert_caught(
        Bug::WrongShutdown,
        &[(
            Clause::InstancesV2ShutdownIsReported,
            "instance_shutdown of the stopped node inv-stopped (providerID inventory://i-inv-stopped) is false, expected true",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_reported_gone_is_caught() {
    assert_caught(
        Bug::StoppedDoesNotExist,
        &[(
            Clause::InstancesV2StoppedInstanceExists,
            "a stopped instance still exists",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_for_an_unknown_instance_is_caught() {
    assert_caught(
        Bug::UnknownExistsFails,
        &[(
            Clause::InstancesV2UnknownInstanceDoesNotExist,
            "must be reported as Ok(false), not as an error",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_is_told_its_clause_and_each_teardown_runs_once() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let teardowns = Arc::new(AtomicUsize::new(0));
    let report = run_all(per_clause({
        let seen = seen.clone();
        let teardowns = teardowns.clone();
        move |info: ClauseInfo| {
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(info.clause);
            let teardowns = teardowns.clone();
            async move {
                subject(None).with_teardown(move || {
                    let teardowns = teardowns.clone();
                    async move {
                        teardowns.fetch_add(1, Ordering::SeqCst);
                    }
                })
            }
        }
    }))
    .await;
    report.assert_complete();
    assert_eq!(
        *seen.lock().unwrap_or_else(PoisonError::into_inner),
        Clause::ALL
    );
    assert_eq!(teardowns.load(Ordering::SeqCst), Clause::ALL.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_teardown_fails_its_clause() {
    let result = run_clause(Clause::InstancesV2RunningInstanceExists, &|| async {
        subject(None).with_teardown(|| async { panic!("could not remove /tmp/inventory-1") })
    })
    .await;
    assert_eq!(
        result.outcome,
        Outcome::Failed {
            message: "the subject's teardown panicked: could not remove /tmp/inventory-1".into()
        }
    );
    assert_eq!(result.provider, PROVIDER);
}

#[test]
fn a_failure_points_at_the_vendors_test_without_suite_frames() {
    let line = line!() + 2;
    let failure = std::panic::catch_unwind(|| {
        ccm_conformance::run_clause_test(
            Clause::InstancesV2ShutdownIsReported,
            || async { subject(Some(Bug::WrongShutdown)) },
            module_path!(),
        );
    })
    .unwrap_err();
    let message = failure.downcast_ref::<String>().expect("a message");
    let at = format!(
        "(test v2_only_providers::instances_v2_shutdown_is_reported at {}:{line})",
        file!()
    );
    assert!(
        message.starts_with(&format!(
            "conformance clause instances-v2/shutdown-is-reported failed for provider \"inventory\" {at}: "
        )),
        "{message}"
    );
    assert!(
        message.contains("\n  contract: instance_shutdown is true"),
        "{message}"
    );
}
