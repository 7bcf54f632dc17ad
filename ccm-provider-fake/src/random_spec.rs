//! The inventory's `randomFaults` section: a seeded fault profile (error probability, latency ± jitter, time
//! window) per operation or for all of them.

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_core::duration::GoDuration;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::inventory::{Checker, FaultKind, InventoryError};
use crate::random::{RandomFault, RandomFaults};

/// A seeded fault profile: rules applied to every call, drawn from one random generator so that the same seed
/// and the same calls give the same faults.
///
/// ```
/// use ccm_provider_fake::Inventory;
///
/// let yaml = "randomFaults:\n  seed: 7\n  rules:\n    - errorProbability: 0.3\n      latency: 200ms\n      jitter: 150ms\n      stopAfter: 60s\n";
/// let inventory = Inventory::from_yaml_str(yaml, "inventory.yaml").unwrap();
/// assert_eq!(inventory.random_faults.unwrap().rules[0].error_probability, 0.3);
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct RandomFaultsSpec {
    /// The seed of the random generator. Default 0.
    #[serde(default)]
    pub seed: u64,
    /// The rules, applied in order to every call: each applicable rule adds its delay, and the first one that
    /// fails the call decides the error.
    #[serde(default)]
    pub rules: Vec<RandomFaultSpec>,
}

/// One rule of a fault profile.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct RandomFaultSpec {
    /// The operation names the rule applies to (see the operation table in docs/fake-provider.md). Default:
    /// every operation.
    #[serde(default)]
    pub operations: Vec<String>,
    /// The chance, from 0 to 1, that a call fails. Default 0.
    #[serde(default)]
    pub error_probability: f64,
    /// The kind of error of a failing call. Default `other`.
    #[serde(default)]
    pub error: Option<FaultKind>,
    /// The message of an `other` error. Default `injected by the inventory`.
    #[serde(default)]
    pub message: Option<String>,
    /// The delay of a `retry` error (required) or a `throttled` error (optional): a Go duration.
    #[serde(default, with = "ccm_core::duration::serde::option")]
    #[schemars(with = "Option<GoDuration>")]
    pub retry_after: Option<Duration>,
    /// The mean delay added to every call (a Go duration, such as `200ms`). Default none.
    #[serde(default, with = "ccm_core::duration::serde::option")]
    #[schemars(with = "Option<GoDuration>")]
    pub latency: Option<Duration>,
    /// The delay is drawn uniformly from `latency ± jitter` (a Go duration, at most `latency`). Default none.
    #[serde(default, with = "ccm_core::duration::serde::option")]
    #[schemars(with = "Option<GoDuration>")]
    pub jitter: Option<Duration>,
    /// The rule applies from this long after the cloud's start (a Go duration). Default: from the start.
    #[serde(default, with = "ccm_core::duration::serde::option")]
    #[schemars(with = "Option<GoDuration>")]
    pub start_after: Option<Duration>,
    /// The rule stops applying this long after the cloud's start (a Go duration, after `startAfter`). Default:
    /// never.
    #[serde(default, with = "ccm_core::duration::serde::option")]
    #[schemars(with = "Option<GoDuration>")]
    pub stop_after: Option<Duration>,
}

impl RandomFaultsSpec {
    /// The checked rules, with windows measured from now.
    pub(crate) fn build(&self, check: &Checker<'_>) -> Result<RandomFaults, InventoryError> {
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, spec)| spec.build(check, &format!("randomFaults.rules[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RandomFaults::new(
            rules,
            self.seed,
            tokio::time::Instant::now(),
        ))
    }
}

impl RandomFaultSpec {
    fn build(&self, check: &Checker<'_>, base: &str) -> Result<RandomFault, InventoryError> {
        let operations = if self.operations.is_empty() {
            None
        } else {
            let mut ops = BTreeSet::new();
            for (j, name) in self.operations.iter().enumerate() {
                ops.insert(check.operation(format!("{base}.operations[{j}]"), name)?);
            }
            Some(ops)
        };
        let p = self.error_probability;
        if !(0.0..=1.0).contains(&p) {
            return Err(check.invalid(
                format!("{base}.errorProbability"),
                format!("must be a number from 0 to 1, not {p}"),
            ));
        }
        let error = check.injected_error(
            base,
            self.error.unwrap_or(FaultKind::Other),
            self.message.as_deref(),
            self.retry_after,
        )?;
        let latency = self.latency.unwrap_or_default();
        let jitter = self.jitter.unwrap_or_default();
        if jitter > latency {
            return Err(check.invalid(
                format!("{base}.jitter"),
                format!(
                    "must not exceed latency ({latency:?}): the delay is drawn from latency ± jitter"
                ),
            ));
        }
        let start_after = self.start_after.unwrap_or_default();
        if let Some(stop) = self.stop_after
            && stop <= start_after
        {
            return Err(check.invalid(
                format!("{base}.stopAfter"),
                format!("must be later than startAfter ({start_after:?})"),
            ));
        }
        Ok(RandomFault {
            operations,
            error_probability: p,
            error,
            latency,
            jitter,
            start_after,
            stop_after: self.stop_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ccm_core::intercept::Operation;

    use crate::fault::InjectedError;
    use crate::inventory::{Checker, Inventory};
    use crate::random::RandomFault;

    fn rules(yaml: &str) -> Result<Vec<RandomFault>, String> {
        let inventory = Inventory::from_yaml_str(yaml, "inv.yaml").map_err(|e| e.to_string())?;
        let spec = inventory.random_faults.expect("randomFaults");
        let check = Checker { file: "inv.yaml" };
        spec.rules
            .iter()
            .enumerate()
            .map(|(i, r)| r.build(&check, &format!("randomFaults.rules[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_rule_parses() {
        let parsed = rules(
            "randomFaults:\n  seed: 3\n  rules:\n    - operations: [create, instance-exists]\n      \
             errorProbability: 0.25\n      error: throttled\n      retryAfter: 2s\n      latency: 200ms\n      \
             jitter: 150ms\n      startAfter: 5s\n      stopAfter: 1m5s\n",
        )
        .unwrap();
        assert_eq!(
            parsed,
            [RandomFault {
                operations: Some([Operation::EnsureLoadBalancer, Operation::InstanceExists].into()),
                error_probability: 0.25,
                error: InjectedError::ThrottledFor(Duration::from_secs(2)),
                latency: Duration::from_millis(200),
                jitter: Duration::from_millis(150),
                start_after: Duration::from_secs(5),
                stop_after: Some(Duration::from_secs(65)),
            }]
        );
    }

    #[test]
    fn defaults_are_every_operation_other_errors_no_delay_no_window() {
        let parsed = rules("randomFaults:\n  rules:\n    - errorProbability: 1\n").unwrap();
        assert_eq!(
            parsed,
            [RandomFault {
                operations: None,
                error_probability: 1.0,
                error: InjectedError::Other("injected by the inventory".into()),
                latency: Duration::ZERO,
                jitter: Duration::ZERO,
                start_after: Duration::ZERO,
                stop_after: None,
            }]
        );
    }

    #[test]
    fn bad_rules_are_refused_with_their_path() {
        let cases = [
            (
                "randomFaults:\n  rules:\n    - errorProbability: 1.5\n",
                "inv.yaml: randomFaults.rules[0].errorProbability: must be a number from 0 to 1, not 1.5",
            ),
            (
                "randomFaults:\n  rules:\n    - latency: 100ms\n      jitter: 200ms\n",
                "inv.yaml: randomFaults.rules[0].jitter: must not exceed latency (100ms): the delay is drawn from \
                 latency ± jitter",
            ),
            (
                "randomFaults:\n  rules:\n    - startAfter: 10s\n      stopAfter: 10s\n",
                "inv.yaml: randomFaults.rules[0].stopAfter: must be later than startAfter (10s)",
            ),
            (
                "randomFaults:\n  rules:\n    - error: retry\n",
                "inv.yaml: randomFaults.rules[0].retryAfter: a retry error needs retryAfter, such as 30s",
            ),
            (
                "randomFaults:\n  rules:\n    - error: timeout\n      message: hi\n",
                "inv.yaml: randomFaults.rules[0].message: only an error of kind other takes a message",
            ),
        ];
        for (yaml, expected) in cases {
            assert_eq!(rules(yaml).unwrap_err(), expected, "{yaml}");
        }
        let unknown = rules("randomFaults:\n  rules:\n    - operations: [nope]\n").unwrap_err();
        assert!(
            unknown.starts_with(
                "inv.yaml: randomFaults.rules[0].operations[0]: unknown operation \"nope\""
            ),
            "{unknown}"
        );
        let typo = rules("randomFaults:\n  rules:\n    - probability: 0.3\n").unwrap_err();
        assert!(typo.contains("unknown field"), "{typo}");
    }
}
