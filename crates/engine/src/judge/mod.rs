//! The canary-vs-baseline judge: pure statistics that turn what canary and baseline served during the same
//! window into `pass`, `fail` or `inconclusive`.
//!
//! - [`error_rate`]: an anytime-valid sequential test on cumulative error counts (mixture SPRT on error
//!   arrivals, Lindon, Sanden & Shirikian, KDD 2022), safe to evaluate at every look.
//! - [`distribution`]: Mann-Whitney U and the Hodges-Lehmann shift for samples such as latencies.
//!
//! This module owns the statistics only. It must not fetch anything (the `canaryd/compare` provider feeds it),
//! read a clock, or panic on any input: bad input is a [`JudgeError`].

pub mod distribution;
pub mod error_rate;
pub mod mixture;
mod normal;
pub mod planned;

pub use distribution::{Direction, DistributionParams, DistributionResult, judge_distribution};
pub use error_rate::{
    ErrorRateParams, ErrorRateResult, ErrorRateTest, Look, Sparse, judge_error_rate,
};
pub use mixture::Mixture;
pub use planned::Design;

use serde::Serialize;

/// The judgement of one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The evidence says the canary is within the allowed margin of the baseline.
    Pass,
    /// The evidence says the canary is worse than the baseline by more than the margin.
    Fail,
    /// Not enough evidence either way (or not enough traffic yet).
    Inconclusive,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Inconclusive => "inconclusive",
        })
    }
}

/// Input the judge cannot use, in the user's terms. `look` is 1-based.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JudgeError {
    #[error("{name} must be {expected}, got {value}")]
    BadParameter {
        name: &'static str,
        expected: &'static str,
        value: f64,
    },
    #[error(
        "look {look}: {field} went down from {before} to {after} (counts must be cumulative; was a counter reset?)"
    )]
    CountDecreased {
        look: usize,
        field: &'static str,
        before: u64,
        after: u64,
    },
    #[error("look {look}: {side} errors ({errors}) exceed {side} requests ({requests})")]
    ErrorsExceedRequests {
        look: usize,
        side: &'static str,
        errors: u64,
        requests: u64,
    },
    #[error(
        "look {look}: {side} errors grew by {errors} but {side} requests only by {requests} since the previous look"
    )]
    IncrementInconsistent {
        look: usize,
        side: &'static str,
        errors: u64,
        requests: u64,
    },
}

/// `1 - confidence` after checking that the confidence is a probability strictly between 0 and 1.
fn alpha(confidence: f64) -> Result<f64, JudgeError> {
    if confidence > 0.0 && confidence < 1.0 {
        Ok(1.0 - confidence)
    } else {
        Err(JudgeError::BadParameter {
            name: "confidence",
            expected: "strictly between 0 and 1",
            value: confidence,
        })
    }
}

/// Checks a margin: finite and not negative.
fn non_negative(name: &'static str, value: f64) -> Result<f64, JudgeError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(JudgeError::BadParameter {
            name,
            expected: "a finite number >= 0",
            value,
        })
    }
}
