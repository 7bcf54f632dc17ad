//! The reference cloud controller manager: the four standard controllers on the fake provider.
//!
//! ```text
//! cargo run -p examples --example reference-ccm -- \
//!     --cloud-provider=fake --cloud-config=examples/inventory.yaml --kubeconfig=$KUBECONFIG
//! ```
//!
//! Every flag of the Go cloud-controller-manager that the SDK supports is accepted; `--help` lists them.
//! `reference-ccm doctor [...]` runs the chicken-and-egg doctor instead (`docs/doctor.md`).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == ccm_doctor::cli::SUBCOMMAND)
    {
        let name = format!("{} {}", examples::COMMAND_NAME, ccm_doctor::cli::SUBCOMMAND);
        return ccm_doctor::cli::run_from(&name, args.into_iter().skip(2)).await;
    }
    match examples::reference_ccm() {
        Ok(ccm) => ccm.run_from_args().await,
        Err(err) => {
            eprintln!("reference-ccm: cannot register the fake provider: {err}");
            ExitCode::FAILURE
        }
    }
}
