//! Stable operation names: the `op` of every [`Call`](crate::Call) in the call log and the keys of fault
//! injection ([`FakeCloud::inject`](crate::FakeCloud::inject)) and latency
//! ([`FakeCloud::set_latency`](crate::FakeCloud::set_latency)).
//!
//! The names of the Go reference fake are kept where it has one (`create`, `update`, `delete`, `list`,
//! `instance-metadata-by-provider-id`, ...), so tests ported from Go read the same. Operations the Go fake does
//! not log (`get-load-balancer`, `master`, `initialize`) have names of their own. The names and targets are
//! those of [`ccm_core::intercept::Operation`] and its `CallInfo`, so call logs, fault injection and
//! interceptors agree.

/// [`CloudProvider::initialize`](ccm_core::CloudProvider::initialize); target `""`.
pub const INITIALIZE: &str = "initialize";
/// [`LoadBalancer::ensure_load_balancer`](ccm_core::LoadBalancer::ensure_load_balancer); target = service key.
pub const ENSURE_LOAD_BALANCER: &str = "create";
/// [`LoadBalancer::update_load_balancer`](ccm_core::LoadBalancer::update_load_balancer); target = service key.
pub const UPDATE_LOAD_BALANCER: &str = "update";
/// [`LoadBalancer::ensure_load_balancer_deleted`](ccm_core::LoadBalancer::ensure_load_balancer_deleted);
/// target = service key.
pub const ENSURE_LOAD_BALANCER_DELETED: &str = "delete";
/// [`LoadBalancer::get_load_balancer`](ccm_core::LoadBalancer::get_load_balancer); target = service key.
pub const GET_LOAD_BALANCER: &str = "get-load-balancer";
/// [`Instances::node_addresses`](ccm_core::Instances::node_addresses); target = node name.
pub const NODE_ADDRESSES: &str = "node-addresses";
/// [`Instances::node_addresses_by_provider_id`](ccm_core::Instances::node_addresses_by_provider_id);
/// target = providerID.
pub const NODE_ADDRESSES_BY_PROVIDER_ID: &str = "node-addresses-by-provider-id";
/// [`Instances::instance_id`](ccm_core::Instances::instance_id); target = node name.
pub const INSTANCE_ID: &str = "instance-id";
/// [`Instances::instance_type`](ccm_core::Instances::instance_type); target = node name.
pub const INSTANCE_TYPE: &str = "instance-type";
/// [`Instances::instance_type_by_provider_id`](ccm_core::Instances::instance_type_by_provider_id);
/// target = providerID.
pub const INSTANCE_TYPE_BY_PROVIDER_ID: &str = "instance-type-by-provider-id";
/// [`Instances::instance_exists_by_provider_id`](ccm_core::Instances::instance_exists_by_provider_id);
/// target = providerID.
pub const INSTANCE_EXISTS_BY_PROVIDER_ID: &str = "instance-exists-by-provider-id";
/// [`Instances::instance_shutdown_by_provider_id`](ccm_core::Instances::instance_shutdown_by_provider_id);
/// target = providerID.
pub const INSTANCE_SHUTDOWN_BY_PROVIDER_ID: &str = "instance-shutdown-by-provider-id";
/// [`InstancesV2::instance_exists`](ccm_core::InstancesV2::instance_exists); target = the node's providerID, or its
/// name if it has none.
pub const INSTANCE_EXISTS: &str = "instance-exists";
/// [`InstancesV2::instance_shutdown`](ccm_core::InstancesV2::instance_shutdown); target = the node's providerID, or
/// its name if it has none.
pub const INSTANCE_SHUTDOWN: &str = "instance-shutdown";
/// [`InstancesV2::instance_metadata`](ccm_core::InstancesV2::instance_metadata); target = the node's providerID,
/// or its name if it has none.
pub const INSTANCE_METADATA: &str = "instance-metadata-by-provider-id";
/// [`InstancesV2::instance_metadata_bulk`](ccm_core::InstancesV2::instance_metadata_bulk) when bulk calls are on
/// ([`FakeCloud::set_bulk`](crate::FakeCloud::set_bulk)); target `"<n> nodes"`.
pub const INSTANCE_METADATA_BULK: &str = "instance-metadata-bulk";
/// [`InstancesV2::instance_exists_bulk`](ccm_core::InstancesV2::instance_exists_bulk) when bulk calls are on;
/// target `"<n> nodes"`.
pub const INSTANCE_EXISTS_BULK: &str = "instance-exists-bulk";
/// [`Zones::get_zone`](ccm_core::Zones::get_zone); target `""`.
pub const GET_ZONE: &str = "get-zone";
/// [`Zones::get_zone_by_provider_id`](ccm_core::Zones::get_zone_by_provider_id); target = providerID.
pub const GET_ZONE_BY_PROVIDER_ID: &str = "get-zone-by-provider-id";
/// [`Zones::get_zone_by_node_name`](ccm_core::Zones::get_zone_by_node_name); target = node name.
pub const GET_ZONE_BY_NODE_NAME: &str = "get-zone-by-node-name";
/// [`Clusters::list_clusters`](ccm_core::Clusters::list_clusters); target `""`.
pub const LIST_CLUSTERS: &str = "list";
/// [`Clusters::master`](ccm_core::Clusters::master); target = cluster name.
pub const MASTER: &str = "master";
/// [`Routes::list_routes`](ccm_core::Routes::list_routes); target = cluster name.
pub const LIST_ROUTES: &str = "list-routes";
/// [`Routes::create_route`](ccm_core::Routes::create_route); target = destination CIDR.
pub const CREATE_ROUTE: &str = "create-route";
/// [`Routes::delete_route`](ccm_core::Routes::delete_route); target = destination CIDR.
pub const DELETE_ROUTE: &str = "delete-route";

/// Every operation name, in the order of this module.
pub const ALL: &[&str] = &[
    INITIALIZE,
    ENSURE_LOAD_BALANCER,
    UPDATE_LOAD_BALANCER,
    ENSURE_LOAD_BALANCER_DELETED,
    GET_LOAD_BALANCER,
    NODE_ADDRESSES,
    NODE_ADDRESSES_BY_PROVIDER_ID,
    INSTANCE_ID,
    INSTANCE_TYPE,
    INSTANCE_TYPE_BY_PROVIDER_ID,
    INSTANCE_EXISTS_BY_PROVIDER_ID,
    INSTANCE_SHUTDOWN_BY_PROVIDER_ID,
    INSTANCE_EXISTS,
    INSTANCE_SHUTDOWN,
    INSTANCE_METADATA,
    INSTANCE_METADATA_BULK,
    INSTANCE_EXISTS_BULK,
    GET_ZONE,
    GET_ZONE_BY_PROVIDER_ID,
    GET_ZONE_BY_NODE_NAME,
    LIST_CLUSTERS,
    MASTER,
    LIST_ROUTES,
    CREATE_ROUTE,
    DELETE_ROUTE,
];

/// Whether `op` is one of the names in [`ALL`].
pub fn is_known(op: &str) -> bool {
    ALL.contains(&op)
}
