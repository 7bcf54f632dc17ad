//! Go-style durations (`"5m"`, `"10s"`, `"1h30m"`, `"1.5h"`, `"300ms"`), as Go's `time.ParseDuration` reads
//! them and `time.Duration.String` writes them, so flags and config files take the same values as the Go
//! cloud controller manager.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The largest duration Go can represent (`math.MaxInt64` nanoseconds, about 292 years).
const MAX_NANOS: u128 = i64::MAX as u128;

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// The text is not a duration at all.
    #[error(
        "invalid duration {value:?}: expected a number with a unit (ns, us, ms, s, m, h), such as \"10s\", \
         \"5m\" or \"1h30m\""
    )]
    Invalid {
        /// The rejected text.
        value: String,
    },
    /// A number has no unit.
    #[error(
        "invalid duration {value:?}: missing unit after a number; add one of ns, us, ms, s, m, h (for example \
         \"10s\")"
    )]
    MissingUnit {
        /// The rejected text.
        value: String,
    },
    /// A unit is not one Go knows.
    #[error("invalid duration {value:?}: unknown unit {unit:?}; use one of ns, us, ms, s, m, h")]
    UnknownUnit {
        /// The rejected text.
        value: String,
        /// The unknown unit.
        unit: String,
    },
    /// The duration is negative.
    #[error("invalid duration {value:?}: it must not be negative")]
    Negative {
        /// The rejected text.
        value: String,
    },
    /// The duration is longer than Go can represent.
    #[error("invalid duration {value:?}: it is longer than the maximum of about 292 years")]
    Overflow {
        /// The rejected text.
        value: String,
    },
}

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SECOND,
        "m" => 60 * NANOS_PER_SECOND,
        "h" => 3600 * NANOS_PER_SECOND,
        _ => return None,
    })
}

/// Parse a Go duration: an optional `+` sign, then one or more decimal numbers (with optional fraction), each
/// followed by a unit (`ns`, `us` or `µs`, `ms`, `s`, `m`, `h`); `"0"` needs no unit. Negative durations are
/// rejected: no setting of the CCM accepts them.
///
/// ```
/// use std::time::Duration;
/// use ccm_app::duration::parse_go_duration;
///
/// assert_eq!(parse_go_duration("1h30m").unwrap(), Duration::from_secs(5400));
/// assert_eq!(parse_go_duration("1.5s").unwrap(), Duration::from_millis(1500));
/// assert!(parse_go_duration("5").is_err()); // no unit
/// ```
///
/// # Errors
///
/// A [`DurationError`] naming the rejected text and what is wrong with it.
pub fn parse_go_duration(value: &str) -> Result<Duration, DurationError> {
    if let Some(rest) = value.strip_prefix('-') {
        // Go accepts negative durations; no CCM setting makes sense negative, but "-0s" is still zero.
        let magnitude = parse_unsigned(value, rest)?;
        if magnitude.is_zero() {
            return Ok(Duration::ZERO);
        }
        return Err(DurationError::Negative {
            value: value.to_owned(),
        });
    }
    parse_unsigned(value, value.strip_prefix('+').unwrap_or(value))
}

/// Parse `rest` (the text after any sign) of `value` (the whole text, for messages).
fn parse_unsigned(value: &str, rest: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid {
        value: value.to_owned(),
    };
    let mut rest = rest;
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        // [0-9]*
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after_int) = rest.split_at(int_len);
        // (\.[0-9]*)?
        let (frac_part, after_frac) = match after_int.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
                after_dot.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        // the unit: everything up to the next digit or '.'
        let unit_len = after_frac
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after_frac.len(), |(i, _)| i);
        if unit_len == 0 {
            return Err(DurationError::MissingUnit {
                value: value.to_owned(),
            });
        }
        let (unit, after_unit) = after_frac.split_at(unit_len);
        let scale = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            value: value.to_owned(),
            unit: unit.to_owned(),
        })?;
        let overflow = || DurationError::Overflow {
            value: value.to_owned(),
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse::<u128>().map_err(|_| overflow())?
        };
        let mut nanos = whole.checked_mul(scale).ok_or_else(overflow)?;
        if !frac_part.is_empty() {
            // 20 fraction digits are more than any unit needs for nanosecond precision (an hour is 3.6e12 ns),
            // and keep the products below u128::MAX. Rounded to the nearest nanosecond.
            let digits = &frac_part[..frac_part.len().min(20)];
            let numerator: u128 = digits.parse().map_err(|_| invalid())?;
            let denominator = 10u128.pow(u32::try_from(digits.len()).map_err(|_| invalid())?);
            nanos = nanos
                .checked_add((numerator * scale + denominator / 2) / denominator)
                .ok_or_else(overflow)?;
        }
        total = total.checked_add(nanos).ok_or_else(overflow)?;
        if total > MAX_NANOS {
            return Err(overflow());
        }
        rest = after_unit;
    }
    let secs = u64::try_from(total / NANOS_PER_SECOND).map_err(|_| invalid())?;
    let sub = u32::try_from(total % NANOS_PER_SECOND).map_err(|_| invalid())?;
    Ok(Duration::new(secs, sub))
}

/// Write a duration as Go's `time.Duration.String` does: `"0s"`, `"1.5s"`, `"1m30s"`, `"1h0m0s"`, `"300ms"`.
///
/// ```
/// use std::time::Duration;
/// use ccm_app::duration::format_go_duration;
///
/// assert_eq!(format_go_duration(Duration::from_secs(300)), "5m0s");
/// assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
/// ```
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < NANOS_PER_SECOND {
        let (unit, suffix) = if nanos < 1_000 {
            (1, "ns")
        } else if nanos < 1_000_000 {
            (1_000, "\u{b5}s")
        } else {
            (1_000_000, "ms")
        };
        return format!("{}{}{suffix}", nanos / unit, fraction(nanos % unit, unit));
    }
    let secs = nanos / NANOS_PER_SECOND;
    let (hours, minutes, seconds) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!(
        "{seconds}{}s",
        fraction(nanos % NANOS_PER_SECOND, NANOS_PER_SECOND)
    ));
    out
}

/// `.ddd` for `remainder / unit` (unit a power of ten), trailing zeros removed; empty for zero.
fn fraction(remainder: u128, unit: u128) -> String {
    if remainder == 0 {
        return String::new();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{remainder:0width$}");
    format!(".{}", digits.trim_end_matches('0'))
}

/// A [`Duration`] read and written in Go's notation; the type of every duration flag and config-file key.
///
/// ```
/// use ccm_app::duration::GoDuration;
///
/// let d: GoDuration = "1h30m".parse().unwrap();
/// assert_eq!(d.to_string(), "1h30m0s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// The wrapped duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        GoDuration(d)
    }
}

impl From<GoDuration> for Duration {
    fn from(d: GoDuration) -> Self {
        d.0
    }
}

impl FromStr for GoDuration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_go_duration(s).map(GoDuration)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_go_duration(self.0))
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Go duration string such as \"10s\", \"5m\" or \"1h30m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GoDuration, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<GoDuration, E> {
                if v == 0 {
                    Ok(GoDuration(Duration::ZERO))
                } else {
                    Err(E::custom(format!(
                        "invalid duration {v}: missing unit; write it as a string such as \"{v}s\""
                    )))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<GoDuration, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!(
                        "invalid duration {v}: it must not be negative"
                    ))),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The JSON-schema pattern of a Go duration.
pub const GO_DURATION_PATTERN: &str =
    r"^\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$";

impl JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A Go duration: numbers with units ns, us, ms, s, m, h, such as \"10s\", \"5m\" or \"1h30m\".",
            "pattern": GO_DURATION_PATTERN,
            "examples": ["10s", "5m", "1h30m"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Duration {
        parse_go_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_what_go_parses() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("5s", Duration::from_secs(5)),
            ("30s", Duration::from_secs(30)),
            ("1478s", Duration::from_secs(1478)),
            ("+5s", Duration::from_secs(5)),
            ("5.0s", Duration::from_secs(5)),
            ("5.6s", Duration::from_millis(5600)),
            ("5.s", Duration::from_secs(5)),
            (".5s", Duration::from_millis(500)),
            ("1.0s", Duration::from_secs(1)),
            ("1.004s", Duration::from_millis(1004)),
            ("1.0040s", Duration::from_millis(1004)),
            ("100.00100s", Duration::from_micros(100_001_000)),
            ("10ns", Duration::from_nanos(10)),
            ("11us", Duration::from_micros(11)),
            ("12\u{b5}s", Duration::from_micros(12)),
            ("12\u{3bc}s", Duration::from_micros(12)),
            ("13ms", Duration::from_millis(13)),
            ("14s", Duration::from_secs(14)),
            ("15m", Duration::from_secs(900)),
            ("16h", Duration::from_secs(16 * 3600)),
            ("3h30m", Duration::from_secs(3 * 3600 + 1800)),
            ("1h30m", Duration::from_secs(5400)),
            ("10.5s4m", Duration::from_millis(250_500)),
            ("1m2s3ms4us5ns", Duration::new(62, 3_004_005)),
            ("39h9m14.425s", Duration::from_millis(140_954_425)),
            ("52763797000ns", Duration::from_nanos(52_763_797_000)),
            ("0.3333333333333333333h", Duration::from_secs(1200)),
            ("1.5h", Duration::from_secs(5400)),
            (
                "9223372036854775807ns",
                Duration::from_nanos(i64::MAX as u64),
            ),
            (
                "9223372036s854ms775us807ns",
                Duration::from_nanos(i64::MAX as u64),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(d(text), *want, "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for text in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{85}\u{85}",
            "1.2.3s",
            "5 s",
        ] {
            let err = parse_go_duration(text).expect_err(text);
            assert!(
                err.to_string().starts_with("invalid duration"),
                "{text}: {err}"
            );
        }
        assert!(matches!(
            parse_go_duration("3"),
            Err(DurationError::MissingUnit { .. })
        ));
        assert!(matches!(
            parse_go_duration("1d"),
            Err(DurationError::UnknownUnit { ref unit, .. }) if unit == "d"
        ));
        assert!(matches!(
            parse_go_duration("-5s"),
            Err(DurationError::Negative { .. })
        ));
        for text in [
            "9223372036854775808ns",
            "9223372036854775807ns1ns",
            "3000000h",
            "99999999999999999999999999999999999999999h",
        ] {
            assert!(
                matches!(parse_go_duration(text), Err(DurationError::Overflow { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1100), "1.1\u{b5}s"),
            (Duration::from_micros(2200), "2.2ms"),
            (Duration::from_millis(3300), "3.3s"),
            (
                Duration::from_secs(240) + Duration::from_millis(5500),
                "4m5.5s",
            ),
            (
                Duration::from_secs(5 * 3600 + 360) + Duration::from_millis(7001),
                "5h6m7.001s",
            ),
            (
                Duration::from_secs(8 * 60) + Duration::from_nanos(1),
                "8m0.000000001s",
            ),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(12 * 3600), "12h0m0s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_millis(100), "100ms"),
            (
                Duration::from_nanos(i64::MAX as u64),
                "2562047h47m16.854775807s",
            ),
        ];
        for (duration, want) in cases {
            assert_eq!(format_go_duration(*duration), *want);
            // and it parses back
            assert_eq!(d(want), *duration, "{want}");
        }
    }

    #[test]
    fn serde_round_trip_and_errors() {
        let v: GoDuration = serde_json::from_str("\"1h30m\"").unwrap();
        assert_eq!(v.get(), Duration::from_secs(5400));
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"1h30m0s\"");
        let zero: GoDuration = serde_json::from_str("0").unwrap();
        assert_eq!(zero.get(), Duration::ZERO);
        let err = serde_json::from_str::<GoDuration>("5").unwrap_err();
        assert!(err.to_string().contains("missing unit"), "{err}");
        let err = serde_json::from_str::<GoDuration>("-5").unwrap_err();
        assert!(err.to_string().contains("must not be negative"), "{err}");
        let err = serde_json::from_str::<GoDuration>("\"5 minutes\"").unwrap_err();
        assert!(err.to_string().contains("invalid duration"), "{err}");
        let err = serde_json::from_str::<GoDuration>("true").unwrap_err();
        assert!(err.to_string().contains("Go duration"), "{err}");
    }

    #[test]
    fn schema_pattern_agrees_with_the_parser() {
        let schema = serde_json::to_value(schemars::schema_for!(GoDuration)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for good in [
            "0", "10s", "5m", "1h30m", "1.5h", ".5s", "300ms", "+5s", "12µs",
        ] {
            assert!(d(good) >= Duration::ZERO);
            assert!(validator.is_valid(&serde_json::json!(good)), "{good}");
        }
        for bad in ["", "3", "1d", ".s", "5 s", "-5s"] {
            assert!(parse_go_duration(bad).is_err());
            assert!(!validator.is_valid(&serde_json::json!(bad)), "{bad}");
        }
    }
}
