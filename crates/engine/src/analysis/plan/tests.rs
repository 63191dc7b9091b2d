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
    let limits = |count, failure, inconclusive, consecutive_success, has_interval| WrittenLimits {
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
