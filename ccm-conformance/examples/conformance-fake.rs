//! The whole conformance run for the fake provider: every contract clause, then the controller scenarios against
//! a Kubernetes API server, each printed as a pass/fail table. Exits non-zero if anything failed.
//!
//! `cargo xtask conformance` builds and runs it against a fresh local control plane. It can also run on its own:
//! with `CCM_TESTENV` set (see `cargo xtask controlplane start`) it uses that control plane, otherwise it starts a
//! private one from the binaries of `cargo xtask controlplane build`.
//!
//! ```text
//! cargo run -p ccm-conformance --example conformance-fake -- --scenario load-balancer --faults 'create=retry:2s*1'
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ccm_conformance::faults::FaultInjector;
use ccm_conformance::scenarios::{Scenario, ScenarioOptions, controller_scenarios};
use ccm_core::CloudProvider;
use ccm_core::intercept::InterceptedProvider;
use clap::Parser;

/// Runs the provider conformance suite and the controller scenarios against the fake cloud.
#[derive(Debug, Parser)]
#[command(name = "conformance-fake")]
struct Args {
    /// Run only this scenario (repeatable): node-initialization, node-lifecycle, load-balancer, routes.
    #[arg(long = "scenario", value_name = "NAME")]
    scenarios: Vec<String>,
    /// Fault rules for the provider the controllers use, e.g. `create=retry:2s*1; *=latency:50ms`.
    #[arg(long, value_name = "RULES")]
    faults: Option<String>,
    /// How long each awaited state of a scenario may take, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout_seconds: u64,
    /// Skip the contract clauses; run the controller scenarios only.
    #[arg(long)]
    no_contract: bool,
}

fn scenarios(names: &[String]) -> Result<Vec<Scenario>, String> {
    if names.is_empty() {
        return Ok(Scenario::ALL.to_vec());
    }
    names
        .iter()
        .map(|name| {
            Scenario::from_id(name).ok_or_else(|| {
                let known: Vec<&str> = Scenario::ALL.iter().map(|s| s.id()).collect();
                format!(
                    "unknown scenario {name:?}; known scenarios: {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CONFORMANCE_LOG")
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let selected = match scenarios(&args.scenarios) {
        Ok(selected) => selected,
        Err(message) => {
            eprintln!("conformance-fake: {message}");
            return ExitCode::from(2);
        }
    };
    let faults = match args
        .faults
        .as_deref()
        .map(FaultInjector::from_spec)
        .transpose()
    {
        Ok(faults) => faults.map(Arc::new),
        Err(err) => {
            eprintln!("conformance-fake: {err}");
            return ExitCode::from(2);
        }
    };

    let mut ok = true;
    if !args.no_contract {
        let report = ccm_conformance::run_all(ccm_conformance::fake::factory).await;
        println!("{report}\n");
        ok &= report.is_success();
    }

    let env = match ccm_testenv::TestEnv::try_shared().await {
        Ok(env) => env,
        Err(err) => {
            eprintln!(
                "conformance-fake: no Kubernetes API server for the controller scenarios: {err}"
            );
            return ExitCode::FAILURE;
        }
    };
    let client = match env.try_client() {
        Ok(client) => client,
        Err(err) => {
            eprintln!("conformance-fake: {err}");
            return ExitCode::FAILURE;
        }
    };
    let run = uuid::Uuid::new_v4().simple().to_string();
    let (_cloud, subject) =
        ccm_conformance::fake::subject_with_prefix(&format!("conformance-{}", &run[..6]));
    let provider: Arc<dyn CloudProvider> = match &faults {
        Some(faults) => Arc::new(
            InterceptedProvider::new(subject.provider.clone())
                .with_shared_interceptor(faults.clone()),
        ),
        None => subject.provider.clone(),
    };
    let options = ScenarioOptions::from_subject(&subject)
        .with_timeout(Duration::from_secs(args.timeout_seconds))
        .with_scenarios(selected);
    let report = controller_scenarios(provider, client, &options).await;
    println!("{report}");
    if let Some(faults) = &faults {
        println!("injected failures: {}", faults.total_failed());
    }
    ok &= report.is_success();
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
