//! The four standard controllers, configured from the resolved settings.
//!
//! | canonical name | alias | crate |
//! |---|---|---|
//! | `cloud-node-controller` | `cloud-node` | `ccm-nodecontroller` |
//! | `cloud-node-lifecycle-controller` | `cloud-node-lifecycle` | `ccm-nodecontroller` |
//! | `service-lb-controller` | `service` | `ccm-servicecontroller` |
//! | `node-route-controller` | `route` | `ccm-routecontroller` |
//! | `node-bootstrap-selfcheck` | `bootstrap-selfcheck` | `ccm-doctor` |
//!
//! The last one is an SDK addition: gauges and warnings about nodes waiting for initialization
//! (`docs/doctor.md`). It exists only with the `doctor` feature (on by default).

use ccm_core::names;
use ccm_core::runtime::controller::ControllerDescriptor;
use ccm_core::settings::Rule;
use ccm_nodecontroller::{CloudNodeConfig, CloudNodeLifecycleConfig, NodeOwnership};
use ccm_routecontroller::RouteSyncMode;

use crate::options::{
    CcmOptions, NodeOwnershipOption, RouteSyncModeOption, ServiceTakeoverOption, ValidationError,
    invalid,
};

fn count(value: i32) -> usize {
    usize::try_from(value).unwrap_or(0)
}

/// The cloud node controller's settings: `--concurrent-node-syncs`, `--concurrent-node-status-updates`,
/// `--node-status-update-frequency`, `--cloud-call-timeout`; batched initialization is off when
/// `--cloud-instance-cache-ttl` is 0 (its answers would not be kept).
pub fn cloud_node_config(options: &CcmOptions) -> CloudNodeConfig {
    let config = CloudNodeConfig::default()
        .with_concurrent_node_syncs(count(options.concurrent_node_syncs))
        .with_concurrent_node_status_updates(count(options.concurrent_node_status_updates))
        .with_node_status_update_frequency(options.node_status_update_frequency)
        .with_cloud_call_timeout(options.cloud_call_timeout);
    if options.cloud_instance_cache_ttl.is_zero() {
        config.with_initialization_batch(0)
    } else {
        config
    }
}

/// The cloud node lifecycle controller's settings: `--node-monitor-period`, `--node-lifecycle-concurrency`,
/// `--node-lifecycle-ownership`, `--protect-initializing-nodes`, `--cloud-call-timeout`.
pub fn cloud_node_lifecycle_config(options: &CcmOptions) -> CloudNodeLifecycleConfig {
    CloudNodeLifecycleConfig::default()
        .with_node_monitor_period(options.node_monitor_period)
        .with_concurrency(count(options.node_lifecycle_concurrency))
        .with_ownership(match options.node_lifecycle_ownership {
            NodeOwnershipOption::AllNodes => NodeOwnership::AllNodes,
            NodeOwnershipOption::ProviderIdPrefix => NodeOwnership::ProviderIdPrefix,
        })
        .with_protect_initializing_nodes(options.protect_initializing_nodes)
        .with_cloud_call_timeout(options.cloud_call_timeout)
}

/// The service controller's settings: `--concurrent-service-syncs` and the `--service-*`,
/// `--load-balancer-class`, `--class-less-services` additions.
pub fn service_config(options: &CcmOptions) -> ccm_servicecontroller::Config {
    ccm_servicecontroller::Config::default()
        .with_concurrent_service_syncs(count(options.concurrent_service_syncs))
        .with_retry_backoff(
            options.service_retry_base_delay,
            options.service_retry_max_delay,
        )
        .with_node_sync_debounce(options.service_node_sync_debounce)
        .with_node_sync_max_delay(options.service_node_sync_max_delay)
        .with_periodic_reensure(
            (!options.service_periodic_reensure.is_zero())
                .then_some(options.service_periodic_reensure),
        )
        .with_load_balancer_class(options.load_balancer_class.clone())
        .with_class_less_services(options.class_less_services)
        .with_extended_update_fields(options.service_extended_update_fields)
        .with_takeover(match options.service_takeover {
            ServiceTakeoverOption::Compare => ccm_servicecontroller::Takeover::Compare,
            ServiceTakeoverOption::EnsureAll => ccm_servicecontroller::Takeover::EnsureAll,
        })
}

/// The route controller's settings: `--configure-cloud-routes`, `--cluster-cidr`,
/// `--route-reconciliation-period` and the `--route-*` additions (`--route-event-debounce`, ...).
pub fn route_config(options: &CcmOptions) -> ccm_routecontroller::Config {
    ccm_routecontroller::Config::default()
        .with_configure_cloud_routes(options.configure_cloud_routes)
        .with_cluster_cidr(options.cluster_cidr.clone())
        .with_route_reconciliation_period(options.route_reconciliation_period)
        .with_event_debounce(options.route_event_debounce)
        .with_sync_mode(match options.route_sync_mode {
            RouteSyncModeOption::Periodic => RouteSyncMode::Periodic,
            RouteSyncModeOption::EventDriven => RouteSyncMode::EventDriven {
                resync: options.route_resync_period,
            },
        })
        .with_max_retry_backoff(options.route_max_retry_backoff)
        .with_max_concurrent_route_operations(count(options.route_max_concurrent_operations))
}

/// The four standard controllers, in start order — cloud-node, cloud-node-lifecycle, service, route — and, with
/// the `doctor` feature, the bootstrap self-check.
pub fn default_controllers(options: &CcmOptions) -> Vec<ControllerDescriptor> {
    vec![
        ccm_nodecontroller::cloud_node_descriptor(cloud_node_config(options)),
        ccm_nodecontroller::cloud_node_lifecycle_descriptor(cloud_node_lifecycle_config(options)),
        ccm_servicecontroller::descriptor(service_config(options)),
        ccm_routecontroller::descriptor(route_config(options)),
        #[cfg(feature = "doctor")]
        ccm_doctor::selfcheck::descriptor(ccm_doctor::selfcheck::SelfCheckConfig::default()),
    ]
}

/// The flag that sets the field `setting` of a standard controller's `Config` a rule checks, with the value given
/// to it when it is a count (a negative one becomes 0 in the `Config`), else 0.
fn flag(options: &CcmOptions, setting: &str) -> Option<(&'static str, i32)> {
    let o = options;
    Some(match setting {
        "concurrent_node_syncs" => ("concurrent-node-syncs", o.concurrent_node_syncs),
        "node_status_update_frequency" => ("node-status-update-frequency", 0),
        "cloud_call_timeout" => ("cloud-call-timeout", 0),
        "node_monitor_period" => ("node-monitor-period", 0),
        "concurrency" => ("node-lifecycle-concurrency", o.node_lifecycle_concurrency),
        "concurrent_service_syncs" => ("concurrent-service-syncs", o.concurrent_service_syncs),
        "retry_base_delay" => ("service-retry-base-delay", 0),
        "node_sync_debounce" => ("service-node-sync-debounce", 0),
        "periodic_reensure" => ("service-periodic-reensure", 0),
        "load_balancer_class" => ("load-balancer-class", 0),
        "class_less_services" => ("class-less-services", 0),
        "route_reconciliation_period" => ("route-reconciliation-period", 0),
        "resync" => ("route-resync-period", 0),
        "max_retry_backoff" => ("route-max-retry-backoff", 0),
        "max_concurrent_route_operations" => (
            "route-max-concurrent-operations",
            o.route_max_concurrent_operations,
        ),
        _ => return None,
    })
}

/// Every rule of the standard controllers' `Config::validate` the settings break, with the controller, each
/// reported once under the flag that sets it (the rules live in the controllers; this only names the flags).
pub(crate) fn violations(options: &CcmOptions) -> Vec<(&'static str, ValidationError)> {
    use names::controllers::{CLOUD_NODE, CLOUD_NODE_LIFECYCLE, NODE_ROUTE, SERVICE_LB};
    let mut found: Vec<(&'static str, ValidationError)> = Vec::new();
    for (controller, violations) in [
        (CLOUD_NODE, cloud_node_config(options).violations()),
        (SERVICE_LB, service_config(options).violations()),
        (
            CLOUD_NODE_LIFECYCLE,
            cloud_node_lifecycle_config(options).violations(),
        ),
        (NODE_ROUTE, route_config(options).violations()),
    ] {
        for violation in violations {
            let error = match (flag(options, violation.setting), &violation.rule) {
                (Some((setting, value)), Rule::Positive) => ValidationError::NotPositive {
                    setting,
                    value: i64::from(value),
                },
                (Some((setting, _)), Rule::NonZeroDuration) => {
                    ValidationError::ZeroDuration { setting }
                }
                (Some((setting, _)), _) => invalid(setting, violation.to_string()),
                (None, _) => invalid("controllers", format!("{controller}: {violation}")),
            };
            // once only: the node controllers share --cloud-call-timeout
            if !found.iter().any(|(_, known)| *known == error) {
                found.push((controller, error));
            }
        }
        // 0 means "as many as --concurrent-node-syncs"; a negative count has no `Config` value at all.
        if controller == CLOUD_NODE && options.concurrent_node_status_updates < 0 {
            found.push((
                CLOUD_NODE,
                ValidationError::Negative {
                    setting: "concurrent-node-status-updates",
                    value: i64::from(options.concurrent_node_status_updates),
                },
            ));
        }
    }
    found
}

/// Whether `error` is a flag out of range on its own (a count below 1 or a zero period), which is reported whether
/// or not its controller runs.
pub(crate) fn out_of_range(error: &ValidationError) -> bool {
    matches!(
        error,
        ValidationError::NotPositive { .. }
            | ValidationError::Negative { .. }
            | ValidationError::ZeroDuration { .. }
    )
}

/// Check the settings of the enabled standard controllers with their own rules, before anything starts (the flags
/// out of range are reported by [`CcmOptions::validate`]).
pub(crate) fn validate(options: &CcmOptions, enabled: &[String]) -> Vec<ValidationError> {
    // The route controller's settings matter only when it configures routes for a cluster CIDR; an empty
    // --cluster-cidr is only an error if the provider supports routes, which is known at start-up.
    let routes = options.configure_cloud_routes && !options.cluster_cidr.trim().is_empty();
    let checked = |controller: &str| {
        enabled.iter().any(|e| e == controller)
            && (controller != names::controllers::NODE_ROUTE || routes)
    };
    let mut errors = Vec::new();
    if checked(names::controllers::NODE_ROUTE)
        && let Err(err) = route_config(options).cluster_cidrs()
    {
        errors.push(invalid("cluster-cidr", err.to_string()));
    }
    errors.extend(
        violations(options)
            .into_iter()
            .filter(|(controller, error)| checked(controller) && !out_of_range(error))
            .map(|(_, error)| error),
    );
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn options() -> CcmOptions {
        CcmOptions {
            cloud_provider: "fake".into(),
            ..CcmOptions::default()
        }
    }

    const ALL: [&str; 4] = [
        names::controllers::CLOUD_NODE,
        names::controllers::CLOUD_NODE_LIFECYCLE,
        names::controllers::SERVICE_LB,
        names::controllers::NODE_ROUTE,
    ];

    fn all() -> Vec<String> {
        ALL.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_four_controllers_with_go_names_and_aliases() {
        let descriptors = default_controllers(&options());
        let names: Vec<(&str, &str)> = descriptors
            .iter()
            .map(|d| (d.name.as_str(), d.short_name()))
            .collect();
        let mut expected = vec![
            ("cloud-node-controller", "cloud-node"),
            ("cloud-node-lifecycle-controller", "cloud-node-lifecycle"),
            ("service-lb-controller", "service"),
            ("node-route-controller", "route"),
        ];
        if cfg!(feature = "doctor") {
            expected.push(("node-bootstrap-selfcheck", "bootstrap-selfcheck"));
        }
        assert_eq!(names, expected);
        assert!(descriptors.iter().all(|d| !d.disabled_by_default));
    }

    #[test]
    fn flags_reach_the_controller_configs() {
        let o = CcmOptions {
            concurrent_node_syncs: 7,
            concurrent_node_status_updates: 3,
            node_status_update_frequency: Duration::from_secs(60),
            node_monitor_period: Duration::from_secs(9),
            node_lifecycle_ownership: NodeOwnershipOption::AllNodes,
            protect_initializing_nodes: false,
            concurrent_service_syncs: 4,
            service_periodic_reensure: Duration::from_secs(3600),
            load_balancer_class: Some("example.com/lb".into()),
            cluster_cidr: "10.244.0.0/16".into(),
            route_reconciliation_period: Duration::from_secs(20),
            route_event_debounce: Duration::from_millis(500),
            route_sync_mode: RouteSyncModeOption::Periodic,
            ..options()
        };
        let node = cloud_node_config(&o);
        assert_eq!(node.concurrent_node_syncs, 7);
        assert_eq!(node.concurrent_node_status_updates, 3);
        assert_eq!(node.node_status_update_frequency, Duration::from_secs(60));
        let lifecycle = cloud_node_lifecycle_config(&o);
        assert_eq!(lifecycle.node_monitor_period, Duration::from_secs(9));
        assert_eq!(lifecycle.ownership, NodeOwnership::AllNodes);
        assert!(!lifecycle.protect_initializing_nodes);
        let service = service_config(&o);
        assert_eq!(service.concurrent_service_syncs, 4);
        assert_eq!(service.periodic_reensure, Some(Duration::from_secs(3600)));
        assert_eq!(
            service.load_balancer_class.as_deref(),
            Some("example.com/lb")
        );
        let route = route_config(&o);
        assert_eq!(route.cluster_cidr, "10.244.0.0/16");
        assert_eq!(route.route_reconciliation_period, Duration::from_secs(20));
        assert_eq!(route.event_debounce, Duration::from_millis(500));
        assert_eq!(route.sync_mode, RouteSyncMode::Periodic);
        assert!(validate(&o, &all()).is_empty());
    }

    #[test]
    fn defaults_match_the_controller_crates() {
        let o = options();
        assert_eq!(cloud_node_config(&o), CloudNodeConfig::default());
        assert_eq!(
            cloud_node_lifecycle_config(&o),
            CloudNodeLifecycleConfig::default()
        );
        assert_eq!(service_config(&o), ccm_servicecontroller::Config::default());
        assert_eq!(route_config(&o), ccm_routecontroller::Config::default());
        assert!(
            validate(&o, &all()).is_empty(),
            "an empty cluster CIDR is checked at start-up"
        );
    }

    #[test]
    fn invalid_controller_settings_are_reported_only_for_enabled_controllers() {
        let o = CcmOptions {
            cluster_cidr: "10.0.0.0/8,10.1.0.0/16".into(),
            ..options()
        };
        let errors = validate(&o, &all());
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .to_string()
                .starts_with("invalid --cluster-cidr: "),
            "{}",
            errors[0]
        );
        assert!(validate(&o, &all()[..3]).is_empty());
        let no_routes = CcmOptions {
            configure_cloud_routes: false,
            ..o
        };
        assert!(validate(&no_routes, &all()).is_empty());
    }
}
