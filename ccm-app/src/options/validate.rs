//! The rules settings must follow, checked before anything starts ([`CcmOptions::validate`], [`ValidationError`]),
//! written out here rather than with each setting: several span settings (the leader election timings, the TLS
//! pair, the cloud budget), and the order in which violations are reported is part of the output.

use ccm_core::duration::format_go_duration;
use ccm_leaderelection::Error as LeaderElectionError;

use super::CcmOptions;

impl CcmOptions {
    /// Check every rule that does not depend on the binary's controllers or provider, collecting all
    /// violations.
    pub fn validate(&self) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        let mut check = |ok: bool, error: ValidationError| {
            if !ok {
                errors.push(error);
            }
        };
        check(
            !self.cloud_provider.is_empty(),
            ValidationError::EmptyCloudProvider,
        );
        let burst = self.kube_api_burst.value().unwrap_or(0);
        check(
            burst >= 0,
            ValidationError::Negative {
                setting: "kube-api-burst",
                value: i64::from(burst),
            },
        );
        check(
            self.kube_api_qps.value().is_none_or(f32::is_finite),
            invalid(
                "kube-api-qps",
                format!("{} is not a number", self.kube_api_qps),
            ),
        );
        // A flag out of range is reported whether or not its controller runs, as Go does; the controllers'
        // other rules are checked for the enabled ones only (`crate::defaults::validate`).
        for (_, error) in crate::defaults::violations(self) {
            check(!crate::defaults::out_of_range(&error), error);
        }
        check(
            !self.shutdown_timeout.is_zero(),
            ValidationError::ZeroDuration {
                setting: "shutdown-timeout",
            },
        );
        check(
            self.cluster_name.is_empty() || !self.cluster_name.chars().any(char::is_control),
            invalid("cluster-name", "it contains control characters"),
        );
        let always_allow = &self.authorization_always_allow_paths;
        let always_allow = crate::auth::decide::AlwaysAllowPaths::parse(always_allow)
            .err()
            .map(|err| invalid("authorization-always-allow-paths", err.to_string()));
        crate::serving::PortFlags::secure(self)
            .validate()
            .into_iter()
            .chain(self.validate_serving_extras())
            .chain(always_allow)
            .for_each(|error| check(false, error));
        if let Some(ns) = &self.service_namespace {
            check(
                ccm_core::syntax::dns_label(ns).is_ok(),
                invalid(
                    "service-namespace",
                    format!("{ns:?} is not a valid namespace name (a DNS-1123 label)"),
                ),
            );
        }
        for (setting, selector) in [
            ("node-selector", &self.node_selector),
            ("service-selector", &self.service_selector),
        ] {
            if let Some(selector) = selector {
                check(
                    !selector.chars().any(char::is_control),
                    invalid(setting, format!("{selector:?} contains control characters")),
                );
            }
        }
        if let Some(reason) = uid_headers_problem(&self.requestheader_uid_headers) {
            errors.push(invalid("requestheader-uid-headers", reason));
        }
        if let Err(err) = self.cloud_budget().validate() {
            errors.push(invalid("cloud-api-qps", err.to_string()));
        }
        if self.leader_elect {
            errors.extend(self.validate_leader_election());
        }
        errors
    }

    /// The webhook port, HTTP/2, the logging buffers and leader migration.
    fn validate_serving_extras(&self) -> Vec<ValidationError> {
        let mut errors = crate::serving::PortFlags::webhook(self).validate();
        let port = self.webhook_secure_port;
        if port != 0 && port == self.secure_port {
            errors.push(invalid(
                "webhook-secure-port",
                format!(
                    "{port} cannot be the same value as --secure-port; choose another port, or 0 to serve no webhooks"
                ),
            ));
        }
        if self.http2_max_streams_per_connection < 0 {
            errors.push(ValidationError::Negative {
                setting: "http2-max-streams-per-connection",
                value: i64::from(self.http2_max_streams_per_connection),
            });
        }
        for (setting, value) in [
            ("log-json-info-buffer-size", &self.log_json_info_buffer_size),
            ("log-text-info-buffer-size", &self.log_text_info_buffer_size),
        ] {
            if let Err(reason) = super::migration::parse_buffer_size(value) {
                errors.push(invalid(setting, reason));
            }
        }
        if self.enable_leader_migration
            && let Some(path) = &self.leader_migration_config
            && let Err(reason) = super::migration::check_config_file(path)
        {
            errors.push(invalid("leader-migration-config", reason));
        }
        errors
    }

    fn validate_leader_election(&self) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        if self.leader_elect_resource_lock != "leases" {
            errors.push(invalid(
                "leader-elect-resource-lock",
                format!(
                    "{:?} is not supported; the resource lock must be \"leases\"",
                    self.leader_elect_resource_lock
                ),
            ));
        }
        // The rules live in ccm-leaderelection; this names the flags.
        let go = format_go_duration;
        let timings = [
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        ];
        let namespace = &self.leader_elect_resource_namespace;
        let name = &self.leader_elect_resource_name;
        for violation in ccm_leaderelection::violations(timings, namespace, name) {
            let (setting, reason) = match violation {
                LeaderElectionError::DurationTooShort { setting, value } => (
                    match setting {
                        "lease duration" => "leader-elect-lease-duration",
                        "renew deadline" => "leader-elect-renew-deadline",
                        _ => "leader-elect-retry-period",
                    },
                    format!("{} is shorter than the minimum of 1s", go(value)),
                ),
                LeaderElectionError::LeaseDurationNotAboveRenewDeadline {
                    lease_duration,
                    renew_deadline,
                } => (
                    "leader-elect-lease-duration",
                    format!(
                        "the lease duration ({}) must be greater than the renew deadline ({})",
                        go(lease_duration),
                        go(renew_deadline)
                    ),
                ),
                LeaderElectionError::RenewDeadlineNotAboveRetryPeriod {
                    renew_deadline,
                    retry_period,
                    ..
                } => (
                    "leader-elect-renew-deadline",
                    format!(
                        "the renew deadline ({}) must be greater than 1.2 × the retry period ({})",
                        go(renew_deadline),
                        go(retry_period)
                    ),
                ),
                LeaderElectionError::InvalidLeaseName {
                    what: "namespace", ..
                } => (
                    "leader-elect-resource-namespace",
                    format!("{namespace:?} is not a valid namespace name"),
                ),
                LeaderElectionError::InvalidLeaseName { .. } => (
                    "leader-elect-resource-name",
                    format!("{name:?} is not a valid Lease name"),
                ),
                other => ("leader-elect-lease-duration", other.to_string()),
            };
            errors.push(invalid(setting, reason));
        }
        errors
    }
}

/// One violated rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// `--cloud-provider` is empty and the binary sets no default.
    #[error("--cloud-provider cannot be empty; set it to the name of your cloud provider")]
    EmptyCloudProvider,
    /// A count that must be positive is not.
    #[error("--{setting} must be greater than 0, got {value}")]
    NotPositive {
        /// The flag name.
        setting: &'static str,
        /// The value given.
        value: i64,
    },
    /// A count that must not be negative is.
    #[error("--{setting} must not be negative, got {value}")]
    Negative {
        /// The flag name.
        setting: &'static str,
        /// The value given.
        value: i64,
    },
    /// A period is zero.
    #[error("--{setting} must be greater than 0s")]
    ZeroDuration {
        /// The flag name.
        setting: &'static str,
    },
    /// Any other invalid value.
    #[error("invalid --{setting}: {reason}")]
    Invalid {
        /// The flag name.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// `--controllers` names unknown controllers.
    #[error(transparent)]
    UnknownControllers(#[from] crate::controllers::UnknownControllers),
}

/// [`ValidationError::Invalid`] of the flag `setting`.
pub(crate) fn invalid(setting: &'static str, reason: impl Into<String>) -> ValidationError {
    ValidationError::Invalid {
        setting,
        reason: reason.into(),
    }
}

/// What is wrong with `--requestheader-uid-headers`, as Go checks it: no blank entry, and when set it must include
/// `X-Remote-Uid`, the header the API server's aggregator sends (without it, aggregated requests lose their UID).
fn uid_headers_problem(headers: &[String]) -> Option<String> {
    let has = |test: fn(&String) -> bool| headers.iter().any(test);
    if has(|h| h.trim().is_empty()) {
        Some("a header name is empty or only white space".to_owned())
    } else if !headers.is_empty() && !has(|h| h.eq_ignore_ascii_case("x-remote-uid")) {
        Some("set without the standard X-Remote-Uid header; add it, or API aggregation will not work".to_owned())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A DNS-1123 label (the rule `--service-namespace` is checked with).
    fn is_dns_label(value: &str) -> bool {
        ccm_core::syntax::dns_label(value).is_ok()
    }

    /// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
    fn is_dns_subdomain(value: &str) -> bool {
        ccm_core::syntax::dns_subdomain(value).is_ok()
    }

    fn valid() -> CcmOptions {
        CcmOptions {
            cloud_provider: "fake".into(),
            ..CcmOptions::default()
        }
    }

    #[test]
    fn validation_collects_every_violation() {
        let o = CcmOptions {
            cloud_provider: String::new(),
            kube_api_burst: (-1).into(),
            concurrent_node_syncs: 0,
            concurrent_node_status_updates: -1,
            concurrent_service_syncs: 0,
            node_monitor_period: Duration::ZERO,
            tls_cert_file: Some("/c".into()),
            service_namespace: Some("Bad_NS".into()),
            ..CcmOptions::default()
        };
        let messages: Vec<String> = o.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "--cloud-provider cannot be empty; set it to the name of your cloud provider",
                "--kube-api-burst must not be negative, got -1",
                "--concurrent-node-syncs must be greater than 0, got 0",
                "--concurrent-node-status-updates must not be negative, got -1",
                "--concurrent-service-syncs must be greater than 0, got 0",
                "--node-monitor-period must be greater than 0s",
                "invalid --tls-cert-file: --tls-cert-file and --tls-private-key-file must be given together",
                "invalid --service-namespace: \"Bad_NS\" is not a valid namespace name (a DNS-1123 label)",
            ]
        );
    }

    #[test]
    fn uid_headers_follow_go() {
        let with = |headers: &[&str]| CcmOptions {
            requestheader_uid_headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            ..valid()
        };
        assert!(with(&[]).validate().is_empty());
        assert!(with(&["x-remote-uid"]).validate().is_empty());
        assert!(with(&["X-Acme-Uid", "X-Remote-Uid"]).validate().is_empty());
        let messages = |headers: &[&str]| -> Vec<String> {
            with(headers)
                .validate()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            messages(&["X-Acme-Uid"]),
            [
                "invalid --requestheader-uid-headers: set without the standard X-Remote-Uid header; add it, or API \
              aggregation will not work"
            ]
        );
        assert_eq!(
            messages(&["X-Remote-Uid", " "]),
            ["invalid --requestheader-uid-headers: a header name is empty or only white space"]
        );
    }

    #[test]
    fn leader_election_rules() {
        let le = |lease: u64, renew: u64, retry_ms: u64| CcmOptions {
            leader_elect_lease_duration: Duration::from_secs(lease),
            leader_elect_renew_deadline: Duration::from_secs(renew),
            leader_elect_retry_period: Duration::from_millis(retry_ms),
            ..valid()
        };
        assert!(le(15, 10, 2000).validate().is_empty());
        let errs = le(10, 10, 2000).validate();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .to_string()
                .contains("must be greater than the renew deadline")
        );
        // 10s <= 1.2 × 9s
        let errs = le(15, 10, 9000).validate();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].to_string().contains("1.2 × the retry period (9s)"),
            "{}",
            errs[0]
        );
        let errs = le(15, 10, 500).validate();
        assert!(errs[0].to_string().contains("minimum of 1s"), "{}", errs[0]);
        // leader election off: the timings are not checked
        let off = CcmOptions {
            leader_elect: false,
            ..le(1, 10, 2000)
        };
        assert!(off.validate().is_empty());
        let lock = CcmOptions {
            leader_elect_resource_lock: "endpoints".into(),
            leader_elect_resource_namespace: "Kube_System".into(),
            leader_elect_resource_name: "".into(),
            ..valid()
        };
        let messages: Vec<String> = lock.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "invalid --leader-elect-resource-lock: \"endpoints\" is not supported; the resource lock must be \"leases\"",
                "invalid --leader-elect-resource-name: \"\" is not a valid Lease name",
                "invalid --leader-elect-resource-namespace: \"Kube_System\" is not a valid namespace name",
            ]
        );
    }

    #[test]
    fn dns_names() {
        assert!(is_dns_label("kube-system"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label("A"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("cloud-controller-manager.example"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain(""));
    }
}
