//! Go-style durations (`2m`, `1h30m`, `1.5s`, `300ms`, `0`), as Kubernetes components spell them in flags.
//!
//! ```
//! use std::time::Duration;
//! use ccm_doctor::duration::{format_go_duration, parse_go_duration};
//!
//! assert_eq!(parse_go_duration("1h30m").unwrap(), Duration::from_secs(5400));
//! assert_eq!(format_go_duration(Duration::from_secs(120)), "2m0s");
//! ```

use std::time::Duration;

/// A duration flag could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is empty.
    #[error("empty duration: write a number with a unit, for example 2m or 30s")]
    Empty,
    /// A negative duration was given.
    #[error("negative duration {0:?}: durations here must be zero or positive")]
    Negative(String),
    /// A number has no unit.
    #[error("missing unit in duration {0:?}: use ns, us, ms, s, m or h (for example 2m or 90s)")]
    MissingUnit(String),
    /// A unit is not one Go knows.
    #[error("unknown unit {unit:?} in duration {text:?}: use ns, us, ms, s, m or h")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// The text is not a sequence of numbers with units.
    #[error("invalid duration {0:?}: write numbers with units, for example 1h30m, 2m or 1.5s")]
    Invalid(String),
    /// The duration does not fit in 64 bits of nanoseconds (about 292 years).
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

const NANOS_PER: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parse a duration the way Go's `time.ParseDuration` does: an optional `+`, then one or more decimal numbers
/// (with an optional fraction) each followed by a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`); `0` alone is
/// allowed. Negative durations are rejected.
///
/// # Errors
/// [`DurationError`] saying what is wrong with `text`.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    let body = match trimmed.strip_prefix('-') {
        Some(rest) => {
            if rest == "0" {
                return Ok(Duration::ZERO);
            }
            return Err(DurationError::Negative(text.to_owned()));
        }
        None => trimmed.strip_prefix('+').unwrap_or(trimmed),
    };
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(DurationError::Invalid(text.to_owned()));
    }
    let overflow = || DurationError::Overflow(text.to_owned());
    let mut total: u128 = 0;
    let mut rest = body;
    while !rest.is_empty() {
        // The integer part.
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, after_int) = rest.split_at(int_len);
        // The optional fraction.
        let (frac_digits, after_frac) = match after_int.strip_prefix('.') {
            Some(f) => {
                let frac_len = f.bytes().take_while(u8::is_ascii_digit).count();
                f.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(DurationError::Invalid(text.to_owned()));
        }
        // The unit: everything up to the next digit or dot.
        let unit_len = after_frac
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map(|(i, _)| i)
            .unwrap_or(after_frac.len());
        let (unit, next) = after_frac.split_at(unit_len);
        if unit.is_empty() {
            if next.starts_with('.') {
                return Err(DurationError::Invalid(text.to_owned()));
            }
            return Err(DurationError::MissingUnit(text.to_owned()));
        }
        let Some(&(_, scale)) = NANOS_PER.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            });
        };
        let int_value: u128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| overflow())?
        };
        let mut value = int_value.checked_mul(scale).ok_or_else(overflow)?;
        // The fraction, truncated to nanoseconds like Go; digits beyond 18 cannot matter.
        let mut frac_value: u128 = 0;
        let mut frac_scale: u128 = 1;
        for digit in frac_digits.bytes().take(18) {
            frac_value = frac_value * 10 + u128::from(digit - b'0');
            frac_scale *= 10;
        }
        value = value
            .checked_add(frac_value * scale / frac_scale)
            .ok_or_else(overflow)?;
        total = total.checked_add(value).ok_or_else(overflow)?;
        rest = next;
    }
    let nanos = u64::try_from(total).map_err(|_| overflow())?;
    if nanos > i64::MAX as u64 {
        return Err(overflow());
    }
    Ok(Duration::from_nanos(nanos))
}

/// Format a duration the way Go's `time.Duration.String` does: `0s`, `1.5ms`, `2m0s`, `1h0m30s`.
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (scale, unit) = if nanos < 1_000 {
            (1, "ns")
        } else if nanos < 1_000_000 {
            (1_000, "\u{b5}s")
        } else {
            (1_000_000, "ms")
        };
        return format!("{}{unit}", with_fraction(nanos, scale));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = (nanos / 60_000_000_000) % 60;
    let second_nanos = nanos % 60_000_000_000;
    let seconds = with_fraction(second_nanos, 1_000_000_000);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / scale` with the fractional digits that are not trailing zeros.
fn with_fraction(value: u128, scale: u128) -> String {
    let whole = value / scale;
    let frac = value % scale;
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A clap value parser for Go-style duration flags.
///
/// # Errors
/// [`DurationError`] when `text` is not a valid non-negative Go duration.
pub fn parse_duration_arg(text: &str) -> Result<Duration, DurationError> {
    parse_go_duration(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse_go_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn parses_go_forms() {
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("-0"), Duration::ZERO);
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("+5s"), Duration::from_secs(5));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("1h30m15s"), Duration::from_secs(5415));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("5.s"), Duration::from_secs(5));
        assert_eq!(ok("300ms"), Duration::from_millis(300));
        assert_eq!(ok("10us"), Duration::from_micros(10));
        assert_eq!(ok("10\u{b5}s"), Duration::from_micros(10));
        assert_eq!(ok("10\u{3bc}s"), Duration::from_micros(10));
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok("1m1m"), Duration::from_secs(120));
        assert_eq!(ok(" 30s "), Duration::from_secs(30));
        assert_eq!(ok("1.0000000001s"), Duration::new(1, 0));
        assert_eq!(ok("0.123456789123s"), Duration::new(0, 123_456_789));
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(parse_go_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_go_duration("   "), Err(DurationError::Empty));
        assert!(matches!(
            parse_go_duration("-5s"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_go_duration("5"),
            Err(DurationError::MissingUnit(_))
        ));
        assert!(matches!(
            parse_go_duration("1h5"),
            Err(DurationError::MissingUnit(_))
        ));
        assert!(matches!(
            parse_go_duration("5d"),
            Err(DurationError::UnknownUnit { unit, .. }) if unit == "d"
        ));
        assert!(matches!(
            parse_go_duration("5 s"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_go_duration("s"),
            Err(DurationError::Invalid(_))
        ));
        assert!(matches!(
            parse_go_duration("."),
            Err(DurationError::Invalid(_))
        ));
        assert!(matches!(
            parse_go_duration("+"),
            Err(DurationError::Invalid(_))
        ));
        assert!(matches!(
            parse_go_duration("1..5s"),
            Err(DurationError::Invalid(_))
        ));
        assert!(matches!(
            parse_go_duration("3000000h"),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            parse_go_duration("99999999999999999999999999999999999999999h"),
            Err(DurationError::Overflow(_))
        ));
        let msg = parse_go_duration("5").unwrap_err().to_string();
        assert!(msg.contains("missing unit"), "{msg}");
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
        assert_eq!(format_go_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(format_go_duration(Duration::from_micros(10)), "10\u{b5}s");
        assert_eq!(format_go_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(format_go_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(Duration::from_secs(120)), "2m0s");
        assert_eq!(format_go_duration(Duration::from_secs(312)), "5m12s");
        assert_eq!(format_go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format_go_duration(Duration::from_secs(3630)), "1h0m30s");
        assert_eq!(format_go_duration(Duration::from_secs(90_000)), "25h0m0s");
    }

    #[test]
    fn round_trips() {
        for secs in [0u64, 1, 59, 60, 61, 3599, 3600, 86_399, 1_000_000] {
            let d = Duration::from_secs(secs);
            assert_eq!(ok(&format_go_duration(d)), d, "{secs}");
        }
        for millis in [1u64, 250, 1500, 61_001] {
            let d = Duration::from_millis(millis);
            assert_eq!(ok(&format_go_duration(d)), d, "{millis}ms");
        }
    }
}
