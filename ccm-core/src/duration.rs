//! Go durations: the one parser and formatter of every duration the SDK reads or writes (flags, the config file,
//! the doctor's flags, the fake cloud's inventory, the conformance suite's fault rules).
//!
//! The grammar is Go's `time.ParseDuration`: an optional sign, then one or more decimal numbers, each with an
//! optional fraction and a unit (`ns`, `us` or `µs`, `ms`, `s`, `m`, `h`), such as `300ms`, `1.5h` or `1h30m`;
//! a bare `0` needs no unit. Durations are written back as Go's `time.Duration.String` does (`1h30m0s`), so a
//! value reads the same in a Go cloud controller manager and in this one.
//!
//! A [`std::time::Duration`] cannot be negative, so a negative duration (other than `-0`) is an error, as is
//! anything longer than Go can hold (`math.MaxInt64` nanoseconds, about 292 years). Blanks are not allowed
//! anywhere, as in Go.
//!
//! ```
//! use std::time::Duration;
//! use ccm_core::duration::{GoDuration, format_go_duration, parse_go_duration};
//!
//! assert_eq!(parse_go_duration("1h30m").unwrap(), Duration::from_secs(5400));
//! assert_eq!(parse_go_duration("1.5h").unwrap(), Duration::from_secs(5400));
//! assert_eq!(parse_go_duration(".5s").unwrap(), Duration::from_millis(500));
//! assert_eq!(format_go_duration(Duration::from_secs(5400)), "1h30m0s");
//!
//! let err = parse_go_duration("5").unwrap_err();
//! assert!(err.to_string().starts_with("invalid duration \"5\": missing unit"));
//!
//! let ttl: GoDuration = "2m".parse().unwrap();
//! assert_eq!(ttl.get(), Duration::from_secs(120));
//! ```
//!
//! In serde types, hold a [`GoDuration`], or keep a [`Duration`] and name the helpers in [`serde`]
//! (with [`GoDuration`] as the JSON schema):
//!
//! ```
//! use std::time::Duration;
//! use ccm_core::duration::GoDuration;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Settings {
//!     #[serde(with = "ccm_core::duration::serde")]
//!     #[schemars(with = "GoDuration")]
//!     period: Duration,
//!     #[serde(default, with = "ccm_core::duration::serde::option")]
//!     #[schemars(with = "Option<GoDuration>")]
//!     timeout: Option<Duration>,
//! }
//!
//! let s: Settings = serde_json::from_str(r#"{"period": "1m30s", "timeout": "250ms"}"#).unwrap();
//! assert_eq!(s.period, Duration::from_secs(90));
//! assert_eq!(s.timeout, Some(Duration::from_millis(250)));
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ::serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// Go's parser bound, `1 << 63`: the magnitude of `math.MinInt64` nanoseconds.
const GO_LIMIT: u64 = 1 << 63;

/// The longest duration Go can hold: `math.MaxInt64` nanoseconds (about 292 years).
pub const MAX: Duration = Duration::from_nanos(i64::MAX as u64);

/// Why a duration did not parse. Every message starts with `invalid duration "<the text>": ` and says how to
/// write it instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// The text is empty.
    #[error(
        "invalid duration \"\": it is empty; write a number with a unit, such as \"30s\", \"5m\" or \"1h30m\""
    )]
    Empty,
    /// The text has a blank (space, tab, newline, ...) in it.
    #[error(
        "invalid duration {value:?}: it must not contain blanks; write numbers and units together, such as \
         \"5m\" or \"1h30m\""
    )]
    Blank {
        /// The rejected text.
        value: String,
    },
    /// The text is not a sequence of numbers with units.
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
    /// The duration is longer than Go can hold.
    #[error("invalid duration {value:?}: it is longer than the maximum of about 292 years")]
    Overflow {
        /// The rejected text.
        value: String,
    },
}

/// Nanoseconds per unit, Go's `unitMap`.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // `us`, MICRO SIGN and GREEK SMALL LETTER MU
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Parse a Go duration (Go's `time.ParseDuration` grammar; see the [module](self) documentation), or a
/// [`DurationError`] naming the rejected text and what is wrong with it.
///
/// Fractions are converted to nanoseconds exactly as Go converts them (`1.5ns` is `1ns`,
/// `0.3333333333333333333h` is `20m`), so a value means the same nanoseconds in both.
///
/// ```
/// use std::time::Duration;
/// use ccm_core::duration::parse_go_duration;
///
/// assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
/// assert_eq!(parse_go_duration("+1m2.5s").unwrap(), Duration::from_millis(62_500));
/// assert_eq!(parse_go_duration("1.s").unwrap(), Duration::from_secs(1));
/// assert!(parse_go_duration("1d").is_err()); // no days in Go
/// assert!(parse_go_duration("-5s").is_err());
/// ```
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let value = || text.to_owned();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.chars().any(char::is_whitespace) {
        return Err(DurationError::Blank { value: value() });
    }
    // [-+]?
    let (negative, magnitude) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let nanos = parse_magnitude(text, magnitude)?;
    if negative && nanos != 0 {
        return Err(DurationError::Negative { value: value() });
    }
    if nanos > i64::MAX as u64 {
        return Err(DurationError::Overflow { value: value() });
    }
    Ok(Duration::from_nanos(nanos))
}

/// The nanoseconds of `rest` (`value` after its sign), at most `1 << 63`, following Go's parser step by step.
fn parse_magnitude(value: &str, mut rest: &str) -> Result<u64, DurationError> {
    let text = || value.to_owned();
    let invalid = || DurationError::Invalid { value: text() };
    let overflow = || DurationError::Overflow { value: text() };
    // Special case: a bare zero needs no unit.
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        // The next character must be [0-9.].
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        // [0-9]*
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        // Go's `leadingInt`: at most `1 << 63`; no digits is zero (".5s")
        let whole = match &rest[..int_len] {
            "" => 0,
            digits => digits
                .parse::<u64>()
                .ok()
                .filter(|x| *x <= GO_LIMIT)
                .ok_or_else(overflow)?,
        };
        rest = &rest[int_len..];
        // (\.[0-9]*)?
        let (mut fraction, mut scale, mut has_fraction) = (0, 1.0, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            (fraction, scale) = leading_fraction(&after_dot[..frac_len]);
            has_fraction = frac_len > 0;
            rest = &after_dot[frac_len..];
        }
        if int_len == 0 && !has_fraction {
            // no digits, as in ".s" or "-."
            return Err(invalid());
        }
        // The unit: everything up to the next digit or dot.
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            // a second dot ("1.2.3s") is not a missing unit
            return Err(if rest.starts_with('.') {
                invalid()
            } else {
                DurationError::MissingUnit { value: text() }
            });
        }
        let (unit, after_unit) = rest.split_at(unit_len);
        rest = after_unit;
        let unit_nanos = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            value: text(),
            unit: unit.to_owned(),
        })?;
        if whole > GO_LIMIT / unit_nanos {
            return Err(overflow());
        }
        // As Go: a float64 is nanosecond-accurate for fractions of hours (at most 3.6e12 ns), and the product
        // is truncated. The cast and the sums saturate, so any overflow ends above the limit.
        let fraction_nanos = (fraction as f64 * (unit_nanos as f64 / scale)) as u64;
        let nanos = (whole * unit_nanos).saturating_add(fraction_nanos);
        total = total.saturating_add(nanos);
        if nanos > GO_LIMIT || total > GO_LIMIT {
            return Err(overflow());
        }
    }
    Ok(total)
}

/// The fraction digits as an integer and its scale (a power of ten), digits that would overflow ignored (Go's
/// `leadingFraction`).
fn leading_fraction(digits: &str) -> (u64, f64) {
    let (mut x, mut scale) = (0u64, 1.0f64);
    for digit in digits.bytes() {
        if x > (i64::MAX as u64) / 10 {
            break;
        }
        let y = x * 10 + u64::from(digit - b'0');
        if y > GO_LIMIT {
            break;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale)
}

/// Write a duration as Go's `time.Duration.String` does: `0s`, `1.5s`, `1m30s`, `1h0m0s`, `300ms`, `1.5µs`.
///
/// ```
/// use std::time::Duration;
/// use ccm_core::duration::format_go_duration;
///
/// assert_eq!(format_go_duration(Duration::ZERO), "0s");
/// assert_eq!(format_go_duration(Duration::from_secs(300)), "5m0s");
/// assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
/// assert_eq!(format_go_duration(Duration::from_micros(1500)), "1.5ms");
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
    let seconds = format!(
        "{seconds}{}s",
        fraction(nanos % NANOS_PER_SECOND, NANOS_PER_SECOND)
    );
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}")
    } else {
        seconds
    }
}

/// `.ddd` for `remainder / unit` (`unit` a power of ten), trailing zeros removed; empty for zero.
fn fraction(remainder: u128, unit: u128) -> String {
    if remainder == 0 {
        return String::new();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{remainder:0width$}");
    format!(".{}", digits.trim_end_matches('0'))
}

/// A [`Duration`] read and written in Go's notation: the type of every duration flag and config-file key, and
/// the JSON schema of every duration (a string matching [`GO_DURATION_PATTERN`]).
///
/// It deserializes from a string, or from the number `0`; any other number is rejected with a message asking
/// for a unit.
///
/// ```
/// use std::time::Duration;
/// use ccm_core::duration::GoDuration;
///
/// let d: GoDuration = "1h30m".parse().unwrap();
/// assert_eq!(d.to_string(), "1h30m0s");
/// assert_eq!(Duration::from(d), Duration::from_secs(5400));
/// assert!("90".parse::<GoDuration>().is_err());
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
        serializer.serialize_str(&format_go_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl ::serde::de::Visitor<'_> for Visitor {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Go duration string such as \"10s\", \"5m\" or \"1h30m\"")
            }
            fn visit_str<E: ::serde::de::Error>(self, v: &str) -> Result<GoDuration, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: ::serde::de::Error>(self, v: u64) -> Result<GoDuration, E> {
                if v == 0 {
                    Ok(GoDuration(Duration::ZERO))
                } else {
                    Err(E::custom(format!(
                        "invalid duration {v}: missing unit after a number; add one of ns, us, ms, s, m, h \
                         (for example \"{v}s\")"
                    )))
                }
            }
            fn visit_i64<E: ::serde::de::Error>(self, v: i64) -> Result<GoDuration, E> {
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

/// The JSON-schema `pattern` of a Go duration: the grammar of [`parse_go_duration`] without a minus sign (a
/// negative duration is an error) and without the range check.
pub const GO_DURATION_PATTERN: &str =
    r"^\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$";

impl schemars::JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A Go duration (Go's time.ParseDuration): numbers, each with an optional fraction and a unit ns, us, ms, s, m or h, such as \"10s\", \"1.5h\" or \"1h30m\"; \"0\" needs no unit. Not negative.",
            "pattern": GO_DURATION_PATTERN,
            "examples": ["10s", "5m", "1h30m"]
        })
    }
}

/// Serde helpers for a [`Duration`] field written as a Go duration: `#[serde(with =
/// "ccm_core::duration::serde")]`, or `ccm_core::duration::serde::option` for an `Option<Duration>` (add
/// `#[serde(default)]` so it may be left out). Pair them with `#[schemars(with = "GoDuration")]` (or
/// `"Option<GoDuration>"`) for the JSON schema. They accept and write exactly what [`GoDuration`] does.
pub mod serde {
    use std::time::Duration;

    use ::serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::GoDuration;

    /// Write `duration` as a Go duration string (errors: the serializer's).
    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        GoDuration(*duration).serialize(serializer)
    }

    /// Read a Go duration string (or `0`); an invalid duration is an error with the parser's message.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        GoDuration::deserialize(deserializer).map(GoDuration::get)
    }

    /// The same for an `Option<Duration>`: `null` (or a missing field, with `#[serde(default)]`) is `None`.
    pub mod option {
        use std::time::Duration;

        use ::serde::{Deserialize, Deserializer, Serialize, Serializer};

        use super::super::GoDuration;

        /// Write `Some` as a Go duration string, `None` as none (errors: the serializer's).
        pub fn serialize<S: Serializer>(
            duration: &Option<Duration>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            duration.map(GoDuration).serialize(serializer)
        }

        /// Read an optional Go duration; an invalid duration is an error with the parser's message.
        pub fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<Duration>, D::Error> {
            Option::<GoDuration>::deserialize(deserializer).map(|d| d.map(GoDuration::get))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Duration {
        parse_go_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> DurationError {
        match parse_go_duration(s) {
            Ok(d) => panic!("{s:?} parsed as {d:?}"),
            Err(e) => e,
        }
    }

    /// Go's own table (`time_test.go`, `parseDurationTests`), the negative cases excepted, plus ours.
    #[test]
    fn parses_what_go_parses() {
        let cases: &[(&str, Duration)] = &[
            // simple
            ("0", Duration::ZERO),
            ("5s", Duration::from_secs(5)),
            ("30s", Duration::from_secs(30)),
            ("1478s", Duration::from_secs(1478)),
            // sign
            ("+5s", Duration::from_secs(5)),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("-0s", Duration::ZERO),
            ("-0.0h", Duration::ZERO),
            // decimal
            ("5.0s", Duration::from_secs(5)),
            ("5.6s", Duration::from_millis(5600)),
            ("5.s", Duration::from_secs(5)),
            ("1.s", Duration::from_secs(1)),
            (".5s", Duration::from_millis(500)),
            ("1.0s", Duration::from_secs(1)),
            ("1.00s", Duration::from_secs(1)),
            ("1.004s", Duration::from_millis(1004)),
            ("1.0040s", Duration::from_millis(1004)),
            ("100.00100s", Duration::from_micros(100_001_000)),
            // different units
            ("0s", Duration::ZERO),
            ("10ns", Duration::from_nanos(10)),
            ("11us", Duration::from_micros(11)),
            ("12\u{b5}s", Duration::from_micros(12)),
            ("12\u{3bc}s", Duration::from_micros(12)),
            ("13ms", Duration::from_millis(13)),
            ("14s", Duration::from_secs(14)),
            ("15m", Duration::from_secs(900)),
            ("16h", Duration::from_secs(16 * 3600)),
            // composite durations
            ("3h30m", Duration::from_secs(3 * 3600 + 1800)),
            ("1h30m", Duration::from_secs(5400)),
            ("1h30m15s", Duration::from_secs(5415)),
            ("10.5s4m", Duration::from_millis(250_500)),
            ("1m1m", Duration::from_secs(120)),
            ("1m2s3ms4us5ns", Duration::new(62, 3_004_005)),
            ("39h9m14.425s", Duration::from_millis(140_954_425)),
            // large value
            ("52763797000ns", Duration::from_nanos(52_763_797_000)),
            // more than 9 digits after the decimal point
            ("0.3333333333333333333h", Duration::from_secs(1200)),
            ("0.123456789123s", Duration::new(0, 123_456_789)),
            ("1.0000000001s", Duration::from_secs(1)),
            ("1.9999999999s", Duration::new(1, 999_999_999)),
            // fractions below a nanosecond are truncated, as in Go
            ("1.5ns", Duration::from_nanos(1)),
            ("0.9ns", Duration::ZERO),
            // nine digits of seconds
            (
                "9007199254.740993s",
                Duration::new(9_007_199_254, 740_993_000),
            ),
            // the largest value
            ("9223372036854775807ns", MAX),
            ("9223372036s854ms775us807ns", MAX),
            ("9223372036.854775807s", MAX),
            ("2562047h47m16.854775807s", MAX),
            // huge fractions of a unit
            ("0.100000000000000000000h", Duration::from_secs(360)),
            ("1.5h", Duration::from_secs(5400)),
            ("2m", Duration::from_secs(120)),
            ("300ms", Duration::from_millis(300)),
            ("0.5m", Duration::from_secs(30)),
            ("0000000000000000000000000000005s", Duration::from_secs(5)),
        ];
        for (text, want) in cases {
            assert_eq!(d(text), *want, "{text}");
        }
    }

    #[test]
    fn every_error_is_named_lower_case_and_never_panics() {
        let cases: &[&str] = &[
            "",
            "+",
            "-",
            ".",
            "-.",
            "+.",
            ".s",
            "+.s",
            "s",
            "ms",
            "3",
            "1h5",
            "-5",
            "1d",
            "1w",
            "1H",
            "1S",
            "1sec",
            "5minutes",
            "1.2.3s",
            "1..5s",
            "5 s",
            " 5s",
            "5s ",
            "\t5s",
            "5s\n",
            "5 minutes",
            "\u{85}\u{85}",
            "\u{a0}5s",
            "--5s",
            "+-5s",
            "-+5s",
            "5s-",
            "1h-5m",
            "1e3s",
            "0x10s",
            "-5s",
            "-1ns",
            "-.5s",
            "9223372036854775808ns",
            "9223372036854775807ns1ns",
            "2562047h47m16.854775808s",
            "3000000h",
            "99999999999999999999999999999999999999999h",
            "9223372036854775808.5ns",
            "18446744073709551616ns",
            "\u{3bc}",
            "\u{b5}s",
            "1\u{3bc}",
            "5\u{ff10}s",
            "1ns\u{0}",
        ];
        for text in cases {
            let e = err(text);
            let message = e.to_string();
            assert!(
                message.starts_with(&format!("invalid duration {text:?}: ")),
                "{text:?}: {message}"
            );
            let first = message.chars().next().unwrap();
            assert!(first.is_lowercase(), "{message}");
        }
    }

    /// Every string of up to four characters over an alphabet of digits, signs, dots, units and blanks: the
    /// parser never panics, every error is an `invalid duration` message, and it accepts exactly what the schema
    /// pattern accepts (plus negative zeros).
    #[test]
    fn small_strings_agree_with_the_pattern() {
        let schema = serde_json::to_value(schemars::schema_for!(GoDuration)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let alphabet = [
            '0', '1', '9', '.', '+', '-', 's', 'm', 'h', 'n', 'u', '\u{b5}', 'd', ' ',
        ];
        let mut texts = vec![String::new()];
        let mut previous = vec![String::new()];
        for _ in 0..4 {
            let next: Vec<String> = previous
                .iter()
                .flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}")))
                .collect();
            texts.extend(next.iter().cloned());
            previous = next;
        }
        for text in &texts {
            let matches = validator.is_valid(&serde_json::json!(text));
            match parse_go_duration(text) {
                Ok(value) => {
                    let negative_zero = text.starts_with('-') && value.is_zero();
                    assert!(
                        matches || negative_zero,
                        "{text:?} parsed, the pattern rejects it"
                    );
                }
                Err(e) => {
                    assert!(!matches, "{text:?} matches the pattern: {e}");
                    assert!(
                        e.to_string()
                            .starts_with(&format!("invalid duration {text:?}: ")),
                        "{text:?}: {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(err(""), DurationError::Empty);
        for text in [
            "+", "-", ".", "-.", ".s", "+.s", "s", "ms", "--5s", "1.2.3s", "1..5s",
        ] {
            assert!(
                matches!(err(text), DurationError::Invalid { ref value } if value == text),
                "{text:?}: {:?}",
                err(text)
            );
        }
        for text in ["3", "1h5", "-5", "1.5", ".5"] {
            assert!(
                matches!(err(text), DurationError::MissingUnit { .. }),
                "{text:?}: {:?}",
                err(text)
            );
        }
        for (text, unit) in [
            ("1d", "d"),
            ("1H", "H"),
            ("1sec", "sec"),
            ("5minutes", "minutes"),
            ("1h-5m", "h-"),
            ("0x10s", "x"),
            ("1e3s", "e"),
            ("5s-", "s-"),
        ] {
            assert!(
                matches!(err(text), DurationError::UnknownUnit { unit: ref u, .. } if u == unit),
                "{text:?}: {:?}",
                err(text)
            );
        }
        for text in [
            "5 s",
            " 5s",
            "5s ",
            "\t5s",
            "5s\n",
            "5 minutes",
            "\u{85}\u{85}",
            "\u{a0}5s",
        ] {
            assert!(
                matches!(err(text), DurationError::Blank { .. }),
                "{text:?}: {:?}",
                err(text)
            );
        }
        for text in ["-5s", "-1ns", "-.5s", "-1h30m", "-9223372036854775808ns"] {
            assert!(
                matches!(err(text), DurationError::Negative { .. }),
                "{text:?}: {:?}",
                err(text)
            );
        }
        for text in [
            "9223372036854775808ns",
            "9223372036854775807ns1ns",
            "2562047h47m16.854775808s",
            "3000000h",
            "99999999999999999999999999999999999999999h",
            "18446744073709551616ns",
            "-18446744073709551616ns",
        ] {
            assert!(
                matches!(err(text), DurationError::Overflow { .. }),
                "{text:?}: {:?}",
                err(text)
            );
        }
        let message = err("5").to_string();
        assert!(message.contains("missing unit"), "{message}");
        let message = err("1d").to_string();
        assert!(message.contains("unknown unit \"d\""), "{message}");
        let message = err("5 minutes").to_string();
        assert!(message.contains("blanks"), "{message}");
        let message = err("").to_string();
        assert!(message.contains("empty"), "{message}");
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1100), "1.1\u{b5}s"),
            (Duration::from_micros(10), "10\u{b5}s"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_micros(2200), "2.2ms"),
            (Duration::from_millis(100), "100ms"),
            (Duration::from_millis(300), "300ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(3300), "3.3s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(120), "2m0s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(312), "5m12s"),
            (Duration::from_millis(245_500), "4m5.5s"),
            (Duration::new(5 * 3600 + 367, 1_000_000), "5h6m7.001s"),
            (Duration::new(8 * 60, 1), "8m0.000000001s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(3630), "1h0m30s"),
            (Duration::from_secs(12 * 3600), "12h0m0s"),
            (Duration::from_secs(90_000), "25h0m0s"),
            (MAX, "2562047h47m16.854775807s"),
        ];
        for (duration, want) in cases {
            assert_eq!(format_go_duration(*duration), *want, "{duration:?}");
            // and it parses back
            assert_eq!(d(want), *duration, "{want}");
        }
    }

    #[test]
    fn round_trips() {
        for secs in [0u64, 1, 59, 60, 61, 3599, 3600, 86_399, 1_000_000] {
            let duration = Duration::from_secs(secs);
            assert_eq!(d(&format_go_duration(duration)), duration, "{secs}s");
        }
        for nanos in [
            1u64,
            999,
            1_000,
            1_001,
            250_000_000,
            1_500_000_000,
            61_001_000_000,
        ] {
            let duration = Duration::from_nanos(nanos);
            assert_eq!(d(&format_go_duration(duration)), duration, "{nanos}ns");
        }
    }

    #[test]
    fn go_duration_type() {
        let v: GoDuration = "1h30m".parse().unwrap();
        assert_eq!(v.get(), Duration::from_secs(5400));
        assert_eq!(v.to_string(), "1h30m0s");
        assert_eq!(GoDuration::from(Duration::from_secs(2)).to_string(), "2s");
        assert_eq!(Duration::from(v), Duration::from_secs(5400));
        assert!(matches!(
            "1d".parse::<GoDuration>(),
            Err(DurationError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn serde_round_trip_and_errors() {
        let v: GoDuration = serde_json::from_str("\"1h30m\"").unwrap();
        assert_eq!(v.get(), Duration::from_secs(5400));
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"1h30m0s\"");
        let zero: GoDuration = serde_json::from_str("0").unwrap();
        assert_eq!(zero.get(), Duration::ZERO);
        let e = serde_json::from_str::<GoDuration>("5").unwrap_err();
        assert!(e.to_string().contains("missing unit"), "{e}");
        let e = serde_json::from_str::<GoDuration>("-5").unwrap_err();
        assert!(e.to_string().contains("must not be negative"), "{e}");
        let e = serde_json::from_str::<GoDuration>("\"5 minutes\"").unwrap_err();
        assert!(e.to_string().contains("invalid duration"), "{e}");
        let e = serde_json::from_str::<GoDuration>("1.5").unwrap_err();
        assert!(e.to_string().contains("Go duration"), "{e}");
        let e = serde_json::from_str::<GoDuration>("true").unwrap_err();
        assert!(e.to_string().contains("Go duration"), "{e}");
    }

    #[derive(Debug, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
    struct Fields {
        #[serde(with = "crate::duration::serde")]
        period: Duration,
        #[serde(default, with = "crate::duration::serde::option")]
        timeout: Option<Duration>,
    }

    #[test]
    fn serde_helpers() {
        let f: Fields = serde_json::from_str(r#"{"period": "1.5h", "timeout": ".5s"}"#).unwrap();
        assert_eq!(
            f,
            Fields {
                period: Duration::from_secs(5400),
                timeout: Some(Duration::from_millis(500)),
            }
        );
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"period":"1h30m0s","timeout":"500ms"}"#
        );
        let f: Fields = serde_json::from_str(r#"{"period": 0}"#).unwrap();
        assert_eq!(f.timeout, None);
        assert_eq!(f.period, Duration::ZERO);
        let f: Fields = serde_json::from_str(r#"{"period": "1s", "timeout": null}"#).unwrap();
        assert_eq!(f.timeout, None);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"period":"1s","timeout":null}"#
        );
        let e = serde_json::from_str::<Fields>(r#"{"period": "1d"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown unit \"d\""), "{e}");
        let e = serde_json::from_str::<Fields>(r#"{"period": "1s", "timeout": "2"}"#).unwrap_err();
        assert!(e.to_string().contains("missing unit"), "{e}");
    }

    #[test]
    fn schema_pattern_agrees_with_the_parser() {
        let schema = serde_json::to_value(schemars::schema_for!(GoDuration)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for good in [
            "0",
            "+0",
            "10s",
            "5m",
            "1h30m",
            "1.5h",
            ".5s",
            "1.s",
            "300ms",
            "+5s",
            "12µs",
            "12μs",
            "1m2s3ms4us5ns",
        ] {
            assert!(d(good) >= Duration::ZERO);
            assert!(validator.is_valid(&serde_json::json!(good)), "{good}");
        }
        // the pattern cannot see the range of a value; everything else it rejects
        for bad in [
            "", "3", "1d", ".s", ".", "5 s", " 5s", "1.2.3s", "s", "+", "-", "1h5", "1e3s", "-5s",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
            assert!(!validator.is_valid(&serde_json::json!(bad)), "{bad}");
        }
    }
}
