//! Every well-known name the controllers read or write, spelled exactly as the Go reference spells it, so a
//! cluster can move between a Go CCM and one built with this SDK.

/// Taints.
pub mod taints {
    /// Set by a kubelet started with `--cloud-provider=external`; removed by the cloud node controller.
    pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
    /// Added (NoSchedule, no value) by the node lifecycle controller to shut-down instances.
    pub const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
    /// Set by the cluster autoscaler on nodes it is about to delete; such nodes leave load balancers.
    pub const TO_BE_DELETED_BY_CLUSTER_AUTOSCALER: &str = "ToBeDeletedByClusterAutoscaler";
    /// Added by the node lifecycle controller in the control plane to NotReady nodes.
    pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
    /// Added to unreachable nodes.
    pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    /// Control-plane nodes.
    pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
    /// Control-plane nodes (legacy name).
    pub const MASTER: &str = "node-role.kubernetes.io/master";
    /// Added by the node lifecycle controller to cordoned nodes (`spec.unschedulable`).
    pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
    /// Added to nodes whose `NetworkUnavailable` condition is true.
    pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
    /// Added to nodes under disk pressure.
    pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
    /// Added to nodes under memory pressure.
    pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
    /// Added to nodes under PID pressure.
    pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
}

/// Labels.
pub mod labels {
    /// The zone (GA).
    pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
    /// The region (GA).
    pub const TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
    /// The zone (beta, deprecated; still written).
    pub const FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
    /// The region (beta, deprecated; still written).
    pub const FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
    /// The instance type (GA).
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    /// The instance type (beta, deprecated; still written).
    pub const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
    /// Excludes a node from load balancers unless its value parses as the boolean `false`.
    pub const EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: &str =
        "node.kubernetes.io/exclude-from-external-load-balancers";
    /// The hostname label the kubelet sets.
    pub const HOSTNAME: &str = "kubernetes.io/hostname";
    /// The operating system label the kubelet sets (GA).
    pub const OS: &str = "kubernetes.io/os";
    /// The architecture label the kubelet sets (GA).
    pub const ARCH: &str = "kubernetes.io/arch";
    /// The operating system label (beta, deprecated; still set by the kubelet).
    pub const OS_BETA: &str = "beta.kubernetes.io/os";
    /// The architecture label (beta, deprecated; still set by the kubelet).
    pub const ARCH_BETA: &str = "beta.kubernetes.io/arch";
}

/// Annotations.
pub mod annotations {
    /// Written by the kubelet from `--node-ip`; validated and used by the cloud node controller.
    pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
    /// Load-balancer source ranges (the Service's `spec.loadBalancerSourceRanges` wins).
    pub const LOAD_BALANCER_SOURCE_RANGES: &str =
        "service.beta.kubernetes.io/load-balancer-source-ranges";
    /// Written by `kubectl apply` (client-side): the whole applied object as JSON. The shared informers keep only
    /// a fingerprint of its value (see `runtime::informer::strip_node`).
    pub const LAST_APPLIED_CONFIGURATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
}

/// Finalizers.
pub mod finalizers {
    /// Added to LoadBalancer Services before any cloud call; removed after the load balancer is deleted.
    pub const LOAD_BALANCER_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";
}

/// Node condition types and reasons.
pub mod conditions {
    /// The condition the route controller maintains.
    pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
    /// `NetworkUnavailable=False`: every route of the node exists.
    pub const REASON_ROUTE_CREATED: &str = "RouteCreated";
    /// `NetworkUnavailable=True`: a route of the node is missing.
    pub const REASON_NO_ROUTE_CREATED: &str = "NoRouteCreated";
    /// The Ready condition.
    pub const READY: &str = "Ready";
}

/// Event reasons, by controller.
pub mod events {
    /// Node initialized (Normal, `cloud-node-controller`).
    pub const SYNCED: &str = "Synced";
    /// Node deleted because its instance is gone (Normal, `cloud-node-lifecycle-controller`).
    pub const DELETING_NODE: &str = "DeletingNode";
    /// Deleting a node failed (Warning, `cloud-node-lifecycle-controller`).
    pub const DELETING_NODE_FAILED: &str = "DeletingNodeFailed";
    /// Ensure started (Normal, `service-controller`).
    pub const ENSURING_LOAD_BALANCER: &str = "EnsuringLoadBalancer";
    /// Ensure succeeded (Normal, `service-controller`).
    pub const ENSURED_LOAD_BALANCER: &str = "EnsuredLoadBalancer";
    /// Delete started (Normal, `service-controller`).
    pub const DELETING_LOAD_BALANCER: &str = "DeletingLoadBalancer";
    /// Delete finished (Normal, `service-controller`).
    pub const DELETED_LOAD_BALANCER: &str = "DeletedLoadBalancer";
    /// Host update succeeded (Normal, `service-controller`).
    pub const UPDATED_LOAD_BALANCER: &str = "UpdatedLoadBalancer";
    /// Sync failed (Warning, `service-controller`).
    pub const SYNC_LOAD_BALANCER_FAILED: &str = "SyncLoadBalancerFailed";
    /// Delete failed (Warning, `service-controller`).
    pub const DELETE_LOAD_BALANCER_FAILED: &str = "DeleteLoadBalancerFailed";
    /// Host update failed (Warning, `service-controller`).
    pub const UPDATE_LOAD_BALANCER_FAILED: &str = "UpdateLoadBalancerFailed";
    /// No nodes to serve the load balancer (Warning, `service-controller`).
    pub const UNAVAILABLE_LOAD_BALANCER: &str = "UnAvailableLoadBalancer";
    /// Creating a route failed (Warning, `route_controller`).
    pub const FAILED_TO_CREATE_ROUTE: &str = "FailedToCreateRoute";
    /// Leadership changed (Normal, on the Lease).
    pub const LEADER_ELECTION: &str = "LeaderElection";
    /// The provider applied a changed `--cloud-config` or credentials file (Normal, `cloud-controller-manager`;
    /// SDK addition).
    pub const CLOUD_CONFIG_RELOADED: &str = "CloudConfigReloaded";
    /// The provider rejected a changed `--cloud-config` or credentials file, or cannot reload; the old
    /// configuration stays (Warning, `cloud-controller-manager`; SDK addition).
    pub const CLOUD_CONFIG_RELOAD_FAILED: &str = "CloudConfigReloadFailed";
}

/// Event source components (the `reportingController` of the events each controller writes).
pub mod components {
    /// The cloud node controller.
    pub const CLOUD_NODE_CONTROLLER: &str = "cloud-node-controller";
    /// The cloud node lifecycle controller.
    pub const CLOUD_NODE_LIFECYCLE_CONTROLLER: &str = "cloud-node-lifecycle-controller";
    /// The service controller.
    pub const SERVICE_CONTROLLER: &str = "service-controller";
    /// The route controller (with an underscore, as in Go).
    pub const ROUTE_CONTROLLER: &str = "route_controller";
    /// The manager itself (leader election events).
    pub const CLOUD_CONTROLLER_MANAGER: &str = "cloud-controller-manager";
}

/// Controller names for `--controllers`: canonical names and their aliases.
pub mod controllers {
    /// Canonical name of the cloud node controller.
    pub const CLOUD_NODE: &str = "cloud-node-controller";
    /// Canonical name of the cloud node lifecycle controller.
    pub const CLOUD_NODE_LIFECYCLE: &str = "cloud-node-lifecycle-controller";
    /// Canonical name of the service controller.
    pub const SERVICE_LB: &str = "service-lb-controller";
    /// Canonical name of the route controller.
    pub const NODE_ROUTE: &str = "node-route-controller";
    /// Alias of [`CLOUD_NODE`]; also its `running_managed_controllers` name.
    pub const CLOUD_NODE_ALIAS: &str = "cloud-node";
    /// Alias of [`CLOUD_NODE_LIFECYCLE`]; also its `running_managed_controllers` name.
    pub const CLOUD_NODE_LIFECYCLE_ALIAS: &str = "cloud-node-lifecycle";
    /// Alias of [`SERVICE_LB`]; also its `running_managed_controllers` name.
    pub const SERVICE_LB_ALIAS: &str = "service";
    /// Alias of [`NODE_ROUTE`]; also its `running_managed_controllers` name.
    pub const NODE_ROUTE_ALIAS: &str = "route";
    /// Client name (user agent) of the node controllers.
    pub const NODE_CONTROLLER_CLIENT: &str = "node-controller";
    /// Client name (user agent) of the service controller.
    pub const SERVICE_CONTROLLER_CLIENT: &str = "service-controller";
    /// Client name (user agent) of the route controller.
    pub const ROUTE_CONTROLLER_CLIENT: &str = "route-controller";
}

/// Leader election defaults.
pub mod lease {
    /// The Lease name.
    pub const NAME: &str = "cloud-controller-manager";
    /// The Lease namespace.
    pub const NAMESPACE: &str = "kube-system";
}

/// Ports.
pub mod ports {
    /// The CCM's secure port (`--secure-port` default).
    pub const CLOUD_CONTROLLER_MANAGER: u16 = 10258;
    /// The CCM's webhook port.
    pub const CLOUD_CONTROLLER_MANAGER_WEBHOOK: u16 = 10260;
}

/// The manager label value of `running_managed_controllers`.
pub const MANAGER_NAME: &str = "cloud-controller-manager";

/// The `--cloud-provider` value that means "no provider in this process".
pub const EXTERNAL_PROVIDER: &str = "external";
