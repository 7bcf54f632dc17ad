//! The route controller's decisions, as pure functions over Nodes, cloud routes and the cluster CIDRs: [`plan`]
//! before the cloud calls, [`RoutePlan::condition_writes`] after them.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet};

use ccm_core::Route;
use ccm_core::names::conditions;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The condition message when every route of the Node exists (as in Go).
pub const MESSAGE_ROUTE_CREATED: &str = "RouteController created a route";
/// The condition message when a route of the Node is missing (as in Go).
pub const MESSAGE_NO_ROUTE_CREATED: &str = "RouteController failed to create a route";

/// What a pass does with one pod CIDR of a Node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CidrAction {
    /// A working route exists: nothing to do.
    Keep,
    /// No working route exists: create one.
    Add,
    /// A route exists but points at the Node's old addresses (providers with `enable_node_addresses`): delete it,
    /// then create it again.
    Update,
}

/// Why a route is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeleteReason {
    /// The cloud reports the route as a blackhole (its target is gone).
    Blackhole,
    /// No Node with this name has this pod CIDR (a deleted Node, a moved CIDR, an empty target).
    NotDesired,
    /// The route points at addresses the Node no longer has.
    AddressesChanged,
}

/// A route to delete.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteDelete {
    /// The route as the cloud listed it.
    pub route: Route,
    /// Why.
    pub reason: DeleteReason,
}

/// A route to create.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteCreate {
    /// The target Node's name.
    pub node_name: String,
    /// The target Node's UID, passed to the provider as the name hint.
    pub name_hint: String,
    /// The route (target node, its addresses, the pod CIDR).
    pub route: Route,
    /// [`CidrAction::Add`] or [`CidrAction::Update`].
    pub action: CidrAction,
    /// The create must start only after every delete of the pass has finished: the provider uses
    /// `enable_node_addresses`, or this CIDR is also the CIDR of a route being deleted.
    pub after_deletes: bool,
}

/// One pod CIDR of a Node and what the pass does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCidr {
    /// The CIDR as written in the Node's spec.
    pub cidr: String,
    /// The action.
    pub action: CidrAction,
}

/// A Node whose `NetworkUnavailable` condition the pass manages: it has pod CIDRs, or routes point at it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRoutes {
    /// The Node's name.
    pub node_name: String,
    /// The Node's UID.
    pub node_uid: String,
    /// Its pod CIDRs (without duplicates); empty if only routes point at it.
    pub pod_cidrs: Vec<PodCidr>,
    /// Its current `NetworkUnavailable` condition, if any.
    pub network_unavailable: Option<NodeCondition>,
}

impl NodeRoutes {
    /// Whether every pod CIDR has a route after the pass, given the `(node, cidr)` creates that failed. A Node with
    /// routes but no pod CIDRs never has its routes "created".
    pub fn routes_created(&self, failed_creates: &HashSet<(String, String)>) -> bool {
        !self.pod_cidrs.is_empty()
            && self.pod_cidrs.iter().all(|c| {
                c.action == CidrAction::Keep
                    || !failed_creates.contains(&(self.node_name.clone(), c.cidr.clone()))
            })
    }
}

/// A `NetworkUnavailable` condition to write to a Node.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionWrite {
    /// The Node's name.
    pub node_name: String,
    /// The whole condition to merge into `status.conditions` (keyed by type).
    pub condition: NodeCondition,
}

/// Everything one pass does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoutePlan {
    /// Routes to delete, in the order the cloud listed them.
    pub deletes: Vec<RouteDelete>,
    /// Routes to create, by Node name then pod CIDR order.
    pub creates: Vec<RouteCreate>,
    /// Nodes whose condition the pass manages, by name.
    pub nodes: Vec<NodeRoutes>,
    /// The provider uses `enable_node_addresses` (the first listed route has it): every create waits for the
    /// deletes, as in Go.
    pub deletes_before_creates: bool,
    /// Listed routes whose CIDR does not parse: left alone.
    pub unparsable: Vec<Route>,
}

impl RoutePlan {
    /// True if the pass makes no cloud call.
    pub fn is_noop(&self) -> bool {
        self.deletes.is_empty() && self.creates.is_empty()
    }

    /// The conditions to write after the cloud calls ([`desired_network_condition`]), given the `(node, cidr)`
    /// creates that failed.
    pub fn condition_writes(
        &self,
        failed_creates: &HashSet<(String, String)>,
        now: &Time,
    ) -> Vec<ConditionWrite> {
        self.nodes
            .iter()
            .filter_map(|node| {
                desired_network_condition(
                    node.network_unavailable.as_ref(),
                    node.routes_created(failed_creates),
                    now,
                )
                .map(|condition| ConditionWrite {
                    node_name: node.node_name.clone(),
                    condition,
                })
            })
            .collect()
    }
}

/// The Node's pod CIDRs: `spec.podCIDRs`, or else `spec.podCIDR`; empty strings and duplicates dropped.
pub fn node_pod_cidrs(node: &Node) -> Vec<String> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    let raw = match spec.pod_cidrs.as_deref() {
        Some(listed) if !listed.is_empty() => listed,
        _ => spec.pod_cidr.as_slice(),
    };
    let mut seen = HashSet::new();
    raw.iter()
        .map(|c| c.trim())
        .filter(|c| !c.is_empty() && seen.insert(cidr_key(c)))
        .map(str::to_owned)
        .collect()
}

/// A comparable form of a CIDR: the canonical network if it parses (so `a00:100:0::/24` equals `a00:100::/24`),
/// else the trimmed text.
pub fn cidr_key(cidr: &str) -> String {
    let cidr = cidr.trim();
    cidr.parse::<IpNet>()
        .map(|n| n.trunc().to_string())
        .unwrap_or_else(|_| cidr.to_owned())
}

/// Whether the controller owns a route with this destination: its first or last address lies in a cluster CIDR
/// (Go: `isResponsibleForRoute`). `None` if the CIDR does not parse.
pub fn is_responsible_for_route(destination_cidr: &str, cluster_cidrs: &[IpNet]) -> Option<bool> {
    let net = destination_cidr.trim().parse::<IpNet>().ok()?;
    let (first, last) = (net.network(), net.broadcast());
    Some(
        cluster_cidrs
            .iter()
            .any(|c| c.contains(&first) || c.contains(&last)),
    )
}

/// Whether two address lists hold the same addresses, in any order.
pub fn same_addresses(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    fn sorted(list: &[NodeAddress]) -> Vec<(&str, &str)> {
        let mut v: Vec<_> = list
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect();
        v.sort_unstable();
        v
    }
    a.len() == b.len() && sorted(a) == sorted(b)
}

/// The `NetworkUnavailable` condition to write: `False`/`RouteCreated` if `routes_created`, else
/// `True`/`NoRouteCreated`; `None` when the current one already has that status **and** reason (Go 1.36: a
/// condition with the right status but another reason, for example a CNI's, is overwritten). `lastHeartbeatTime`
/// is `now`; `lastTransitionTime` is `now` when the status changes (or there was no condition), else kept.
///
/// ```
/// use ccm_routecontroller::plan::desired_network_condition;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
///
/// let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
/// let cond = desired_network_condition(None, true, &now).unwrap();
/// assert_eq!((cond.status.as_str(), cond.reason.as_deref()), ("False", Some("RouteCreated")));
/// assert!(desired_network_condition(Some(&cond), true, &now).is_none());
/// ```
pub fn desired_network_condition(
    current: Option<&NodeCondition>,
    routes_created: bool,
    now: &Time,
) -> Option<NodeCondition> {
    let (status, reason, message) = if routes_created {
        (
            "False",
            conditions::REASON_ROUTE_CREATED,
            MESSAGE_ROUTE_CREATED,
        )
    } else {
        (
            "True",
            conditions::REASON_NO_ROUTE_CREATED,
            MESSAGE_NO_ROUTE_CREATED,
        )
    };
    if let Some(c) = current
        && c.status == status
        && c.reason.as_deref() == Some(reason)
    {
        return None;
    }
    let transition = current
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    Some(NodeCondition {
        type_: conditions::NETWORK_UNAVAILABLE.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(transition),
    })
}

fn network_unavailable(node: &Node) -> Option<NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == conditions::NETWORK_UNAVAILABLE)
        .cloned()
}

/// Compare the cloud's `routes` with the `nodes` and decide what one pass does (Go: `reconcile`).
///
/// - Desired routes: one per Node and pod CIDR ([`node_pod_cidrs`]); Nodes without pod CIDRs get none.
/// - A pod CIDR with a working (non-blackhole) route of the Node is kept, unless the route uses
///   `enable_node_addresses` and its addresses differ from the Node's (as sets): then it is updated (deleted,
///   then created). Otherwise it is added; if only a blackhole route exists for it, that route is deleted and the
///   create waits for the delete.
/// - Routes whose CIDR lies in a cluster CIDR ([`is_responsible_for_route`]) are deleted if they are blackholes
///   or no kept pod CIDR matches them. Routes outside the cluster CIDRs are never touched.
/// - Every Node that has pod CIDRs or is the target of a listed route gets a [`NodeRoutes`] entry.
///
/// ```
/// use ccm_core::Route;
/// use ccm_routecontroller::plan::plan;
/// use k8s_openapi::api::core::v1::{Node, NodeSpec};
///
/// let mut node = Node::default();
/// node.metadata.name = Some("node-a".into());
/// node.metadata.uid = Some("uid-a".into());
/// node.spec = Some(NodeSpec { pod_cidrs: Some(vec!["10.244.1.0/24".into()]), ..Default::default() });
/// let stale = Route::new("gone", "10.244.9.0/24");
/// let plan = plan(&[node], &[stale], &["10.244.0.0/16".parse().unwrap()]);
/// assert_eq!(plan.deletes.len(), 1);
/// assert_eq!(plan.creates[0].name_hint, "uid-a");
/// ```
pub fn plan<N: Borrow<Node>>(nodes: &[N], routes: &[Route], cluster_cidrs: &[IpNet]) -> RoutePlan {
    let deletes_before_creates = routes.first().is_some_and(|r| r.enable_node_addresses);

    // Existing routes by target node (routes without a target are not grouped, as in Go).
    let mut by_node: HashMap<&str, Vec<&Route>> = HashMap::new();
    for route in routes.iter().filter(|r| !r.target_node.is_empty()) {
        by_node
            .entry(route.target_node.as_str())
            .or_default()
            .push(route);
    }

    let sorted: BTreeMap<&str, &Node> = nodes
        .iter()
        .map(|node| node.borrow())
        .filter_map(|node: &Node| Some((node.metadata.name.as_deref()?, node)))
        .collect();

    let mut actions: HashMap<(&str, String), CidrAction> = HashMap::new();
    let mut node_entries = Vec::new();
    let mut creates = Vec::new();
    for (&name, &node) in &sorted {
        let cidrs = node_pod_cidrs(node);
        let existing = by_node.get(name).map(Vec::as_slice).unwrap_or_default();
        if cidrs.is_empty() && existing.is_empty() {
            continue;
        }
        let addresses = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default();
        let mut pod_cidrs = Vec::with_capacity(cidrs.len());
        for cidr in cidrs {
            let key = cidr_key(&cidr);
            let live: Vec<&&Route> = existing
                .iter()
                .filter(|r| !r.blackhole && cidr_key(&r.destination_cidr) == key)
                .collect();
            let action = if live.is_empty() {
                CidrAction::Add
            } else if live.iter().any(|r| {
                !r.enable_node_addresses || same_addresses(&r.target_node_addresses, &addresses)
            }) {
                CidrAction::Keep
            } else {
                CidrAction::Update
            };
            actions.insert((name, key), action);
            if action != CidrAction::Keep {
                let mut route = Route::new(name, cidr.clone());
                route.target_node_addresses = addresses.clone();
                // Also after the deletes if a route of this CIDR is deleted (marked below).
                let after_deletes = deletes_before_creates || action == CidrAction::Update;
                creates.push(RouteCreate {
                    node_name: name.to_owned(),
                    name_hint: node.metadata.uid.clone().unwrap_or_default(),
                    route,
                    action,
                    after_deletes,
                });
            }
            pod_cidrs.push(PodCidr { cidr, action });
        }
        node_entries.push(NodeRoutes {
            node_name: name.to_owned(),
            node_uid: node.metadata.uid.clone().unwrap_or_default(),
            pod_cidrs,
            network_unavailable: network_unavailable(node),
        });
    }

    let mut deletes = Vec::new();
    let mut unparsable = Vec::new();
    let mut deleted_keys = HashSet::new();
    for route in routes {
        match is_responsible_for_route(&route.destination_cidr, cluster_cidrs) {
            None => {
                unparsable.push(route.clone());
                continue;
            }
            Some(false) => continue,
            Some(true) => {}
        }
        let key = cidr_key(&route.destination_cidr);
        let reason = if route.blackhole {
            Some(DeleteReason::Blackhole)
        } else {
            match actions.get(&(route.target_node.as_str(), key.clone())) {
                Some(CidrAction::Keep) => None,
                Some(CidrAction::Update) => Some(DeleteReason::AddressesChanged),
                Some(CidrAction::Add) | None => Some(DeleteReason::NotDesired),
            }
        };
        if let Some(reason) = reason {
            deleted_keys.insert(key);
            deletes.push(RouteDelete {
                route: route.clone(),
                reason,
            });
        }
    }

    for create in &mut creates {
        create.after_deletes |= deleted_keys.contains(&cidr_key(&create.route.destination_cidr));
    }

    RoutePlan {
        deletes,
        creates,
        nodes: node_entries,
        deletes_before_creates,
        unparsable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use k8s_openapi::jiff::Timestamp;

    const CLUSTER: &str = "my-k8s";

    fn addr(ip: &str) -> Vec<NodeAddress> {
        vec![NodeAddress {
            type_: "InternalIP".into(),
            address: ip.into(),
        }]
    }

    fn node(name: &str, uid: &str, cidrs: &[&str], ip: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.uid = Some(uid.into());
        n.spec = Some(NodeSpec {
            pod_cidr: cidrs.first().map(|c| c.to_string()),
            pod_cidrs: Some(cidrs.iter().map(|c| c.to_string()).collect()),
            ..Default::default()
        });
        n.status = Some(NodeStatus {
            addresses: Some(addr(ip)),
            ..Default::default()
        });
        n
    }

    fn route(n: usize, target: &str, ip: &str, cidr: &str) -> Route {
        let mut r = Route::new(target, cidr).with_name(format!("{CLUSTER}-{n:02}"));
        r.target_node_addresses = addr(ip);
        r
    }

    fn addr_route(n: usize, target: &str, ip: Option<&str>, cidr: &str) -> Route {
        let mut r = Route::new(target, cidr).with_name(format!("{CLUSTER}-{n:02}"));
        r.enable_node_addresses = true;
        r.target_node_addresses = ip.map(addr).unwrap_or_default();
        r
    }

    fn single() -> Vec<IpNet> {
        vec!["10.120.0.0/16".parse().unwrap()]
    }

    fn dual() -> Vec<IpNet> {
        vec![
            "10.120.0.0/16".parse().unwrap(),
            "ace:cab:deca::/8".parse::<IpNet>().unwrap().trunc(),
        ]
    }

    // The Go test's nodes.
    fn node1() -> Node {
        node("node-1", "01", &["10.120.0.0/24"], "10.0.1.1")
    }
    fn node2() -> Node {
        node("node-2", "02", &["10.120.1.0/24"], "10.0.2.1")
    }
    fn node_no_cidr() -> Node {
        node("node-2", "02", &[], "10.0.5.1")
    }
    fn node3() -> Node {
        node(
            "node-3",
            "03",
            &["10.120.0.0/24", "a00:100::/24"],
            "10.0.3.1",
        )
    }
    fn node4() -> Node {
        node(
            "node-4",
            "04",
            &["10.120.1.0/24", "a00:200::/24"],
            "10.0.4.1",
        )
    }

    /// `(target, cidr)` of each delete, sorted.
    fn deleted(p: &RoutePlan) -> Vec<(String, String, DeleteReason)> {
        let mut v: Vec<_> = p
            .deletes
            .iter()
            .map(|d| {
                (
                    d.route.target_node.clone(),
                    d.route.destination_cidr.clone(),
                    d.reason,
                )
            })
            .collect();
        v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        v
    }

    /// `(target, cidr, after_deletes)` of each create, in plan order.
    fn created(p: &RoutePlan) -> Vec<(String, String, bool)> {
        p.creates
            .iter()
            .map(|c| {
                (
                    c.route.target_node.clone(),
                    c.route.destination_cidr.clone(),
                    c.after_deletes,
                )
            })
            .collect()
    }

    fn d(t: &str, c: &str, r: DeleteReason) -> (String, String, DeleteReason) {
        (t.into(), c.into(), r)
    }
    fn c(t: &str, cidr: &str, after: bool) -> (String, String, bool) {
        (t.into(), cidr.into(), after)
    }

    /// The routes the cloud holds after applying the plan with every call succeeding.
    fn apply(routes: &[Route], p: &RoutePlan) -> Vec<(String, String, Vec<NodeAddress>)> {
        let mut out: Vec<_> = routes
            .iter()
            .filter(|r| !p.deletes.iter().any(|d| &d.route == *r))
            .chain(p.creates.iter().map(|c| &c.route))
            .map(|r| {
                (
                    r.target_node.clone(),
                    r.destination_cidr.clone(),
                    r.target_node_addresses.clone(),
                )
            })
            .collect();
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    fn expect(list: &[(&str, &str, &str)]) -> Vec<(String, String, Vec<NodeAddress>)> {
        let mut v: Vec<_> = list
            .iter()
            .map(|(t, c, ip)| (t.to_string(), c.to_string(), addr(ip)))
            .collect();
        v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        v
    }

    fn all_created(p: &RoutePlan) -> Vec<(String, bool)> {
        let none = HashSet::new();
        p.nodes
            .iter()
            .map(|n| (n.node_name.clone(), n.routes_created(&none)))
            .collect()
    }

    fn dual_final() -> Vec<(String, String, Vec<NodeAddress>)> {
        expect(&[
            ("node-3", "10.120.0.0/24", "10.0.3.1"),
            ("node-4", "10.120.1.0/24", "10.0.4.1"),
            ("node-3", "a00:100::/24", "10.0.3.1"),
            ("node-4", "a00:200::/24", "10.0.4.1"),
        ])
    }

    #[test]
    fn routes_without_target_addresses_are_updated() {
        let routes = vec![
            addr_route(1, "node-3", None, "10.120.0.0/24"),
            addr_route(2, "node-4", None, "10.120.1.0/24"),
            addr_route(3, "node-3", None, "a00:100::/24"),
            addr_route(4, "node-4", None, "a00:200::/24"),
        ];
        let p = plan(&[node3(), node4()], &routes, &dual());
        assert!(p.deletes_before_creates);
        assert_eq!(p.deletes.len(), 4);
        assert!(
            p.deletes
                .iter()
                .all(|d| d.reason == DeleteReason::AddressesChanged)
        );
        assert_eq!(p.creates.len(), 4);
        assert!(
            p.creates
                .iter()
                .all(|c| c.after_deletes && c.action == CidrAction::Update)
        );
        assert_eq!(apply(&routes, &p), dual_final());
        assert_eq!(
            all_created(&p),
            vec![("node-3".into(), true), ("node-4".into(), true)]
        );
    }

    #[test]
    fn changed_target_addresses_are_updated() {
        let routes = vec![
            addr_route(1, "node-3", Some("10.0.13.1"), "10.120.0.0/24"),
            addr_route(2, "node-4", Some("10.0.14.1"), "10.120.1.0/24"),
            addr_route(3, "node-3", Some("10.0.13.1"), "a00:100::/24"),
            addr_route(4, "node-4", Some("10.0.14.1"), "a00:200::/24"),
        ];
        let p = plan(&[node3(), node4()], &routes, &dual());
        assert!(p.deletes_before_creates);
        assert_eq!(p.deletes.len(), 4);
        assert_eq!(p.creates.len(), 4);
        assert_eq!(apply(&routes, &p), dual_final());
    }

    #[test]
    fn unchanged_addresses_in_another_order_are_kept() {
        let mut n = node1();
        let mut addrs = addr("10.0.1.1");
        addrs.push(NodeAddress {
            type_: "Hostname".into(),
            address: "node-1".into(),
        });
        n.status.as_mut().unwrap().addresses = Some(addrs.clone());
        let mut r = addr_route(1, "node-1", None, "10.120.0.0/24");
        r.target_node_addresses = addrs.into_iter().rev().collect();
        let p = plan(&[n], &[r], &single());
        assert!(p.is_noop(), "{p:?}");
        assert_eq!(p.nodes[0].pod_cidrs[0].action, CidrAction::Keep);
    }

    #[test]
    fn addresses_ignored_without_enable_node_addresses() {
        let routes = vec![route(1, "node-1", "10.9.9.9", "10.120.0.0/24")];
        let p = plan(&[node1()], &routes, &single());
        assert!(p.is_noop());
        assert!(!p.deletes_before_creates);
    }

    #[test]
    fn multi_cidr_no_routes() {
        let p = plan(&[node3(), node4()], &[], &dual());
        assert!(p.deletes.is_empty());
        assert_eq!(
            created(&p),
            vec![
                c("node-3", "10.120.0.0/24", false),
                c("node-3", "a00:100::/24", false),
                c("node-4", "10.120.1.0/24", false),
                c("node-4", "a00:200::/24", false),
            ]
        );
        assert_eq!(apply(&[], &p), dual_final());
        assert!(
            p.creates
                .iter()
                .all(|c| c.name_hint == c.node_name.replace("node-", "0"))
        );
        assert!(p.creates.iter().all(|c| !c.route.enable_node_addresses));
    }

    #[test]
    fn multi_cidr_all_routes_created() {
        let routes = vec![
            route(1, "node-3", "10.0.3.1", "10.120.0.0/24"),
            route(2, "node-4", "10.0.4.1", "10.120.1.0/24"),
            route(3, "node-3", "10.0.3.1", "a00:100::/24"),
            route(4, "node-4", "10.0.4.1", "a00:200::/24"),
        ];
        let p = plan(&[node3(), node4()], &routes, &dual());
        assert!(p.is_noop());
        assert_eq!(
            all_created(&p),
            vec![("node-3".into(), true), ("node-4".into(), true)]
        );
    }

    #[test]
    fn multi_cidr_wrong_routes_are_swapped_after_deletes() {
        let routes = vec![
            route(1, "node-3", "10.0.3.1", "10.120.1.0/24"),
            route(2, "node-4", "10.0.4.1", "10.120.0.0/24"),
            route(3, "node-3", "10.0.3.1", "a00:200::/24"),
            route(4, "node-4", "10.0.4.1", "a00:100::/24"),
        ];
        let p = plan(&[node3(), node4()], &routes, &dual());
        assert_eq!(
            deleted(&p),
            vec![
                d("node-3", "10.120.1.0/24", DeleteReason::NotDesired),
                d("node-3", "a00:200::/24", DeleteReason::NotDesired),
                d("node-4", "10.120.0.0/24", DeleteReason::NotDesired),
                d("node-4", "a00:100::/24", DeleteReason::NotDesired),
            ]
        );
        // Each CIDR moves between nodes: its create waits for the delete of the old route.
        assert!(p.creates.iter().all(|c| c.after_deletes), "{p:?}");
        assert!(!p.deletes_before_creates);
        assert_eq!(apply(&routes, &p), dual_final());
    }

    #[test]
    fn multi_cidr_some_routes_created() {
        let routes = vec![
            route(1, "node-3", "10.0.3.1", "10.120.0.0/24"),
            route(4, "node-4", "10.0.4.1", "a00:200::/24"),
        ];
        let p = plan(&[node3(), node4()], &routes, &dual());
        assert!(p.deletes.is_empty());
        assert_eq!(
            created(&p),
            vec![
                c("node-3", "a00:100::/24", false),
                c("node-4", "10.120.1.0/24", false),
            ]
        );
        assert_eq!(apply(&routes, &p), dual_final());
    }

    #[test]
    fn multi_cidr_too_many_routes() {
        let routes = vec![
            route(1, "node-3", "10.0.3.1", "10.120.0.0/24"),
            route(2, "node-4", "10.0.4.1", "10.120.1.0/24"),
            route(5, "node-x", "10.0.5.1", "10.120.2.0/24"),
            route(3, "node-3", "10.0.3.1", "a00:100::/24"),
            route(4, "node-4", "10.0.4.1", "a00:200::/24"),
            route(6, "node-y", "10.0.6.1", "a00:300::/24"),
        ];
        let p = plan(&[node3(), node4()], &routes, &dual());
        assert_eq!(
            deleted(&p),
            vec![
                d("node-x", "10.120.2.0/24", DeleteReason::NotDesired),
                d("node-y", "a00:300::/24", DeleteReason::NotDesired),
            ]
        );
        assert!(p.creates.is_empty());
        assert_eq!(apply(&routes, &p), dual_final());
        // Unknown nodes have no condition to manage.
        assert_eq!(p.nodes.len(), 2);
    }

    #[test]
    fn single_cidr_routes_created() {
        let routes = vec![
            route(1, "node-1", "10.0.1.1", "10.120.0.0/24"),
            route(2, "node-2", "10.0.2.1", "10.120.1.0/24"),
        ];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert!(p.is_noop());
        assert_eq!(
            all_created(&p),
            vec![("node-1".into(), true), ("node-2".into(), true)]
        );
    }

    #[test]
    fn single_cidr_node_ips_changed() {
        let routes = vec![
            addr_route(1, "node-1", Some("10.0.1.2"), "10.120.0.0/24"),
            addr_route(2, "node-2", Some("10.0.2.2"), "10.120.1.0/24"),
        ];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert_eq!(
            deleted(&p),
            vec![
                d("node-1", "10.120.0.0/24", DeleteReason::AddressesChanged),
                d("node-2", "10.120.1.0/24", DeleteReason::AddressesChanged),
            ]
        );
        assert_eq!(
            created(&p),
            vec![
                c("node-1", "10.120.0.0/24", true),
                c("node-2", "10.120.1.0/24", true),
            ]
        );
        assert_eq!(
            apply(&routes, &p),
            expect(&[
                ("node-1", "10.120.0.0/24", "10.0.1.1"),
                ("node-2", "10.120.1.0/24", "10.0.2.1"),
            ])
        );
    }

    #[test]
    fn update_waits_for_deletes_even_if_first_route_lacks_the_flag() {
        let routes = vec![
            route(1, "node-1", "10.0.1.1", "10.120.0.0/24"),
            addr_route(2, "node-2", Some("10.0.2.2"), "10.120.1.0/24"),
        ];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert!(!p.deletes_before_creates);
        assert_eq!(created(&p), vec![c("node-2", "10.120.1.0/24", true)]);
    }

    #[test]
    fn single_cidr_one_route_created() {
        let routes = vec![route(1, "node-1", "10.0.1.1", "10.120.0.0/24")];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert!(p.deletes.is_empty());
        assert_eq!(created(&p), vec![c("node-2", "10.120.1.0/24", false)]);
        assert_eq!(p.creates[0].name_hint, "02");
        assert_eq!(p.creates[0].route.target_node_addresses, addr("10.0.2.1"));
    }

    #[test]
    fn single_cidr_no_routes() {
        let p = plan(&[node2(), node1()], &[], &single());
        assert_eq!(
            created(&p),
            vec![
                c("node-1", "10.120.0.0/24", false),
                c("node-2", "10.120.1.0/24", false),
            ],
            "creates are ordered by node name"
        );
    }

    #[test]
    fn single_cidr_too_many_routes() {
        let routes = vec![
            route(1, "node-1", "10.0.1.1", "10.120.0.0/24"),
            route(2, "node-2", "10.0.2.1", "10.120.1.0/24"),
            route(3, "node-3", "10.0.3.1", "10.120.2.0/24"),
            route(4, "node-4", "10.0.4.1", "10.120.3.0/24"),
        ];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert_eq!(
            deleted(&p),
            vec![
                d("node-3", "10.120.2.0/24", DeleteReason::NotDesired),
                d("node-4", "10.120.3.0/24", DeleteReason::NotDesired),
            ]
        );
        assert!(p.creates.is_empty());
        assert_eq!(p.deletes[0].route.name, "my-k8s-03", "listing order");
    }

    #[test]
    fn single_cidr_one_incorrect_route() {
        let routes = vec![
            route(1, "node-1", "10.0.1.1", "10.120.0.0/24"),
            route(3, "node-3", "10.0.2.1", "10.120.2.0/24"),
        ];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert_eq!(
            deleted(&p),
            vec![d("node-3", "10.120.2.0/24", DeleteReason::NotDesired)]
        );
        assert_eq!(created(&p), vec![c("node-2", "10.120.1.0/24", false)]);
    }

    #[test]
    fn node_without_cidr_is_skipped() {
        let p = plan(&[node1(), node_no_cidr()], &[], &single());
        assert_eq!(created(&p), vec![c("node-1", "10.120.0.0/24", false)]);
        assert_eq!(
            p.nodes
                .iter()
                .map(|n| n.node_name.as_str())
                .collect::<Vec<_>>(),
            vec!["node-1"],
            "a node without pod CIDRs and without routes is left alone"
        );
    }

    #[test]
    fn blackhole_in_range_is_deleted() {
        let mut hole = route(3, "", "10.0.100.1", "10.120.2.0/24");
        hole.blackhole = true;
        let routes = vec![
            route(1, "node-1", "10.0.1.1", "10.120.0.0/24"),
            route(2, "node-2", "10.0.2.1", "10.120.1.0/24"),
            hole,
        ];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert_eq!(
            deleted(&p),
            vec![d("", "10.120.2.0/24", DeleteReason::Blackhole)]
        );
        assert!(p.creates.is_empty());
    }

    #[test]
    fn blackhole_out_of_range_is_kept() {
        let mut hole = route(3, "", "10.0.100.1", "10.1.2.0/24");
        hole.blackhole = true;
        let routes = vec![
            route(1, "node-1", "10.0.1.1", "10.120.0.0/24"),
            route(2, "node-2", "10.0.2.1", "10.120.1.0/24"),
            hole,
        ];
        let p = plan(&[node1(), node2()], &routes, &single());
        assert!(p.is_noop());
    }

    #[test]
    fn blackhole_of_a_desired_cidr_is_replaced() {
        let mut hole = route(1, "node-1", "10.0.1.1", "10.120.0.0/24");
        hole.blackhole = true;
        let p = plan(&[node1()], &[hole], &single());
        assert_eq!(
            deleted(&p),
            vec![d("node-1", "10.120.0.0/24", DeleteReason::Blackhole)]
        );
        assert_eq!(created(&p), vec![c("node-1", "10.120.0.0/24", true)]);
        assert_eq!(p.nodes[0].pod_cidrs[0].action, CidrAction::Add);
    }

    #[test]
    fn blackhole_next_to_a_live_route_only_deletes_the_blackhole() {
        let mut hole = route(2, "node-1", "10.0.1.1", "10.120.0.0/24");
        hole.blackhole = true;
        let live = route(1, "node-1", "10.0.1.1", "10.120.0.0/24");
        let p = plan(&[node1()], &[live, hole], &single());
        assert_eq!(
            deleted(&p),
            vec![d("node-1", "10.120.0.0/24", DeleteReason::Blackhole)]
        );
        assert!(p.creates.is_empty());
        assert!(p.nodes[0].routes_created(&HashSet::new()));
    }

    #[test]
    fn duplicate_pod_cidr_gives_one_route() {
        let dup = node(
            "node-4",
            "04",
            &["10.120.1.0/24", "10.120.1.0/24"],
            "10.0.4.1",
        );
        let p = plan(&[dup], &[], &single());
        assert_eq!(created(&p), vec![c("node-4", "10.120.1.0/24", false)]);
        assert_eq!(p.nodes[0].pod_cidrs.len(), 1);
    }

    #[test]
    fn duplicate_routes_of_a_kept_cidr_are_kept() {
        let routes = vec![
            route(1, "node-1", "10.0.1.1", "10.120.0.0/24"),
            route(2, "node-1", "10.0.1.1", "10.120.0.0/24"),
        ];
        assert!(plan(&[node1()], &routes, &single()).is_noop());
    }

    #[test]
    fn routes_of_unknown_nodes_in_and_out_of_range() {
        let routes = vec![
            route(1, "ghost", "10.0.9.1", "10.120.9.0/24"),
            route(2, "ghost", "10.0.9.1", "192.168.9.0/24"),
            route(3, "", "10.0.9.1", "10.120.8.0/24"),
        ];
        let p = plan::<Node>(&[], &routes, &single());
        assert_eq!(
            deleted(&p),
            vec![
                d("", "10.120.8.0/24", DeleteReason::NotDesired),
                d("ghost", "10.120.9.0/24", DeleteReason::NotDesired),
            ]
        );
        assert!(p.nodes.is_empty());
    }

    #[test]
    fn node_with_routes_but_no_pod_cidrs() {
        let routes = vec![
            route(1, "node-2", "10.0.5.1", "10.120.5.0/24"),
            route(2, "node-2", "10.0.5.1", "172.16.0.0/24"),
        ];
        let p = plan(&[node_no_cidr()], &routes, &single());
        assert_eq!(
            deleted(&p),
            vec![d("node-2", "10.120.5.0/24", DeleteReason::NotDesired)]
        );
        assert_eq!(p.nodes.len(), 1);
        assert!(p.nodes[0].pod_cidrs.is_empty());
        assert!(!p.nodes[0].routes_created(&HashSet::new()));
        let now = Time(Timestamp::UNIX_EPOCH);
        let writes = p.condition_writes(&HashSet::new(), &now);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].condition.status, "True");
        assert_eq!(
            writes[0].condition.reason.as_deref(),
            Some(conditions::REASON_NO_ROUTE_CREATED)
        );
    }

    #[test]
    fn pod_cidr_fallback_and_normalisation() {
        let mut n = node1();
        n.spec.as_mut().unwrap().pod_cidrs = None;
        assert_eq!(node_pod_cidrs(&n), vec!["10.120.0.0/24"]);
        n.spec.as_mut().unwrap().pod_cidr = Some(String::new());
        assert!(node_pod_cidrs(&n).is_empty());
        assert!(node_pod_cidrs(&Node::default()).is_empty());

        // A cloud that spells IPv6 differently still matches.
        let routes = vec![
            route(1, "node-3", "10.0.3.1", "10.120.0.0/24"),
            route(2, "node-3", "10.0.3.1", "a00:100:0::/24"),
        ];
        let p = plan(&[node3()], &routes, &dual());
        assert!(p.is_noop(), "{p:?}");
        assert_eq!(cidr_key("a00:100:0:0::/24"), "a00:100::/24");
        assert_eq!(cidr_key(" junk "), "junk");
    }

    #[test]
    fn unparsable_routes_are_left_alone() {
        let routes = vec![route(1, "node-1", "10.0.1.1", "not-a-cidr")];
        let p = plan(&[node1()], &routes, &single());
        assert!(p.deletes.is_empty());
        assert_eq!(p.unparsable, routes);
        assert_eq!(created(&p), vec![c("node-1", "10.120.0.0/24", false)]);
    }

    #[test]
    fn arc_nodes_are_accepted() {
        let nodes = vec![std::sync::Arc::new(node1())];
        assert_eq!(plan(&nodes, &[], &single()).creates.len(), 1);
    }

    #[test]
    fn responsibility_table() {
        // The Go test's table.
        let cases = [
            ("10.244.0.0/16", "10.244.0.0/24", true),
            ("10.244.0.0/16", "10.244.10.0/24", true),
            ("10.244.0.0/16", "10.244.255.0/24", true),
            ("10.244.0.0/14", "10.244.0.0/24", true),
            ("10.244.0.0/14", "10.247.255.0/24", true),
            ("a00:100::/10", "a00:100::/24", true),
            ("10.244.0.0/16", "10.224.0.0/24", false),
            ("10.244.0.0/16", "10.0.10.0/24", false),
            ("10.244.0.0/16", "10.255.255.0/24", false),
            ("10.244.0.0/14", "10.248.0.0/24", false),
            ("10.244.0.0/14", "10.243.255.0/24", false),
            ("a00:100::/10", "b00:100::/24", false),
            // Only the last address inside: a route wider than the cluster CIDR starting below it.
            ("10.244.0.0/16", "10.243.0.0/15", false),
            ("10.245.0.0/16", "10.244.0.0/15", true),
            // Across families.
            ("10.244.0.0/16", "fd00::/8", false),
        ];
        for (cluster, cidr, want) in cases {
            let nets = vec![cluster.parse::<IpNet>().unwrap().trunc()];
            assert_eq!(
                is_responsible_for_route(cidr, &nets),
                Some(want),
                "{cluster} {cidr}"
            );
        }
        assert_eq!(is_responsible_for_route("nope", &single()), None);
        assert_eq!(
            is_responsible_for_route("10.120.3.0/24", &dual()),
            Some(true)
        );
    }

    #[test]
    fn same_addresses_is_order_insensitive() {
        let a = vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.1".into(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: "n".into(),
            },
        ];
        let b: Vec<_> = a.iter().rev().cloned().collect();
        assert!(same_addresses(&a, &b));
        assert!(!same_addresses(&a, &a[..1]));
        assert!(!same_addresses(&a[..1], &addr("10.0.0.2")));
        assert!(same_addresses(&[], &[]));
    }

    fn cond(status: &str, reason: &str, transition: Option<Timestamp>) -> NodeCondition {
        NodeCondition {
            type_: conditions::NETWORK_UNAVAILABLE.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some("previous".into()),
            last_heartbeat_time: None,
            last_transition_time: transition.map(Time),
        }
    }

    /// The expected write: status, reason, message, lastTransitionTime.
    type Expected<'a> = (&'a str, &'a str, &'a str, &'a Time);

    #[test]
    fn condition_matrix() {
        let earlier = Timestamp::from_second(1_000).unwrap();
        let now = Time(Timestamp::from_second(2_000).unwrap());
        let before = Time(earlier);
        // (current, routes created, expected write: (status, reason, message, transition))
        let cases: Vec<(Option<NodeCondition>, bool, Option<Expected>)> = vec![
            (
                None,
                true,
                Some(("False", "RouteCreated", MESSAGE_ROUTE_CREATED, &now)),
            ),
            (
                None,
                false,
                Some(("True", "NoRouteCreated", MESSAGE_NO_ROUTE_CREATED, &now)),
            ),
            (
                Some(cond("False", "RouteCreated", Some(earlier))),
                true,
                None,
            ),
            (
                Some(cond("True", "NoRouteCreated", Some(earlier))),
                false,
                None,
            ),
            // Status matches but the reason is a CNI's: written (Go 1.36), transition time kept.
            (
                Some(cond("False", "CalicoIsUp", Some(earlier))),
                true,
                Some(("False", "RouteCreated", MESSAGE_ROUTE_CREATED, &before)),
            ),
            (
                Some(cond("True", "SomethingElse", Some(earlier))),
                false,
                Some(("True", "NoRouteCreated", MESSAGE_NO_ROUTE_CREATED, &before)),
            ),
            // Status flips: transition time is now.
            (
                Some(cond("True", "NoRouteCreated", Some(earlier))),
                true,
                Some(("False", "RouteCreated", MESSAGE_ROUTE_CREATED, &now)),
            ),
            (
                Some(cond("False", "RouteCreated", Some(earlier))),
                false,
                Some(("True", "NoRouteCreated", MESSAGE_NO_ROUTE_CREATED, &now)),
            ),
            (
                Some(cond("False", "CalicoIsUp", Some(earlier))),
                false,
                Some(("True", "NoRouteCreated", MESSAGE_NO_ROUTE_CREATED, &now)),
            ),
            // Unknown status, or a matching status without a transition time.
            (
                Some(cond("Unknown", "RouteCreated", Some(earlier))),
                true,
                Some(("False", "RouteCreated", MESSAGE_ROUTE_CREATED, &now)),
            ),
            (
                Some(cond("False", "Other", None)),
                true,
                Some(("False", "RouteCreated", MESSAGE_ROUTE_CREATED, &now)),
            ),
        ];
        for (i, (current, created, want)) in cases.into_iter().enumerate() {
            let got = desired_network_condition(current.as_ref(), created, &now);
            match (got, want) {
                (None, None) => {}
                (Some(got), Some((status, reason, message, transition))) => {
                    assert_eq!(got.type_, "NetworkUnavailable", "case {i}");
                    assert_eq!(got.status, status, "case {i}");
                    assert_eq!(got.reason.as_deref(), Some(reason), "case {i}");
                    assert_eq!(got.message.as_deref(), Some(message), "case {i}");
                    assert_eq!(got.last_heartbeat_time.as_ref(), Some(&now), "case {i}");
                    assert_eq!(
                        got.last_transition_time.as_ref(),
                        Some(transition),
                        "case {i}"
                    );
                }
                (got, want) => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn condition_writes_follow_create_failures() {
        let mut n3 = node3();
        n3.status.as_mut().unwrap().conditions = Some(vec![cond("False", "RouteCreated", None)]);
        let mut n1 = node1();
        n1.status.as_mut().unwrap().conditions = Some(vec![cond("True", "NoRouteCreated", None)]);
        let routes = vec![
            route(1, "node-3", "10.0.3.1", "10.120.0.0/24"),
            route(2, "node-1", "10.0.1.1", "10.120.0.0/24"),
        ];
        let p = plan(&[n1, n3], &routes, &dual());
        assert_eq!(created(&p), vec![c("node-3", "a00:100::/24", false)]);
        let now = Time(Timestamp::UNIX_EPOCH);

        // node-3's IPv6 create fails: it goes to NoRouteCreated; node-1 (kept) goes to RouteCreated.
        let failed: HashSet<_> = [("node-3".to_string(), "a00:100::/24".to_string())].into();
        let writes = p.condition_writes(&failed, &now);
        let summary: Vec<_> = writes
            .iter()
            .map(|w| (w.node_name.as_str(), w.condition.status.as_str()))
            .collect();
        assert_eq!(summary, vec![("node-1", "False"), ("node-3", "True")]);

        // Everything succeeds: node-3 already says RouteCreated, so only node-1 is written.
        let writes = p.condition_writes(&HashSet::new(), &now);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].node_name, "node-1");
    }
}
