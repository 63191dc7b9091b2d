//! What the pictures of one AnalysisRun show, without markup: per metric its measurements over time with the
//! thresholds its conditions compare with, or, for `canaryd/compare`'s error-rate judge, the judge's numbers
//! at every look (replayed from the looks its status keeps, so they are the judge's own), the look that
//! decided and the sentence saying why. `mod.rs` lays this out as HTML; the tests read it directly.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::api::compare::{COMPARE_PLUGIN, CompareSpec};
use crate::api::{AnalysisPhase, AnalysisRun, Measurement, Metric, MetricResult};
use crate::engine::args::substitute;
use crate::engine::compare;
use crate::engine::condition::thresholds::{Comparison, thresholds};
use crate::engine::judge::{ErrorRateParams, ErrorRateResult, Verdict, judge_error_rate};

#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    pub name: String,
    pub phase: Option<AnalysisPhase>,
    pub message: Option<String>,
    pub metrics: Vec<MetricView>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricView {
    pub name: String,
    /// `None` until the metric has a result.
    pub phase: Option<AnalysisPhase>,
    pub message: Option<String>,
    pub picture: Picture,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Picture {
    Measurements(MeasurementsView),
    ErrorRate(ErrorRateView),
    /// The status holds what cannot be drawn (an unreadable look history, parameters the judge refuses).
    Unreadable(String),
}

/// A metric's measurements over time.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasurementsView {
    /// What each number of a value is: `result[0]`, `result[1]`, ... (`result` for a scalar).
    pub series: Vec<String>,
    pub points: Vec<Point>,
    pub thresholds: Vec<ThresholdLine>,
}

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Seconds since the run started (or since its first measurement when the status has no start).
    pub seconds: f64,
    pub at: Option<Timestamp>,
    /// One per series; NaN where the value holds no number there.
    pub numbers: Vec<f64>,
    /// The value as stored.
    pub value: String,
    pub phase: AnalysisPhase,
    pub message: Option<String>,
}

/// A line the metric's condition draws: the measurement passes (or fails) on the side `comparison` says.
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdLine {
    pub condition: ConditionKind,
    /// Index into [`MeasurementsView::series`].
    pub series: usize,
    pub comparison: Comparison,
    pub value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionKind {
    Success,
    Failure,
}

/// The error-rate judge's numbers at every look.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorRateView {
    pub params: ErrorRateParams,
    pub looks: Vec<LookView>,
    /// The 1-based look at which the verdict was reached (it never changes after).
    pub decided_at: Option<usize>,
    pub verdict: Verdict,
    pub sentence: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LookView {
    /// 1-based.
    pub number: usize,
    pub result: ErrorRateResult,
    /// The most the canary's rate may be under the margin: baseline × (1 + relative) + absolute.
    pub allowed_rate: f64,
}

impl RunView {
    pub fn of(run: &AnalysisRun) -> RunView {
        let status = run.status.as_ref();
        let started = status.and_then(|s| s.started_at.as_ref()).map(|t| t.0);
        // A run keeps its metrics' `{{args.NAME}}` as written (Argo resolves them at each measurement):
        // the values given in the run's own args are what its conditions compare with.
        let args: BTreeMap<String, Option<String>> = run
            .spec
            .args
            .iter()
            .flatten()
            .map(|a| (a.name.clone(), a.value.clone()))
            .collect();
        let metrics = run
            .spec
            .metrics
            .iter()
            .map(|metric| {
                let result = status.and_then(|s| s.result(&metric.name));
                MetricView::of(metric, result, started, &args)
            })
            .collect();
        RunView {
            name: run.metadata.name.clone().unwrap_or_default(),
            phase: status.and_then(|s| s.phase),
            message: status.and_then(|s| s.message.clone()),
            metrics,
        }
    }
}

impl MetricView {
    /// `args`: the run's arg values, for the placeholders in the metric's conditions.
    pub fn of(
        metric: &Metric,
        result: Option<&MetricResult>,
        started: Option<Timestamp>,
        args: &BTreeMap<String, Option<String>>,
    ) -> MetricView {
        let picture = match error_rate_spec(metric) {
            Some(Ok(params)) => error_rate(&params, result),
            Some(Err(e)) => Picture::Unreadable(format!("plugin {COMPARE_PLUGIN}: {e}")),
            None => Picture::Measurements(measurements(metric, result, started, args)),
        };
        MetricView {
            name: metric.name.clone(),
            phase: result.map(|r| r.phase),
            message: result.and_then(|r| r.message.clone()),
            picture,
        }
    }
}

/// The error-rate judge's parameters when the metric is `canaryd/compare` with `errorRate`.
fn error_rate_spec(metric: &Metric) -> Option<Result<ErrorRateParams, String>> {
    let config = metric.provider.plugin.as_ref()?.get(COMPARE_PLUGIN)?;
    match serde_json::from_value::<CompareSpec>(config.clone()) {
        Ok(spec) => spec.error_rate.map(|e| Ok(compare::error_rate_params(&e))),
        Err(e) => Some(Err(e.to_string())),
    }
}

fn error_rate(params: &ErrorRateParams, result: Option<&MetricResult>) -> Picture {
    let looks = match compare::looks_from(result.and_then(|r| r.metadata.as_ref())) {
        Ok(looks) => looks,
        Err(e) => return Picture::Unreadable(e),
    };
    let results = match judge_error_rate(params, &looks) {
        Ok(results) => results,
        Err(e) => return Picture::Unreadable(e.to_string()),
    };
    let looks: Vec<LookView> = results
        .into_iter()
        .enumerate()
        .map(|(i, result)| LookView {
            number: i + 1,
            allowed_rate: result.baseline_rate * (1.0 + params.max_relative_increase)
                + params.max_absolute_increase,
            result,
        })
        .collect();
    let decided_at = looks
        .iter()
        .find(|l| l.result.verdict != Verdict::Inconclusive)
        .map(|l| l.number);
    let verdict = looks
        .last()
        .map_or(Verdict::Inconclusive, |l| l.result.verdict);
    let sentence = super::sentence::why(params, &looks, decided_at);
    Picture::ErrorRate(ErrorRateView {
        params: *params,
        looks,
        decided_at,
        verdict,
        sentence,
    })
}

fn measurements(
    metric: &Metric,
    result: Option<&MetricResult>,
    started: Option<Timestamp>,
    args: &BTreeMap<String, Option<String>>,
) -> MeasurementsView {
    let taken = result.map_or(&[][..], |r| r.measurements.as_slice());
    let numbers: Vec<Vec<f64>> = taken.iter().map(numbers_of).collect();
    let width = numbers.iter().map(Vec::len).max().unwrap_or(0);
    let lines: Vec<(ConditionKind, Vec<_>)> = [
        (ConditionKind::Success, &metric.success_condition),
        (ConditionKind::Failure, &metric.failure_condition),
    ]
    .into_iter()
    .filter_map(|(kind, c)| {
        let text = c.as_deref()?;
        let resolved = substitute(text, args, &|_| None).unwrap_or_else(|_| text.to_string());
        Some((kind, thresholds(&resolved)))
    })
    .collect();
    let vector = taken.iter().any(|m| {
        m.value
            .as_deref()
            .is_some_and(|v| v.trim_start().starts_with('['))
    });
    let scalar = !vector
        && width <= 1
        && lines
            .iter()
            .flat_map(|(_, t)| t)
            .all(|t| t.series.is_none());
    let series_count = lines
        .iter()
        .flat_map(|(_, t)| t)
        .filter_map(|t| t.series.map(|s| s + 1))
        .fold(width.max(1), usize::max);
    let series = if scalar {
        vec!["result".to_string()]
    } else {
        (0..series_count).map(|i| format!("result[{i}]")).collect()
    };
    let thresholds = lines
        .into_iter()
        .flat_map(|(condition, found)| {
            found.into_iter().map(move |t| ThresholdLine {
                condition,
                series: t.series.unwrap_or(0),
                comparison: t.comparison,
                value: t.value,
            })
        })
        .collect();
    let origin = started.or_else(|| taken.iter().find_map(when));
    let points = taken
        .iter()
        .zip(numbers)
        .map(|(m, mut numbers)| {
            numbers.resize(series.len(), f64::NAN);
            let at = when(m);
            Point {
                seconds: match (at, origin) {
                    (Some(at), Some(origin)) => at.duration_since(origin).as_secs_f64(),
                    _ => f64::NAN,
                },
                at,
                numbers,
                value: m.value.clone().unwrap_or_default(),
                phase: m.phase,
                message: m.message.clone(),
            }
        })
        .collect();
    MeasurementsView {
        series,
        points,
        thresholds,
    }
}

fn when(m: &Measurement) -> Option<Timestamp> {
    m.finished_at
        .as_ref()
        .or(m.started_at.as_ref())
        .map(|t| t.0)
}

/// The numbers of a stored value: `0.5` is one, `[0.99,NaN]` two; anything else (JSON objects, text, an
/// empty value) none. Go's spellings of the specials (`NaN`, `+Inf`) are read too.
fn numbers_of(m: &Measurement) -> Vec<f64> {
    let text = m.value.as_deref().unwrap_or("").trim();
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if inner.is_empty() {
        return Vec::new();
    }
    let parsed: Option<Vec<f64>> = inner
        .split(',')
        .map(|n| n.trim().trim_start_matches('+').parse::<f64>().ok())
        .collect();
    parsed.unwrap_or_default()
}
