//! Go-style duration strings (`time.ParseDuration`), as Argo Rollouts writes them: `30s`, `5m`, `1h30m`,
//! `500ms`, `1.5h`. Owns parsing and formatting only; it must not decide what a duration means.

use std::time::Duration;

/// Why a duration string is not one Go's `time.ParseDuration` would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error(
        "invalid duration {0:?}: expected a number followed by a unit (ns, us, ms, s, m, h), e.g. 30s or 1h30m"
    )]
    Invalid(String),
    #[error("invalid duration {0:?}: missing unit (ns, us, ms, s, m, h)")]
    MissingUnit(String),
    #[error("invalid duration {0:?}: unknown unit {1:?} (expected ns, us, ms, s, m or h)")]
    UnknownUnit(String, String),
    #[error("invalid duration {0:?}: negative durations are not allowed here")]
    Negative(String),
    #[error("invalid duration {0:?}: too large")]
    Overflow(String),
    #[error("invalid duration {0:?}: a step must be greater than zero")]
    ZeroStep(String),
}

/// Parses the step of a range query: a duration greater than zero (Prometheus refuses a zero step, so every
/// measurement would be an Error). The one rule for `validate` and for the request sent.
pub fn parse_step(text: &str) -> Result<Duration, DurationError> {
    match parse_duration(text)? {
        step if step.is_zero() => Err(DurationError::ZeroStep(text.to_string())),
        step => Ok(step),
    }
}

/// Parses a Go duration. Negative durations are rejected: nothing in an analysis can wait a negative time.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let (negative, mut rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Invalid(text.to_string()));
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(DurationError::Invalid(text.to_string()));
        }
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit_nanos: u128 = match unit {
            "" => return Err(DurationError::MissingUnit(text.to_string())),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            other => {
                return Err(DurationError::UnknownUnit(
                    text.to_string(),
                    other.to_string(),
                ));
            }
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole
                .parse()
                .map_err(|_| DurationError::Overflow(text.to_string()))?
        };
        let mut nanos = whole
            .checked_mul(unit_nanos)
            .ok_or_else(|| DurationError::Overflow(text.to_string()))?;
        // Fractions are exact to the nanosecond, as in Go: scale digit by digit, drop what is below 1ns.
        let mut scale = unit_nanos;
        for digit in frac.bytes().take(30) {
            scale /= 10;
            nanos += u128::from(digit - b'0') * scale;
        }
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or_else(|| DurationError::Overflow(text.to_string()))?;
    }
    if negative && total_nanos > 0 {
        return Err(DurationError::Negative(text.to_string()));
    }
    // Go's limit is i64 nanoseconds (~292 years).
    if total_nanos > i64::MAX as u128 {
        return Err(DurationError::Overflow(text.to_string()));
    }
    let secs = (total_nanos / 1_000_000_000) as u64;
    let sub = (total_nanos % 1_000_000_000) as u32;
    Ok(Duration::new(secs, sub))
}

/// Formats a duration the way Go's `Duration.String()` does for whole units (`1h30m0s` → `1h30m`, shortened):
/// used in messages, so users see the same spelling they wrote.
pub fn format_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_string();
    }
    let total_ms = d.as_millis();
    if total_ms < 1_000 {
        return format!("{total_ms}ms");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    let ms = d.subsec_millis();
    if s > 0 || ms > 0 {
        if ms > 0 {
            out.push_str(format!("{s}.{ms:03}").trim_end_matches('0'));
            out.push('s');
        } else {
            out.push_str(&format!("{s}s"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spellings_argo_users_write() {
        let cases = [
            ("30s", Duration::from_secs(30)),
            ("5m", Duration::from_secs(300)),
            ("1h30m", Duration::from_secs(5400)),
            ("500ms", Duration::from_millis(500)),
            ("1.5h", Duration::from_secs(5400)),
            ("2h45m10s", Duration::from_secs(2 * 3600 + 45 * 60 + 10)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("10us", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            (".5s", Duration::from_millis(500)),
            ("+1m", Duration::from_secs(60)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects_with_a_reason() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert!(matches!(
            parse_duration("5"),
            Err(DurationError::MissingUnit(_))
        ));
        assert!(matches!(
            parse_duration("5 minutes"),
            Err(DurationError::UnknownUnit(..))
        ));
        assert!(matches!(
            parse_duration("5d"),
            Err(DurationError::UnknownUnit(..))
        ));
        assert!(matches!(
            parse_duration("m"),
            Err(DurationError::Invalid(_))
        ));
        assert!(matches!(
            parse_duration("1..5s"),
            Err(DurationError::Invalid(_))
        ));
        assert!(matches!(
            parse_duration("-5s"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_duration("99999999999h"),
            Err(DurationError::Overflow(_))
        ));
    }

    #[test]
    fn formats_like_the_user_would_write_it() {
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
