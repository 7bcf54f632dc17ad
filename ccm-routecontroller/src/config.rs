//! Settings of the route controller, with the Go reference's defaults, and `--cluster-cidr` parsing.

use std::time::Duration;

use ccm_core::runtime::debounce::Schedule;
use ccm_core::settings::InvalidSetting;
use ipnet::IpNet;

use crate::error::Error;

/// Default of `--route-reconciliation-period` (Go: 10 s).
pub const DEFAULT_ROUTE_RECONCILIATION_PERIOD: Duration = Duration::from_secs(10);
/// Default of [`Config::event_debounce`]: 250 ms, long enough to batch into one pass the events of one new Node
/// (the kubelet's registration, the pod CIDR the IPAM controller writes tens of milliseconds later, the first
/// status update) and the nodes an autoscaler adds together; short enough that a new Node has its route about a
/// quarter of a second plus one pass after it appeared, not up to a whole `--route-reconciliation-period` (Go).
pub const DEFAULT_EVENT_DEBOUNCE: Duration = ccm_core::runtime::debounce::DEFAULT_DEBOUNCE;
/// Default full-resync interval of [`RouteSyncMode::EventDriven`]: 5 minutes.
pub const DEFAULT_RESYNC_PERIOD: Duration = Duration::from_secs(5 * 60);
/// Default cap of the retry backoff after a failed pass: 5 minutes.
pub const DEFAULT_MAX_RETRY_BACKOFF: Duration = Duration::from_secs(5 * 60);
/// Default limit of cloud route operations in flight (Go: `maxConcurrentRouteOperations` = 200).
pub const DEFAULT_MAX_CONCURRENT_ROUTE_OPERATIONS: usize = 200;

/// When the controller compares the cloud's routes with the Nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, educe::Educe)]
#[educe(Default)]
#[strum(serialize_all = "kebab-case")]
#[non_exhaustive]
pub enum RouteSyncMode {
    /// The Go reference's default: list every route from the cloud every `route_reconciliation_period`, forever,
    /// whether or not anything changed. Node events are ignored. Failed passes are simply repeated next period.
    Periodic,
    /// Reconcile when Nodes are added or deleted or their pod CIDRs or addresses change (seen through the shared
    /// Node informer), [`Config::event_debounce`] after the change; changes during a pass share the next one.
    /// Failed passes are retried with backoff ([`Config::route_reconciliation_period`],
    /// [`Config::max_retry_backoff`]). A full pass runs `resync` after the last one even when nothing changed, to
    /// repair drift made behind the controller's back; the Go gate of this mode,
    /// `CloudControllerManagerWatchBasedRoutesReconciliation` (alpha in 1.35), has no such repair.
    #[educe(Default)]
    EventDriven {
        /// How long after the last pass a full pass runs although nothing changed.
        #[educe(Default(expression = DEFAULT_RESYNC_PERIOD))]
        resync: Duration,
    },
}

impl RouteSyncMode {
    /// When the kit's debounced pass runs in this mode.
    pub(crate) fn schedule(self) -> Schedule {
        match self {
            RouteSyncMode::Periodic => Schedule::Periodic,
            RouteSyncMode::EventDriven { resync } => Schedule::Triggered { resync },
        }
    }

    /// The mode's name in the start-up log.
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// The full resync of the event-driven mode.
    pub(crate) fn resync(self) -> Option<Duration> {
        match self {
            RouteSyncMode::Periodic => None,
            RouteSyncMode::EventDriven { resync } => Some(resync),
        }
    }
}

/// Settings of the route controller. `Default` gives the Go reference's flag defaults, except that the sync mode
/// is [`RouteSyncMode::EventDriven`] (see `docs/route-controller.md`).
///
/// ```
/// use std::time::Duration;
/// use ccm_routecontroller::{Config, RouteSyncMode};
///
/// let config = Config::default()
///     .with_cluster_cidr("10.244.0.0/16,fd00:10:244::/56")
///     .with_route_reconciliation_period(Duration::from_secs(10))
///     .with_sync_mode(RouteSyncMode::EventDriven { resync: Duration::from_secs(600) });
/// assert_eq!(config.cluster_cidrs().unwrap().len(), 2);
/// ```
///
/// Every field but `cluster_cidr` has a setter `with_<field>` (`getset`); `with_cluster_cidr` takes any string.
/// `Default` (`educe`) takes the default each field names.
#[derive(Debug, Clone, PartialEq, Eq, getset::WithSetters, educe::Educe)]
#[educe(Default)]
#[getset(set_with = "pub")]
#[non_exhaustive]
pub struct Config {
    /// `--configure-cloud-routes` (default true): when false the controller is not started.
    #[educe(Default = true)]
    pub configure_cloud_routes: bool,
    /// `--cluster-cidr` (default empty): one CIDR or a dual-stack pair, comma separated. Required when routes are
    /// configured and the provider supports them.
    #[getset(skip)]
    pub cluster_cidr: String,
    /// `--route-reconciliation-period` (default 10 s): the interval of [`RouteSyncMode::Periodic`]; in
    /// [`RouteSyncMode::EventDriven`], the first retry delay after a failed pass and, while passes fail, the
    /// minimum interval between passes (it never delays a reaction to a change while they succeed).
    #[educe(Default(expression = DEFAULT_ROUTE_RECONCILIATION_PERIOD))]
    pub route_reconciliation_period: Duration,
    /// How long after a relevant Node change an event-driven pass starts, however recently the last pass ran
    /// ([`DEFAULT_EVENT_DEBOUNCE`]); changes within that window share the pass. Measured from the first change, so
    /// a steady stream of changes cannot postpone a pass. Capped at `route_reconciliation_period`; zero starts a
    /// pass at once. Ignored in [`RouteSyncMode::Periodic`].
    #[educe(Default(expression = DEFAULT_EVENT_DEBOUNCE))]
    pub event_debounce: Duration,
    /// How passes are triggered (default [`RouteSyncMode::EventDriven`] with a 5 minute resync).
    pub sync_mode: RouteSyncMode,
    /// The cap of the exponential retry backoff after a failed event-driven pass (default 5 minutes).
    #[educe(Default(expression = DEFAULT_MAX_RETRY_BACKOFF))]
    pub max_retry_backoff: Duration,
    /// Cloud route operations (creates and deletes together) in flight at once (default 200).
    #[educe(Default(expression = DEFAULT_MAX_CONCURRENT_ROUTE_OPERATIONS))]
    pub max_concurrent_route_operations: usize,
}

impl Config {
    /// Set `--cluster-cidr` (validated when the controller is built; see [`parse_cluster_cidrs`]).
    pub fn with_cluster_cidr(mut self, cluster_cidr: impl Into<String>) -> Self {
        self.cluster_cidr = cluster_cidr.into();
        self
    }

    /// The parsed `--cluster-cidr`.
    pub fn cluster_cidrs(&self) -> Result<Vec<IpNet>, Error> {
        parse_cluster_cidrs(&self.cluster_cidr)
    }

    /// Check every setting the controller needs (the cluster CIDRs, then [`violations`](Self::violations)),
    /// returning the parsed cluster CIDRs.
    pub fn validate(&self) -> Result<Vec<IpNet>, Error> {
        let cidrs = self.cluster_cidrs()?;
        match self.rule_errors().into_iter().next() {
            Some(err) => Err(err),
            None => Ok(cidrs),
        }
    }

    /// Every rule the periods and limits break, in field order (the cluster CIDRs are checked by
    /// [`cluster_cidrs`](Self::cluster_cidrs)).
    pub fn violations(&self) -> Vec<InvalidSetting> {
        self.rule_errors()
            .iter()
            .filter_map(|err| match err {
                Error::ZeroConcurrency => {
                    InvalidSetting::positive("max_concurrent_route_operations", 0)
                }
                Error::InvalidDuration {
                    setting: setting @ "route_reconciliation_period",
                    value,
                    ..
                } => InvalidSetting::non_zero(setting, *value),
                Error::InvalidDuration { setting, .. } => {
                    Some(InvalidSetting::other(setting, err.to_string()))
                }
                _ => None,
            })
            .collect()
    }

    /// The rules of the periods and limits, each broken one as the error `validate` returns.
    fn rule_errors(&self) -> Vec<Error> {
        let mut errors = Vec::new();
        if self.route_reconciliation_period.is_zero() {
            errors.push(Error::InvalidDuration {
                setting: "route_reconciliation_period",
                value: self.route_reconciliation_period,
                reason: "it must be greater than zero (the default is 10s)",
            });
        }
        if let RouteSyncMode::EventDriven { resync } = self.sync_mode
            && resync < self.route_reconciliation_period
        {
            errors.push(Error::InvalidDuration {
                setting: "resync",
                value: resync,
                reason: "the event-driven full resync must not be shorter than the route reconciliation period",
            });
        }
        if self.max_retry_backoff < self.route_reconciliation_period {
            errors.push(Error::InvalidDuration {
                setting: "max_retry_backoff",
                value: self.max_retry_backoff,
                reason: "the retry backoff cap must not be shorter than the route reconciliation period",
            });
        }
        if self.max_concurrent_route_operations == 0 {
            errors.push(Error::ZeroConcurrency);
        }
        errors
    }
}

/// Parse `--cluster-cidr`: one CIDR, or a dual-stack pair separated by a comma (Go: `processCIDRs` plus the
/// dual-stack checks of `startRouteController`). Whitespace around the value and each entry is ignored; host bits
/// are cleared (`10.244.1.0/16` → `10.244.0.0/16`, as Go's `ParseCIDR` does). Errors: an empty value or entry, an
/// entry that is not a CIDR, more than two CIDRs, two CIDRs of the same family.
///
/// ```
/// use ccm_routecontroller::parse_cluster_cidrs;
///
/// let cidrs = parse_cluster_cidrs("10.244.0.0/16, fd00:10:244::/56").unwrap();
/// assert_eq!(cidrs[1].to_string(), "fd00:10:244::/56");
/// assert!(parse_cluster_cidrs("").is_err());
/// assert!(parse_cluster_cidrs("10.0.0.0/8,10.1.0.0/16").is_err());
/// ```
pub fn parse_cluster_cidrs(value: &str) -> Result<Vec<IpNet>, Error> {
    let value = value.trim();
    if value.is_empty() {
        return Err(Error::MissingClusterCidr);
    }
    let cidrs = value
        .split(',')
        .map(|entry| {
            let entry = entry.trim();
            if entry.is_empty() {
                return Err(Error::InvalidClusterCidr {
                    value: entry.to_owned(),
                    reason: "the entry is empty".to_owned(),
                });
            }
            entry
                .parse::<IpNet>()
                .map(|net| net.trunc())
                .map_err(|err| Error::InvalidClusterCidr {
                    value: entry.to_owned(),
                    reason: err.to_string(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if cidrs.len() > 2 {
        return Err(Error::TooManyClusterCidrs { count: cidrs.len() });
    }
    if let [first, second] = cidrs.as_slice()
        && matches!(first, IpNet::V4(_)) == matches!(second, IpNet::V4(_))
    {
        return Err(Error::NotDualStack {
            first: first.to_string(),
            second: second.to_string(),
        });
    }
    Ok(cidrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sync_mode_has_its_schedule_name_and_resync() {
        let resync = Duration::from_secs(600);
        let event_driven = RouteSyncMode::EventDriven { resync };
        assert_eq!(event_driven.schedule(), Schedule::Triggered { resync });
        assert_eq!(
            (event_driven.as_str(), event_driven.resync()),
            ("event-driven", Some(resync))
        );
        let periodic = RouteSyncMode::Periodic;
        assert_eq!(periodic.schedule(), Schedule::Periodic);
        assert_eq!((periodic.as_str(), periodic.resync()), ("periodic", None));
    }

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn single_and_dual_stack() {
        assert_eq!(
            parse_cluster_cidrs("10.244.0.0/16").unwrap(),
            vec![net("10.244.0.0/16")]
        );
        assert_eq!(
            parse_cluster_cidrs(" fd00:10:244::/56 , 10.244.0.0/16 ").unwrap(),
            vec![net("fd00:10:244::/56"), net("10.244.0.0/16")]
        );
        assert_eq!(
            parse_cluster_cidrs("10.244.7.9/16").unwrap(),
            vec![net("10.244.0.0/16")],
            "host bits are cleared"
        );
    }

    #[test]
    fn empty_is_missing() {
        for value in ["", "   ", "\n"] {
            assert!(
                matches!(parse_cluster_cidrs(value), Err(Error::MissingClusterCidr)),
                "{value:?}"
            );
        }
        let err = parse_cluster_cidrs("").unwrap_err().to_string();
        assert!(err.contains("--cluster-cidr"), "{err}");
        assert!(err.contains("--configure-cloud-routes=false"), "{err}");
    }

    #[test]
    fn invalid_entries() {
        for (value, bad) in [
            ("10.244.0.0", "10.244.0.0"),
            ("nope", "nope"),
            ("10.244.0.0/33", "10.244.0.0/33"),
            ("10.244.0.0/16,", ""),
            (",10.244.0.0/16", ""),
            ("10.244.0.0/16,,fd00::/8", ""),
            ("10.244.0.0/16;fd00::/8", "10.244.0.0/16;fd00::/8"),
        ] {
            match parse_cluster_cidrs(value) {
                Err(Error::InvalidClusterCidr { value: v, .. }) => assert_eq!(v, bad, "{value:?}"),
                other => panic!("{value:?}: expected an invalid entry, got {other:?}"),
            }
        }
        let err = parse_cluster_cidrs("nope").unwrap_err().to_string();
        assert!(
            err.starts_with("invalid --cluster-cidr entry \"nope\""),
            "{err}"
        );
    }

    #[test]
    fn too_many_and_same_family() {
        assert!(matches!(
            parse_cluster_cidrs("10.0.0.0/16,fd00::/8,10.1.0.0/16"),
            Err(Error::TooManyClusterCidrs { count: 3 })
        ));
        assert!(matches!(
            parse_cluster_cidrs("10.0.0.0/16,10.1.0.0/16"),
            Err(Error::NotDualStack { .. })
        ));
        assert!(matches!(
            parse_cluster_cidrs("fd00::/8,fd01::/16"),
            Err(Error::NotDualStack { .. })
        ));
    }

    #[test]
    fn defaults_match_go() {
        let c = Config::default();
        assert!(c.configure_cloud_routes);
        assert_eq!(c.cluster_cidr, "");
        assert_eq!(c.route_reconciliation_period, Duration::from_secs(10));
        assert_eq!(c.event_debounce, Duration::from_millis(250));
        assert_eq!(c.max_concurrent_route_operations, 200);
        assert_eq!(
            c.sync_mode,
            RouteSyncMode::EventDriven {
                resync: Duration::from_secs(300)
            }
        );
        assert!(matches!(c.validate(), Err(Error::MissingClusterCidr)));
    }

    #[test]
    fn validate_settings() {
        let ok = Config::default().with_cluster_cidr("10.244.0.0/16");
        assert_eq!(ok.validate().unwrap(), vec![net("10.244.0.0/16")]);
        assert!(
            ok.clone()
                .with_sync_mode(RouteSyncMode::Periodic)
                .validate()
                .is_ok()
        );

        let zero = ok
            .clone()
            .with_route_reconciliation_period(Duration::ZERO)
            .validate();
        assert!(matches!(
            zero,
            Err(Error::InvalidDuration {
                setting: "route_reconciliation_period",
                ..
            })
        ));
        let short_resync = ok
            .clone()
            .with_sync_mode(RouteSyncMode::EventDriven {
                resync: Duration::from_secs(5),
            })
            .validate();
        assert!(matches!(
            short_resync,
            Err(Error::InvalidDuration {
                setting: "resync",
                ..
            })
        ));
        let short_backoff = ok
            .clone()
            .with_max_retry_backoff(Duration::from_secs(1))
            .validate();
        assert!(matches!(
            short_backoff,
            Err(Error::InvalidDuration {
                setting: "max_retry_backoff",
                ..
            })
        ));
        assert!(matches!(
            ok.with_max_concurrent_route_operations(0).validate(),
            Err(Error::ZeroConcurrency)
        ));
    }
}
