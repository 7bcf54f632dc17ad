//! The reference cloud controller manager: the four standard controllers on the fake provider, the example
//! vendor controller `tagging-controller` (`examples/src/tagging.rs`), which `--controllers=*,tagging` turns on, and
//! the example admission webhook `load-balancer-type` (`examples/src/lb_type_webhook.rs`), served on the webhook
//! port with `--webhooks=*`.
//!
//! ```text
//! cargo run -p examples --example reference-ccm -- \
//!     --cloud-provider=fake --cloud-config=examples/inventory.yaml --kubeconfig=$KUBECONFIG \
//!     --controllers=*,tagging
//! ```
//!
//! Every flag of the Go cloud-controller-manager that the SDK supports is accepted; `--help` lists them (the few it
//! does not are listed with the reason in docs/runtime.md).
//! `reference-ccm doctor [...]` runs the chicken-and-egg doctor instead (`docs/doctor.md`).

use std::process::ExitCode;

/// jemalloc instead of the system allocator: the informers replace every cached Node several times while nodes
/// initialize, and glibc's malloc keeps more of the freed memory resident (peak RSS at 10,000 nodes 89 MiB against
/// 100 MiB; docs/benchmarks.md, "10,000 nodes: where the memory goes"). The workspace's `.cargo/config.toml` gives
/// it one arena (`JEMALLOC_SYS_WITH_MALLOC_CONF`): 69 MiB against 82 with the default four per core.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    match examples::reference_ccm() {
        Ok(ccm) => ccm.run_from_args().await,
        Err(err) => {
            eprintln!("reference-ccm: cannot register the fake provider: {err}");
            ExitCode::FAILURE
        }
    }
}
