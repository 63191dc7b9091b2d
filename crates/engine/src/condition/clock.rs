//! Times and durations in a condition, as a notification trigger's `when` sees them in Argo Rollouts
//! (`utils/record/record.go`'s `timeExprs`: `time.Now()`, `time.Parse(text)` with Go's RFC 3339 layout) and as
//! expr-lang treats Go's `time.Time` and `time.Duration`: their methods (`Sub`, `Add`, `Before`, `After`,
//! `Equal`, `Unix`; `Hours`, `Minutes`, `Seconds`, `Milliseconds`, `String`), its `duration("5m")` builtin
//! (Go's `time.ParseDuration`) and its operators (`time - time`, `time ± duration`, `duration ± duration`,
//! comparisons between two times or two durations). The clock itself is the caller's: the instant `now` is
//! handed in with each evaluation. Must not panic on any value.

use evalexpr::Value;
use jiff::{SignedDuration, Timestamp};

use super::EvalError;
use super::expr::NativeKind;
use super::val::{Val, describe, err};

/// A method of a time or a duration (Go's, called through expr-lang).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    Sub,
    Add,
    Before,
    After,
    Equal,
    Unix,
    Hours,
    Minutes,
    Seconds,
    Milliseconds,
    String,
}

/// The methods, for messages.
pub(super) const METHOD_NAMES: &str = "Sub, Add, Before, After, Equal, Unix (of a time); Hours, Minutes, Seconds, Milliseconds, String (of a duration)";

impl Method {
    pub fn from_name(name: &str) -> Option<Method> {
        Some(match name {
            "Sub" => Method::Sub,
            "Add" => Method::Add,
            "Before" => Method::Before,
            "After" => Method::After,
            "Equal" => Method::Equal,
            "Unix" => Method::Unix,
            "Hours" => Method::Hours,
            "Minutes" => Method::Minutes,
            "Seconds" => Method::Seconds,
            "Milliseconds" => Method::Milliseconds,
            "String" => Method::String,
            _ => return None,
        })
    }

    /// How many arguments the method takes.
    pub fn arity(self) -> usize {
        match self {
            Method::Sub | Method::Add | Method::Before | Method::After | Method::Equal => 1,
            _ => 0,
        }
    }
}

/// `time.Parse(text)`: Go's `time.Parse(time.RFC3339, text)`, which record.go's `parse` calls (its failure
/// is an evaluation error, as the panic it raises is expr-lang's error).
pub(super) fn parse_time<'a>(text: &Val<'_>, arg_text: &str) -> Result<Val<'a>, EvalError> {
    let Val::Scalar(Value::String(s)) = text else {
        return err(format!(
            "time.Parse() needs an RFC 3339 string such as \"2026-01-02T15:04:05Z\", but {arg_text} is {}",
            describe(text)
        ));
    };
    match s.parse::<Timestamp>() {
        Ok(t) if s.contains('T') => Ok(Val::Time(t)),
        _ => err(format!(
            "time.Parse({arg_text}): parsing time {s:?} as RFC 3339 (\"2006-01-02T15:04:05Z07:00\") failed"
        )),
    }
}

/// `duration(text)`: Go's `time.ParseDuration` (`300ms`, `-1.5h`, `2h45m`; units ns, us, µs, ms, s, m, h).
pub(super) fn parse_duration<'a>(text: &Val<'_>, arg_text: &str) -> Result<Val<'a>, EvalError> {
    let Val::Scalar(Value::String(s)) = text else {
        return err(format!(
            "duration() needs a string such as \"5m\", but {arg_text} is {}",
            describe(text)
        ));
    };
    go_duration(s).map(Val::Duration).ok_or_else(|| {
        EvalError::new(format!(
            "duration({arg_text}): time: invalid duration {s:?}"
        ))
    })
}

/// Go's `time.ParseDuration`; `None` where Go returns an error.
fn go_duration(text: &str) -> Option<SignedDuration> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let whole_len = digits(rest);
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(f) => f.split_at(digits(f)),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        // Go keeps the fraction's digits while they fit; nanoseconds are the last that count here.
        let fraction = fraction.get(..fraction.len().min(18)).unwrap_or("");
        let fraction_nanos = if fraction.is_empty() {
            0
        } else {
            let digits: u128 = fraction.parse().ok()?;
            digits * scale / 10u128.pow(u32::try_from(fraction.len()).ok()?)
        };
        total = total.checked_add(whole.checked_mul(scale)?.checked_add(fraction_nanos)?)?;
        rest = next;
    }
    let nanos = i64::try_from(total).ok()?;
    let nanos = if negative { -nanos } else { nanos };
    Some(SignedDuration::from_nanos(nanos))
}

/// A duration as Go's `time.Duration.String` writes it: `1h2m3.5s`, `5m0s`, `1.5ms`, `0s`.
pub(super) fn go_duration_text(d: SignedDuration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    let with_fraction = |whole: u128, rest: u128, width: usize| {
        let fraction = format!("{rest:0width$}");
        let fraction = fraction.trim_end_matches('0');
        if fraction.is_empty() {
            whole.to_string()
        } else {
            format!("{whole}.{fraction}")
        }
    };
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}µs", with_fraction(u / 1_000, u % 1_000, 3));
    }
    if u < 1_000_000_000 {
        return format!("{sign}{}ms", with_fraction(u / 1_000_000, u % 1_000_000, 6));
    }
    let seconds = u / 1_000_000_000;
    let (hours, minutes) = (seconds / 3600, (seconds / 60) % 60);
    let mut out = sign.to_string();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&with_fraction(seconds % 60, u % 1_000_000_000, 9));
    out.push('s');
    out
}

fn number<'a>(n: f64) -> Result<Val<'a>, EvalError> {
    Ok(Val::Scalar(Value::Float(n)))
}

fn boolean<'a>(b: bool) -> Result<Val<'a>, EvalError> {
    Ok(Val::Scalar(Value::Boolean(b)))
}

/// Go's `t.Sub(u)`, saturating as Go's does.
fn between(t: Timestamp, u: Timestamp) -> SignedDuration {
    t.duration_since(u)
}

/// `base.Method(args)`.
pub(super) fn call_method<'a>(
    method: Method,
    base: &Val<'_>,
    args: &[Val<'_>],
    text: &str,
) -> Result<Val<'a>, EvalError> {
    let arg = args.first();
    let nanos_per = |unit: f64, d: &SignedDuration| d.as_nanos() as f64 / unit;
    match (method, base, arg) {
        (Method::Sub, Val::Time(t), Some(Val::Time(u))) => Ok(Val::Duration(between(*t, *u))),
        (Method::Add, Val::Time(t), Some(Val::Duration(d))) => match t.checked_add(*d) {
            Ok(sum) => Ok(Val::Time(sum)),
            Err(e) => err(format!("`{text}`: {e}")),
        },
        (Method::Before, Val::Time(t), Some(Val::Time(u))) => boolean(t < u),
        (Method::After, Val::Time(t), Some(Val::Time(u))) => boolean(t > u),
        (Method::Equal, Val::Time(t), Some(Val::Time(u))) => boolean(t == u),
        (Method::Unix, Val::Time(t), None) => number(t.as_second() as f64),
        (Method::Hours, Val::Duration(d), None) => number(nanos_per(3.6e12, d)),
        (Method::Minutes, Val::Duration(d), None) => number(nanos_per(6e10, d)),
        (Method::Seconds, Val::Duration(d), None) => number(nanos_per(1e9, d)),
        (Method::Milliseconds, Val::Duration(d), None) => number(d.as_millis() as f64),
        (Method::String, Val::Duration(d), None) => {
            Ok(Val::Scalar(Value::String(go_duration_text(*d))))
        }
        (_, Val::Time(_) | Val::Duration(_), _) => err(format!(
            "`{text}`: cannot call it on {}{}",
            describe(base),
            arg.map(|a| format!(" with {}", describe(a)))
                .unwrap_or_default()
        )),
        _ => err(format!(
            "`{text}`: only a time or a duration has methods, but this is {}",
            describe(base)
        )),
    }
}

/// An operator with a time or a duration on either side (`None`: neither is one, the operator is another
/// module's). The kinds expr-lang's runtime accepts; any other pairing is an error naming both.
pub(super) fn operator<'a>(
    kind: NativeKind,
    a: &Val<'_>,
    b: Option<&Val<'_>>,
    text: &str,
) -> Result<Option<Val<'a>>, EvalError> {
    let temporal = |v: &Val<'_>| matches!(v, Val::Time(_) | Val::Duration(_));
    if !temporal(a) && !b.is_some_and(temporal) {
        return Ok(None);
    }
    let result = match (kind, a, b) {
        (NativeKind::Sub, Val::Time(t), Some(Val::Time(u))) => Val::Duration(between(*t, *u)),
        (NativeKind::Add, Val::Time(t), Some(Val::Duration(d)))
        | (NativeKind::Add, Val::Duration(d), Some(Val::Time(t))) => match t.checked_add(*d) {
            Ok(sum) => Val::Time(sum),
            Err(e) => return err(format!("`{text}`: {e}")),
        },
        (NativeKind::Sub, Val::Time(t), Some(Val::Duration(d))) => match t.checked_sub(*d) {
            Ok(difference) => Val::Time(difference),
            Err(e) => return err(format!("`{text}`: {e}")),
        },
        (NativeKind::Add, Val::Duration(d), Some(Val::Duration(e))) => {
            Val::Duration(d.saturating_add(*e))
        }
        (NativeKind::Sub, Val::Duration(d), Some(Val::Duration(e))) => {
            Val::Duration(d.saturating_sub(*e))
        }
        (NativeKind::Neg, Val::Duration(d), None) => {
            Val::Duration(d.checked_neg().unwrap_or(SignedDuration::MAX))
        }
        (kind, Val::Time(t), Some(Val::Time(u))) => match compare(kind, t.cmp(u)) {
            Some(b) => Val::Scalar(Value::Boolean(b)),
            None => return refused(kind, a, b, text),
        },
        (kind, Val::Duration(d), Some(Val::Duration(e))) => match compare(kind, d.cmp(e)) {
            Some(b) => Val::Scalar(Value::Boolean(b)),
            None => return refused(kind, a, b, text),
        },
        // A time or a duration is never equal to a value of another kind.
        (NativeKind::Eq, _, Some(_)) => Val::Scalar(Value::Boolean(false)),
        (NativeKind::Ne, _, Some(_)) => Val::Scalar(Value::Boolean(true)),
        _ => return refused(kind, a, b, text),
    };
    Ok(Some(result))
}

fn compare(kind: NativeKind, order: std::cmp::Ordering) -> Option<bool> {
    Some(match kind {
        NativeKind::Eq => order.is_eq(),
        NativeKind::Ne => order.is_ne(),
        NativeKind::Lt => order.is_lt(),
        NativeKind::Le => order.is_le(),
        NativeKind::Gt => order.is_gt(),
        NativeKind::Ge => order.is_ge(),
        _ => return None,
    })
}

fn refused<T>(
    kind: NativeKind,
    a: &Val<'_>,
    b: Option<&Val<'_>>,
    text: &str,
) -> Result<T, EvalError> {
    let operands = match b {
        Some(b) => format!("{} and {}", describe(a), describe(b)),
        None => describe(a),
    };
    err(format!(
        "`{}` does not apply to {operands} in `{text}` — a duration gives a number with .Minutes(), .Seconds() or .Hours()",
        kind.symbol()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_gos_parse_duration() {
        let nanos = |s: &str| go_duration(s).map(|d| d.as_nanos());
        assert_eq!(nanos("5m"), Some(300_000_000_000));
        assert_eq!(nanos("1h30m"), Some(5_400_000_000_000));
        assert_eq!(nanos("-1.5h"), Some(-5_400_000_000_000));
        assert_eq!(nanos("300ms"), Some(300_000_000));
        assert_eq!(nanos("1µs"), Some(1_000));
        assert_eq!(nanos(".5s"), Some(500_000_000));
        assert_eq!(nanos("0"), Some(0));
        assert_eq!(nanos("1.h"), Some(3_600_000_000_000));
        for bad in ["", "5", "1x", "h", ".h", "-", "99999999999999h"] {
            assert_eq!(nanos(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations_print_as_gos_duration_string() {
        let text = |s: &str| go_duration(s).map(go_duration_text);
        assert_eq!(text("0s").as_deref(), Some("0s"));
        assert_eq!(text("5m").as_deref(), Some("5m0s"));
        assert_eq!(text("1h").as_deref(), Some("1h0m0s"));
        assert_eq!(text("1h2m3.5s").as_deref(), Some("1h2m3.5s"));
        assert_eq!(text("1.5ms").as_deref(), Some("1.5ms"));
        assert_eq!(text("-90s").as_deref(), Some("-1m30s"));
        assert_eq!(text("42ns").as_deref(), Some("42ns"));
    }
}
