//! Pure validation of the election settings.

use std::time::Duration;

use ccm_core::syntax::{dns_label, dns_subdomain};

use crate::Error;

/// client-go's `JitterFactor`: candidates wait between 1 and 2.2 retry periods, and the renew
/// deadline must exceed 1.2 retry periods.
pub const JITTER_FACTOR: f64 = 1.2;

/// Default lease duration (client-go / cloud-provider default).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default renew deadline (client-go / cloud-provider default).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default retry period (client-go / cloud-provider default).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// Default tolerance of the health check beyond the lease duration (cloud-provider's value).
pub const DEFAULT_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);
/// Default Lease namespace.
pub const DEFAULT_LEASE_NAMESPACE: &str = "kube-system";
/// Default Lease name.
pub const DEFAULT_LEASE_NAME: &str = "cloud-controller-manager";

const ONE_SECOND: Duration = Duration::from_secs(1);

/// The three client-go timings, validated together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

impl Timing {
    /// The lease duration in whole seconds, truncated like client-go's
    /// `int(LeaseDuration / time.Second)`; `None` if it does not fit an `i32`.
    pub(crate) fn lease_duration_seconds(&self) -> Option<i32> {
        i32::try_from(self.lease_duration.as_secs()).ok()
    }

    /// client-go's lock client timeout: half the renew deadline, at least one second.
    pub(crate) fn default_api_timeout(&self) -> Duration {
        (self.renew_deadline / 2).max(ONE_SECOND)
    }
}

/// Every rule the election settings break, in order: each timing at least one second,
/// `lease > renew > 1.2 × retry`, the lease duration fits `leaseDurationSeconds`, then the Lease
/// name (a DNS subdomain) and namespace (a DNS label). [`LeaderElectorBuilder::build`](crate::LeaderElectorBuilder::build)
/// fails with the first of them; a binary can report them all before anything starts.
///
/// ```no_run
/// use std::time::Duration;
///
/// let errors = ccm_leaderelection::violations(
///     [Duration::from_secs(10), Duration::from_secs(10), Duration::from_secs(2)],
///     "kube-system",
///     "cloud-controller-manager",
/// );
/// assert!(matches!(
///     errors[..],
///     [ccm_leaderelection::Error::LeaseDurationNotAboveRenewDeadline { .. }]
/// ));
/// ```
pub fn violations(
    [lease_duration, renew_deadline, retry_period]: [Duration; 3],
    namespace: &str,
    name: &str,
) -> Vec<Error> {
    let timing = Timing {
        lease_duration,
        renew_deadline,
        retry_period,
    };
    let mut errors: Vec<Error> = [
        ("lease duration", lease_duration),
        ("renew deadline", renew_deadline),
        ("retry period", retry_period),
    ]
    .into_iter()
    .filter(|(_, value)| *value < ONE_SECOND)
    .map(|(setting, value)| Error::DurationTooShort { setting, value })
    .collect();
    if lease_duration <= renew_deadline {
        errors.push(Error::LeaseDurationNotAboveRenewDeadline {
            lease_duration,
            renew_deadline,
        });
    }
    let minimum = retry_period.mul_f64(JITTER_FACTOR);
    if renew_deadline <= minimum {
        errors.push(Error::RenewDeadlineNotAboveRetryPeriod {
            renew_deadline,
            retry_period,
            minimum,
        });
    }
    if timing.lease_duration_seconds().is_none() {
        errors.push(Error::LeaseDurationTooLong {
            value: lease_duration,
            max: i32::MAX,
        });
    }
    let checks: [(_, _, fn(&str) -> _); 2] = [
        ("name", name, dns_subdomain),
        ("namespace", namespace, dns_label),
    ];
    for (what, value, check) in checks {
        errors.extend(check(value).err().map(|reason| Error::InvalidLeaseName {
            what,
            value: value.to_owned(),
            reason,
        }));
    }
    errors
}

/// Validates the per-request timeout against the renew deadline.
pub(crate) fn validate_api_timeout(api_timeout: Duration, timing: &Timing) -> Result<(), Error> {
    if api_timeout.is_zero() || api_timeout >= timing.renew_deadline {
        return Err(Error::InvalidApiTimeout {
            api_timeout,
            renew_deadline: timing.renew_deadline,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(errors: Vec<Error>) -> Result<(), Error> {
        errors.into_iter().next().map_or(Ok(()), Err)
    }

    impl Timing {
        fn validate(&self) -> Result<(), Error> {
            let timings = [self.lease_duration, self.renew_deadline, self.retry_period];
            first(violations(timings, "default", "lease"))
        }
    }

    const DEFAULTS: [Duration; 3] = [
        DEFAULT_LEASE_DURATION,
        DEFAULT_RENEW_DEADLINE,
        DEFAULT_RETRY_PERIOD,
    ];

    fn validate_lease_name(value: &str) -> Result<(), Error> {
        first(violations(DEFAULTS, "default", value))
    }

    fn validate_namespace(value: &str) -> Result<(), Error> {
        first(violations(DEFAULTS, value, "lease"))
    }

    fn timing(lease: u64, renew: u64, retry_ms: u64) -> Timing {
        Timing {
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_millis(retry_ms),
        }
    }

    #[test]
    fn violations_lists_every_broken_rule_in_order() {
        let secs = Duration::from_secs;
        assert!(violations([secs(15), secs(10), secs(2)], "kube-system", "ccm").is_empty());
        let errors = violations(
            [secs(10), Duration::from_millis(500), secs(2)],
            "Kube_System",
            "",
        );
        let kinds: Vec<String> = errors
            .iter()
            .map(|e| {
                format!("{e:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "DurationTooShort",
                "RenewDeadlineNotAboveRetryPeriod",
                "InvalidLeaseName",
                "InvalidLeaseName",
            ]
        );
        assert!(matches!(
            errors[2],
            Error::InvalidLeaseName { what: "name", .. }
        ));
        assert!(matches!(
            errors[3],
            Error::InvalidLeaseName {
                what: "namespace",
                ..
            }
        ));
    }

    #[test]
    fn defaults_are_client_go_defaults_and_valid() {
        let t = Timing::default();
        assert_eq!(t, timing(15, 10, 2000));
        t.validate().expect("defaults validate");
        assert_eq!(t.lease_duration_seconds(), Some(15));
        assert_eq!(t.default_api_timeout(), Duration::from_secs(5));
    }

    #[test]
    fn lease_must_exceed_renew() {
        let err = timing(10, 10, 2000).validate().unwrap_err();
        assert!(
            matches!(err, Error::LeaseDurationNotAboveRenewDeadline { .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("must be greater than the renew deadline"),
            "{err}"
        );
        let err = timing(9, 10, 2000).validate().unwrap_err();
        assert!(
            matches!(err, Error::LeaseDurationNotAboveRenewDeadline { .. }),
            "{err}"
        );
    }

    #[test]
    fn renew_must_exceed_jittered_retry() {
        // 1.2 × 2.5 s = 3 s: equal is rejected, like client-go's `<=`.
        let err = timing(15, 3, 2500).validate().unwrap_err();
        match err {
            Error::RenewDeadlineNotAboveRetryPeriod { minimum, .. } => {
                assert_eq!(minimum, Duration::from_secs(3));
            }
            other => panic!("unexpected error {other}"),
        }
        timing(15, 3, 2400).validate().expect("3s > 2.88s");
        // renew > retry but not > 1.2 × retry.
        let err = timing(15, 2, 1800).validate().unwrap_err();
        assert!(
            matches!(err, Error::RenewDeadlineNotAboveRetryPeriod { .. }),
            "{err}"
        );
    }

    #[test]
    fn every_duration_must_be_at_least_one_second() {
        let err = timing(3, 2, 999).validate().unwrap_err();
        assert!(
            matches!(
                err,
                Error::DurationTooShort {
                    setting: "retry period",
                    ..
                }
            ),
            "{err}"
        );
        let t = Timing {
            lease_duration: Duration::from_millis(900),
            renew_deadline: Duration::from_millis(800),
            retry_period: Duration::from_millis(100),
        };
        let err = t.validate().unwrap_err();
        assert!(
            matches!(
                err,
                Error::DurationTooShort {
                    setting: "lease duration",
                    ..
                }
            ),
            "{err}"
        );
        let t = Timing {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_millis(500),
            retry_period: Duration::from_secs(1),
        };
        assert!(matches!(
            t.validate().unwrap_err(),
            Error::DurationTooShort {
                setting: "renew deadline",
                ..
            }
        ));
        assert!(
            timing(3, 2, 1000).validate().is_ok(),
            "the short test timings used across the workspace are valid"
        );
    }

    #[test]
    fn lease_duration_must_fit_int32() {
        let t = Timing {
            lease_duration: Duration::from_secs(u64::from(u32::MAX)),
            ..Timing::default()
        };
        assert!(matches!(
            t.validate().unwrap_err(),
            Error::LeaseDurationTooLong { .. }
        ));
    }

    #[test]
    fn lease_duration_seconds_truncates_like_client_go() {
        let t = Timing {
            lease_duration: Duration::from_millis(15_900),
            ..Timing::default()
        };
        assert_eq!(t.lease_duration_seconds(), Some(15));
    }

    #[test]
    fn api_timeout_defaults_and_bounds() {
        let t = timing(3, 2, 1000);
        assert_eq!(
            t.default_api_timeout(),
            Duration::from_secs(1),
            "at least one second"
        );
        validate_api_timeout(Duration::from_millis(500), &t).expect("below renew deadline");
        assert!(validate_api_timeout(Duration::ZERO, &t).is_err());
        assert!(validate_api_timeout(Duration::from_secs(2), &t).is_err());
    }

    #[test]
    fn names_are_validated() {
        validate_lease_name("cloud-controller-manager").unwrap();
        validate_lease_name("a.b-c.d1").unwrap();
        validate_namespace("kube-system").unwrap();
        for bad in [
            "",
            "Upper",
            "-start",
            "end-",
            "a..b",
            "has space",
            "under_score",
        ] {
            assert!(validate_lease_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(
            validate_namespace("a.b").is_err(),
            "dots are not allowed in namespaces"
        );
        assert!(validate_namespace(&"a".repeat(64)).is_err());
        assert!(validate_lease_name(&"a".repeat(254)).is_err());
        let err = validate_lease_name("Bad").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid leader election lease name \"Bad\": may contain only lower-case letters, \
             digits, '-' and '.'"
        );
    }
}
