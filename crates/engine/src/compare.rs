//! The pure half of the `canaryd/compare` provider: the `{{window}}` a metric's queries cover, the
//! parameters' defaults, turning query answers into counts and samples, the error-rate history kept in the
//! metric's status metadata, what a look without traffic means, and the verdict as a measurement value and
//! phase. The queries themselves are sent by `measure.rs`; the statistics are `judge`'s. No I/O, no clock:
//! times come in as arguments, so a restart replays to the same verdicts.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::analysis::MetricPlan;
use super::judge::{
    self, DistributionParams, ErrorRateParams, ErrorRateTest, JudgeError, Look, Verdict,
};
use super::value::MetricValue;
use crate::api::AnalysisPhase;
use crate::api::compare::{DistributionCompare, ErrorRateCompare};

/// The metric-result metadata key holding the cumulative looks the error-rate test has seen. It lives in
/// status, which measurementRetention never trims, so the sequential test survives restarts and retention.
pub const LOOKS_KEY: &str = "canaryd.io/compare-looks";

/// Where a compare metric's window opens: one `interval` before its first measurement, which is due at the
/// run's start plus `initialDelay`. Derived from status (the run's `startedAt`) alone.
pub fn window_start(plan: &MetricPlan, run_started: Timestamp) -> Timestamp {
    let back = plan.interval.unwrap_or(Duration::ZERO);
    let first = add(run_started, plan.initial_delay);
    sub(first, back)
}

/// `{{window}}`: from the window's start to `now`, in whole seconds as a PromQL duration (at least `1s`).
pub fn window(start: Timestamp, now: Timestamp) -> String {
    let seconds = now.duration_since(start).as_secs().max(1);
    format!("{seconds}s")
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(t)
}

fn sub(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_sub(d).ok())
        .unwrap_or(t)
}

/// Why an answer cannot be used as one side's number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CountError {
    #[error(
        "{query} returned {series} series; each side's query must return one number: aggregate it, e.g. sum(...)"
    )]
    SeveralSeries { query: &'static str, series: usize },
    #[error("{query} returned {value}, which is not a count")]
    NotACount { query: &'static str, value: String },
    #[error("{query} returned a JSON value; it must be a PromQL number")]
    NotANumber { query: &'static str },
}

/// One side's count from an instant query: `None` when there are no series yet or the value is NaN (no
/// traffic: Inconclusive, never Error). `increase()` extrapolates, so counts are rounded to whole events.
pub fn count(query: &'static str, value: &MetricValue) -> Result<Option<u64>, CountError> {
    let n = match value {
        MetricValue::Nil => return Ok(None),
        MetricValue::Number(n) => *n,
        MetricValue::Numbers(ns) => match ns.as_slice() {
            [] => return Ok(None),
            [n] => *n,
            many => {
                return Err(CountError::SeveralSeries {
                    query,
                    series: many.len(),
                });
            }
        },
        MetricValue::Json(_) => return Err(CountError::NotANumber { query }),
    };
    if n.is_nan() {
        return Ok(None);
    }
    if !n.is_finite() || n < 0.0 {
        return Err(CountError::NotACount {
            query,
            value: crate::value::render_number(n),
        });
    }
    // Saturating: a count beyond u64 is not a real count anyway.
    Ok(Some(n.round() as u64))
}

/// A look from four counts (`[canary errors, canary requests, baseline errors, baseline requests]`).
/// `increase()` extrapolates, so its counts are smoothed into what the judge requires of cumulative counts:
/// never smaller than the previous look's (a slightly smaller extrapolation is not a counter reset), and
/// errors never growing by more than requests did.
pub fn look(counts: [u64; 4], previous: Option<&Look>) -> Look {
    let [ce, cr, be, br] = counts;
    let prev = previous.copied().unwrap_or_default();
    let side = |errors: u64, requests: u64, prev_errors: u64, prev_requests: u64| {
        let requests = requests.max(prev_requests);
        let errors = errors
            .max(prev_errors)
            .min(prev_errors + (requests - prev_requests));
        (errors, requests)
    };
    let (canary_errors, canary_requests) = side(ce, cr, prev.canary_errors, prev.canary_requests);
    let (baseline_errors, baseline_requests) =
        side(be, br, prev.baseline_errors, prev.baseline_requests);
    Look {
        canary_errors,
        canary_requests,
        baseline_errors,
        baseline_requests,
    }
}

/// The looks recorded in a metric's metadata (`ce:cr:be:br` per look, comma-separated). Unreadable entries
/// are an error: a history that cannot be replayed must not be silently restarted.
pub fn looks_from(metadata: Option<&BTreeMap<String, String>>) -> Result<Vec<Look>, String> {
    let Some(text) = metadata
        .and_then(|m| m.get(LOOKS_KEY))
        .filter(|t| !t.is_empty())
    else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(|entry| {
            let n: Vec<u64> = entry.split(':').filter_map(|x| x.parse().ok()).collect();
            match n.as_slice() {
                [ce, cr, be, br] => Ok(Look {
                    canary_errors: *ce,
                    canary_requests: *cr,
                    baseline_errors: *be,
                    baseline_requests: *br,
                }),
                _ => Err(format!(
                    "status metadata {LOOKS_KEY} holds an unreadable look {entry:?}"
                )),
            }
        })
        .collect()
}

/// The metadata value for a history of looks.
pub fn looks_to(looks: &[Look]) -> String {
    let entries: Vec<String> = looks
        .iter()
        .map(|l| {
            format!(
                "{}:{}:{}:{}",
                l.canary_errors, l.canary_requests, l.baseline_errors, l.baseline_requests
            )
        })
        .collect();
    entries.join(",")
}

/// For `compose::resolve_metric`: `{{window}}` stays in place until measurement time, when it is known.
pub fn keep_window(name: &str) -> Option<String> {
    (name == "window").then(|| "{{window}}".to_string())
}

/// The error-rate test's parameters: what the metric sets, the judge's defaults for the rest.
pub fn error_rate_params(e: &ErrorRateCompare) -> ErrorRateParams {
    let defaults = ErrorRateParams::default();
    ErrorRateParams {
        max_relative_increase: e
            .max_relative_increase
            .unwrap_or(defaults.max_relative_increase),
        max_absolute_increase: e
            .max_absolute_increase
            .unwrap_or(defaults.max_absolute_increase),
        confidence: e.confidence.unwrap_or(defaults.confidence),
        min_requests: e.min_requests.unwrap_or(defaults.min_requests),
        mixture: e.mixture.unwrap_or(defaults.mixture),
        design: e.design.unwrap_or(defaults.design),
    }
}

/// The distribution test's parameters: what the metric sets, the judge's defaults for the rest.
pub fn distribution_params(d: &DistributionCompare) -> Result<DistributionParams, String> {
    let defaults = DistributionParams::default();
    Ok(DistributionParams {
        direction: match d.direction.as_deref() {
            None => defaults.direction,
            Some(text) => text.parse()?,
        },
        confidence: d.confidence.unwrap_or(defaults.confidence),
        max_relative_shift: d.max_relative_shift.unwrap_or(defaults.max_relative_shift),
        min_samples: d.min_samples.unwrap_or(defaults.min_samples),
    })
}

/// The resolution of the distribution queries' samples when the metric sets none.
pub const DEFAULT_DISTRIBUTION_STEP: &str = "30s";

/// What `canaryd/compare` concluded at one look: the verdict, and the reason it is undecided when the
/// traffic was too sparse for any verdict (the measurement's message).
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub sparse: Option<String>,
}

impl From<Verdict> for Judgement {
    fn from(verdict: Verdict) -> Self {
        Judgement {
            verdict,
            sparse: None,
        }
    }
}

/// One look of the error-rate test: `counts` are canary errors, canary requests, baseline errors, baseline
/// requests (`None`: no series or NaN). `history` is the looks so far. Without traffic on both sides (no
/// series, NaN, or zero requests) nothing is looked at and the measurement is undecided. Returns the result
/// as JSON, the judgement and the looks to keep.
pub fn error_rate_look(
    params: &ErrorRateParams,
    counts: [Option<u64>; 4],
    history: Vec<Look>,
) -> Result<(serde_json::Value, Judgement, Vec<Look>), JudgeError> {
    let mut test = ErrorRateTest::replay(params, &history)?;
    let mut looks = history;
    let looked = match counts {
        [Some(ce), Some(cr), Some(be), Some(br)] if cr > 0 && br > 0 => {
            let look = look([ce, cr, be, br], looks.last());
            test.observe(&look)?;
            looks.push(look);
            true
        }
        _ => false,
    };
    let result = test.result();
    let judgement = Judgement {
        verdict: if looked {
            result.verdict
        } else {
            Verdict::Inconclusive
        },
        sparse: result.sparse_message(),
    };
    Ok((result.to_json(), judgement, looks))
}

/// The distribution test's result as JSON and its verdict.
pub fn distribution_judgement(
    canary: &[f64],
    baseline: &[f64],
    params: &DistributionParams,
) -> Result<(serde_json::Value, Verdict), JudgeError> {
    let result = judge::judge_distribution(canary, baseline, params)?;
    Ok((result.to_json(), result.verdict))
}

/// The measurement's phase: the verdict's when the metric has no conditions (`conditions` is `None`), else
/// the conditions'. On traffic too sparse for any verdict it is never Successful: a canary that served too
/// little to be judged has not passed, whatever a condition such as `result.verdict != "fail"` says.
pub fn judged_phase(judgement: &Judgement, conditions: Option<AnalysisPhase>) -> AnalysisPhase {
    let phase = conditions.unwrap_or(match judgement.verdict {
        Verdict::Pass => AnalysisPhase::Successful,
        Verdict::Fail => AnalysisPhase::Failed,
        Verdict::Inconclusive => AnalysisPhase::Inconclusive,
    });
    if judgement.sparse.is_some() && phase == AnalysisPhase::Successful {
        AnalysisPhase::Inconclusive
    } else {
        phase
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_window_opens_one_interval_before_the_first_measurement() {
        let plan = MetricPlan {
            name: "m".into(),
            interval: Some(Duration::from_secs(60)),
            initial_delay: Duration::from_secs(300),
            count: Some(10),
            failure_limit: 0,
            inconclusive_limit: 0,
            consecutive_error_limit: 4,
            consecutive_success_limit: 0,
            dry_run: false,
            retention: 10,
        };
        let start = window_start(&plan, ts("2026-01-01T00:00:00Z"));
        assert_eq!(start, ts("2026-01-01T00:04:00Z"));
        assert_eq!(window(start, ts("2026-01-01T00:05:00Z")), "60s");
        assert_eq!(window(start, ts("2026-01-01T00:14:30Z")), "630s");
        assert_eq!(window(start, start), "1s", "never an empty PromQL range");
    }

    #[test]
    fn counts_come_from_one_number_and_no_series_means_no_traffic() {
        assert_eq!(
            count("canary.errors", &MetricValue::Numbers(vec![4.6])),
            Ok(Some(5))
        );
        assert_eq!(
            count("canary.errors", &MetricValue::Number(3.0)),
            Ok(Some(3))
        );
        assert_eq!(
            count("canary.errors", &MetricValue::Numbers(vec![])),
            Ok(None)
        );
        assert_eq!(
            count("canary.errors", &MetricValue::Numbers(vec![f64::NAN])),
            Ok(None)
        );
        assert_eq!(
            count("canary.errors", &MetricValue::Numbers(vec![1.0, 2.0]))
                .unwrap_err()
                .to_string(),
            "canary.errors returned 2 series; each side's query must return one number: aggregate it, e.g. sum(...)"
        );
        assert!(count("canary.errors", &MetricValue::Numbers(vec![-1.0])).is_err());
    }

    #[test]
    fn looks_stay_monotone_and_errors_never_exceed_requests() {
        let first = look([5, 100, 1, 100], None);
        let second = look([4, 99, 3, 150], Some(&first));
        assert_eq!(
            second,
            Look {
                canary_errors: 5,
                canary_requests: 100,
                baseline_errors: 3,
                baseline_requests: 150
            }
        );
        assert_eq!(look([12, 10, 0, 0], None).canary_errors, 10);
        // Errors may grow only as much as requests did since the previous look.
        let third = look([9, 102, 3, 150], Some(&second));
        assert_eq!((third.canary_errors, third.canary_requests), (7, 102));
    }

    #[test]
    fn the_history_round_trips_through_metadata() {
        let looks = vec![look([1, 10, 0, 12], None), look([2, 25, 1, 30], None)];
        let metadata = BTreeMap::from([(LOOKS_KEY.to_string(), looks_to(&looks))]);
        assert_eq!(looks_from(Some(&metadata)), Ok(looks));
        assert_eq!(looks_from(None), Ok(vec![]));
        let broken = BTreeMap::from([(LOOKS_KEY.to_string(), "1:2:x".to_string())]);
        assert!(looks_from(Some(&broken)).is_err());
    }
}
