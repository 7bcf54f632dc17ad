//! What the flags parse into: Go booleans and durations, `--cloud-api-operation-limit`, and the value enums of
//! `--logging-format`, `--node-lifecycle-ownership` and `--route-sync-mode`.

use ccm_core::budget::OperationBudget;
use ccm_core::duration::{DurationError, GoDuration};
use ccm_core::intercept::Operation;
use clap::ValueEnum;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Parse a boolean the way Go's `strconv.ParseBool` does (`1`, `t`, `T`, `TRUE`, `true`, `True`, and the
/// `0`/`f`/`false` forms).
///
/// ```
/// assert_eq!(ccm_app::options::parse_go_bool("True"), Ok(true));
/// assert!(ccm_app::options::parse_go_bool("yes").is_err());
/// ```
///
/// # Errors
///
/// A message naming the accepted values.
pub fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!(
            "invalid boolean {other:?}; use true or false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False)"
        )),
    }
}

/// Parse a Go duration flag (`10s`, `1h30m`) with the one parser of the workspace.
pub(crate) fn parse_duration_flag(value: &str) -> Result<GoDuration, String> {
    value.parse().map_err(|e: DurationError| e.to_string())
}

/// One `--cloud-api-operation-limit` value: an operation's call-log name and its limit.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct OperationLimit {
    /// The operation ([`Operation::as_str`] names it).
    pub operation: Operation,
    /// Its rate and burst.
    pub limit: OperationBudget,
}

/// Parse `OPERATION=QPS:BURST` or `OPERATION=QPS` (burst = QPS rounded up, at least 1).
///
/// ```
/// use ccm_app::options::parse_operation_limit;
/// let limit = parse_operation_limit("create=2:4").unwrap();
/// assert_eq!((limit.operation.as_str(), limit.limit.qps, limit.limit.burst), ("create", 2.0, 4));
/// assert_eq!(parse_operation_limit("list-routes=0.5").unwrap().limit.burst, 1);
/// assert!(parse_operation_limit("nope=1:1").is_err());
/// ```
///
/// # Errors
///
/// A message saying what is wrong: the shape, an unknown operation, or a rate or burst that is not a number.
pub fn parse_operation_limit(value: &str) -> Result<OperationLimit, String> {
    let shape = || {
        format!(
            "invalid operation limit {value:?}: expected OPERATION=QPS:BURST (or OPERATION=QPS), such as create=2:4"
        )
    };
    let (name, limit) = value.split_once('=').ok_or_else(shape)?;
    let operation = Operation::from_name(name)
        .filter(|op| op.is_intercepted())
        .ok_or_else(|| {
            format!(
                "unknown cloud operation {name:?} in {value:?}; known operations: {}",
                Operation::intercepted_names()
            )
        })?;
    let (qps, burst) = match limit.split_once(':') {
        Some((qps, burst)) => (qps, Some(burst)),
        None => (limit, None),
    };
    let qps: f64 = qps
        .parse()
        .ok()
        .filter(|q: &f64| q.is_finite() && *q >= 0.0)
        .ok_or_else(|| format!("{}: the rate {qps:?} is not a number >= 0", shape()))?;
    let burst = match burst {
        Some(burst) => burst
            .parse::<u32>()
            .map_err(|_| format!("{}: the burst {burst:?} is not a whole number", shape()))?,
        // at most u32::MAX after the clamp, so the conversion cannot truncate
        None => qps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32,
    };
    Ok(OperationLimit {
        operation,
        limit: OperationBudget { qps, burst },
    })
}

/// The log line format (`--logging-format`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Which nodes the cloud node lifecycle controller may taint and delete (`--node-lifecycle-ownership`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NodeOwnershipOption {
    /// Only nodes whose providerID starts with `<provider name>://`.
    #[default]
    ProviderIdPrefix,
    /// Every node (the Go behaviour).
    AllNodes,
}

/// How the route controller is triggered (`--route-sync-mode`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RouteSyncModeOption {
    /// Reconcile every `--route-reconciliation-period` (the Go default).
    Periodic,
    /// Reconcile on node changes, `--route-event-debounce` after the change, with a full pass every
    /// `--route-resync-period`.
    #[default]
    EventDriven,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_bools() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Ok(false));
        }
        for bad in ["", "yes", "no", "tRUE", "2"] {
            assert!(parse_go_bool(bad).unwrap_err().contains("invalid boolean"));
        }
    }
}
