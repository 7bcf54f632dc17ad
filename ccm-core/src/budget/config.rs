//! The budget's settings: [`CloudBudget`] (the config-file section and the flags' target), its per-operation
//! caps and their validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::intercept::Operation;

/// How fast the CCM may call the cloud.
///
/// The default is adaptive with no hard cap: calls go at once while the cloud accepts them, and the rate adapts
/// when the cloud throttles ([`adaptive`](super::adaptive)). `qps` > 0 adds a hard cap (a token bucket of `qps`
/// and `burst` for the whole provider), `operations` caps single operations, and `adaptive: false` turns the
/// adaptation off (leaving only the caps, if any: [`unlimited`](CloudBudget::unlimited) is no budget at all).
///
/// A field left out of a deserialized budget takes its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[non_exhaustive]
pub struct CloudBudget {
    /// The hard cap, calls per second for the whole provider; 0 (the default) = no hard cap.
    pub qps: f64,
    /// How many calls the hard cap lets out at once after a quiet period (default 100; used only when
    /// `qps` > 0).
    pub burst: u32,
    /// Adapt to the cloud: limit the rate when it throttles, honour its retry-after, recover gradually (default
    /// true).
    pub adaptive: bool,
    /// Extra limits for single operations, by [`Operation`] name (`create`, `instance-metadata-by-provider-id`,
    /// `list-routes`, ...; not `initialize`, which is not intercepted). A call must get a token from both its
    /// operation's bucket and the provider's.
    pub operations: BTreeMap<String, OperationBudget>,
}

/// The limit of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperationBudget {
    /// Calls per second.
    pub qps: f64,
    /// Burst.
    pub burst: u32,
}

impl Default for CloudBudget {
    fn default() -> Self {
        CloudBudget {
            qps: 0.0,
            burst: 100,
            adaptive: true,
            operations: BTreeMap::new(),
        }
    }
}

/// An invalid budget.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// A rate is negative or not a number.
    #[error("cloud budget for {scope}: qps must be a finite number >= 0, got {qps}")]
    InvalidQps {
        /// `provider` or the operation name.
        scope: String,
        /// The value given.
        qps: f64,
    },
    /// A burst of zero with a positive rate.
    #[error("cloud budget for {scope}: burst must be at least 1 when qps > 0")]
    ZeroBurst {
        /// `provider` or the operation name.
        scope: String,
    },
    /// An operation name that no intercepted provider method has.
    #[error(
        "cloud budget: unknown operation {name:?}; known operations: {}",
        Operation::intercepted_names()
    )]
    UnknownOperation {
        /// The name given.
        name: String,
    },
}

impl CloudBudget {
    /// No budget at all: no cap, no adaptation (every call goes at once, whatever the cloud answers).
    pub fn unlimited() -> Self {
        CloudBudget {
            burst: 0,
            adaptive: false,
            ..Self::default()
        }
    }
    /// Set the hard cap's rate (0 = no hard cap).
    pub fn with_qps(mut self, qps: f64) -> Self {
        self.qps = qps;
        self
    }
    /// Set the hard cap's burst.
    pub fn with_burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }
    /// Turn the adaptation to the cloud's throttling on or off.
    pub fn with_adaptive(mut self, adaptive: bool) -> Self {
        self.adaptive = adaptive;
        self
    }
    /// Add a limit for one operation.
    pub fn with_operation(mut self, operation: Operation, qps: f64, burst: u32) -> Self {
        self.operations.insert(
            operation.as_str().to_owned(),
            OperationBudget { qps, burst },
        );
        self
    }
    /// Check every rate, burst and operation name.
    pub fn validate(&self) -> Result<(), BudgetError> {
        check("provider", self.qps, self.burst)?;
        for (name, op) in &self.operations {
            if !Operation::from_name(name).is_some_and(Operation::is_intercepted) {
                return Err(BudgetError::UnknownOperation { name: name.clone() });
            }
            check(name, op.qps, op.burst)?;
        }
        Ok(())
    }
    /// True if the provider-wide hard cap is on.
    pub fn is_limited(&self) -> bool {
        self.qps > 0.0
    }
    /// A short description for logs: `adaptive, no hard cap`, `adaptive, hard cap 45/s (burst 40)`, `none`, ...
    pub fn describe(&self) -> String {
        if !self.adaptive && !self.is_limited() && self.operations.is_empty() {
            return "none".to_owned();
        }
        let mode = if self.adaptive {
            "adaptive"
        } else {
            "not adaptive"
        };
        let cap = if self.is_limited() {
            format!("hard cap {}/s (burst {})", self.qps, self.burst)
        } else {
            "no hard cap".to_owned()
        };
        match self.operations.len() {
            0 => format!("{mode}, {cap}"),
            n => format!("{mode}, {cap}, {n} operation limits"),
        }
    }
}

fn check(scope: &str, qps: f64, burst: u32) -> Result<(), BudgetError> {
    if !qps.is_finite() || qps < 0.0 {
        return Err(BudgetError::InvalidQps {
            scope: scope.to_owned(),
            qps,
        });
    }
    if qps > 0.0 && burst == 0 {
        return Err(BudgetError::ZeroBurst {
            scope: scope.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert!(CloudBudget::default().validate().is_ok());
        assert!(CloudBudget::unlimited().validate().is_ok());
        assert!(matches!(
            CloudBudget::default().with_qps(-1.0).validate(),
            Err(BudgetError::InvalidQps { .. })
        ));
        assert!(matches!(
            CloudBudget::default()
                .with_qps(10.0)
                .with_burst(0)
                .validate(),
            Err(BudgetError::ZeroBurst { .. })
        ));
        // without a hard cap the burst is not used
        assert!(CloudBudget::default().with_burst(0).validate().is_ok());
        for name in ["nope", "instance-metadata", "initialize"] {
            let mut budget = CloudBudget::default();
            budget
                .operations
                .insert(name.to_owned(), OperationBudget { qps: 1.0, burst: 1 });
            let err = budget.validate().unwrap_err();
            assert!(
                err.to_string().contains(&format!(
                    "unknown operation \"{name}\"; known operations: get-load-balancer, create"
                )),
                "{err}"
            );
        }
        assert!(
            CloudBudget::default()
                .with_operation(Operation::EnsureLoadBalancer, 1.0, 1)
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn config_file_shape() {
        let budget: CloudBudget = serde_json::from_str(
            r#"{"qps": 5, "operations": {"list-routes": {"qps": 0.1, "burst": 1}}}"#,
        )
        .unwrap();
        assert_eq!(budget.burst, 100);
        assert_eq!(budget.operations[Operation::ListRoutes.as_str()].burst, 1);
        assert!(serde_json::from_str::<CloudBudget>(r#"{"qsp": 5}"#).is_err());
    }

    #[test]
    fn descriptions() {
        let op = |b: CloudBudget| b.with_operation(Operation::ListRoutes, 1.0, 1);
        let capped = || CloudBudget::default().with_qps(45.0).with_burst(40);
        for (budget, text) in [
            (CloudBudget::default(), "adaptive, no hard cap"),
            (capped(), "adaptive, hard cap 45/s (burst 40)"),
            (
                op(capped()),
                "adaptive, hard cap 45/s (burst 40), 1 operation limits",
            ),
            (CloudBudget::unlimited(), "none"),
            (
                op(CloudBudget::unlimited()),
                "not adaptive, no hard cap, 1 operation limits",
            ),
            (
                capped().with_adaptive(false),
                "not adaptive, hard cap 45/s (burst 40)",
            ),
        ] {
            assert_eq!(budget.describe(), text);
        }
    }
}
