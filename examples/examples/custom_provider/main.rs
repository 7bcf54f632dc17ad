//! A custom provider checked by the conformance suite.
//!
//! `acme.rs` implements a small cloud from scratch; this program runs every conformance clause against it and
//! prints the report, then runs it again through a fault-injecting wrapper (the first ensures answer "retry
//! after", every call is slowed down) to show the same provider still conforms when its cloud is flaky.
//! Its test twin, `examples/tests/conformance_acme.rs`, runs the same suite as one `cargo test` per clause.
//!
//! ```text
//! cargo run -p examples --example custom-provider
//! ```

mod acme;

use std::process::ExitCode;
use std::sync::Arc;

use ccm_conformance::faults::FaultInjector;
use ccm_conformance::run_all;
use ccm_core::intercept::InterceptedProvider;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let report = run_all(acme::factory).await;
    println!("{report}\n");

    let flaky = || async {
        let faults = match FaultInjector::from_spec("create=retry:100ms*3; *=latency:5ms") {
            Ok(faults) => faults,
            Err(err) => return Err(err),
        };
        Ok(acme::factory()
            .await
            .map_provider(|p| Arc::new(InterceptedProvider::new(p).with_interceptor(faults))))
    };
    let flaky_report = run_all(flaky).await;
    println!("with injected faults:\n{flaky_report}");

    if report.is_success() && flaky_report.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
