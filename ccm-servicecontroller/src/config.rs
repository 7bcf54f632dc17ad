//! The service controller's settings: [`Config`], whose `Default` is the Go reference's behaviour plus the
//! SDK's improvements that do not change what ends up in the cloud.

use std::time::Duration;

use ccm_core::settings::InvalidSetting;

use crate::error::Error;
use crate::predicates::ServiceSelector;

/// Settings of the service controller.
///
/// `Config::default()` matches the Go controller (`--concurrent-service-syncs=1`, per-Service exponential
/// backoff from 5 s to 300 s, class-less Services only, the Go `needsUpdate` field list), with two additions
/// that make it much cheaper and never more than a second later: node changes are batched (a pass starts once
/// node changes have settled for [`node_sync_debounce`](Self::node_sync_debounce), 100 ms, or at most
/// [`node_sync_max_delay`](Self::node_sync_max_delay), 1 s, after the first; changes during a pass are folded into
/// the next one, and each load balancer gets the node set as it is when its turn comes), and host updates of one
/// load balancer never overlap its ensure.
///
/// ```
/// use std::time::Duration;
/// use ccm_servicecontroller::Config;
///
/// let config = Config::default()
///     .with_concurrent_service_syncs(4)
///     .with_periodic_reensure(Some(Duration::from_secs(3600)))
///     .with_load_balancer_class(Some("example.com/internal".into()))
///     .with_class_less_services(false);
/// config.validate().unwrap();
/// assert_eq!(config.concurrent_service_syncs, 4);
/// ```
///
/// Every field but the retry delays has a setter `with_<field>`, derived with `getset`; the delays are set
/// together with [`with_retry_backoff`](Self::with_retry_backoff). `Default` is derived with `educe` from the
/// value at each field (a field without one takes its type's default).
#[derive(Debug, Clone, PartialEq, getset::WithSetters, educe::Educe)]
#[educe(Default)]
#[getset(set_with = "pub")]
#[non_exhaustive]
pub struct Config {
    /// How many Services are synced at once, and the parallelism of a node-sync pass
    /// (Go: `--concurrent-service-syncs`). Default 1; must be at least 1.
    #[educe(Default = 1)]
    pub concurrent_service_syncs: usize,
    /// First retry delay of a failed Service sync; doubles per failure (Go: 5 s).
    #[getset(skip)]
    #[educe(Default(expression = Duration::from_secs(5)))]
    pub retry_base_delay: Duration,
    /// Longest retry delay of a failed Service sync (Go: 300 s).
    #[getset(skip)]
    #[educe(Default(expression = Duration::from_secs(300)))]
    pub retry_max_delay: Duration,
    /// How long node changes must settle before a node-sync pass starts. **Default 100 ms**: long enough that
    /// the Nodes of one burst (an autoscaler adding 100 at once, created within a few hundred milliseconds) share
    /// one pass, so each load balancer gets one update for the burst; short enough that a lone change reaches the
    /// load balancers within a few tenths of a second. Changes that arrive while a pass runs are folded into the
    /// next pass. Zero starts a pass at once when none runs (work-conserving only: on a fast cloud, a burst then
    /// costs two or three updates per load balancer).
    #[educe(Default(expression = Duration::from_millis(100)))]
    pub node_sync_debounce: Duration,
    /// Upper bound on how long a continuous stream of node changes can delay a node-sync pass. **Default 1 s**:
    /// while Nodes keep arriving (one every 50 ms, say), a pass still runs every second, so every Node is in every
    /// load balancer within about a second of its arrival, at a tenth of Go's calls.
    #[educe(Default(expression = Duration::from_secs(1)))]
    pub node_sync_max_delay: Duration,
    /// Re-ensure every owned load balancer about this often, to repair changes made behind the controller's back
    /// (the Go controller never does). `None` (the default) disables it.
    pub periodic_reensure: Option<Duration>,
    /// Random extra delay added to each periodic re-ensure round, as a fraction of the period (0.0 to 1.0).
    /// Default 0.1.
    #[educe(Default = 0.1)]
    pub periodic_reensure_jitter: f64,
    /// Also own `type: LoadBalancer` Services whose `spec.loadBalancerClass` is this value. Default `None`.
    pub load_balancer_class: Option<String>,
    /// Own `type: LoadBalancer` Services without a `spec.loadBalancerClass` (the Go behaviour). Default `true`.
    #[educe(Default = true)]
    pub class_less_services: bool,
    /// Also re-ensure when `spec.allocateLoadBalancerNodePorts` or the values (not only the count) of
    /// `spec.ipFamilies` change. Default `false` (the Go field list).
    pub extended_update_fields: bool,
    /// What a starting controller (a new leader, a restarted CCM) does with the load balancers that exist.
    /// **Default [`Takeover::Compare`]**: with a provider that lists its load balancers, only Services whose load
    /// balancer is missing or differs are ensured. [`Takeover::EnsureAll`] is Go's behaviour.
    pub takeover: Takeover,
}

/// What a starting service controller does with the load balancers that already exist
/// ([`Config::takeover`]; docs/service-controller.md, "Takeover").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Takeover {
    /// If the provider [lists](ccm_core::LoadBalancer::supports_listing) its load balancers: list them (a few
    /// paginated calls), and ensure only the Services whose load balancer is missing or differs in its ports,
    /// backends, status or the Service's settings since the last ensure. A provider without a listing, or a
    /// listing that fails, gets [`EnsureAll`](Takeover::EnsureAll).
    #[default]
    Compare,
    /// Ensure every Service's load balancer, as Go does (one `EnsureLoadBalancer` per Service).
    EnsureAll,
}

impl Config {
    /// Set the retry backoff ([`retry_base_delay`](Self::retry_base_delay) to
    /// [`retry_max_delay`](Self::retry_max_delay)).
    #[must_use]
    pub fn with_retry_backoff(mut self, base: Duration, max: Duration) -> Self {
        self.retry_base_delay = base;
        self.retry_max_delay = max;
        self
    }

    /// Which Services these settings make the controller own.
    pub fn selector(&self) -> ServiceSelector {
        ServiceSelector {
            class_less: self.class_less_services,
            class: self.load_balancer_class.clone(),
        }
    }

    /// Every rule the settings break, in field order; each names the setting and what to change.
    pub fn violations(&self) -> Vec<InvalidSetting> {
        let mut invalid: Vec<InvalidSetting> = [
            InvalidSetting::positive("concurrent_service_syncs", self.concurrent_service_syncs),
            InvalidSetting::non_zero("retry_base_delay", self.retry_base_delay),
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut check = |ok: bool, setting, reason: String| {
            if !ok {
                invalid.push(InvalidSetting::other(setting, reason));
            }
        };
        check(
            self.retry_base_delay <= self.retry_max_delay,
            "retry_base_delay",
            format!(
                "retry_base_delay ({:?}) is longer than retry_max_delay ({:?}); make the base delay the shorter one",
                self.retry_base_delay, self.retry_max_delay
            ),
        );
        check(
            self.node_sync_debounce <= self.node_sync_max_delay,
            "node_sync_debounce",
            format!(
                "node_sync_debounce ({:?}) is longer than node_sync_max_delay ({:?}); raise the maximum or shorten the quiet period",
                self.node_sync_debounce, self.node_sync_max_delay
            ),
        );
        if let Some(period) = self.periodic_reensure {
            check(
                period >= Duration::from_secs(1),
                "periodic_reensure",
                format!(
                    "periodic_reensure ({period:?}) is shorter than 1s; use a longer period or None to disable it"
                ),
            );
        }
        check(
            (0.0..=1.0).contains(&self.periodic_reensure_jitter),
            "periodic_reensure_jitter",
            format!(
                "periodic_reensure_jitter ({}) is outside 0.0..=1.0",
                self.periodic_reensure_jitter
            ),
        );
        if let Some(class) = &self.load_balancer_class {
            check(
                !class.is_empty() && !class.chars().any(char::is_whitespace),
                "load_balancer_class",
                format!(
                    "load_balancer_class {class:?} is not a valid class name; use a non-empty name without spaces such as example.com/internal"
                ),
            );
        }
        check(
            self.class_less_services || self.load_balancer_class.is_some(),
            "class_less_services",
            "class_less_services is false and no load_balancer_class is set, so no Service would be served; set a class or own class-less Services"
                .to_owned(),
        );
        invalid
    }

    /// Check the settings: the first of [`violations`](Self::violations).
    pub fn validate(&self) -> Result<(), Error> {
        match self.violations().into_iter().next() {
            Some(setting) => Err(Error::InvalidConfig(setting)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_go() {
        let c = Config::default();
        assert_eq!(c.concurrent_service_syncs, 1);
        assert_eq!(c.retry_base_delay, Duration::from_secs(5));
        assert_eq!(c.retry_max_delay, Duration::from_secs(300));
        assert_eq!(c.periodic_reensure, None);
        assert_eq!(c.node_sync_debounce, Duration::from_millis(100));
        assert_eq!(c.node_sync_max_delay, Duration::from_secs(1));
        assert!(c.class_less_services);
        assert_eq!(c.load_balancer_class, None);
        assert!(!c.extended_update_fields);
        assert_eq!(c.takeover, Takeover::Compare);
        c.validate().unwrap();
    }

    #[test]
    fn invalid_settings_are_named() {
        let cases: Vec<(Config, &str)> = vec![
            (
                Config::default().with_concurrent_service_syncs(0),
                "concurrent_service_syncs",
            ),
            (
                Config::default().with_retry_backoff(Duration::ZERO, Duration::from_secs(1)),
                "retry_base_delay is 0",
            ),
            (
                Config::default()
                    .with_retry_backoff(Duration::from_secs(10), Duration::from_secs(1)),
                "longer than retry_max_delay",
            ),
            (
                Config::default().with_node_sync_debounce(Duration::from_secs(60)),
                "node_sync_debounce",
            ),
            (
                Config::default().with_periodic_reensure(Some(Duration::from_millis(10))),
                "periodic_reensure",
            ),
            (
                Config::default().with_periodic_reensure_jitter(1.5),
                "periodic_reensure_jitter",
            ),
            (
                Config::default().with_periodic_reensure_jitter(f64::NAN),
                "periodic_reensure_jitter",
            ),
            (
                Config::default().with_load_balancer_class(Some(String::new())),
                "load_balancer_class",
            ),
            (
                Config::default().with_load_balancer_class(Some("a b".into())),
                "load_balancer_class",
            ),
            (
                Config::default().with_class_less_services(false),
                "no Service would be served",
            ),
        ];
        for (config, needle) in cases {
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle:?}");
            assert!(
                err.starts_with("invalid service controller configuration"),
                "{err}"
            );
        }
    }

    #[test]
    fn class_only_is_valid_and_selects() {
        let c = Config::default()
            .with_load_balancer_class(Some("example.com/lb".into()))
            .with_class_less_services(false);
        c.validate().unwrap();
        let s = c.selector();
        assert!(!s.class_less);
        assert_eq!(s.class.as_deref(), Some("example.com/lb"));
    }
}
