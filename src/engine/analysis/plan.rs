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
        let dry_rules = dry_run
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                compile_rule(format!("dryRun[{i}].metricName"), &rule.metric_name, &names)
            })
            .collect::<Result<Vec<_>, _>>()?;
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
            .map(|m| {
                let dry = dry_rules.iter().any(|re| re.is_match(&m.name));
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
mod tests {
    use super::*;

    fn metric(name: &str) -> Metric {
        Metric {
            name: name.to_string(),
            ..Metric::default()
        }
    }

    fn plan(m: &Metric) -> Result<MetricPlan, PlanError> {
        MetricPlan::from_metric(m, false, DEFAULT_MEASUREMENT_RETENTION)
    }

    #[test]
    fn a_bare_metric_gets_argos_defaults() {
        let p = plan(&metric("m")).unwrap();
        assert_eq!(p.interval, None);
        assert_eq!(p.initial_delay, Duration::ZERO);
        assert_eq!(p.count, Some(1), "no count and no interval measure once");
        assert_eq!(p.failure_limit, 0);
        assert_eq!(p.inconclusive_limit, 0);
        assert_eq!(p.consecutive_error_limit, 4);
        assert_eq!(p.consecutive_success_limit, 0);
        assert_eq!(p.retention, 10);
    }

    #[test]
    fn interval_without_count_runs_until_terminated() {
        let m = Metric {
            interval: Some("5m".into()),
            ..metric("m")
        };
        let p = plan(&m).unwrap();
        assert_eq!(p.count, None);
        assert_eq!(p.interval, Some(Duration::from_secs(300)));
    }

    #[test]
    fn count_zero_means_the_same_as_unset() {
        let m = Metric {
            count: Some(IntOrString::Int(0)),
            ..metric("m")
        };
        assert_eq!(plan(&m).unwrap().count, Some(1));
    }

    #[test]
    fn limits_accept_numeric_strings_left_by_args_substitution() {
        let m = Metric {
            interval: Some("1m".into()),
            count: Some(IntOrString::String("5".into())),
            failure_limit: Some(IntOrString::String(" 3 ".into())),
            consecutive_error_limit: Some(IntOrString::String("2".into())),
            ..metric("m")
        };
        let p = plan(&m).unwrap();
        assert_eq!(
            (p.count, p.failure_limit, p.consecutive_error_limit),
            (Some(5), 3, 2)
        );
    }

    #[test]
    fn a_leftover_placeholder_is_an_error_naming_the_field() {
        let m = Metric {
            failure_limit: Some(IntOrString::String("{{args.limit}}".into())),
            ..metric("m")
        };
        let err = plan(&m).unwrap_err();
        assert_eq!(
            err.to_string(),
            "metric \"m\": failureLimit: \"{{args.limit}}\" still holds an argument placeholder; pass a value for it"
        );
    }

    #[test]
    fn a_limit_that_is_not_a_number_is_an_error() {
        let m = Metric {
            inconclusive_limit: Some(IntOrString::String("three".into())),
            ..metric("m")
        };
        assert!(matches!(
            plan(&m),
            Err(PlanError::NotAnInteger {
                field: "inconclusiveLimit",
                ..
            })
        ));
    }

    #[test]
    fn a_bad_interval_is_an_error_naming_the_field() {
        let m = Metric {
            interval: Some("5 minutes".into()),
            ..metric("m")
        };
        let err = plan(&m).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("metric \"m\": interval: invalid duration"),
            "{err}"
        );
    }

    #[test]
    fn count_above_one_without_interval_is_invalid() {
        let m = Metric {
            count: Some(IntOrString::Int(3)),
            ..metric("m")
        };
        assert_eq!(
            plan(&m),
            Err(PlanError::CountWithoutInterval {
                metric: "m".into(),
                count: 3
            })
        );
    }

    #[test]
    fn failure_limit_minus_one_needs_a_consecutive_success_limit() {
        let m = Metric {
            failure_limit: Some(IntOrString::Int(-1)),
            ..metric("m")
        };
        assert_eq!(
            plan(&m),
            Err(PlanError::NoLimitApplies { metric: "m".into() })
        );
        let m = Metric {
            interval: Some("1m".into()),
            count: Some(IntOrString::Int(5)),
            consecutive_success_limit: Some(IntOrString::Int(3)),
            ..m
        };
        assert_eq!(plan(&m).unwrap().failure_limit, -1);
    }

    #[test]
    fn limits_below_their_minimum_are_rejected() {
        let cases = [
            (
                Metric {
                    failure_limit: Some(IntOrString::Int(-2)),
                    ..metric("m")
                },
                "failureLimit",
            ),
            (
                Metric {
                    consecutive_error_limit: Some(IntOrString::Int(-1)),
                    ..metric("m")
                },
                "consecutiveErrorLimit",
            ),
            (
                Metric {
                    count: Some(IntOrString::Int(-1)),
                    ..metric("m")
                },
                "count",
            ),
        ];
        for (m, expected) in cases {
            assert!(
                matches!(plan(&m), Err(PlanError::TooSmall { field, .. }) if field == expected),
                "{expected}"
            );
        }
    }

    #[test]
    fn count_smaller_than_a_limit_is_rejected() {
        let m = Metric {
            interval: Some("1m".into()),
            count: Some(IntOrString::Int(2)),
            failure_limit: Some(IntOrString::Int(3)),
            ..metric("m")
        };
        assert_eq!(
            plan(&m).unwrap_err().to_string(),
            "metric \"m\": count (2) must be >= failureLimit + consecutiveSuccessLimit (3)"
        );
        // Both limits together must fit in the count, as `validate` requires.
        let both = Metric {
            count: Some(IntOrString::Int(3)),
            failure_limit: Some(IntOrString::Int(2)),
            consecutive_success_limit: Some(IntOrString::Int(2)),
            ..m
        };
        assert!(matches!(
            plan(&both),
            Err(PlanError::CountBelowLimit { limit: 4, .. })
        ));
    }

    #[test]
    fn with_failure_limit_off_the_count_is_held_against_the_consecutive_success_limit_alone() {
        let m = Metric {
            count: Some(IntOrString::Int(1)),
            failure_limit: Some(IntOrString::Int(-1)),
            consecutive_success_limit: Some(IntOrString::Int(2)),
            ..metric("m")
        };
        assert_eq!(
            plan(&m).unwrap_err().to_string(),
            "metric \"m\": count (1) must be >= consecutiveSuccessLimit (2)"
        );
    }

    #[test]
    fn a_single_measurement_metric_may_set_a_failure_limit() {
        let m = Metric {
            failure_limit: Some(IntOrString::Int(3)),
            ..metric("m")
        };
        assert_eq!(plan(&m).unwrap().count, Some(1));
    }

    #[test]
    fn dry_run_and_retention_rules_are_regexes_on_the_name() {
        let metrics = [metric("success-rate"), metric("latency-p99")];
        let plan = AnalysisPlan::from_spec(
            &metrics,
            &[DryRun {
                metric_name: "^lat".into(),
            }],
            &[
                MeasurementRetention {
                    metric_name: ".*".into(),
                    limit: 20,
                },
                MeasurementRetention {
                    metric_name: "rate".into(),
                    limit: 3,
                },
            ],
        )
        .unwrap();
        let summary: Vec<(bool, usize)> = plan
            .metrics
            .iter()
            .map(|m| (m.dry_run, m.retention))
            .collect();
        assert_eq!(summary, [(false, 3), (true, 20)]);
    }

    #[test]
    fn a_rule_that_matches_no_metric_is_an_error() {
        let err = AnalysisPlan::from_spec(
            &[metric("a")],
            &[DryRun {
                metric_name: "b".into(),
            }],
            &[],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "dryRun[0].metricName: \"b\" matches no metric name"
        );
    }

    #[test]
    fn a_rule_that_is_not_a_regex_is_an_error() {
        let err = AnalysisPlan::from_spec(
            &[metric("a")],
            &[],
            &[MeasurementRetention {
                metric_name: "(".into(),
                limit: 1,
            }],
        )
        .unwrap_err();
        assert!(
            matches!(err, PlanError::BadPattern { ref field, .. } if field == "measurementRetention[0].metricName")
        );
    }

    #[test]
    fn limit_rules_leave_what_depends_on_a_placeholder_for_run_time() {
        use Written::{Absent, Placeholder, Value};
        let limits =
            |count, failure, inconclusive, consecutive_success, has_interval| WrittenLimits {
                count,
                failure,
                inconclusive,
                consecutive_error: Absent,
                consecutive_success,
                has_interval,
            };
        let cases = [
            (limits(Value(3), Placeholder, Absent, Absent, true), vec![]),
            (
                limits(Value(3), Value(3), Absent, Value(1), true),
                vec![LimitRule::CountBelowLimits {
                    count: 3,
                    failure: 3,
                    consecutive_success: 1,
                }],
            ),
            (
                limits(Placeholder, Value(9), Value(9), Absent, true),
                vec![],
            ),
            (limits(Absent, Value(-1), Absent, Placeholder, true), vec![]),
            (
                limits(Absent, Value(-1), Absent, Absent, true),
                vec![LimitRule::NoLimitApplies],
            ),
            (
                limits(Value(2), Absent, Value(3), Absent, false),
                vec![
                    LimitRule::CountWithoutInterval { count: 2 },
                    LimitRule::CountBelowInconclusive {
                        count: 2,
                        inconclusive: 3,
                    },
                ],
            ),
            (
                limits(Value(-2), Value(-2), Absent, Absent, true),
                vec![
                    LimitRule::TooSmall {
                        field: "count",
                        value: -2,
                        min: 0,
                    },
                    LimitRule::TooSmall {
                        field: "failureLimit",
                        value: -2,
                        min: -1,
                    },
                ],
            ),
        ];
        for (written, expected) in cases {
            assert_eq!(limit_rules(&written), expected, "{written:?}");
        }
    }

    #[test]
    fn duplicate_names_and_empty_specs_are_rejected() {
        assert_eq!(
            AnalysisPlan::from_spec(&[], &[], &[]),
            Err(PlanError::NoMetrics)
        );
        assert_eq!(
            AnalysisPlan::from_spec(&[metric("a"), metric("a")], &[], &[]),
            Err(PlanError::DuplicateName { metric: "a".into() })
        );
    }
}
