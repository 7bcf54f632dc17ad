//! The one configuration of the workspace's property tests (`<crate>/tests/properties.rs`), behind the
//! `proptest` feature.
//!
//! Every property runs [`DEFAULT_CASES`] generated cases unless the `PROPTEST_CASES` environment variable asks for
//! another number (read by proptest itself), so a local soak run is `PROPTEST_CASES=200000 cargo xtask test --
//! properties`. Failures are not persisted to `proptest-regressions/` files: a counterexample that found a real
//! bug becomes a named unit test next to the fix, which says what it checks; a seed file would not.
//!
//! ```no_run
//! use proptest::prelude::*;
//!
//! proptest! {
//!     #![proptest_config(ccm_testenv::properties::config())]
//!     #[test]
//!     fn addition_commutes(a in 0u32..1000, b in 0u32..1000) {
//!         prop_assert_eq!(a + b, b + a);
//!     }
//! }
//! ```

use proptest::test_runner::Config;

/// Generated cases per property when `PROPTEST_CASES` is not set.
pub const DEFAULT_CASES: u32 = 10_000;

/// The environment variable that overrides [`DEFAULT_CASES`] (proptest's own).
pub const CASES_VARIABLE: &str = "PROPTEST_CASES";

/// The property-test configuration: [`DEFAULT_CASES`] cases (or `PROPTEST_CASES`), no failure persistence.
pub fn config() -> Config {
    // proptest's default configuration already parsed PROPTEST_CASES (and its other variables) if set.
    let from_env = Config::default();
    let cases = if std::env::var_os(CASES_VARIABLE).is_some() {
        from_env.cases
    } else {
        DEFAULT_CASES
    };
    Config {
        failure_persistence: None,
        ..Config::with_cases(cases)
    }
}
