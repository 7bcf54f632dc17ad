//! The contract clauses: one [`Clause`] per rule a provider must follow, each with a stable id, the capability
//! it needs and the contract it checks (how clauses end is in `report.rs`).

use std::fmt;

use ccm_core::intercept::Capability;

/// Calls back `$callback! { [$extra] <clause list> }` with every clause as
/// `/// docs  Variant => test_function_name,`. The single list from which the [`Clause`] enum and the tests
/// of [`provider_conformance_tests!`](crate::provider_conformance_tests) are generated, so they cannot drift.
#[doc(hidden)]
#[macro_export]
macro_rules! __ccm_conformance_for_each_clause {
    ([$($callback:tt)*] $($extra:tt)*) => {
        $($callback)*! { [$($extra)*]
            /// `provider/name-is-valid`: `provider_name()` is a usable providerID scheme (non-empty, lower-case
            /// letters, digits, `-`, `.` or `+`, starting with a letter), and the fixture's providerIDs use it.
            ProviderNameIsValid => provider_name_is_valid,
            /// `provider/capabilities-are-stable`: every capability accessor gives the same answer each time it
            /// is called (controllers decide at start-up which capabilities exist).
            ProviderCapabilitiesAreStable => provider_capabilities_are_stable,
            /// `provider/capabilities-match-declaration`: every capability the fixture declares absent
            /// ([`ConformanceFixture::without`](crate::ConformanceFixture::without)) is absent (its accessor
            /// returns `None`), and every capability it expects
            /// ([`ConformanceFixture::expect_capability`](crate::ConformanceFixture::expect_capability)) is
            /// present.
            ProviderCapabilitiesMatchDeclaration => provider_capabilities_match_declaration,

            /// `load-balancer/ensure-returns-status`: `ensure_load_balancer` returns a status with at least one
            /// ingress entry, each with an IP (that parses) or a hostname (an empty status is an error to the
            /// controller). Retry-after answers are waited out up to the fixture's ready timeout.
            LoadBalancerEnsureReturnsStatus => load_balancer_ensure_returns_status,
            /// `load-balancer/ensure-is-idempotent`: ensuring the same Service twice with the same nodes
            /// succeeds and reports the same ingress.
            LoadBalancerEnsureIsIdempotent => load_balancer_ensure_is_idempotent,
            /// `load-balancer/get-reports-ensured`: after an ensure, `get_load_balancer` reports the load
            /// balancer as existing, with the ingress addresses the ensure returned (within the fixture's
            /// consistency timeout).
            LoadBalancerGetReportsEnsured => load_balancer_get_reports_ensured,
            /// `load-balancer/get-absent-is-none`: `get_load_balancer` of a Service that never had a load
            /// balancer answers "does not exist" (`Ok(None)`), not an error.
            LoadBalancerGetAbsentIsNone => load_balancer_get_absent_is_none,
            /// `load-balancer/delete-absent-succeeds`: `ensure_load_balancer_deleted` of a Service that never
            /// had a load balancer succeeds.
            LoadBalancerDeleteAbsentSucceeds => load_balancer_delete_absent_succeeds,
            /// `load-balancer/get-after-delete-is-none`: after `ensure_load_balancer_deleted`,
            /// `get_load_balancer` answers "does not exist".
            LoadBalancerGetAfterDeleteIsNone => load_balancer_get_after_delete_is_none,
            /// `load-balancer/delete-is-idempotent`: deleting the same load balancer twice succeeds both times.
            LoadBalancerDeleteIsIdempotent => load_balancer_delete_is_idempotent,
            /// `load-balancer/delete-never-implemented-elsewhere`: `ensure_load_balancer_deleted` never returns
            /// `ImplementedElsewhere` (for an existing or an absent load balancer).
            LoadBalancerDeleteNeverImplementedElsewhere => load_balancer_delete_never_implemented_elsewhere,
            /// `load-balancer/update-keeps-load-balancer`: `update_load_balancer` of an ensured load balancer
            /// succeeds and the load balancer still exists with the same ingress.
            LoadBalancerUpdateKeepsLoadBalancer => load_balancer_update_keeps_load_balancer,
            /// `load-balancer/ensure-sets-hosts`: the backends after an ensure are exactly the nodes passed,
            /// also when a second ensure passes fewer nodes (needs a [`LoadBalancerInspector`](crate::LoadBalancerInspector)).
            LoadBalancerEnsureSetsHosts => load_balancer_ensure_sets_hosts,
            /// `load-balancer/update-replaces-hosts`: `update_load_balancer` replaces the backends with exactly
            /// the nodes passed (needs a [`LoadBalancerInspector`](crate::LoadBalancerInspector)).
            LoadBalancerUpdateReplacesHosts => load_balancer_update_replaces_hosts,
            /// `load-balancer/services-are-isolated`: deleting one Service's load balancer leaves another
            /// Service's load balancer in place.
            LoadBalancerServicesAreIsolated => load_balancer_services_are_isolated,
            /// `load-balancer/name-is-stable`: `get_load_balancer_name` is non-empty, the same for the same
            /// Service, and different for Services with different UIDs.
            LoadBalancerNameIsStable => load_balancer_name_is_stable,
            /// `load-balancer/concurrent-services`: concurrent ensures for different Services all succeed and
            /// exist; concurrent deletes then remove every one of them.
            LoadBalancerConcurrentServices => load_balancer_concurrent_services,
            /// `load-balancer/listing-reports-ensured`: a provider that lists its load balancers
            /// (`supports_listing`) reports, across every page of `list_load_balancers`, each ensured load balancer
            /// exactly once under its `get_load_balancer_name`, with the ensured status, the Service's ports, the
            /// nodes passed as backends and the Service's fingerprint (`ObservedLoadBalancer::drift` finds nothing),
            /// and stops reporting a deleted one. Not applicable to a provider without a listing.
            LoadBalancerListingReportsEnsured => load_balancer_listing_reports_ensured,

            /// `instances-v2/running-instance-exists`: `instance_exists` is true for a running instance.
            InstancesV2RunningInstanceExists => instances_v2_running_instance_exists,
            /// `instances-v2/stopped-instance-exists`: `instance_exists` is true for a stopped instance (false
            /// would make the lifecycle controller delete its Node).
            InstancesV2StoppedInstanceExists => instances_v2_stopped_instance_exists,
            /// `instances-v2/unknown-instance-does-not-exist`: `instance_exists` of an instance the cloud does
            /// not have is `Ok(false)`, not an error.
            InstancesV2UnknownInstanceDoesNotExist => instances_v2_unknown_instance_does_not_exist,
            /// `instances-v2/shutdown-is-reported`: `instance_shutdown` is true for the stopped instance and
            /// false for the running one. A `NotImplemented` answer skips the clause (shut-down Nodes are then
            /// never tainted; nothing to check).
            InstancesV2ShutdownIsReported => instances_v2_shutdown_is_reported,
            /// `instances-v2/metadata-provider-id`: `instance_metadata` of a running instance finds it (no skip,
            /// no error), with a providerID of the form `<provider_name>://<id>` equal to the fixture's, if it
            /// names one; an empty providerID is accepted when the Node already has one (the controller keeps
            /// it).
            InstancesV2MetadataProviderId => instances_v2_metadata_provider_id,
            /// `instances-v2/metadata-by-node-name`: a Node without `spec.providerID` (a kubelet that was not
            /// given `--provider-id`) is found by name, with a non-empty providerID equal to the fixture's.
            /// Not applicable when the fixture says the provider needs `spec.providerID`
            /// ([`ConformanceFixture::without_lookup_by_name`](crate::ConformanceFixture::without_lookup_by_name)).
            InstancesV2MetadataByNodeName => instances_v2_metadata_by_node_name,
            /// `instances-v2/metadata-is-valid`: the metadata's addresses have known types and parse, and its
            /// zone, region, instance type and additional labels are valid label values the node controller
            /// can write (no keys under `kubernetes.io` or `k8s.io`, which it drops).
            InstancesV2MetadataIsValid => instances_v2_metadata_is_valid,
            /// `instances-v2/unknown-instance-metadata-not-found`: `instance_metadata` of an unknown instance
            /// fails with the kind `InstanceNotFound`: never metadata (which would initialize a Node for a
            /// machine that is not there), never a skip or another error (the Node would never be initialized,
            /// and the controllers would never learn that its machine is gone).
            InstancesV2UnknownInstanceMetadataNotFound => instances_v2_unknown_instance_metadata_not_found,
            /// `instances-v2/concurrent-lookups-agree`: concurrent `instance_exists` and `instance_metadata`
            /// calls give the same answers as sequential ones.
            InstancesV2ConcurrentLookupsAgree => instances_v2_concurrent_lookups_agree,

            /// `instances/running-instance-has-id`: V1 `instance_id` of a running instance is a non-empty ID.
            InstancesRunningInstanceHasId => instances_running_instance_has_id,
            /// `instances/unknown-instance-not-found`: V1 `instance_id` of an unknown node fails with the kind
            /// `InstanceNotFound`, and `instance_exists_by_provider_id` of an unknown providerID is `Ok(false)`.
            InstancesUnknownInstanceNotFound => instances_unknown_instance_not_found,
            /// `instances/stopped-instance-exists`: V1 `instance_id` of a stopped instance succeeds (never
            /// `InstanceNotFound`) and `instance_exists_by_provider_id` is true.
            InstancesStoppedInstanceExists => instances_stopped_instance_exists,
            /// `instances/shutdown-is-reported`: `instance_shutdown_by_provider_id` is true for the stopped
            /// instance and false for the running one. A `NotImplemented` answer (which counts as "not shut
            /// down") skips the clause.
            InstancesShutdownIsReported => instances_shutdown_is_reported,
            /// `instances/provider-id-round-trips`: the providerID the node controller builds,
            /// `<provider_name>://<instance_id>`, is accepted by the by-providerID calls (and equals the
            /// fixture's providerID, if it names one).
            InstancesProviderIdRoundTrips => instances_provider_id_round_trips,
            /// `instances/by-provider-id-and-name-agree`: node addresses and instance type are the same looked
            /// up by name and by providerID. A pair where either lookup answers `NotImplemented` is not
            /// compared; the clause is skipped when neither pair can be.
            InstancesByProviderIdAndNameAgree => instances_by_provider_id_and_name_agree,
            /// `instances/node-addresses-are-valid`: V1 node addresses by providerID (which must succeed) and by
            /// name (which may answer `NotImplemented`) have known types, and IP addresses parse.
            InstancesNodeAddressesAreValid => instances_node_addresses_are_valid,

            /// `zones/by-provider-id-and-name-agree`: the zone by providerID and by node name is the same, and
            /// its failure domain and region are valid label values. Skipped when either lookup answers
            /// `NotImplemented`, or when the running instance has no providerID and the provider no V1
            /// `instance_id` to build one.
            ZonesByProviderIdAndNameAgree => zones_by_provider_id_and_name_agree,

            /// `routes/create-list-delete-round-trip`: a route created with a name hint is listed (same
            /// destination and target node), and is gone from the list after `delete_route`.
            RoutesCreateListDeleteRoundTrip => routes_create_list_delete_round_trip,
            /// `routes/delete-missing-succeeds`: deleting a route that does not exist succeeds.
            RoutesDeleteMissingSucceeds => routes_delete_missing_succeeds,
            /// `routes/scoped-to-cluster`: a route created for the fixture's cluster name is not listed for its
            /// other cluster name (or the other cluster's route controller would delete it).
            RoutesScopedToCluster => routes_scoped_to_cluster,
            /// `routes/concurrent-creates`: concurrent creates of routes to different CIDRs all succeed and are
            /// all listed (the route controller creates up to 200 at once).
            RoutesConcurrentCreates => routes_concurrent_creates,

            /// `errors/instances-v2-kind-survives-wrapping`: the `InstanceNotFound` of `instance_metadata` for
            /// an unknown instance, and (with an [`ErrorInjector`](crate::ErrorInjector)) the cloud's errors
            /// injected into `instance_exists`, `instance_metadata` and `instance_shutdown`, have the right
            /// `CloudError::kind()` as returned and after the controllers wrap them in more context.
            ErrorsInstancesV2KindSurvivesWrapping => errors_instances_v2_kind_survives_wrapping,
            /// `errors/instances-kind-survives-wrapping`: the `InstanceNotFound` of V1 `instance_id` for an
            /// unknown node, and (with an [`ErrorInjector`](crate::ErrorInjector)) the cloud's errors injected
            /// into the by-providerID calls, have the right `CloudError::kind()` as returned and after wrapping.
            ErrorsInstancesKindSurvivesWrapping => errors_instances_kind_survives_wrapping,
            /// `errors/load-balancer-kind-survives-wrapping`: the cloud's errors injected (by an
            /// [`ErrorInjector`](crate::ErrorInjector)) into get, ensure, update and delete keep their
            /// `CloudError::kind()` through the provider and after wrapping; skipped without an injector.
            ErrorsLoadBalancerKindSurvivesWrapping => errors_load_balancer_kind_survives_wrapping,
            /// `errors/routes-kind-survives-wrapping`: the cloud's errors injected (by an
            /// [`ErrorInjector`](crate::ErrorInjector)) into list, create and delete keep their
            /// `CloudError::kind()` through the provider and after wrapping; skipped without an injector.
            ErrorsRoutesKindSurvivesWrapping => errors_routes_kind_survives_wrapping,
            /// `errors/zones-kind-survives-wrapping`: the cloud's errors injected (by an
            /// [`ErrorInjector`](crate::ErrorInjector)) into the zone lookups keep their `CloudError::kind()`
            /// through the provider and after wrapping; skipped without an injector.
            ErrorsZonesKindSurvivesWrapping => errors_zones_kind_survives_wrapping,
        }
    };
}

macro_rules! define_clauses {
    ([] $( $(#[$meta:meta])* $variant:ident => $name:ident, )*) => {
        /// One rule of the provider contract, checked by the suite on its own.
        ///
        /// Each clause has a stable [`id`](Clause::id) (`area/rule`), the test function name
        /// [`provider_conformance_tests!`](crate::provider_conformance_tests) gives it
        /// ([`test_name`](Clause::test_name)), a one-line [`contract`](Clause::contract) and the capability it
        /// needs ([`capability`](Clause::capability)); a provider without that capability gets the clause
        /// skipped, never passed.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Clause {
            $( $(#[$meta])* $variant, )*
        }

        impl Clause {
            /// Every clause, in the order the suite runs them.
            pub const ALL: &'static [Clause] = &[ $( Clause::$variant, )* ];

            /// The name of the test function [`provider_conformance_tests!`](crate::provider_conformance_tests)
            /// generates for this clause.
            pub fn test_name(self) -> &'static str {
                match self {
                    $( Clause::$variant => stringify!($name), )*
                }
            }
        }
    };
}

__ccm_conformance_for_each_clause!([define_clauses]);

impl Clause {
    /// The stable id, `area/rule` (for example `load-balancer/ensure-is-idempotent`).
    pub fn id(self) -> &'static str {
        use Clause::*;
        match self {
            ProviderNameIsValid => "provider/name-is-valid",
            ProviderCapabilitiesAreStable => "provider/capabilities-are-stable",
            ProviderCapabilitiesMatchDeclaration => "provider/capabilities-match-declaration",
            LoadBalancerEnsureReturnsStatus => "load-balancer/ensure-returns-status",
            LoadBalancerEnsureIsIdempotent => "load-balancer/ensure-is-idempotent",
            LoadBalancerGetReportsEnsured => "load-balancer/get-reports-ensured",
            LoadBalancerGetAbsentIsNone => "load-balancer/get-absent-is-none",
            LoadBalancerDeleteAbsentSucceeds => "load-balancer/delete-absent-succeeds",
            LoadBalancerGetAfterDeleteIsNone => "load-balancer/get-after-delete-is-none",
            LoadBalancerDeleteIsIdempotent => "load-balancer/delete-is-idempotent",
            LoadBalancerDeleteNeverImplementedElsewhere => {
                "load-balancer/delete-never-implemented-elsewhere"
            }
            LoadBalancerUpdateKeepsLoadBalancer => "load-balancer/update-keeps-load-balancer",
            LoadBalancerEnsureSetsHosts => "load-balancer/ensure-sets-hosts",
            LoadBalancerUpdateReplacesHosts => "load-balancer/update-replaces-hosts",
            LoadBalancerServicesAreIsolated => "load-balancer/services-are-isolated",
            LoadBalancerNameIsStable => "load-balancer/name-is-stable",
            LoadBalancerConcurrentServices => "load-balancer/concurrent-services",
            LoadBalancerListingReportsEnsured => "load-balancer/listing-reports-ensured",
            InstancesV2RunningInstanceExists => "instances-v2/running-instance-exists",
            InstancesV2StoppedInstanceExists => "instances-v2/stopped-instance-exists",
            InstancesV2UnknownInstanceDoesNotExist => {
                "instances-v2/unknown-instance-does-not-exist"
            }
            InstancesV2ShutdownIsReported => "instances-v2/shutdown-is-reported",
            InstancesV2MetadataProviderId => "instances-v2/metadata-provider-id",
            InstancesV2MetadataByNodeName => "instances-v2/metadata-by-node-name",
            InstancesV2MetadataIsValid => "instances-v2/metadata-is-valid",
            InstancesV2UnknownInstanceMetadataNotFound => {
                "instances-v2/unknown-instance-metadata-not-found"
            }
            InstancesV2ConcurrentLookupsAgree => "instances-v2/concurrent-lookups-agree",
            InstancesRunningInstanceHasId => "instances/running-instance-has-id",
            InstancesUnknownInstanceNotFound => "instances/unknown-instance-not-found",
            InstancesStoppedInstanceExists => "instances/stopped-instance-exists",
            InstancesShutdownIsReported => "instances/shutdown-is-reported",
            InstancesProviderIdRoundTrips => "instances/provider-id-round-trips",
            InstancesByProviderIdAndNameAgree => "instances/by-provider-id-and-name-agree",
            InstancesNodeAddressesAreValid => "instances/node-addresses-are-valid",
            ZonesByProviderIdAndNameAgree => "zones/by-provider-id-and-name-agree",
            RoutesCreateListDeleteRoundTrip => "routes/create-list-delete-round-trip",
            RoutesDeleteMissingSucceeds => "routes/delete-missing-succeeds",
            RoutesScopedToCluster => "routes/scoped-to-cluster",
            RoutesConcurrentCreates => "routes/concurrent-creates",
            ErrorsInstancesV2KindSurvivesWrapping => "errors/instances-v2-kind-survives-wrapping",
            ErrorsInstancesKindSurvivesWrapping => "errors/instances-kind-survives-wrapping",
            ErrorsLoadBalancerKindSurvivesWrapping => "errors/load-balancer-kind-survives-wrapping",
            ErrorsRoutesKindSurvivesWrapping => "errors/routes-kind-survives-wrapping",
            ErrorsZonesKindSurvivesWrapping => "errors/zones-kind-survives-wrapping",
        }
    }

    /// The clause with this [`id`](Clause::id) or [`test_name`](Clause::test_name).
    pub fn from_name(name: &str) -> Option<Clause> {
        Clause::ALL
            .iter()
            .copied()
            .find(|c| c.id() == name || c.test_name() == name)
    }

    /// The capability the clause exercises; `None` for clauses about the provider as a whole. A provider
    /// without the capability gets the clause [skipped](crate::Outcome::Skipped), or [not
    /// applicable](crate::Outcome::NotApplicable) if the fixture declares the capability absent.
    pub fn capability(self) -> Option<Capability> {
        use Clause::*;
        match self {
            ProviderNameIsValid
            | ProviderCapabilitiesAreStable
            | ProviderCapabilitiesMatchDeclaration => None,
            LoadBalancerEnsureReturnsStatus
            | LoadBalancerEnsureIsIdempotent
            | LoadBalancerGetReportsEnsured
            | LoadBalancerGetAbsentIsNone
            | LoadBalancerDeleteAbsentSucceeds
            | LoadBalancerGetAfterDeleteIsNone
            | LoadBalancerDeleteIsIdempotent
            | LoadBalancerDeleteNeverImplementedElsewhere
            | LoadBalancerUpdateKeepsLoadBalancer
            | LoadBalancerEnsureSetsHosts
            | LoadBalancerUpdateReplacesHosts
            | LoadBalancerServicesAreIsolated
            | LoadBalancerNameIsStable
            | LoadBalancerConcurrentServices
            | LoadBalancerListingReportsEnsured
            | ErrorsLoadBalancerKindSurvivesWrapping => Some(Capability::LoadBalancer),
            InstancesV2RunningInstanceExists
            | InstancesV2StoppedInstanceExists
            | InstancesV2UnknownInstanceDoesNotExist
            | InstancesV2ShutdownIsReported
            | InstancesV2MetadataProviderId
            | InstancesV2MetadataByNodeName
            | InstancesV2MetadataIsValid
            | InstancesV2UnknownInstanceMetadataNotFound
            | InstancesV2ConcurrentLookupsAgree
            | ErrorsInstancesV2KindSurvivesWrapping => Some(Capability::InstancesV2),
            InstancesRunningInstanceHasId
            | InstancesUnknownInstanceNotFound
            | InstancesStoppedInstanceExists
            | InstancesShutdownIsReported
            | InstancesProviderIdRoundTrips
            | InstancesByProviderIdAndNameAgree
            | InstancesNodeAddressesAreValid
            | ErrorsInstancesKindSurvivesWrapping => Some(Capability::Instances),
            ZonesByProviderIdAndNameAgree | ErrorsZonesKindSurvivesWrapping => {
                Some(Capability::Zones)
            }
            RoutesCreateListDeleteRoundTrip
            | RoutesDeleteMissingSucceeds
            | RoutesScopedToCluster
            | RoutesConcurrentCreates
            | ErrorsRoutesKindSurvivesWrapping => Some(Capability::Routes),
        }
    }

    /// The rule the clause checks, in one sentence (what a failure means).
    pub fn contract(self) -> &'static str {
        use Clause::*;
        match self {
            ProviderNameIsValid => {
                "provider_name() is a valid providerID scheme and the fixture's providerIDs start with <provider_name>://"
            }
            ProviderCapabilitiesAreStable => {
                "every capability accessor returns the same Some/None on every call"
            }
            ProviderCapabilitiesMatchDeclaration => {
                "capabilities declared absent return None; capabilities declared expected return Some"
            }
            LoadBalancerEnsureReturnsStatus => {
                "ensure_load_balancer returns a status with at least one ingress entry, each with an IP that parses or a hostname"
            }
            LoadBalancerEnsureIsIdempotent => {
                "ensuring the same Service twice succeeds and reports the same ingress"
            }
            LoadBalancerGetReportsEnsured => {
                "get_load_balancer reports an ensured load balancer as existing, with the ensured ingress"
            }
            LoadBalancerGetAbsentIsNone => {
                "get_load_balancer of a Service without a load balancer is Ok(None)"
            }
            LoadBalancerDeleteAbsentSucceeds => {
                "ensure_load_balancer_deleted of a Service without a load balancer succeeds"
            }
            LoadBalancerGetAfterDeleteIsNone => {
                "get_load_balancer after ensure_load_balancer_deleted is Ok(None)"
            }
            LoadBalancerDeleteIsIdempotent => {
                "ensure_load_balancer_deleted succeeds when called twice for the same Service"
            }
            LoadBalancerDeleteNeverImplementedElsewhere => {
                "ensure_load_balancer_deleted never returns ImplementedElsewhere"
            }
            LoadBalancerUpdateKeepsLoadBalancer => {
                "update_load_balancer succeeds on an ensured load balancer, which keeps existing with the same ingress"
            }
            LoadBalancerEnsureSetsHosts => {
                "after ensure_load_balancer the backends are exactly the nodes passed"
            }
            LoadBalancerUpdateReplacesHosts => {
                "after update_load_balancer the backends are exactly the nodes passed"
            }
            LoadBalancerServicesAreIsolated => {
                "deleting one Service's load balancer leaves other Services' load balancers in place"
            }
            LoadBalancerNameIsStable => {
                "get_load_balancer_name is non-empty, stable for a Service and distinct for different UIDs"
            }
            LoadBalancerConcurrentServices => {
                "concurrent ensures for different Services all succeed; concurrent deletes then remove them all"
            }
            LoadBalancerListingReportsEnsured => {
                "list_load_balancers reports each ensured load balancer once, as ensured, and no deleted one (no listing: N/A)"
            }
            InstancesV2RunningInstanceExists => "instance_exists is true for a running instance",
            InstancesV2StoppedInstanceExists => "instance_exists is true for a stopped instance",
            InstancesV2UnknownInstanceDoesNotExist => {
                "instance_exists of an unknown instance is Ok(false), not an error"
            }
            InstancesV2ShutdownIsReported => {
                "instance_shutdown is true for a stopped instance and false for a running one (NotImplemented: skipped)"
            }
            InstancesV2MetadataProviderId => {
                "instance_metadata of a running instance finds it, with a providerID <provider_name>://<id> equal to the fixture's"
            }
            InstancesV2MetadataByNodeName => {
                "instance_metadata finds a Node without spec.providerID by its name"
            }
            InstancesV2MetadataIsValid => {
                "metadata addresses have known types and parse; zone, region, instance type and labels are valid label values"
            }
            InstancesV2UnknownInstanceMetadataNotFound => {
                "instance_metadata of an unknown instance fails with InstanceNotFound (no metadata, no skip, no other error)"
            }
            InstancesV2ConcurrentLookupsAgree => {
                "concurrent instance_exists and instance_metadata calls agree with sequential ones"
            }
            InstancesRunningInstanceHasId => "instance_id of a running instance is a non-empty ID",
            InstancesUnknownInstanceNotFound => {
                "instance_id of an unknown node fails with InstanceNotFound; instance_exists_by_provider_id is Ok(false)"
            }
            InstancesStoppedInstanceExists => {
                "instance_id of a stopped instance succeeds and instance_exists_by_provider_id is true"
            }
            InstancesShutdownIsReported => {
                "instance_shutdown_by_provider_id is true for a stopped instance and false for a running one (NotImplemented: skipped)"
            }
            InstancesProviderIdRoundTrips => {
                "<provider_name>://<instance_id> is accepted by the by-providerID calls"
            }
            InstancesByProviderIdAndNameAgree => {
                "node addresses and instance type agree looked up by name and by providerID"
            }
            InstancesNodeAddressesAreValid => {
                "node addresses have known types and IP addresses parse"
            }
            ZonesByProviderIdAndNameAgree => {
                "get_zone_by_provider_id and get_zone_by_node_name agree and give valid label values"
            }
            RoutesCreateListDeleteRoundTrip => {
                "a created route is listed with its destination and target, and is gone after delete_route"
            }
            RoutesDeleteMissingSucceeds => "delete_route of a route that does not exist succeeds",
            RoutesScopedToCluster => {
                "list_routes of another cluster name does not list this cluster's routes"
            }
            RoutesConcurrentCreates => {
                "concurrent create_route calls for different CIDRs all succeed and are all listed"
            }
            ErrorsInstancesV2KindSurvivesWrapping => {
                "InstancesV2 errors (InstanceNotFound of an unknown instance, injected cloud errors) keep their CloudError::kind() as returned and after wrapping"
            }
            ErrorsInstancesKindSurvivesWrapping => {
                "V1 Instances errors (InstanceNotFound of an unknown node, injected cloud errors) keep their CloudError::kind() as returned and after wrapping"
            }
            ErrorsLoadBalancerKindSurvivesWrapping => {
                "cloud errors of the load-balancer calls keep their CloudError::kind() as returned and after wrapping"
            }
            ErrorsRoutesKindSurvivesWrapping => {
                "cloud errors of the route calls keep their CloudError::kind() as returned and after wrapping"
            }
            ErrorsZonesKindSurvivesWrapping => {
                "cloud errors of the zone lookups keep their CloudError::kind() as returned and after wrapping"
            }
        }
    }
}

impl fmt::Display for Clause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ids_and_test_names_are_unique_and_well_formed() {
        let ids: BTreeSet<&str> = Clause::ALL.iter().map(|c| c.id()).collect();
        let names: BTreeSet<&str> = Clause::ALL.iter().map(|c| c.test_name()).collect();
        assert_eq!(ids.len(), Clause::ALL.len());
        assert_eq!(names.len(), Clause::ALL.len());
        for clause in Clause::ALL {
            let id = clause.id();
            let (area, rule) = id.split_once('/').expect("id is area/rule");
            assert!(!area.is_empty() && !rule.is_empty(), "{id}");
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '/'),
                "{id}"
            );
            // The test name is the id in snake case (ids may abbreviate nothing).
            assert_eq!(
                clause.test_name(),
                id.replace(['/', '-'], "_"),
                "test name of {id}"
            );
            assert_eq!(Clause::from_name(id), Some(*clause));
            assert_eq!(Clause::from_name(clause.test_name()), Some(*clause));
            assert!(!clause.contract().is_empty());
        }
        assert_eq!(Clause::from_name("no/such-clause"), None);
    }

    #[test]
    fn capabilities_match_areas() {
        for clause in Clause::ALL {
            let (area, rule) = clause.id().split_once('/').unwrap_or_default();
            // An error clause's area is the first part of its rule: errors/<capability>-kind-survives-wrapping.
            let area = match area {
                "errors" => rule.trim_end_matches("-kind-survives-wrapping"),
                other => other,
            };
            let expected = match area {
                "provider" => None,
                "load-balancer" => Some(Capability::LoadBalancer),
                "instances-v2" => Some(Capability::InstancesV2),
                "instances" => Some(Capability::Instances),
                "zones" => Some(Capability::Zones),
                "routes" => Some(Capability::Routes),
                other => panic!("unknown area {other}"),
            };
            assert_eq!(clause.capability(), expected, "{clause}");
        }
    }
}
