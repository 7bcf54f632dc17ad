//! Node addresses, as pure functions: the `alpha.kubernetes.io/provided-node-ip` annotation, the filter it
//! implies, and the merge of the cloud's addresses into `status.addresses` (Go's rules, except for the stricter
//! change detection of [`addresses_equivalent`]).
//!
//! ```
//! use ccm_nodecontroller::addresses::addresses_from_node_ip;
//! use k8s_openapi::api::core::v1::NodeAddress;
//!
//! let addr = |t: &str, a: &str| NodeAddress { type_: t.into(), address: a.into() };
//! let cloud = vec![addr("InternalIP", "10.0.0.1"), addr("InternalIP", "10.0.0.2"), addr("ExternalIP", "203.0.113.7")];
//! let filtered = addresses_from_node_ip("10.0.0.2", &cloud).unwrap();
//! assert_eq!(filtered, vec![addr("InternalIP", "10.0.0.2"), addr("ExternalIP", "203.0.113.7")]);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use ccm_core::names;
use k8s_openapi::api::core::v1::{Node, NodeAddress};

/// The `Hostname` address type.
pub const HOSTNAME: &str = "Hostname";

/// An invalid provided-node-ip annotation, or one that matches none of the cloud's addresses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeIpError {
    /// A comma-separated part is not an IP address (no whitespace is allowed).
    #[error(
        "failed to parse node IP {annotation:?}: could not parse {value:?}; the annotation must be one IP \
         or an IPv4,IPv6 pair without spaces"
    )]
    Unparsable {
        /// The whole annotation.
        annotation: String,
        /// The part that is not an IP.
        value: String,
    },
    /// More than two IPs, or two of the same family.
    #[error(
        "failed to parse node IP {annotation:?}: must contain either a single IP or a dual-stack pair of IPs"
    )]
    NotSingleOrDualStack {
        /// The whole annotation.
        annotation: String,
    },
    /// A dual-stack pair contains `0.0.0.0` or `::`.
    #[error(
        "failed to parse node IP {annotation:?}: dual-stack node IP cannot include '0.0.0.0' or '::'"
    )]
    UnspecifiedInPair {
        /// The whole annotation.
        annotation: String,
    },
    /// The cloud reports no address equal to this node IP.
    #[error(
        "failed to get node address from cloud provider that matches ip: {ip}; the kubelet's --node-ip must be \
         one of the instance's addresses"
    )]
    NoMatchingCloudAddress {
        /// The node IP that matched nothing.
        ip: IpAddr,
    },
}

/// Parse an IP address the way Go's `ParseIPSloppy` does: IPv4 octets may have leading zeros (read as decimal),
/// and an IPv4-mapped IPv6 address is the IPv4 address. No whitespace is allowed.
///
/// ```
/// use ccm_nodecontroller::addresses::parse_ip_sloppy;
/// assert_eq!(parse_ip_sloppy("01.2.3.004").unwrap().to_string(), "1.2.3.4");
/// assert_eq!(parse_ip_sloppy("::ffff:10.0.0.1").unwrap().to_string(), "10.0.0.1");
/// assert!(parse_ip_sloppy(" 1.2.3.4").is_none());
/// ```
pub fn parse_ip_sloppy(value: &str) -> Option<IpAddr> {
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    // IPv4 with leading zeros, which the standard parser rejects.
    let mut octets = [0u8; 4];
    let mut parts = value.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        // Digits only (`u8::from_str` would also take a sign); any number of leading zeros parses.
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// Parse the provided-node-ip annotation strictly (Go: `ParseNodeIPAnnotation`): comma-separated, no whitespace
/// trimming, one IP or one IPv4 plus one IPv6, and a pair may not contain `0.0.0.0` or `::`.
///
/// ```
/// use ccm_nodecontroller::addresses::parse_node_ip_annotation;
/// assert_eq!(parse_node_ip_annotation("10.0.0.1,fd00::1").unwrap().len(), 2);
/// assert!(parse_node_ip_annotation("10.0.0.1, fd00::1").is_err());
/// assert!(parse_node_ip_annotation("10.0.0.1,10.0.0.2").is_err());
/// ```
pub fn parse_node_ip_annotation(annotation: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    let parse = |part: &str| {
        parse_ip_sloppy(part).ok_or_else(|| NodeIpError::Unparsable {
            annotation: annotation.to_owned(),
            value: part.to_owned(),
        })
    };
    let ips = annotation
        .split(',')
        .map(parse)
        .collect::<Result<Vec<_>, _>>()?;
    let same_family = ips.len() == 2 && ips[0].is_ipv6() == ips[1].is_ipv6();
    if ips.len() > 2 || same_family {
        return Err(NodeIpError::NotSingleOrDualStack {
            annotation: annotation.to_owned(),
        });
    }
    if ips.len() == 2 && ips.iter().any(IpAddr::is_unspecified) {
        return Err(NodeIpError::UnspecifiedInPair {
            annotation: annotation.to_owned(),
        });
    }
    Ok(ips)
}

/// Filter and order the cloud's addresses by the provided node IPs (Go: `GetNodeAddressesFromNodeIP`).
///
/// For each node IP, every cloud address equal to it (compared as IPs, not strings) comes first, in cloud order,
/// and its type is marked; a node IP that matches nothing is an error. Then every cloud address whose type was
/// not marked follows. So when the node IP is an `InternalIP`, the other `InternalIP`s are dropped.
pub fn addresses_from_node_ip(
    annotation: &str,
    cloud: &[NodeAddress],
) -> Result<Vec<NodeAddress>, NodeIpError> {
    let node_ips = parse_node_ip_annotation(annotation)?;
    let mut result = Vec::with_capacity(cloud.len());
    let mut marked: BTreeSet<&str> = BTreeSet::new();
    for ip in node_ips {
        let mut matched = false;
        for address in cloud {
            if parse_ip_sloppy(&address.address) == Some(ip) {
                result.push(address.clone());
                marked.insert(address.type_.as_str());
                matched = true;
            }
        }
        if !matched {
            return Err(NodeIpError::NoMatchingCloudAddress { ip });
        }
    }
    result.extend(
        cloud
            .iter()
            .filter(|a| !marked.contains(a.type_.as_str()))
            .cloned(),
    );
    Ok(result)
}

/// The node's provided-node-ip annotation, if it has one (an empty value counts: it is invalid).
pub fn provided_node_ip(node: &Node) -> Option<&str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::annotations::PROVIDED_NODE_IP))
        .map(String::as_str)
}

/// The node's current `status.addresses`.
pub fn node_addresses(node: &Node) -> &[NodeAddress] {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default()
}

/// Whether two address lists mean the same thing: the same addresses of each type, **in the same order within a
/// type** (the first `InternalIP` is the node's primary IP), however the types interleave. Go
/// (`nodeAddressesChangeDetected`) compares lengths and the last address of each type, so it misses a secondary
/// IP replaced or two IPs of one type swapped.
///
/// ```
/// use ccm_nodecontroller::addresses::addresses_equivalent;
/// use k8s_openapi::api::core::v1::NodeAddress;
/// let a = |t: &str, v: &str| NodeAddress { type_: t.into(), address: v.into() };
/// assert!(addresses_equivalent(&[a("Hostname", "n"), a("InternalIP", "10.0.0.1")], &[a("InternalIP", "10.0.0.1"), a("Hostname", "n")]));
/// assert!(!addresses_equivalent(&[a("InternalIP", "10.0.0.1"), a("InternalIP", "10.0.0.2")], &[a("InternalIP", "10.0.0.2"), a("InternalIP", "10.0.0.1")]));
/// ```
pub fn addresses_equivalent(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    fn by_type(list: &[NodeAddress]) -> BTreeMap<&str, Vec<&str>> {
        let mut map: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for address in list {
            map.entry(address.type_.as_str())
                .or_default()
                .push(address.address.as_str());
        }
        map
    }
    a.len() == b.len() && by_type(a) == by_type(b)
}

/// What the address sync should do with one node.
#[derive(Debug, Clone, PartialEq)]
pub enum AddressUpdate {
    /// The cloud returned no addresses: leave the node alone.
    NoCloudAddresses,
    /// The node already has these addresses.
    Unchanged,
    /// Replace `status.addresses` with this list.
    Replace(Vec<NodeAddress>),
}

/// The addresses the node should have, given the cloud's (Go: `updateNodeAddress`):
///
/// 1. no cloud addresses → [`AddressUpdate::NoCloudAddresses`];
/// 2. if the cloud gave no `Hostname`, the node's existing `Hostname` entries (set by the kubelet) are appended;
/// 3. if the node has the provided-node-ip annotation, the list is filtered and ordered by it (an error leaves
///    the node alone);
/// 4. [`AddressUpdate::Unchanged`] if the result is [equivalent](addresses_equivalent) to the node's list, else
///    [`AddressUpdate::Replace`].
pub fn plan_address_update(
    node: &Node,
    cloud: &[NodeAddress],
) -> Result<AddressUpdate, NodeIpError> {
    if cloud.is_empty() {
        return Ok(AddressUpdate::NoCloudAddresses);
    }
    let current = node_addresses(node);
    let mut desired = cloud.to_vec();
    if !cloud.iter().any(|a| a.type_ == HOSTNAME) {
        desired.extend(current.iter().filter(|a| a.type_ == HOSTNAME).cloned());
    }
    if let Some(annotation) = provided_node_ip(node) {
        desired = addresses_from_node_ip(annotation, &desired)?;
    }
    if addresses_equivalent(current, &desired) {
        Ok(AddressUpdate::Unchanged)
    } else {
        Ok(AddressUpdate::Replace(desired))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use std::collections::BTreeMap;

    const KUBELET_HOSTNAME: &str = "hostname";

    fn a(t: &str, v: &str) -> NodeAddress {
        NodeAddress {
            type_: t.into(),
            address: v.into(),
        }
    }

    fn node(addresses: Vec<NodeAddress>, node_ip: Option<&str>) -> Node {
        let mut node = Node {
            status: Some(NodeStatus {
                addresses: Some(addresses),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(ip) = node_ip {
            node.metadata.annotations = Some(BTreeMap::from([(
                names::annotations::PROVIDED_NODE_IP.to_owned(),
                ip.to_owned(),
            )]));
        }
        node
    }

    #[test]
    fn parse_annotation_table() {
        // Go: component-helpers TestParseNodeIPAnnotation.
        let ok = |s: &str| {
            parse_node_ip_annotation(s)
                .unwrap_or_else(|e| panic!("{s}: {e}"))
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        let err = |s: &str| parse_node_ip_annotation(s).unwrap_err();
        assert!(matches!(err(""), NodeIpError::Unparsable { .. }));
        assert!(matches!(err(" "), NodeIpError::Unparsable { .. }));
        assert!(matches!(err("blah"), NodeIpError::Unparsable { .. }));
        assert_eq!(ok("1.2.3.4"), ["1.2.3.4"]);
        assert!(matches!(err(" 1.2.3.4   "), NodeIpError::Unparsable { .. }));
        assert_eq!(ok("01.2.3.004"), ["1.2.3.4"]);
        assert!(matches!(err("1.2.3"), NodeIpError::Unparsable { .. }));
        assert!(matches!(err("1.2.3.0/24"), NodeIpError::Unparsable { .. }));
        assert_eq!(ok("0.0.0.0"), ["0.0.0.0"]);
        assert!(matches!(
            err("1.2.3.4,not-an-IPv6-address"),
            NodeIpError::Unparsable { .. }
        ));
        assert_eq!(ok("abcd::ef01"), ["abcd::ef01"]);
        assert_eq!(ok("abcd:0abc:00ab:0000:0000::1"), ["abcd:abc:ab::1"]);
        assert_eq!(ok("1.2.3.4,abcd::ef01"), ["1.2.3.4", "abcd::ef01"]);
        assert!(matches!(
            err("abcd::ef01 , 1.2.3.4"),
            NodeIpError::Unparsable { .. }
        ));
        assert!(matches!(
            err("1.2.3.4,5.6.7.8"),
            NodeIpError::NotSingleOrDualStack { .. }
        ));
        assert!(matches!(
            err("abcd::1,abcd::2"),
            NodeIpError::NotSingleOrDualStack { .. }
        ));
        assert!(matches!(
            err("1.2.3.4,::"),
            NodeIpError::UnspecifiedInPair { .. }
        ));
        assert!(matches!(
            err("0.0.0.0,abcd::1"),
            NodeIpError::UnspecifiedInPair { .. }
        ));
        assert!(matches!(
            err("abcd::ef01 , 1.2.3.4, something else"),
            NodeIpError::Unparsable { .. }
        ));
        assert!(matches!(
            err("1.2.3.4,abcd::1,5.6.7.8"),
            NodeIpError::NotSingleOrDualStack { .. }
        ));
        // Mapped IPv4 counts as IPv4, so a mapped + plain IPv4 pair is one family.
        assert!(matches!(
            err("::ffff:1.2.3.4,5.6.7.8"),
            NodeIpError::NotSingleOrDualStack { .. }
        ));
    }

    #[test]
    fn sloppy_parser_edges() {
        assert_eq!(
            parse_ip_sloppy("000.0255.1.1"),
            Some("0.255.1.1".parse().unwrap())
        );
        assert_eq!(parse_ip_sloppy("256.1.1.1"), None);
        assert_eq!(parse_ip_sloppy("1.2.3.4.5"), None);
        assert_eq!(parse_ip_sloppy("1..3.4"), None);
        assert_eq!(parse_ip_sloppy("+1.2.3.4"), None);
        assert_eq!(
            parse_ip_sloppy("00000000001.2.3.4"),
            Some("1.2.3.4".parse().unwrap())
        );
        assert_eq!(parse_ip_sloppy("1000.2.3.4"), None);
        assert_eq!(parse_ip_sloppy("fe80::1%eth0"), None);
    }

    #[test]
    fn node_ip_filter_table() {
        // Go: node/helpers TestGetNodeAddressesFromNodeIP, every case.
        type Case<'a> = (&'a str, &'a str, Vec<NodeAddress>, Option<Vec<NodeAddress>>);
        let h = || a(HOSTNAME, KUBELET_HOSTNAME);
        let cases: Vec<Case> = vec![
            (
                "A single InternalIP",
                "10.1.1.1",
                vec![a("InternalIP", "10.1.1.1"), h()],
                Some(vec![a("InternalIP", "10.1.1.1"), h()]),
            ),
            (
                "NodeIP is external",
                "55.55.55.55",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    h(),
                ],
                Some(vec![
                    a("ExternalIP", "55.55.55.55"),
                    a("InternalIP", "10.1.1.1"),
                    h(),
                ]),
            ),
            (
                "InternalIP and ExternalIP are the same",
                "55.55.55.55",
                vec![
                    a("InternalIP", "44.44.44.44"),
                    a("ExternalIP", "44.44.44.44"),
                    a("InternalIP", "55.55.55.55"),
                    a("ExternalIP", "55.55.55.55"),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "55.55.55.55"),
                    a("ExternalIP", "55.55.55.55"),
                    h(),
                ]),
            ),
            (
                "An Internal/ExternalIP, an Internal/ExternalDNS",
                "10.1.1.1",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    a("InternalDNS", "ip-10-1-1-1.us-west-2.compute.internal"),
                    a(
                        "ExternalDNS",
                        "ec2-55-55-55-55.us-west-2.compute.amazonaws.com",
                    ),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    a("InternalDNS", "ip-10-1-1-1.us-west-2.compute.internal"),
                    a(
                        "ExternalDNS",
                        "ec2-55-55-55-55.us-west-2.compute.amazonaws.com",
                    ),
                    h(),
                ]),
            ),
            (
                "An Internal with multiple internal IPs",
                "10.1.1.1",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "10.2.2.2"),
                    a("InternalIP", "10.3.3.3"),
                    a("ExternalIP", "55.55.55.55"),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    h(),
                ]),
            ),
            (
                "An InternalIP that isn't valid: should error",
                "10.2.2.2",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    h(),
                ],
                None,
            ),
            (
                "Dual-stack cloud, with nodeIP, different IPv6 formats",
                "2600:1f14:1d4:d101::ba3d",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "2600:1f14:1d4:d101:0:0:0:ba3d"),
                    h(),
                ],
                Some(vec![a("InternalIP", "2600:1f14:1d4:d101:0:0:0:ba3d"), h()]),
            ),
            (
                "Single-stack cloud, dual-stack request",
                "10.1.1.1,fc01:1234::5678",
                vec![a("InternalIP", "10.1.1.1"), h()],
                None,
            ),
            (
                "Dual-stack cloud, IPv4 first, IPv4-primary request",
                "10.1.1.1,fc01:1234::5678",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "fc01:1234::5678"),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "fc01:1234::5678"),
                    h(),
                ]),
            ),
            (
                "Dual-stack cloud, IPv6 first, IPv4-primary request",
                "10.1.1.1,fc01:1234::5678",
                vec![
                    a("InternalIP", "fc01:1234::5678"),
                    a("InternalIP", "10.1.1.1"),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "fc01:1234::5678"),
                    h(),
                ]),
            ),
            (
                "Dual-stack cloud, dual-stack request, multiple IPs",
                "10.1.1.1,fc01:1234::5678",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "10.1.1.2"),
                    a("InternalIP", "fc01:1234::1234"),
                    a("InternalIP", "fc01:1234::5678"),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "fc01:1234::5678"),
                    h(),
                ]),
            ),
            (
                "Dual-stack cloud, dual-stack request, extra ExternalIP",
                "10.1.1.1,fc01:1234::5678",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    a("InternalIP", "fc01:1234::1234"),
                    a("InternalIP", "fc01:1234::5678"),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "10.1.1.1"),
                    a("InternalIP", "fc01:1234::5678"),
                    a("ExternalIP", "55.55.55.55"),
                    h(),
                ]),
            ),
            (
                "Dual-stack cloud, dual-stack request, multiple ExternalIPs",
                "fc01:1234::5678,10.1.1.1",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    a("InternalIP", "fc01:1234::5678"),
                    a("ExternalIP", "2001:db1::1"),
                    h(),
                ],
                Some(vec![
                    a("InternalIP", "fc01:1234::5678"),
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    a("ExternalIP", "2001:db1::1"),
                    h(),
                ]),
            ),
            (
                "Dual-stack cloud, dual-stack request, mixed InternalIP/ExternalIP match",
                "55.55.55.55,fc01:1234::5678",
                vec![
                    a("InternalIP", "10.1.1.1"),
                    a("ExternalIP", "55.55.55.55"),
                    a("InternalIP", "fc01:1234::5678"),
                    a("ExternalIP", "2001:db1::1"),
                    h(),
                ],
                Some(vec![
                    a("ExternalIP", "55.55.55.55"),
                    a("InternalIP", "fc01:1234::5678"),
                    h(),
                ]),
            ),
        ];
        for (name, node_ip, cloud, expected) in cases {
            let got = addresses_from_node_ip(node_ip, &cloud);
            match expected {
                Some(expected) => assert_eq!(got.as_ref().ok(), Some(&expected), "{name}: {got:?}"),
                None => assert!(got.is_err(), "{name}: {got:?}"),
            }
        }
    }

    #[test]
    fn unmatched_ip_error_names_the_ip() {
        let err = addresses_from_node_ip("10.9.9.9", &[a("InternalIP", "10.0.0.1")]).unwrap_err();
        assert_eq!(
            err,
            NodeIpError::NoMatchingCloudAddress {
                ip: "10.9.9.9".parse().unwrap()
            }
        );
        assert!(err.to_string().contains("10.9.9.9"));
        // Unparsable cloud addresses never match (and never panic).
        assert!(addresses_from_node_ip("10.0.0.1", &[a("InternalIP", "not-an-ip")]).is_err());
        // Leading zeros in the cloud's address still match.
        assert_eq!(
            addresses_from_node_ip("10.0.0.1", &[a("InternalIP", "010.000.000.001")]).unwrap(),
            vec![a("InternalIP", "010.000.000.001")]
        );
    }

    #[test]
    fn change_detection_table() {
        // Go: TestNodeAddressesChangeDetected (every case gives the same answer here) ...
        let base = vec![
            a("InternalIP", "10.0.0.1"),
            a("ExternalIP", "132.143.154.163"),
        ];
        assert!(addresses_equivalent(&base, &base.clone()));
        let other_external = vec![
            a("InternalIP", "10.0.0.1"),
            a("ExternalIP", "132.143.154.164"),
        ];
        assert!(!addresses_equivalent(&other_external, &base));
        let with_host = vec![
            a("InternalIP", "10.0.0.1"),
            a("ExternalIP", "132.143.154.164"),
            a(HOSTNAME, "hostname.zone.region.aws.test"),
        ];
        assert!(!addresses_equivalent(&with_host, &other_external));
        assert!(!addresses_equivalent(&other_external, &with_host));
        let swapped_types = vec![
            a("ExternalIP", "10.0.0.1"),
            a("InternalIP", "132.143.154.163"),
        ];
        assert!(!addresses_equivalent(&swapped_types, &base));
        // ... plus the cases Go misses: several addresses of one type.
        let two = vec![a("InternalIP", "10.0.0.1"), a("InternalIP", "10.0.0.2")];
        let two_swapped = vec![a("InternalIP", "10.0.0.2"), a("InternalIP", "10.0.0.1")];
        let secondary_changed = vec![a("InternalIP", "10.0.0.9"), a("InternalIP", "10.0.0.2")];
        assert!(!addresses_equivalent(&two, &two_swapped));
        assert!(!addresses_equivalent(&secondary_changed, &two));
        // Interleaving of different types is not a change.
        let reordered = vec![
            a("ExternalIP", "132.143.154.163"),
            a("InternalIP", "10.0.0.1"),
        ];
        assert!(addresses_equivalent(&reordered, &base));
        assert!(addresses_equivalent(&[], &[]));
    }

    #[test]
    fn plan_keeps_kubelet_hostname_when_cloud_has_none() {
        // Go: "node initialized with hostname and cloud provider missing hostname".
        let n = node(vec![a(HOSTNAME, "nodeoverriden")], None);
        let cloud = vec![
            a("InternalIP", "10.0.0.1"),
            a("ExternalIP", "132.143.154.163"),
        ];
        assert_eq!(
            plan_address_update(&n, &cloud).unwrap(),
            AddressUpdate::Replace(vec![
                a("InternalIP", "10.0.0.1"),
                a("ExternalIP", "132.143.154.163"),
                a(HOSTNAME, "nodeoverriden"),
            ])
        );
    }

    #[test]
    fn plan_uses_cloud_hostname_when_given() {
        // Go: "node initialized with hostname".
        let n = node(vec![a(HOSTNAME, "nodeoverriden")], None);
        let cloud = vec![
            a(HOSTNAME, "node0.cloud.internal"),
            a("InternalIP", "10.0.0.1"),
            a("ExternalIP", "132.143.154.163"),
        ];
        assert_eq!(
            plan_address_update(&n, &cloud).unwrap(),
            AddressUpdate::Replace(cloud.clone())
        );
    }

    #[test]
    fn plan_no_cloud_addresses_and_unchanged() {
        let current = vec![a("InternalIP", "10.0.0.1"), a(HOSTNAME, "n0")];
        let n = node(current.clone(), None);
        assert_eq!(
            plan_address_update(&n, &[]).unwrap(),
            AddressUpdate::NoCloudAddresses
        );
        // Go: TestNodeAddressesNotUpdate — the same addresses are not written again.
        assert_eq!(
            plan_address_update(&n, &[a("InternalIP", "10.0.0.1")]).unwrap(),
            AddressUpdate::Unchanged
        );
        // A node with no status at all gets the cloud list.
        let bare = Node::default();
        assert_eq!(
            plan_address_update(&bare, &[a("InternalIP", "10.0.0.1")]).unwrap(),
            AddressUpdate::Replace(vec![a("InternalIP", "10.0.0.1")])
        );
    }

    #[test]
    fn plan_applies_node_ip_after_hostname_merge() {
        // Go: "provided node IP address" — the kubelet hostname survives the filter, other InternalIPs do not.
        let n = node(vec![a(HOSTNAME, "kubelet-host")], Some("10.0.0.2"));
        let cloud = vec![
            a("InternalIP", "10.0.0.1"),
            a("InternalIP", "10.0.0.2"),
            a("ExternalIP", "132.143.154.163"),
        ];
        assert_eq!(
            plan_address_update(&n, &cloud).unwrap(),
            AddressUpdate::Replace(vec![
                a("InternalIP", "10.0.0.2"),
                a("ExternalIP", "132.143.154.163"),
                a(HOSTNAME, "kubelet-host"),
            ])
        );
        // An annotation that matches nothing is an error, and nothing is planned.
        let bad = node(vec![], Some("10.9.9.9"));
        assert!(plan_address_update(&bad, &cloud).is_err());
        let unparsable = node(vec![], Some("ten"));
        assert!(matches!(
            plan_address_update(&unparsable, &cloud),
            Err(NodeIpError::Unparsable { .. })
        ));
    }
}
