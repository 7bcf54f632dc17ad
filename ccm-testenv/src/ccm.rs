//! In-process CCMs against the test control plane: the node label, the runtime flags, the admin listener and the
//! status wait that the runtime's tests (`ccm-app/tests`) and the examples' tests share. The CCM itself is built
//! by the caller (this crate does not depend on the runtime); its status is any `tokio::sync::watch` value.
//!
//! ```
//! let args = ccm_testenv::ccm::flags("t1", "ns-t1", "ccm");
//! assert!(args.contains(&"--node-selector=ccm-test=t1".to_owned()));
//! assert!(args.contains(&"--leader-elect-resource-name=ccm".to_owned()));
//! ```

use std::fmt::Debug;
use std::time::Duration;

use tokio::sync::watch;

/// How long a test waits for an in-process CCM to act.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The label key every test puts on its Nodes (`ccm-test=<test label>`); each CCM watches only its own.
pub const TEST_LABEL: &str = "ccm-test";

/// The flags of an in-process CCM on the fake provider: the Nodes labelled `ccm-test=<label>`, the Services of
/// `namespace`, the Lease `namespace/lease` with short election timings (4s/3s/1s), and a cluster CIDR. Callers
/// append their own (shutdown timeout, cluster name, admin paths ...).
pub fn flags(label: &str, namespace: &str, lease: &str) -> Vec<String> {
    vec![
        "test-ccm".to_owned(),
        "--cloud-provider=fake".to_owned(),
        format!("--node-selector={TEST_LABEL}={label}"),
        format!("--service-namespace={namespace}"),
        format!("--leader-elect-resource-namespace={namespace}"),
        format!("--leader-elect-resource-name={lease}"),
        "--leader-elect-lease-duration=4s".to_owned(),
        "--leader-elect-renew-deadline=3s".to_owned(),
        "--leader-elect-retry-period=1s".to_owned(),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
    ]
}

/// A listener on an ephemeral loopback port, for the CCM's admin server.
///
/// # Panics
///
/// If no loopback port can be bound.
pub fn admin_listener() -> std::net::TcpListener {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port")
}

/// Wait until `status` shows `want`, at most `timeout`.
///
/// # Panics
///
/// With the status last seen, when `want` is not reached in time or the sender is gone.
pub async fn wait_status<S: PartialEq + Debug>(
    mut status: watch::Receiver<S>,
    want: S,
    timeout: Duration,
) {
    let reached = tokio::time::timeout(timeout, status.wait_for(|s| *s == want))
        .await
        .map(|r| r.is_ok());
    assert_eq!(
        reached,
        Ok(true),
        "timed out waiting for {want:?}; status is {:?}",
        *status.borrow()
    );
}
