//! Pure checks of values a provider returns: providerID schemes, load-balancer statuses, node addresses,
//! label keys and values. Each returns `Err(why)` with a lower-case explanation.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ccm_core::syntax;
use ccm_nodecontroller::labels::is_kubernetes_namespaced;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, NodeAddress};

/// The node address types Kubernetes knows.
pub(crate) const ADDRESS_TYPES: [&str; 5] = [
    "Hostname",
    "ExternalIP",
    "InternalIP",
    "ExternalDNS",
    "InternalDNS",
];

/// A provider name usable as the scheme of `<provider>://<id>` (RFC 3986: a letter, then letters, digits, `+`,
/// `-` or `.`).
pub(crate) fn provider_scheme(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Err("it is empty".to_owned()),
        Some(c) if !c.is_ascii_alphabetic() => {
            return Err(format!("it starts with {c:?}, not a letter"));
        }
        Some(_) => {}
    }
    if let Some(c) = chars.find(|c| !(c.is_ascii_alphanumeric() || "+-.".contains(*c))) {
        return Err(format!(
            "it contains {c:?}; a providerID scheme has only letters, digits, '+', '-' and '.'"
        ));
    }
    Ok(())
}

/// The addresses of a load-balancer status, as `ip:<ip>` / `hostname:<name>`, sorted.
pub(crate) fn status_addresses(status: &LoadBalancerStatus) -> BTreeSet<String> {
    status
        .ingress
        .iter()
        .flatten()
        .flat_map(|i| {
            let ip =
                i.ip.iter()
                    .filter(|s| !s.is_empty())
                    .map(|s| format!("ip:{s}"));
            let host = i
                .hostname
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| format!("hostname:{s}"));
            ip.chain(host)
        })
        .collect()
}

/// A readable form of a status: `[ip 203.0.113.1, hostname lb.example]`, or `no ingress`.
pub(crate) fn describe_status(status: &LoadBalancerStatus) -> String {
    let entries: Vec<String> = status
        .ingress
        .iter()
        .flatten()
        .map(|i| {
            let mut parts = Vec::new();
            if let Some(ip) = &i.ip {
                parts.push(format!("ip {ip:?}"));
            }
            if let Some(host) = &i.hostname {
                parts.push(format!("hostname {host:?}"));
            }
            if parts.is_empty() {
                "an empty entry".to_owned()
            } else {
                parts.join(" ")
            }
        })
        .collect();
    if entries.is_empty() {
        "no ingress".to_owned()
    } else {
        format!("ingress [{}]", entries.join(", "))
    }
}

/// A status the service controller accepts: at least one ingress entry, each with an IP that parses or a
/// non-empty hostname.
pub(crate) fn load_balancer_status(status: &LoadBalancerStatus) -> Result<(), String> {
    let ingress = status.ingress.as_deref().unwrap_or_default();
    if ingress.is_empty() {
        return Err(
            "the status has no ingress entry (the service controller treats an empty status as an error)"
                .to_owned(),
        );
    }
    for (index, entry) in ingress.iter().enumerate() {
        let ip = entry.ip.as_deref().unwrap_or_default();
        let hostname = entry.hostname.as_deref().unwrap_or_default();
        if ip.is_empty() && hostname.is_empty() {
            return Err(format!(
                "ingress entry {index} has neither an IP nor a hostname"
            ));
        }
        if !ip.is_empty() && ip.parse::<IpAddr>().is_err() {
            return Err(format!(
                "ingress entry {index} has ip {ip:?}, which is not an IP address"
            ));
        }
    }
    Ok(())
}

/// Node addresses the node controller can use: a known type, non-empty, IPs that parse.
pub(crate) fn node_addresses(addresses: &[NodeAddress]) -> Result<(), String> {
    for a in addresses {
        if !ADDRESS_TYPES.contains(&a.type_.as_str()) {
            return Err(format!(
                "address {:?} has type {:?}; known types are {}",
                a.address,
                a.type_,
                ADDRESS_TYPES.join(", ")
            ));
        }
        if a.address.is_empty() {
            return Err(format!("an address of type {} is empty", a.type_));
        }
        if a.type_.ends_with("IP") && a.address.parse::<IpAddr>().is_err() {
            return Err(format!(
                "{} address {:?} is not an IP address",
                a.type_, a.address
            ));
        }
    }
    Ok(())
}

/// Addresses as sorted `Type=address` strings (for order-insensitive comparison).
pub(crate) fn address_set(addresses: &[NodeAddress]) -> BTreeSet<String> {
    addresses
        .iter()
        .map(|a| format!("{}={}", a.type_, a.address))
        .collect()
}

/// A valid label value: empty, or at most 63 alphanumerics, `-`, `_` and `.`, starting and ending with an
/// alphanumeric ([`ccm_core::syntax::label_value`]).
pub(crate) fn label_value(value: &str) -> Result<(), String> {
    syntax::label_value(value).map_err(|why| format!("label value {value:?} {why}"))
}

/// A valid label key (`[prefix/]name`, the prefix a DNS subdomain; [`ccm_core::syntax::label_key`]) that the node
/// controller will not drop (keys under `kubernetes.io` and `k8s.io` are reserved).
pub(crate) fn label_key(key: &str) -> Result<(), String> {
    syntax::label_key(key).map_err(|why| format!("label key {key:?}: {why}"))?;
    if is_kubernetes_namespaced(key) {
        return Err(format!(
            "label key {key:?} is under a reserved domain (kubernetes.io, k8s.io); the node controller drops it"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::LoadBalancerIngress;

    fn status(entries: &[(Option<&str>, Option<&str>)]) -> LoadBalancerStatus {
        LoadBalancerStatus {
            ingress: Some(
                entries
                    .iter()
                    .map(|(ip, host)| LoadBalancerIngress {
                        ip: ip.map(Into::into),
                        hostname: host.map(Into::into),
                        ..Default::default()
                    })
                    .collect(),
            ),
        }
    }

    fn addr(t: &str, a: &str) -> NodeAddress {
        NodeAddress {
            type_: t.into(),
            address: a.into(),
        }
    }

    #[test]
    fn schemes() {
        for ok in ["fake", "acme", "aws", "my-cloud.v2", "c+x", "A1"] {
            assert!(provider_scheme(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1cloud", "-x", "ac me", "acme://", "a/b", "a_b"] {
            assert!(provider_scheme(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn statuses() {
        assert!(load_balancer_status(&status(&[(Some("203.0.113.1"), None)])).is_ok());
        assert!(load_balancer_status(&status(&[(None, Some("lb.example"))])).is_ok());
        assert!(load_balancer_status(&status(&[(Some("2001:db8::1"), Some("lb"))])).is_ok());
        let empty = load_balancer_status(&LoadBalancerStatus::default()).unwrap_err();
        assert!(empty.contains("no ingress entry"), "{empty}");
        assert!(load_balancer_status(&status(&[])).is_err());
        assert!(load_balancer_status(&status(&[(None, None)])).is_err());
        assert!(load_balancer_status(&status(&[(Some(""), Some(""))])).is_err());
        let bad_ip = load_balancer_status(&status(&[(Some("not-an-ip"), None)])).unwrap_err();
        assert!(bad_ip.contains("not an IP address"), "{bad_ip}");
    }

    #[test]
    fn status_addresses_and_descriptions() {
        let s = status(&[(Some("203.0.113.1"), None), (None, Some("lb.example"))]);
        assert_eq!(
            status_addresses(&s).into_iter().collect::<Vec<_>>(),
            ["hostname:lb.example", "ip:203.0.113.1"]
        );
        assert_eq!(
            describe_status(&s),
            "ingress [ip \"203.0.113.1\", hostname \"lb.example\"]"
        );
        assert_eq!(
            describe_status(&LoadBalancerStatus::default()),
            "no ingress"
        );
        assert_eq!(
            describe_status(&status(&[(None, None)])),
            "ingress [an empty entry]"
        );
        assert!(status_addresses(&status(&[(Some(""), None)])).is_empty());
    }

    #[test]
    fn addresses() {
        assert!(
            node_addresses(&[
                addr("InternalIP", "10.0.0.1"),
                addr("ExternalIP", "2001:db8::1"),
                addr("Hostname", "n1"),
                addr("InternalDNS", "n1.internal"),
            ])
            .is_ok()
        );
        assert!(node_addresses(&[]).is_ok());
        assert!(
            node_addresses(&[addr("PublicIP", "1.2.3.4")])
                .unwrap_err()
                .contains("known types")
        );
        assert!(
            node_addresses(&[addr("InternalIP", "10.0.0.300")])
                .unwrap_err()
                .contains("not an IP")
        );
        assert!(node_addresses(&[addr("Hostname", "")]).is_err());
        assert_eq!(
            address_set(&[addr("InternalIP", "10.0.0.2"), addr("Hostname", "n")])
                .into_iter()
                .collect::<Vec<_>>(),
            ["Hostname=n", "InternalIP=10.0.0.2"]
        );
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "zone-a", "m5.large", "A_b-c.D", &"x".repeat(63)] {
            assert!(label_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "a/b", ".a", &"x".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn label_keys() {
        for ok in [
            "rack",
            "acme.example.com/rack",
            "a-b.c/d_e.f",
            "example.io/x",
        ] {
            assert!(label_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/x",
            "acme.example.com/",
            "Acme.com/x",
            "acme..com/x",
            "a/b/c",
            "-x.com/y",
        ] {
            assert!(label_key(bad).is_err(), "{bad}");
        }
        for reserved in [
            "kubernetes.io/x",
            "node.kubernetes.io/x",
            "k8s.io/y",
            "foo.k8s.io/y",
        ] {
            let why = label_key(reserved).unwrap_err();
            assert!(why.contains("reserved"), "{reserved}: {why}");
        }
        // Only the domain itself and its subdomains are reserved.
        assert!(label_key("notkubernetes.io/x").is_ok());
    }
}
