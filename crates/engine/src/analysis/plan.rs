//! The analysis plan: an AnalysisRun's metrics with Argo's defaults applied and every duration and limit parsed
//! once, so the state machine never re-reads wire types. Owns defaults and the timing/limit rules Argo rejects
//! a spec for; it must not evaluate conditions, substitute args (they arrive substituted) or perform I/O.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use regex::Regex;

use crate::api::duration::{DurationError, parse_duration};
use crate::api::{DryRun, MeasurementRetention, Metric};

/// Argo's `consecutiveErrorLimit` default: the 5th error in a row ends the metric.
pub const DEFAULT_CONSECUTIVE_ERROR_LIMIT: i32 = 4;
/// Argo's default number of measurements kept per metric in status.
pub const DEFAULT_MEASUREMENT_RETENTION: usize = 10;

/// Why a metric cannot be run as written. Messages name the metric and the Argo field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("an analysis needs at least one metric")]
    NoMetrics,
    #[error("metric {metric:?}: the name is used by more than one metric")]
    DuplicateName { metric: String },
    #[error("metric {metric:?}: {field}: {source}")]
    Duration {
        metric: String,
        field: &'static str,
        source: DurationError,
    },
    #[error(
        "metric {metric:?}: {field}: {text:?} still holds an argument placeholder; pass a value for it"
    )]
    UnresolvedArg {
        metric: String,
        field: &'static str,
        text: String,
    },
    #[error("metric {metric:?}: {field}: {text:?} is not a whole number")]
    NotAnInteger {
        metric: String,
        field: &'static str,
        text: String,
    },
    #[error("metric {metric:?}: {field}: {value} is below the smallest allowed value {min}")]
    TooSmall {
        metric: String,
        field: &'static str,
        value: i32,
        min: i32,
    },
    #[error("metric {metric:?}: count is {count} but no interval says how far apart to measure")]
    CountWithoutInterval { metric: String, count: u32 },
    #[error(
        "metric {metric:?}: failureLimit -1 disables failing, so consecutiveSuccessLimit must be above 0"
    )]
    NoLimitApplies { metric: String },
    #[error("metric {metric:?}: count ({count}) must be >= {field} ({limit})")]
    CountBelowLimit {
        metric: String,
        field: &'static str,
        count: u32,
        limit: i32,
    },
    #[error("{field}: {pattern:?} is not a valid regular expression: {message}")]
    BadPattern {
        field: String,
        pattern: String,
        message: String,
    },
    #[error("{field}: {pattern:?} matches no metric name")]
    PatternMatchesNothing { field: String, pattern: String },
}

impl PlanError {
    fn from_rule(metric: String, rule: LimitRule) -> PlanError {
        let narrow = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
        let count_of = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        match rule {
            LimitRule::TooSmall { field, value, min } => PlanError::TooSmall {
                metric,
                field,
                value: narrow(value),
                min: narrow(min),
            },
            LimitRule::CountWithoutInterval { count } => PlanError::CountWithoutInterval {
                metric,
                count: count_of(count),
            },
            LimitRule::NoLimitApplies => PlanError::NoLimitApplies { metric },
            LimitRule::CountBelowLimits {
                count,
                failure,
                consecutive_success,
            } if failure < 0 => PlanError::CountBelowLimit {
                metric,
                field: "consecutiveSuccessLimit",
                count: count_of(count),
                limit: narrow(consecutive_success),
            },
            LimitRule::CountBelowLimits {
                count,
                failure,
                consecutive_success,
            } => PlanError::CountBelowLimit {
                metric,
                field: "failureLimit + consecutiveSuccessLimit",
                count: count_of(count),
                limit: narrow(failure.saturating_add(consecutive_success)),
            },
            LimitRule::CountBelowInconclusive {
                count,
                inconclusive,
            } => PlanError::CountBelowLimit {
                metric,
                field: "inconclusiveLimit",
                count: count_of(count),
                limit: narrow(inconclusive),
            },
        }
    }
}

/// One metric, ready to schedule and judge.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricPlan {
    pub name: String,
    /// Time between the end of one measurement and the start of the next; `None` measures once.
    pub interval: Option<Duration>,
    /// Wait after the run starts before the first measurement.
    pub initial_delay: Duration,
    /// Measurements (errors excluded) after which the metric ends; `None` runs until terminated.
    pub count: Option<u32>,
    /// Failed measurements tolerated; -1 disables failing on this count.
    pub failure_limit: i32,
    pub inconclusive_limit: i32,
    pub consecutive_error_limit: i32,
    /// Successes in a row that end the metric Successful; 0 disables it.
    pub consecutive_success_limit: i32,
    /// Reported but never decides the run.
    pub dry_run: bool,
    /// Measurements kept in status.
    pub retention: usize,
}

impl MetricPlan {
    /// How many measurements the metric keeps: its retention, and never none (the last one is the metric's
    /// state).
    pub fn kept(&self) -> usize {
        self.retention.max(1)
    }
}

/// Every metric of one AnalysisRun, in spec order (the order of `status.metricResults`).
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisPlan {
    pub metrics: Vec<MetricPlan>,
}

impl AnalysisPlan {
    /// Builds the plan from a run's (args-substituted) spec: `dryRun` and `measurementRetention` rules are
    /// regular expressions searched in the metric name, as Argo does, and each must match some metric.
    pub fn from_spec(
        metrics: &[Metric],
        dry_run: &[DryRun],
        retention: &[MeasurementRetention],
    ) -> Result<AnalysisPlan, PlanError> {
        if metrics.is_empty() {
            return Err(PlanError::NoMetrics);
        }
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(PlanError::DuplicateName {
                    metric: name.to_string(),
                });
            }
        }
        let dry = dry_run_flags(metrics, dry_run)?;
        let retention_rules = retention
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                compile_rule(
                    format!("measurementRetention[{i}].metricName"),
                    &rule.metric_name,
                    &names,
                )
                .map(|re| (re, rule.limit))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let metrics = metrics
            .iter()
            .zip(dry)
            .map(|(m, dry)| {
                // Like Argo, a later rule overrides an earlier one, and a limit of 0 or less means the default.
                let kept = retention_rules
                    .iter()
                    .rev()
                    .find(|(re, _)| re.is_match(&m.name))
                    .and_then(|(_, limit)| usize::try_from(*limit).ok())
                    .filter(|limit| *limit > 0)
                    .unwrap_or(DEFAULT_MEASUREMENT_RETENTION);
                MetricPlan::from_metric(m, dry, kept)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AnalysisPlan { metrics })
    }
}

/// Whether each of `metrics` (in order) is a dry-run metric: `dryRun` rules are regular expressions searched in
/// the metric name, and each must match some metric (Argo's `GetDryRunMetrics`).
pub fn dry_run_flags(metrics: &[Metric], dry_run: &[DryRun]) -> Result<Vec<bool>, PlanError> {
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    let rules = dry_run
        .iter()
        .enumerate()
        .map(|(i, rule)| compile_rule(format!("dryRun[{i}].metricName"), &rule.metric_name, &names))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(names
        .iter()
        .map(|name| rules.iter().any(|re| re.is_match(name)))
        .collect())
}

fn compile_rule(field: String, pattern: &str, names: &[&str]) -> Result<Regex, PlanError> {
    let re = Regex::new(pattern).map_err(|e| PlanError::BadPattern {
        field: field.clone(),
        pattern: pattern.to_string(),
        message: e.to_string(),
    })?;
    if !names.iter().any(|n| re.is_match(n)) {
        return Err(PlanError::PatternMatchesNothing {
            field,
            pattern: pattern.to_string(),
        });
    }
    Ok(re)
}

/// A count or limit as a metric spells it. `validate` sees specs before args are substituted, so a field may
/// still be a placeholder; rules that need its value are then left for run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Written {
    #[default]
    Absent,
    Value(i64),
    Placeholder,
}

impl Written {
    fn value(self) -> Option<i64> {
        match self {
            Written::Value(n) => Some(n),
            _ => None,
        }
    }
}

/// A metric's count and limits as written, and whether it has an interval.
#[derive(Debug, Clone, Copy, Default)]
pub struct WrittenLimits {
    pub count: Written,
    pub failure: Written,
    pub inconclusive: Written,
    pub consecutive_error: Written,
    pub consecutive_success: Written,
    pub has_interval: bool,
}

/// A rule of Argo's that a metric's count and limits break. One list serves `validate`, which reports them
/// all, and the plan, which refuses to run on the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitRule {
    /// `field` (Argo's name) is below `min`.
    TooSmall {
        field: &'static str,
        value: i64,
        min: i64,
    },
    /// More than one measurement without an interval between them.
    CountWithoutInterval { count: i64 },
    /// `failureLimit: -1` with no `consecutiveSuccessLimit` to end the metric.
    NoLimitApplies,
    /// The count ends the metric before failureLimit + consecutiveSuccessLimit can be reached.
    CountBelowLimits {
        count: i64,
        failure: i64,
        consecutive_success: i64,
    },
    /// The count ends the metric before inconclusiveLimit can be reached.
    CountBelowInconclusive { count: i64, inconclusive: i64 },
}

/// Argo's rules on a metric's count and limits (absent limits take Argo's defaults), in field order.
pub fn limit_rules(l: &WrittenLimits) -> Vec<LimitRule> {
    let mut broken = Vec::new();
    let mut at_least = |field: &'static str, written: Written, min: i64| {
        if let Some(value) = written.value().filter(|v| *v < min) {
            broken.push(LimitRule::TooSmall { field, value, min });
        }
    };
    at_least("count", l.count, 0);
    at_least("failureLimit", l.failure, -1);
    at_least("inconclusiveLimit", l.inconclusive, 0);
    at_least("consecutiveErrorLimit", l.consecutive_error, 0);
    at_least("consecutiveSuccessLimit", l.consecutive_success, 0);
    let count = l.count.value().filter(|n| *n > 0);
    if let Some(n) = count.filter(|n| *n > 1)
        && !l.has_interval
    {
        broken.push(LimitRule::CountWithoutInterval { count: n });
    }
    // Absent limits are Argo's defaults (0); a placeholder's value is not known yet.
    let known = |w: Written| match w {
        Written::Absent => Some(0),
        Written::Value(n) => Some(n),
        Written::Placeholder => None,
    };
    if l.failure.value() == Some(-1) && known(l.consecutive_success).is_some_and(|s| s <= 0) {
        broken.push(LimitRule::NoLimitApplies);
    }
    // Only a count the user wrote is held against the limits (Argo does the same).
    if let (Some(n), Some(f), Some(s)) = (count, known(l.failure), known(l.consecutive_success))
        && n < f.max(0).saturating_add(s)
    {
        broken.push(LimitRule::CountBelowLimits {
            count: n,
            // -1 (failing off) is kept so the message can say which rule applied.
            failure: f,
            consecutive_success: s,
        });
    }
    if let (Some(n), Some(i)) = (count, l.inconclusive.value())
        && n < i
    {
        broken.push(LimitRule::CountBelowInconclusive {
            count: n,
            inconclusive: i,
        });
    }
    broken
}

impl MetricPlan {
    /// Applies Argo's defaults to one metric and rejects what Argo's controller rejects.
    pub fn from_metric(
        m: &Metric,
        dry_run: bool,
        retention: usize,
    ) -> Result<MetricPlan, PlanError> {
        let name = m.name.clone();
        let duration = |field: &'static str, text: &Option<String>| {
            text.as_deref()
                .filter(|t| !t.is_empty())
                .map(|t| {
                    parse_duration(t).map_err(|source| PlanError::Duration {
                        metric: name.clone(),
                        field,
                        source,
                    })
                })
                .transpose()
        };
        let written = |field: &'static str, value: &Option<IntOrString>| {
            value.as_ref().map_or(Ok(Written::Absent), |v| {
                int_value(&name, field, v).map(|n| Written::Value(i64::from(n)))
            })
        };
        let interval = duration("interval", &m.interval)?;
        let initial_delay = duration("initialDelay", &m.initial_delay)?.unwrap_or(Duration::ZERO);
        let limits = WrittenLimits {
            count: written("count", &m.count)?,
            failure: written("failureLimit", &m.failure_limit)?,
            inconclusive: written("inconclusiveLimit", &m.inconclusive_limit)?,
            consecutive_error: written("consecutiveErrorLimit", &m.consecutive_error_limit)?,
            consecutive_success: written("consecutiveSuccessLimit", &m.consecutive_success_limit)?,
            has_interval: interval.is_some(),
        };
        if let Some(rule) = limit_rules(&limits).into_iter().next() {
            return Err(PlanError::from_rule(name, rule));
        }
        // In range now: each was parsed from an i32 and is at least its minimum.
        let int = |w: Written, default: i32| {
            w.value()
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(default)
        };
        // Argo's effective count: 0 and unset mean the same; without an interval that is one measurement,
        // with one it is "until terminated".
        let count = match (u32::try_from(int(limits.count, 0)).unwrap_or(0), interval) {
            (0, None) => Some(1),
            (0, Some(_)) => None,
            (n, _) => Some(n),
        };
        let failure_limit = int(limits.failure, 0);
        let inconclusive_limit = int(limits.inconclusive, 0);
        let consecutive_error_limit =
            int(limits.consecutive_error, DEFAULT_CONSECUTIVE_ERROR_LIMIT);
        let consecutive_success_limit = int(limits.consecutive_success, 0);
        Ok(MetricPlan {
            name,
            interval,
            initial_delay,
            count,
            failure_limit,
            inconclusive_limit,
            consecutive_error_limit,
            consecutive_success_limit,
            dry_run,
            retention,
        })
    }
}

/// An IntOrString limit: an int, or (after args substitution) a string holding one.
fn int_value(metric: &str, field: &'static str, value: &IntOrString) -> Result<i32, PlanError> {
    match value {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(text) => {
            if text.contains("{{") {
                return Err(PlanError::UnresolvedArg {
                    metric: metric.to_string(),
                    field,
                    text: text.clone(),
                });
            }
            text.trim()
                .parse::<i32>()
                .map_err(|_| PlanError::NotAnInteger {
                    metric: metric.to_string(),
                    field,
                    text: text.clone(),
                })
        }
    }
}

#[cfg(test)]
mod tests;
