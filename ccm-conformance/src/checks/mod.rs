//! The body of every clause, and the dispatch from [`Clause`] to it.

mod errors;
mod instances;
mod instances_v2;
mod listing;
mod load_balancer;
mod provider;
mod routes;

use crate::clause::Clause;
use crate::context::{Check, Ctx};

/// Run the body of `clause`.
pub(crate) async fn run(clause: Clause, ctx: &Ctx) -> Check {
    use Clause::*;
    match clause {
        ProviderNameIsValid => provider::name_is_valid(ctx).await,
        ProviderCapabilitiesAreStable => provider::capabilities_are_stable(ctx).await,
        ProviderCapabilitiesMatchDeclaration => provider::capabilities_match_declaration(ctx).await,
        LoadBalancerEnsureReturnsStatus => load_balancer::ensure_returns_status(ctx).await,
        LoadBalancerEnsureIsIdempotent => load_balancer::ensure_is_idempotent(ctx).await,
        LoadBalancerGetReportsEnsured => load_balancer::get_reports_ensured(ctx).await,
        LoadBalancerGetAbsentIsNone => load_balancer::get_absent_is_none(ctx).await,
        LoadBalancerDeleteAbsentSucceeds => load_balancer::delete_absent_succeeds(ctx).await,
        LoadBalancerGetAfterDeleteIsNone => load_balancer::get_after_delete_is_none(ctx).await,
        LoadBalancerDeleteIsIdempotent => load_balancer::delete_is_idempotent(ctx).await,
        LoadBalancerDeleteNeverImplementedElsewhere => {
            load_balancer::delete_never_implemented_elsewhere(ctx).await
        }
        LoadBalancerUpdateKeepsLoadBalancer => load_balancer::update_keeps_load_balancer(ctx).await,
        LoadBalancerEnsureSetsHosts => load_balancer::ensure_sets_hosts(ctx).await,
        LoadBalancerUpdateReplacesHosts => load_balancer::update_replaces_hosts(ctx).await,
        LoadBalancerServicesAreIsolated => load_balancer::services_are_isolated(ctx).await,
        LoadBalancerNameIsStable => load_balancer::name_is_stable(ctx).await,
        LoadBalancerConcurrentServices => load_balancer::concurrent_services(ctx).await,
        LoadBalancerListingReportsEnsured => listing::reports_ensured(ctx).await,
        InstancesV2RunningInstanceExists => instances_v2::running_instance_exists(ctx).await,
        InstancesV2StoppedInstanceExists => instances_v2::stopped_instance_exists(ctx).await,
        InstancesV2UnknownInstanceDoesNotExist => {
            instances_v2::unknown_instance_does_not_exist(ctx).await
        }
        InstancesV2ShutdownIsReported => instances_v2::shutdown_is_reported(ctx).await,
        InstancesV2MetadataProviderId => instances_v2::metadata_provider_id(ctx).await,
        InstancesV2MetadataByNodeName => instances_v2::metadata_by_node_name(ctx).await,
        InstancesV2MetadataIsValid => instances_v2::metadata_is_valid(ctx).await,
        InstancesV2UnknownInstanceMetadataNotFound => {
            instances_v2::unknown_instance_metadata_not_found(ctx).await
        }
        InstancesV2ConcurrentLookupsAgree => instances_v2::concurrent_lookups_agree(ctx).await,
        InstancesRunningInstanceHasId => instances::running_instance_has_id(ctx).await,
        InstancesUnknownInstanceNotFound => instances::unknown_instance_not_found(ctx).await,
        InstancesStoppedInstanceExists => instances::stopped_instance_exists(ctx).await,
        InstancesShutdownIsReported => instances::shutdown_is_reported(ctx).await,
        InstancesProviderIdRoundTrips => instances::provider_id_round_trips(ctx).await,
        InstancesByProviderIdAndNameAgree => instances::by_provider_id_and_name_agree(ctx).await,
        InstancesNodeAddressesAreValid => instances::node_addresses_are_valid(ctx).await,
        ZonesByProviderIdAndNameAgree => instances::zones_agree(ctx).await,
        RoutesCreateListDeleteRoundTrip => routes::round_trip(ctx).await,
        RoutesDeleteMissingSucceeds => routes::delete_missing_succeeds(ctx).await,
        RoutesScopedToCluster => routes::scoped_to_cluster(ctx).await,
        RoutesConcurrentCreates => routes::concurrent_creates(ctx).await,
        ErrorsInstancesV2KindSurvivesWrapping => errors::instances_v2(ctx).await,
        ErrorsInstancesKindSurvivesWrapping => errors::instances(ctx).await,
        ErrorsLoadBalancerKindSurvivesWrapping => errors::load_balancer(ctx).await,
        ErrorsRoutesKindSurvivesWrapping => errors::routes(ctx).await,
        ErrorsZonesKindSurvivesWrapping => errors::zones(ctx).await,
    }
}
