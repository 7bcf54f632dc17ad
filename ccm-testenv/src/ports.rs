//! Picking free TCP ports on the loopback interface.

use std::net::{Ipv4Addr, TcpListener};

/// Returns `count` distinct TCP ports on 127.0.0.1 that were free when this function ran.
///
/// All ports are reserved at the same time (one listener each) before any is released, so they
/// are distinct. Another process may still take one before the caller binds it; the control-plane
/// launcher retries with new ports when a server reports the address is in use.
///
/// ```
/// let ports = ccm_testenv::ports::pick_free_ports(2)?;
/// assert_eq!(ports.len(), 2);
/// assert_ne!(ports[0], ports[1]);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// Any I/O error from binding a loopback socket.
pub fn pick_free_ports(count: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|addr| addr.port()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ports_are_distinct_nonzero_and_bindable() {
        let ports = pick_free_ports(8).expect("ports");
        assert_eq!(ports.len(), 8);
        assert_eq!(ports.iter().collect::<HashSet<_>>().len(), 8);
        for port in ports {
            assert_ne!(port, 0);
            // Released again: binding it now succeeds (nothing else on this machine races for
            // ephemeral ports this quickly in practice, and a failure here would be a real bug
            // in the release logic).
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("port is free again");
        }
    }

    #[test]
    fn zero_ports_is_empty() {
        assert!(pick_free_ports(0).expect("ports").is_empty());
    }
}
