//! The one sentence saying why the error-rate judge decided (or has not yet), built from its own numbers:
//! the margin and confidence it was given, the look it decided at, the rates and the bound on their ratio.

use super::model::LookView;
use crate::engine::judge::{ErrorRateParams, Verdict};

/// Why: "the canary's error rate exceeds the baseline's by more than 10% with 95% confidence after 4 looks
/// (canary 4% of 2000 requests, baseline 1% of 2000)".
pub fn why(params: &ErrorRateParams, looks: &[LookView], decided_at: Option<usize>) -> String {
    let confidence = percent(params.confidence);
    let margin = margin(params);
    let decided = decided_at.and_then(|n| looks.get(n.wrapping_sub(1)));
    match (decided, looks.last()) {
        (_, None) => "no look yet: neither side has served traffic".to_string(),
        (Some(look), _) if look.result.verdict == Verdict::Fail => format!(
            "the canary's error rate exceeds the baseline's by more than {margin} with {confidence} confidence \
             after {} ({})",
            looks_count(look.number),
            rates(look)
        ),
        (Some(look), _) => format!(
            "the canary's error rate is at most {margin} above the baseline's with {confidence} confidence \
             after {} ({})",
            looks_count(look.number),
            rates(look)
        ),
        (None, Some(last)) => match last.result.sparse_message() {
            Some(sparse) => format!("no verdict after {}: {sparse}", looks_count(last.number)),
            None => format!(
                "no verdict after {}: with {confidence} confidence the canary's error rate is {} the \
                 baseline's, which does not yet settle whether it is more than {margin} above it ({})",
                looks_count(last.number),
                ratio_range(last.result.ratio_lower, last.result.ratio_upper),
                rates(last)
            ),
        },
    }
}

fn looks_count(n: usize) -> String {
    if n == 1 {
        "1 look".to_string()
    } else {
        format!("{n} looks")
    }
}

/// The allowed increase as the null hypothesis states it: relative, absolute or both.
fn margin(params: &ErrorRateParams) -> String {
    let relative = percent(params.max_relative_increase);
    let absolute = points(params.max_absolute_increase);
    match (
        params.max_relative_increase > 0.0,
        params.max_absolute_increase > 0.0,
    ) {
        (_, false) => relative,
        (false, true) => absolute,
        (true, true) => format!("{relative} plus {absolute}"),
    }
}

fn rates(look: &LookView) -> String {
    let r = &look.result;
    format!(
        "canary {} of {} requests, baseline {} of {}",
        percent(r.canary_rate),
        r.canary_requests,
        percent(r.baseline_rate),
        r.baseline_requests
    )
}

fn ratio_range(lower: Option<f64>, upper: Option<f64>) -> String {
    match (lower, upper) {
        (Some(lo), Some(hi)) => format!("between {} and {} times", number(lo), number(hi)),
        (Some(lo), None) => format!("at least {} times", number(lo)),
        (None, Some(hi)) => format!("at most {} times", number(hi)),
        (None, None) => "any multiple of".to_string(),
    }
}

/// A fraction as a percentage with at most two decimals: 0.1 -> `10%`, 0.0241 -> `2.41%`.
pub fn percent(fraction: f64) -> String {
    if !fraction.is_finite() {
        return "n/a".to_string();
    }
    format!("{}%", trimmed(fraction * 100.0, 2))
}

/// A rate difference in percentage points: 0.001 -> `0.1 percentage points`.
fn points(fraction: f64) -> String {
    format!("{} percentage points", trimmed(fraction * 100.0, 3))
}

/// A ratio with two decimals, trailing zeros dropped.
pub fn number(x: f64) -> String {
    trimmed(x, 2)
}

fn trimmed(x: f64, decimals: usize) -> String {
    let text = format!("{x:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    if text == "-0" { "0".to_string() } else { text }
}
