//! What the flags parse into: Go booleans and durations, `--cloud-api-operation-limit`, and the value enums of
//! `--logging-format`, `--node-lifecycle-ownership` and `--route-sync-mode`.

use ccm_core::budget::OperationBudget;
use ccm_core::intercept::Operation;
use clap::ValueEnum;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Parse a boolean the way Go's `strconv.ParseBool` does (`1`, `t`, `T`, `TRUE`, `true`, `True`, and the
/// `0`/`f`/`false` forms); the error names the accepted values.
pub(crate) fn parse_go_bool(value: &str) -> Result<bool, String> {
    ccm_servicecontroller::predicates::parse_go_bool(value).ok_or_else(|| {
        format!(
            "invalid boolean {value:?}; use true or false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False)"
        )
    })
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

/// Parse `OPERATION=QPS:BURST` or `OPERATION=QPS` (burst = QPS rounded up, at least 1); the error says what is
/// wrong: the shape, an unknown operation, or a rate or burst that is not a number.
pub(crate) fn parse_operation_limit(value: &str) -> Result<OperationLimit, String> {
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

/// `--kube-api-qps` / `--kube-api-burst`, on the command line and in the config file: a number, or `auto` (the
/// default, the flag not given): the runtime decides at start from whether the API server runs API Priority and
/// Fairness (`crate::client::KubeApiLimits`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum KubeApiLimit<T> {
    /// Not set: decided at start (no client-side limit with APF, Go's 20/30 without).
    #[default]
    Auto,
    /// Set: honoured exactly, as Go does.
    Value(T),
}

impl<T: Copy> KubeApiLimit<T> {
    /// The value, if one was set.
    pub fn value(self) -> Option<T> {
        match self {
            KubeApiLimit::Auto => None,
            KubeApiLimit::Value(value) => Some(value),
        }
    }
}

impl<T> From<T> for KubeApiLimit<T> {
    fn from(value: T) -> Self {
        KubeApiLimit::Value(value)
    }
}

impl<T: PartialEq> PartialEq<T> for KubeApiLimit<T> {
    fn eq(&self, other: &T) -> bool {
        matches!(self, KubeApiLimit::Value(value) if value == other)
    }
}

impl<T: std::fmt::Display> std::fmt::Display for KubeApiLimit<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeApiLimit::Auto => f.write_str("auto"),
            KubeApiLimit::Value(value) => value.fmt(f),
        }
    }
}

impl<T: std::str::FromStr> std::str::FromStr for KubeApiLimit<T> {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, String> {
        if value == "auto" {
            return Ok(KubeApiLimit::Auto);
        }
        value
            .parse()
            .map(KubeApiLimit::Value)
            .map_err(|_| format!("invalid value {value:?}: expected a number or auto"))
    }
}

impl<T: Serialize> Serialize for KubeApiLimit<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            KubeApiLimit::Auto => serializer.serialize_str("auto"),
            KubeApiLimit::Value(value) => value.serialize(serializer),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for KubeApiLimit<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{self, IntoDeserializer};

        struct Visitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> de::Visitor<'de> for Visitor<T> {
            type Value = KubeApiLimit<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or \"auto\"")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                if value == "auto" {
                    Ok(KubeApiLimit::Auto)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(value), &self))
                }
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
                T::deserialize(value.into_deserializer()).map(KubeApiLimit::Value)
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
                T::deserialize(value.into_deserializer()).map(KubeApiLimit::Value)
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
                T::deserialize(value.into_deserializer()).map(KubeApiLimit::Value)
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

impl<T: JsonSchema> JsonSchema for KubeApiLimit<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("KubeApiLimit_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let number = generator.subschema_for::<T>();
        schemars::json_schema!({
            "description": "A number, or \"auto\": no client-side limit when the API server runs API Priority and Fairness, Go's default otherwise.",
            "anyOf": [number, {"const": "auto"}]
        })
    }
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

/// What a starting service controller does with existing load balancers (`--service-takeover`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ServiceTakeoverOption {
    /// List the provider's load balancers and ensure only the Services whose load balancer is missing or differs.
    #[default]
    Compare,
    /// Ensure every Service's load balancer (the Go behaviour).
    EnsureAll,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_api_limits_read_numbers_and_auto() {
        // how clap reads --kube-api-qps and --kube-api-burst
        let parse_kube_api_qps = str::parse::<KubeApiLimit<f32>>;
        let parse_kube_api_burst = str::parse::<KubeApiLimit<i32>>;
        assert_eq!(parse_kube_api_qps("auto"), Ok(KubeApiLimit::Auto));
        assert_eq!(parse_kube_api_qps("-1"), Ok(KubeApiLimit::Value(-1.0)));
        assert_eq!(parse_kube_api_burst("30"), Ok(KubeApiLimit::Value(30)));
        assert!(
            parse_kube_api_burst("1.5")
                .unwrap_err()
                .contains("number or auto")
        );
        assert!(parse_kube_api_qps("fast").is_err());
        let qps: KubeApiLimit<f32> = serde_json::from_str("50").unwrap();
        assert_eq!(qps, 50.0);
        let qps: KubeApiLimit<f32> = serde_json::from_str("2.5").unwrap();
        assert_eq!(qps, 2.5);
        let burst: KubeApiLimit<i32> = serde_json::from_str("\"auto\"").unwrap();
        assert_eq!(burst, KubeApiLimit::Auto);
        assert!(serde_json::from_str::<KubeApiLimit<i32>>("\"fast\"").is_err());
        assert!(serde_json::from_str::<KubeApiLimit<i32>>("1.5").is_err());
        assert_eq!(
            serde_json::to_string(&KubeApiLimit::<f32>::Auto).unwrap(),
            "\"auto\""
        );
        assert_eq!(
            serde_json::to_string(&KubeApiLimit::Value(30)).unwrap(),
            "30"
        );
        assert_eq!(KubeApiLimit::Value(-1.0_f32).to_string(), "-1");
    }

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

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_parse_go_bool() {
        assert_eq!(crate::options::parse_go_bool("True"), Ok(true));
        assert!(crate::options::parse_go_bool("yes").is_err());
    }

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_parse_operation_limit() {
        use crate::options::parse_operation_limit;
        let limit = parse_operation_limit("create=2:4").unwrap();
        assert_eq!(
            (limit.operation.as_str(), limit.limit.qps, limit.limit.burst),
            ("create", 2.0, 4)
        );
        assert_eq!(
            parse_operation_limit("list-routes=0.5")
                .unwrap()
                .limit
                .burst,
            1
        );
        assert!(parse_operation_limit("nope=1:1").is_err());
    }
}
