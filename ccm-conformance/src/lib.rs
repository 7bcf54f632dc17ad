//! # ccm-conformance
//!
//! The provider conformance suite: does a cloud vendor's implementation of the `ccm-core` provider traits
//! behave the way the controllers expect?
//!
//! - **Contract clauses** ([`Clause`]): one check per rule of the trait contracts (ensure returns a status and
//!   is idempotent, deleting an absent load balancer succeeds, a stopped instance still exists, an unknown one
//!   is "does not exist" without error, providerIDs have the `<provider>://` form, routes round-trip, error
//!   kinds survive wrapping, concurrent calls are safe, ...). A vendor runs them from a test file with
//!   [`provider_conformance_tests!`] (one test per clause in `cargo test` output) or programmatically with
//!   [`run_all`] (a [`Report`] of [`Outcome::Passed`] / [`Outcome::Failed`] / [`Outcome::Skipped`] /
//!   [`Outcome::NotApplicable`] per clause). The provider comes from a factory returning a
//!   [`ConformanceSubject`]: the provider, a [`ConformanceFixture`] naming instances of the vendor's cloud and
//!   the capabilities it lacks on purpose, and optionally a [`LoadBalancerInspector`], an [`ErrorInjector`]
//!   and a teardown. Clauses for capabilities the provider lacks are skipped with the reason, never passed;
//!   declared absent, they are not applicable, which strict mode ([`STRICT_ENV_VAR`]) accepts.
//! - **The fake** ([`fake`]): the subject for `ccm-provider-fake`, which passes every clause.
//! - **Fault injection** ([`faults`]): a [`FaultInjector`](faults::FaultInjector) for
//!   [`InterceptedProvider`](ccm_core::intercept::InterceptedProvider) that fails or delays chosen operations
//!   (once, N times, always, at random), to watch a CCM converge under cloud faults.
//! - **Controller scenarios** ([`scenarios`]): the real node, lifecycle, service and route controllers run
//!   against a provider and a Kubernetes API server, with a pass/fail result per scenario.
//!
//! A vendor's test file:
//!
//! ```no_run
//! use std::sync::Arc;
//! use ccm_conformance::{ConformanceFixture, ConformanceSubject, InstanceRef};
//! use ccm_core::intercept::Capability;
//! # struct AcmeCloud;
//! # impl ccm_core::CloudProvider for AcmeCloud { fn provider_name(&self) -> &str { "acme" } }
//! # impl AcmeCloud { async fn connect() -> AcmeCloud { AcmeCloud } }
//!
//! async fn acme() -> ConformanceSubject {
//!     let cloud = AcmeCloud::connect().await;
//!     let fixture = ConformanceFixture::new()
//!         .with_running(InstanceRef::new("worker-1").with_provider_id("acme://i-0001"))
//!         .with_stopped(InstanceRef::new("worker-2").with_provider_id("acme://i-0002"))
//!         // An InstancesV2-only provider: these are absent on purpose.
//!         .without_capabilities([Capability::Instances, Capability::Zones, Capability::LoadBalancer])
//!         .without_capabilities([Capability::Routes, Capability::Clusters]);
//!     ConformanceSubject::new(Arc::new(cloud), fixture)
//! }
//!
//! ccm_conformance::provider_conformance_tests!(acme);
//! ```
//!
//! See `docs/conformance.md` for what each clause means and how to read a failure.
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

mod checks;
mod clause;
mod context;
pub mod fake;
pub mod faults;
mod fixture;
mod report;
mod runner;
pub mod scenarios;
mod subject;
mod validate;

pub use clause::Clause;
pub use fixture::{ConformanceFixture, InstanceRef, POLL_INTERVAL_ENV_VAR, ServiceCustomizer};
pub use report::{ClauseResult, Outcome, Report};
pub use runner::{STRICT_ENV_VAR, check_subject, run_all, run_clause, run_clauses};
pub use subject::{
    ClauseInfo, ConformanceSubject, ErrorInjector, IntoSubject, LoadBalancerInspector, PerClause,
    SubjectFactory, SubjectFuture, Teardown, per_clause,
};

#[doc(hidden)]
pub use runner::run_clause_test;

/// Generate one `#[test]` per [`Clause`], each running that clause against a fresh provider from the
/// factory, named after the clause ([`Clause::test_name`], e.g. `load_balancer_ensure_is_idempotent`).
///
/// The factory is any expression usable as a [`SubjectFactory`]: an `async fn` returning a
/// [`ConformanceSubject`] (or a `Result` of one), or a closure returning such a future, or [`per_clause`]`(f)`
/// to be told which clause each subject serves. Each test runs on its own multi-threaded tokio runtime; the
/// calling crate needs no tokio dependency.
///
/// A failed clause fails its test with the provider, the clause, the test (file and line of this macro's
/// invocation), what was observed and the contract, without a backtrace of the suite's internals. A skipped
/// clause (a capability the provider lacks without declaring it, a fixture without what the clause needs)
/// passes in `cargo test` terms but prints one line to standard error,
/// `conformance SKIPPED: provider "<name>", clause <id> (test <module>::<test> at <file>:<line>): <reason> ...`;
/// with the environment variable [`STRICT_ENV_VAR`] (`CCM_CONFORMANCE_STRICT=1`) such skips fail instead.
/// Clauses the fixture declares not applicable ([`ConformanceFixture::without`],
/// [`ConformanceFixture::skip`]) pass quietly, also in strict mode.
///
/// Invoke it once per module (put it in a `mod` to run the suite for several providers in one file):
///
/// ```no_run
/// mod fake_cloud {
///     ccm_conformance::provider_conformance_tests!(ccm_conformance::fake::factory);
/// }
/// ```
#[macro_export]
macro_rules! provider_conformance_tests {
    ($factory:expr $(,)?) => {
        $crate::__ccm_conformance_for_each_clause!([$crate::__ccm_conformance_define_tests] $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __ccm_conformance_define_tests {
    ([$factory:expr] $( $(#[$meta:meta])* $variant:ident => $name:ident, )*) => {
        $(
            $(#[$meta])*
            #[test]
            fn $name() {
                $crate::run_clause_test($crate::Clause::$variant, $factory, module_path!());
            }
        )*
    };
}
