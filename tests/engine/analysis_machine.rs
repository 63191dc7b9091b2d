//! The analysis state machine against Argo Rollouts' rules: counters, limits and their messages, scheduling,
//! termination, run phase, dry-run, retention, restore from status, and whole simulated runs.

use canaryd::api::{
    AnalysisPhase, AnalysisRunStatus, DryRun, Measurement, MeasurementRetention, Metric,
};
use canaryd::engine::analysis::{
    AnalysisPlan, Assessment, UnknownMetric, assess, due, next_wakeup, record, start, step,
    terminated, to_terminate,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use AnalysisPhase::{Error, Failed, Inconclusive, Pending, Running, Successful};

/// Seconds after the run starts.
fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn secs(t: Timestamp) -> i64 {
    t.as_second() - 1_700_000_000
}

fn metric(name: &str) -> Metric {
    Metric {
        name: name.to_string(),
        ..Metric::default()
    }
}

/// A metric measured `count` times `interval` apart (either may be left out).
fn every(name: &str, interval: Option<&str>, count: Option<i32>) -> Metric {
    Metric {
        interval: interval.map(str::to_string),
        count: count.map(IntOrString::Int),
        ..metric(name)
    }
}

fn limit(n: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(n))
}

fn plan(metrics: &[Metric]) -> AnalysisPlan {
    AnalysisPlan::from_spec(metrics, &[], &[]).unwrap()
}

fn measured(phase: AnalysisPhase, finished: i64) -> Measurement {
    Measurement {
        phase,
        message: None,
        started_at: Some(Time(at(finished))),
        finished_at: Some(Time(at(finished))),
        value: None,
        metadata: None,
        resume_at: None,
    }
}

fn result<'a>(status: &'a AnalysisRunStatus, name: &str) -> &'a canaryd::api::MetricResult {
    status
        .metric_results
        .as_ref()
        .and_then(|rs| rs.iter().find(|r| r.name == name))
        .unwrap()
}

/// Starts a run at 0 and records `phases` for metric 0, one per second, assessing after each.
fn feed(plan: &AnalysisPlan, phases: &[AnalysisPhase]) -> (AnalysisRunStatus, Assessment) {
    let mut status = start(plan, at(0));
    let mut last = assess(plan, &mut status, at(0), false);
    for (i, phase) in phases.iter().enumerate() {
        let t = i as i64 + 1;
        record(plan, &mut status, 0, measured(*phase, t), at(t)).unwrap();
        last = assess(plan, &mut status, at(t), false);
    }
    (status, last)
}

/// Drives a run over a virtual clock: measure what is due, jump to the next wake-up, until the run completes.
/// `source` gives each measurement's phase; the run is terminated from `terminate_at` on. Returns every
/// measurement as (seconds, metric, phase) and the final status.
fn simulate(
    plan: &AnalysisPlan,
    terminate_at: Option<i64>,
    mut source: impl FnMut(&str, usize) -> AnalysisPhase,
) -> (
    Vec<(i64, String, AnalysisPhase)>,
    AnalysisRunStatus,
    Assessment,
) {
    let mut status = AnalysisRunStatus::default();
    let mut log = Vec::new();
    let mut now = at(0);
    let mut taken = std::collections::HashMap::<String, usize>::new();
    for _ in 0..1000 {
        let terminate = terminate_at.is_some_and(|t| secs(now) >= t);
        let a = step(plan, &mut status, now, terminate, |_, p, now| {
            let n = taken.entry(p.name.clone()).or_default();
            let phase = source(&p.name, *n);
            *n += 1;
            log.push((secs(now), p.name.clone(), phase));
            measured(phase, secs(now))
        });
        if a.is_complete() {
            return (log, status, a);
        }
        let next = a
            .next_wakeup
            .expect("a running analysis has a next wake-up");
        assert!(next > now, "time moves forward");
        now = match terminate_at.map(at) {
            Some(t) if t < next && t > now => t,
            _ => next,
        };
    }
    panic!("the simulated run did not complete");
}

mod counters {
    use super::*;

    #[test]
    fn successful_failed_and_inconclusive_each_use_up_count() {
        let p = plan(&[Metric {
            failure_limit: limit(5),
            inconclusive_limit: limit(5),
            ..every("m", Some("1s"), Some(10))
        }]);
        let (status, _) = feed(&p, &[Successful, Failed, Inconclusive, Successful]);
        let r = result(&status, "m");
        assert_eq!(
            (r.count, r.successful, r.failed, r.inconclusive, r.error),
            (4, 2, 1, 1, 0)
        );
    }

    #[test]
    fn error_does_not_use_up_count() {
        let p = plan(&[every("m", Some("1s"), Some(2))]);
        let (status, a) = feed(&p, &[Error, Error, Successful]);
        let r = result(&status, "m");
        assert_eq!((r.count, r.error, r.consecutive_error), (1, 2, 0));
        assert_eq!(a.phase, Running, "one of two measurements is still to come");
    }

    #[test]
    fn consecutive_error_resets_on_any_non_error() {
        for other in [Successful, Failed, Inconclusive] {
            let p = plan(&[Metric {
                failure_limit: limit(9),
                inconclusive_limit: limit(9),
                ..every("m", Some("1s"), None)
            }]);
            let (status, _) = feed(&p, &[Error, Error, other, Error]);
            let r = result(&status, "m");
            assert_eq!((r.error, r.consecutive_error), (3, 1), "after {other}");
        }
    }

    #[test]
    fn consecutive_success_resets_on_anything_but_successful() {
        for other in [Failed, Inconclusive, Error] {
            let p = plan(&[Metric {
                failure_limit: limit(9),
                inconclusive_limit: limit(9),
                ..every("m", Some("1s"), None)
            }]);
            let (status, _) = feed(&p, &[Successful, Successful, other, Successful]);
            assert_eq!(result(&status, "m").consecutive_success, 1, "after {other}");
        }
    }

    #[test]
    fn record_rejects_a_metric_the_plan_does_not_have() {
        let p = plan(&[metric("m")]);
        let mut status = start(&p, at(0));
        assert_eq!(
            record(&p, &mut status, 3, measured(Successful, 1), at(1)),
            Err(UnknownMetric(3))
        );
    }

    #[test]
    fn record_fills_missing_timestamps_with_now() {
        let p = plan(&[metric("m")]);
        let mut status = start(&p, at(0));
        let bare = Measurement {
            started_at: None,
            finished_at: None,
            ..measured(Successful, 0)
        };
        record(&p, &mut status, 0, bare, at(7)).unwrap();
        let m = &result(&status, "m").measurements[0];
        assert_eq!(
            (m.started_at.clone(), m.finished_at.clone()),
            (Some(Time(at(7))), Some(Time(at(7))))
        );
    }
}

mod limits {
    use super::*;

    #[test]
    fn failure_limit_is_exceeded_only_by_one_more_failure() {
        let p = plan(&[Metric {
            failure_limit: limit(3),
            ..every("x", Some("1s"), None)
        }]);
        let (_, a) = feed(&p, &[Failed, Failed, Failed]);
        assert_eq!(a.phase, Running);
        let (status, a) = feed(&p, &[Failed, Failed, Failed, Failed]);
        assert_eq!(a.phase, Failed);
        assert_eq!(result(&status, "x").phase, Failed);
        assert_eq!(
            a.message.as_deref(),
            Some("Metric \"x\" assessed Failed due to failed (4) > failureLimit (3)")
        );
    }

    #[test]
    fn the_default_failure_limit_fails_on_the_first_failure() {
        let p = plan(&[every("x", Some("1s"), Some(5))]);
        let (_, a) = feed(&p, &[Successful, Failed]);
        assert_eq!(a.phase, Failed);
    }

    #[test]
    fn failure_limit_minus_one_never_fails_on_failures() {
        let p = plan(&[Metric {
            failure_limit: limit(-1),
            consecutive_success_limit: limit(3),
            ..every("x", Some("1s"), None)
        }]);
        let (_, a) = feed(&p, &[Failed; 20]);
        assert_eq!(a.phase, Running);
    }

    #[test]
    fn inconclusive_limit_is_exceeded_by_the_first_inconclusive_by_default() {
        let p = plan(&[every("x", Some("1s"), Some(5))]);
        let (_, a) = feed(&p, &[Inconclusive]);
        assert_eq!(a.phase, Inconclusive);
        assert_eq!(
            a.message.as_deref(),
            Some(
                "Metric \"x\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0)"
            )
        );
    }

    #[test]
    fn the_fifth_error_in_a_row_ends_the_metric_in_error_with_the_providers_message() {
        let p = plan(&[every("x", Some("1m"), None)]);
        let (_, a) = feed(&p, &[Error; 4]);
        assert_eq!(a.phase, Running);

        let mut status = start(&p, at(0));
        for t in 1..=5 {
            let m = Measurement {
                message: Some("connection refused".into()),
                ..measured(Error, t)
            };
            record(&p, &mut status, 0, m, at(t)).unwrap();
        }
        let a = assess(&p, &mut status, at(5), false);
        assert_eq!(a.phase, Error);
        assert_eq!(
            a.message.as_deref(),
            Some(
                "Metric \"x\" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4): \"Error Message: connection refused\""
            )
        );
        assert_eq!(
            result(&status, "x").message.as_deref(),
            Some("connection refused")
        );
    }

    #[test]
    fn consecutive_success_limit_succeeds_when_the_streak_reaches_it() {
        let p = plan(&[Metric {
            failure_limit: limit(5),
            consecutive_success_limit: limit(3),
            ..every("x", Some("1s"), None)
        }]);
        let (_, a) = feed(
            &p,
            &[Successful, Successful, Failed, Successful, Successful],
        );
        assert_eq!(a.phase, Running);
        let (status, a) = feed(
            &p,
            &[Successful, Failed, Successful, Successful, Successful],
        );
        assert_eq!(a.phase, Successful);
        assert_eq!(result(&status, "x").count, 5);
    }

    #[test]
    fn reaching_count_succeeds_when_no_consecutive_success_limit_is_set() {
        let p = plan(&[Metric {
            failure_limit: limit(2),
            ..every("x", Some("1s"), Some(3))
        }]);
        let (_, a) = feed(&p, &[Failed, Successful, Failed]);
        assert_eq!((a.phase, a.message), (Successful, None));
    }

    #[test]
    fn reaching_count_without_the_streak_fails_when_failure_limit_is_off() {
        let p = plan(&[Metric {
            failure_limit: limit(-1),
            consecutive_success_limit: limit(3),
            ..every("x", Some("1s"), Some(4))
        }]);
        let (_, a) = feed(&p, &[Successful, Successful, Failed, Successful]);
        assert_eq!(a.phase, Failed);
        assert_eq!(
            a.message.as_deref(),
            Some(
                "Metric \"x\" assessed Failed due to count (4) reached with consecutiveSuccess (1) < consecutiveSuccessLimit (3)"
            )
        );
    }

    #[test]
    fn reaching_count_without_the_streak_is_inconclusive_when_both_limits_apply() {
        let p = plan(&[Metric {
            failure_limit: limit(2),
            consecutive_success_limit: limit(3),
            ..every("x", Some("1s"), Some(5))
        }]);
        let (_, a) = feed(&p, &[Successful, Failed, Successful, Successful, Failed]);
        assert_eq!(a.phase, Inconclusive);
    }

    /// A sequential comparison undecided at every look (for instance on traffic too sparse for any verdict)
    /// under the limits of the shipped templates: `progressive-sync-gate-vs-baseline` (failureLimit 0,
    /// inconclusiveLimit = count) ends Successful, as in Argo; `error-rate-vs-baseline` adds
    /// consecutiveSuccessLimit 1 and so ends Inconclusive, waiting for a person (docs/providers.md).
    #[test]
    fn undecided_to_the_count_succeeds_unless_a_success_streak_is_required() {
        let gate = plan(&[Metric {
            failure_limit: limit(0),
            inconclusive_limit: limit(4),
            ..every("x", Some("1s"), Some(4))
        }]);
        let (status, a) = feed(&gate, &[Inconclusive; 4]);
        assert_eq!((a.phase, a.message), (Successful, None));
        assert_eq!(result(&status, "x").inconclusive, 4);
        let compare = plan(&[Metric {
            failure_limit: limit(0),
            consecutive_success_limit: limit(1),
            inconclusive_limit: limit(4),
            ..every("x", Some("1s"), Some(4))
        }]);
        let (_, a) = feed(&compare, &[Inconclusive; 4]);
        assert_eq!(a.phase, Inconclusive);
        assert_eq!(
            a.message.as_deref(),
            Some(
                "Metric \"x\" assessed Inconclusive due to count (4) reached with consecutiveSuccess (0) < consecutiveSuccessLimit (1)"
            )
        );
    }
}

mod scheduling {
    use super::*;

    #[test]
    fn the_first_measurement_waits_for_the_initial_delay() {
        let p = plan(&[Metric {
            initial_delay: Some("30s".into()),
            ..metric("m")
        }]);
        let status = start(&p, at(0));
        assert!(due(&p, &status, at(29), false).is_empty());
        assert_eq!(due(&p, &status, at(30), false), [0]);
        let mut status = status;
        assert_eq!(
            assess(&p, &mut status, at(0), false).next_wakeup,
            Some(at(30))
        );
    }

    #[test]
    fn the_next_measurement_is_an_interval_after_the_previous_one_finished() {
        let p = plan(&[every("m", Some("1m"), Some(3))]);
        let mut status = start(&p, at(0));
        let slow = Measurement {
            started_at: Some(Time(at(0))),
            ..measured(Successful, 5)
        };
        record(&p, &mut status, 0, slow, at(5)).unwrap();
        let a = assess(&p, &mut status, at(5), false);
        assert_eq!(a.next_wakeup, Some(at(65)));
        assert!(due(&p, &status, at(64), false).is_empty());
        assert_eq!(due(&p, &status, at(65), false), [0]);
    }

    #[test]
    fn an_error_is_retried_ten_seconds_later_whatever_the_interval() {
        let p = plan(&[every("m", Some("5m"), Some(3))]);
        let mut status = start(&p, at(0));
        record(&p, &mut status, 0, measured(Error, 0), at(0)).unwrap();
        assert_eq!(
            assess(&p, &mut status, at(0), false).next_wakeup,
            Some(at(10))
        );
        record(&p, &mut status, 0, measured(Successful, 10), at(10)).unwrap();
        assert_eq!(
            assess(&p, &mut status, at(10), false).next_wakeup,
            Some(at(310))
        );
    }

    #[test]
    fn a_single_measurement_metric_also_retries_an_error() {
        let p = plan(&[metric("m")]);
        let (log, status, a) = simulate(&p, None, |_, n| if n == 0 { Error } else { Successful });
        assert_eq!(log, [(0, "m".into(), Error), (10, "m".into(), Successful)]);
        assert_eq!((a.phase, result(&status, "m").count), (Successful, 1));
    }

    #[test]
    fn without_count_or_interval_exactly_one_measurement_is_taken() {
        let p = plan(&[metric("m")]);
        let (log, _, a) = simulate(&p, None, |_, _| Successful);
        assert_eq!(log, [(0, "m".into(), Successful)]);
        assert_eq!((a.phase, a.next_wakeup), (Successful, None));
    }

    #[test]
    fn an_in_flight_measurement_is_resumed_at_its_resume_at_and_then_replaced() {
        let p = plan(&[metric("job")]);
        let mut status = start(&p, at(0));
        let running = Measurement {
            finished_at: None,
            resume_at: Some(Time(at(20))),
            ..measured(Running, 0)
        };
        record(&p, &mut status, 0, running, at(0)).unwrap();
        let a = assess(&p, &mut status, at(0), false);
        assert_eq!((a.phase, a.next_wakeup), (Running, Some(at(20))));
        assert_eq!(result(&status, "job").phase, Running);
        assert!(due(&p, &status, at(19), false).is_empty());
        assert_eq!(due(&p, &status, at(20), false), [0]);
        assert_eq!(
            result(&status, "job").count,
            0,
            "an in-flight measurement counts nothing"
        );

        record(&p, &mut status, 0, measured(Successful, 20), at(20)).unwrap();
        let a = assess(&p, &mut status, at(20), false);
        let r = result(&status, "job");
        assert_eq!((r.measurements.len(), r.count, a.phase), (1, 1, Successful));
    }

    #[test]
    fn the_next_wakeup_is_the_earliest_due_time_among_unfinished_metrics() {
        let p = plan(&[
            every("slow", Some("5m"), None),
            Metric {
                initial_delay: Some("2m".into()),
                ..every("late", Some("1m"), None)
            },
            metric("once"),
        ]);
        let mut status = start(&p, at(0));
        assert_eq!(due(&p, &status, at(0), false), [0, 2]);
        record(&p, &mut status, 0, measured(Successful, 0), at(0)).unwrap();
        record(&p, &mut status, 2, measured(Successful, 0), at(0)).unwrap();
        let a = assess(&p, &mut status, at(0), false);
        assert_eq!(result(&status, "once").phase, Successful);
        assert_eq!(a.next_wakeup, Some(at(120)));
    }

    #[test]
    fn the_next_wakeup_read_from_a_stored_status_is_the_one_assess_returned() {
        let p = plan(&[every("m", Some("10s"), Some(2))]);
        let mut status = start(&p, at(0));
        assert_eq!(next_wakeup(&p, &status, at(5)), Some(at(0)));
        record(&p, &mut status, 0, measured(Successful, 1), at(1)).unwrap();
        let a = assess(&p, &mut status, at(1), false);
        // A restarted daemon, reading only the status, wakes when the running one planned to.
        assert_eq!(next_wakeup(&p, &status, at(7)), a.next_wakeup);
        assert_eq!(a.next_wakeup, Some(at(11)));
        record(&p, &mut status, 0, measured(Successful, 11), at(11)).unwrap();
        assess(&p, &mut status, at(11), false);
        assert_eq!(next_wakeup(&p, &status, at(11)), None);
    }
}

mod termination {
    use super::*;

    #[test]
    fn terminating_ends_unfinished_metrics_successful_and_says_so() {
        let p = plan(&[
            every("bg", Some("1m"), None),
            every("waiting", Some("1m"), None),
        ]);
        let mut status = start(&p, at(0));
        record(&p, &mut status, 0, measured(Successful, 0), at(0)).unwrap();
        assess(&p, &mut status, at(0), false);
        assert!(
            due(&p, &status, at(60), true).is_empty(),
            "no new measurements"
        );
        let a = assess(&p, &mut status, at(60), true);
        assert_eq!(
            (a.phase, a.message.as_deref(), a.next_wakeup),
            (Successful, Some("Run Terminated"), None)
        );
        assert_eq!(
            result(&status, "waiting").phase,
            Successful,
            "even without a measurement"
        );
        assert_eq!(status.completed_at, Some(Time(at(60))));
    }

    #[test]
    fn a_run_terminated_before_any_measurement_is_successful() {
        let p = plan(&[Metric {
            initial_delay: Some("5m".into()),
            ..metric("m")
        }]);
        let mut status = start(&p, at(0));
        let a = assess(&p, &mut status, at(10), true);
        assert_eq!(a.phase, Successful);
        assert!(result(&status, "m").measurements.is_empty());
    }

    #[test]
    fn a_terminated_run_stops_its_in_flight_measurement_before_it_ends_and_it_ends_inconclusive() {
        let p = plan(&[metric("job")]);
        let mut status = start(&p, at(0));
        let running = Measurement {
            finished_at: None,
            resume_at: Some(Time(at(100))),
            ..measured(Running, 0)
        };
        record(&p, &mut status, 0, running, at(0)).unwrap();
        // Terminating: the measurement is the provider's to stop first, whatever its resumeAt.
        let a = assess(&p, &mut status, at(30), true);
        assert_eq!((a.phase, a.next_wakeup), (Running, Some(at(30))));
        assert_eq!(result(&status, "job").measurements[0].phase, Running);
        assert!(due(&p, &status, at(30), true).is_empty(), "nothing new");
        assert_eq!(to_terminate(&p, &status, true), [0]);
        assert!(to_terminate(&p, &status, false).is_empty());

        let flying = result(&status, "job").measurements[0].clone();
        record(
            &p,
            &mut status,
            0,
            terminated(flying, Ok(()), at(31)),
            at(31),
        )
        .unwrap();
        let a = assess(&p, &mut status, at(31), true);
        let r = result(&status, "job");
        let m = &r.measurements[0];
        assert_eq!(
            (m.phase, m.message.as_deref(), m.finished_at.clone()),
            (Inconclusive, Some("Metric Terminated"), Some(Time(at(31))))
        );
        assert_eq!((r.measurements.len(), r.count, r.inconclusive), (1, 1, 1));
        // Argo since #4602: a Job cut short proved nothing.
        assert_eq!(a.phase, Inconclusive);
        assert_eq!(
            a.message.as_deref(),
            Some(
                "Metric \"job\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0): \"Error Message: Metric Terminated\""
            )
        );
    }

    #[test]
    fn a_measurement_its_provider_could_not_stop_ends_error_with_why() {
        let flying = Measurement {
            finished_at: None,
            ..measured(Running, 0)
        };
        let m = terminated(flying, Err("jobs.batch is forbidden".into()), at(5));
        assert_eq!(
            (m.phase, m.message.as_deref(), m.finished_at),
            (Error, Some("jobs.batch is forbidden"), Some(Time(at(5))))
        );
    }

    #[test]
    fn a_metric_failing_while_another_is_in_flight_ends_the_run_only_after_that_one_is_stopped() {
        let p = plan(&[metric("prom"), metric("job")]);
        let mut status = start(&p, at(0));
        let running = Measurement {
            finished_at: None,
            resume_at: Some(Time(at(100))),
            ..measured(Running, 0)
        };
        record(&p, &mut status, 1, running, at(0)).unwrap();
        record(&p, &mut status, 0, measured(Failed, 0), at(0)).unwrap();
        let a = assess(&p, &mut status, at(0), false);
        assert_eq!((a.phase, a.next_wakeup), (Running, Some(at(0))));
        let a = step(&p, &mut status, at(1), false, |_, _, _| {
            unreachable!("nothing new is measured")
        });
        assert_eq!(result(&status, "job").phase, Inconclusive);
        assert_eq!((a.phase, a.next_wakeup), (Failed, None));
    }

    #[test]
    fn a_terminated_run_keeps_a_failure_it_already_had() {
        let p = plan(&[every("x", Some("1s"), None)]);
        let (mut status, _) = feed(&p, &[Failed]);
        let a = assess(&p, &mut status, at(5), true);
        assert_eq!(a.phase, Failed);
        assert_eq!(
            a.message.as_deref(),
            Some("Metric \"x\" assessed Failed due to failed (1) > failureLimit (0)")
        );
    }
}

mod run_phase {
    use super::*;

    /// Two single-measurement metrics with the given measurement phases (limits high enough not to trip).
    fn pair(first: AnalysisPhase, second: AnalysisPhase) -> AnalysisPhase {
        let p = plan(&[metric("a"), metric("b")]);
        let mut status = start(&p, at(0));
        record(&p, &mut status, 0, measured(first, 0), at(0)).unwrap();
        record(&p, &mut status, 1, measured(second, 0), at(0)).unwrap();
        assess(&p, &mut status, at(0), false).phase
    }

    #[test]
    fn the_worst_metric_decides_the_run() {
        let table = [
            (Successful, Successful, Successful),
            (Successful, Inconclusive, Inconclusive),
            (Inconclusive, Failed, Failed),
            (Failed, Inconclusive, Failed),
            (Successful, Failed, Failed),
        ];
        for (a, b, run) in table {
            assert_eq!(pair(a, b), run, "{a} + {b}");
        }
    }

    #[test]
    fn error_is_worse_than_inconclusive_and_better_than_failed() {
        let erroring = Metric {
            consecutive_error_limit: limit(0),
            ..metric("e")
        };
        for (other, run) in [(Inconclusive, Error), (Failed, Failed)] {
            let p = plan(&[erroring.clone(), metric("o")]);
            let mut status = start(&p, at(0));
            record(&p, &mut status, 0, measured(Error, 0), at(0)).unwrap();
            record(&p, &mut status, 1, measured(other, 0), at(0)).unwrap();
            assert_eq!(
                assess(&p, &mut status, at(0), false).phase,
                run,
                "error + {other}"
            );
        }
    }

    #[test]
    fn the_run_is_running_while_any_metric_is_unfinished() {
        let p = plan(&[metric("a"), every("b", Some("1m"), Some(2))]);
        let mut status = start(&p, at(0));
        assert_eq!(status.phase, Some(Running));
        assert_eq!(result(&status, "a").phase, Pending);
        record(&p, &mut status, 0, measured(Successful, 0), at(0)).unwrap();
        record(&p, &mut status, 1, measured(Successful, 0), at(0)).unwrap();
        let a = assess(&p, &mut status, at(0), false);
        assert_eq!((a.phase, a.message), (Running, None));
    }

    #[test]
    fn a_failed_metric_stops_the_others_and_they_end_successful() {
        let p = plan(&[
            every("bad", Some("1m"), None),
            every("good", Some("1m"), None),
        ]);
        let mut status = start(&p, at(0));
        record(&p, &mut status, 0, measured(Failed, 0), at(0)).unwrap();
        record(&p, &mut status, 1, measured(Successful, 0), at(0)).unwrap();
        let a = assess(&p, &mut status, at(0), false);
        assert_eq!((a.phase, a.next_wakeup), (Failed, None));
        assert_eq!(result(&status, "good").phase, Successful);
        assert!(due(&p, &status, at(60), false).is_empty());
    }

    #[test]
    fn a_dry_run_metric_is_reported_but_never_decides_the_run() {
        let metrics = [every("real", Some("1m"), Some(2)), metric("trial")];
        let p = AnalysisPlan::from_spec(
            &metrics,
            &[DryRun {
                metric_name: "trial".into(),
            }],
            &[],
        )
        .unwrap();
        let mut status = start(&p, at(0));
        record(&p, &mut status, 1, measured(Failed, 0), at(0)).unwrap();
        record(&p, &mut status, 0, measured(Successful, 0), at(0)).unwrap();
        let a = assess(&p, &mut status, at(0), false);
        assert_eq!(a.phase, Running, "a dry-run failure does not stop the run");
        let trial = result(&status, "trial");
        assert!(trial.dry_run);
        assert_eq!(trial.phase, Failed);
        assert_eq!(
            trial.message.as_deref(),
            Some("Metric assessed Failed due to failed (1) > failureLimit (0)")
        );
        assert_eq!(due(&p, &status, at(60), false), [0]);
        record(&p, &mut status, 0, measured(Successful, 60), at(60)).unwrap();
        let a = assess(&p, &mut status, at(60), false);
        assert_eq!((a.phase, a.message), (Successful, None));
        let dry = status.dry_run_summary.clone().unwrap();
        assert_eq!((dry.count, dry.failed, dry.successful), (1, 1, 0));
        let real = status.run_summary.clone().unwrap();
        assert_eq!((real.count, real.successful, real.failed), (1, 1, 0));
    }

    #[test]
    fn a_run_of_only_dry_run_metrics_is_successful_when_they_complete() {
        let p = AnalysisPlan::from_spec(
            &[metric("a"), metric("b")],
            &[DryRun {
                metric_name: ".*".into(),
            }],
            &[],
        )
        .unwrap();
        let mut status = start(&p, at(0));
        record(&p, &mut status, 0, measured(Failed, 0), at(0)).unwrap();
        assert_eq!(assess(&p, &mut status, at(0), false).phase, Running);
        record(&p, &mut status, 1, measured(Error, 0), at(0)).unwrap();
        // An error is retried, so b is still running after one.
        assert_eq!(assess(&p, &mut status, at(0), false).phase, Running);
        record(&p, &mut status, 1, measured(Inconclusive, 10), at(10)).unwrap();
        assert_eq!(assess(&p, &mut status, at(10), false).phase, Successful);
    }

    #[test]
    fn the_run_summary_counts_metric_phases() {
        let p = plan(&[
            metric("ok"),
            Metric {
                inconclusive_limit: limit(1),
                ..metric("meh")
            },
            every("later", Some("1m"), Some(3)),
        ]);
        let mut status = start(&p, at(0));
        record(&p, &mut status, 0, measured(Successful, 0), at(0)).unwrap();
        record(&p, &mut status, 1, measured(Inconclusive, 0), at(0)).unwrap();
        assess(&p, &mut status, at(0), false);
        let s = status.run_summary.clone().unwrap();
        assert_eq!(
            (s.count, s.successful, s.failed, s.inconclusive, s.error),
            (3, 2, 0, 0, 0)
        );
    }
}

mod retention {
    use super::*;

    #[test]
    fn status_keeps_the_last_measurements_while_counters_keep_totals() {
        let metrics = [Metric {
            failure_limit: limit(-1),
            consecutive_success_limit: limit(50),
            ..every("m", Some("1s"), None)
        }];
        let p = AnalysisPlan::from_spec(
            &metrics,
            &[],
            &[MeasurementRetention {
                metric_name: "m".into(),
                limit: 3,
            }],
        )
        .unwrap();
        let (status, _) = feed(&p, &[Failed, Failed, Successful, Failed, Successful]);
        let r = result(&status, "m");
        let kept: Vec<i64> = r
            .measurements
            .iter()
            .map(|m| secs(m.finished_at.clone().unwrap().0))
            .collect();
        assert_eq!(kept, [3, 4, 5]);
        assert_eq!((r.count, r.failed, r.successful), (5, 3, 2));
    }

    #[test]
    fn ten_measurements_are_kept_by_default() {
        let p = plan(&[every("m", Some("1s"), None)]);
        let (status, _) = feed(&p, &[Successful; 25]);
        let r = result(&status, "m");
        assert_eq!((r.measurements.len(), r.count), (10, 25));
    }

    #[test]
    fn a_full_history_takes_the_next_measurement_without_growing_its_buffer() {
        // The daemon steps a copy of each stored status (exactly as long as its history): recording into a full
        // history must not double its buffer, tens of thousands of copies being held at once.
        let p = plan(&[every("m", Some("1s"), None)]);
        let (status, _) = feed(&p, &[Successful; 10]);
        let mut copy = status.clone();
        assert_eq!(result(&copy, "m").measurements.capacity(), 10);
        record(&p, &mut copy, 0, measured(Successful, 11), at(11)).unwrap();
        let r = result(&copy, "m");
        assert_eq!((r.measurements.len(), r.measurements.capacity()), (10, 10));
        assert_eq!(
            r.measurements.last().and_then(|m| m.finished_at.clone()),
            Some(Time(at(11)))
        );
    }
}

mod restore {
    use super::*;

    fn source(_: &str, n: usize) -> AnalysisPhase {
        [
            Successful, Error, Failed, Successful, Successful, Failed, Successful,
        ][n % 7]
    }

    fn template() -> AnalysisPlan {
        plan(&[Metric {
            failure_limit: limit(3),
            ..every("m", Some("1m"), Some(5))
        }])
    }

    #[test]
    fn a_status_restored_from_json_continues_exactly_like_an_uninterrupted_run() {
        let p = template();
        let (expected_log, expected_status, expected) = simulate(&p, None, source);

        // Same run, but the daemon "restarts" after the third measurement.
        let mut status = AnalysisRunStatus::default();
        let mut now = at(0);
        let mut n = 0;
        let mut log = Vec::new();
        loop {
            let a = step(&p, &mut status, now, false, |_, p, now| {
                let phase = source(&p.name, n);
                n += 1;
                log.push((secs(now), p.name.clone(), phase));
                measured(phase, secs(now))
            });
            // The metric source is the outside world: it goes on regardless; the daemon keeps only the status.
            if log.len() == 3 {
                let json = serde_json::to_string(&status).unwrap();
                status = serde_json::from_str(&json).unwrap();
            }
            if a.is_complete() {
                assert_eq!(a, expected);
                break;
            }
            now = a.next_wakeup.unwrap();
        }
        assert_eq!(log, expected_log);
        assert_eq!(status, expected_status);
    }

    #[test]
    fn a_restarted_daemon_neither_repeats_nor_skips_a_measurement() {
        let p = template();
        let mut status = start(&p, at(0));
        record(&p, &mut status, 0, measured(Successful, 0), at(0)).unwrap();
        assess(&p, &mut status, at(0), false);
        let restored: AnalysisRunStatus =
            serde_json::from_value(serde_json::to_value(&status).unwrap()).unwrap();
        // Restarting 30 s later: nothing is due until a minute after the last measurement.
        assert!(due(&p, &restored, at(30), false).is_empty());
        let mut restored = restored;
        assert_eq!(
            assess(&p, &mut restored, at(30), false).next_wakeup,
            Some(at(60))
        );
        // Restarting late: the overdue measurement is taken once, right away.
        assert_eq!(due(&p, &restored, at(200), false), [0]);
    }

    #[test]
    fn scheduling_survives_measurements_trimmed_by_retention() {
        let metrics = [every("m", Some("1m"), Some(6))];
        let p = AnalysisPlan::from_spec(
            &metrics,
            &[],
            &[MeasurementRetention {
                metric_name: "m".into(),
                limit: 1,
            }],
        )
        .unwrap();
        let (log, status, a) = simulate(&p, None, |_, n| if n == 2 { Error } else { Successful });
        let times: Vec<i64> = log.iter().map(|(t, _, _)| *t).collect();
        assert_eq!(times, [0, 60, 120, 130, 190, 250, 310]);
        let r = result(&status, "m");
        assert_eq!(
            (r.measurements.len(), r.count, r.error, a.phase),
            (1, 6, 1, Successful)
        );
    }

    #[test]
    fn a_completed_run_stays_as_it_is() {
        let p = plan(&[metric("m")]);
        let (mut status, a) = feed(&p, &[Failed]);
        let before = status.clone();
        assert!(due(&p, &status, at(100), false).is_empty());
        assert_eq!(
            assess(&p, &mut status, at(100), true),
            Assessment {
                next_wakeup: None,
                ..a
            }
        );
        assert_eq!(status, before);
    }

    #[test]
    fn a_status_written_by_argo_without_pending_results_is_completed_in_plan_order() {
        let p = plan(&[metric("a"), metric("b")]);
        let mut status = AnalysisRunStatus {
            started_at: Some(Time(at(0))),
            ..AnalysisRunStatus::default()
        };
        assert_eq!(due(&p, &status, at(0), false), [0, 1]);
        record(&p, &mut status, 1, measured(Successful, 0), at(0)).unwrap();
        assess(&p, &mut status, at(0), false);
        let names: Vec<&str> = status
            .metric_results
            .as_ref()
            .unwrap()
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(names, ["b", "a"], "existing results keep their place");
        assert_eq!(status.started_at, Some(Time(at(0))));
    }
}

mod simulation {
    use super::*;

    fn times(log: &[(i64, String, AnalysisPhase)]) -> Vec<i64> {
        log.iter().map(|(t, _, _)| *t).collect()
    }

    #[test]
    fn count_five_every_minute_with_failure_limit_three() {
        let p = plan(&[Metric {
            failure_limit: limit(3),
            ..every("success-rate", Some("1m"), Some(5))
        }]);
        let (log, status, a) = simulate(
            &p,
            None,
            |_, n| if n % 2 == 0 { Failed } else { Successful },
        );
        assert_eq!(times(&log), [0, 60, 120, 180, 240]);
        assert_eq!(
            a.phase, Successful,
            "3 failures do not exceed failureLimit 3"
        );
        let r = result(&status, "success-rate");
        assert_eq!((r.count, r.failed, r.successful), (5, 3, 2));
        assert_eq!(status.completed_at, Some(Time(at(240))));

        let (log, _, a) = simulate(&p, None, |_, n| if n == 1 { Successful } else { Failed });
        assert_eq!(times(&log), [0, 60, 120, 180, 240]);
        assert_eq!(
            a.message.as_deref(),
            Some("Metric \"success-rate\" assessed Failed due to failed (4) > failureLimit (3)")
        );
    }

    #[test]
    fn an_indefinite_background_analysis_runs_until_terminated() {
        let p = plan(&[Metric {
            failure_limit: limit(3),
            ..every("bg", Some("5m"), None)
        }]);
        let (log, status, a) = simulate(&p, Some(1000), |_, _| Successful);
        assert_eq!(times(&log), [0, 300, 600, 900]);
        assert_eq!(
            (a.phase, a.message.as_deref()),
            (Successful, Some("Run Terminated"))
        );
        assert_eq!(status.completed_at, Some(Time(at(1000))));
    }

    #[test]
    fn consecutive_success_limit_three_with_failure_limit_off() {
        let p = plan(&[Metric {
            failure_limit: limit(-1),
            consecutive_success_limit: limit(3),
            ..every("streak", Some("30s"), Some(10))
        }]);
        let phases = [
            Failed, Successful, Successful, Error, Successful, Successful, Successful,
        ];
        let (log, status, a) = simulate(&p, None, |_, n| phases[n]);
        assert_eq!(times(&log), [0, 30, 60, 90, 100, 130, 160]);
        assert_eq!(a.phase, Successful);
        let r = result(&status, "streak");
        assert_eq!((r.count, r.consecutive_success, r.error), (6, 3, 1));
    }

    #[test]
    fn of_two_metrics_the_one_that_fails_first_ends_the_run() {
        let p = plan(&[
            Metric {
                failure_limit: limit(1),
                ..every("errors", Some("1m"), Some(10))
            },
            Metric {
                initial_delay: Some("30s".into()),
                ..every("latency", Some("2m"), Some(10))
            },
        ]);
        let (log, status, a) = simulate(&p, None, |name, n| match name {
            "errors" if n >= 2 => Failed,
            _ => Successful,
        });
        let expected: Vec<(i64, String, AnalysisPhase)> = [
            (0, "errors", Successful),
            (30, "latency", Successful),
            (60, "errors", Successful),
            (120, "errors", Failed),
            (150, "latency", Successful),
            (180, "errors", Failed),
        ]
        .into_iter()
        .map(|(t, m, ph)| (t, m.to_string(), ph))
        .collect();
        assert_eq!(log, expected);
        assert_eq!(a.phase, Failed);
        assert_eq!(
            a.message.as_deref(),
            Some("Metric \"errors\" assessed Failed due to failed (2) > failureLimit (1)")
        );
        assert_eq!(result(&status, "latency").phase, Successful);
        assert_eq!(result(&status, "latency").count, 2);
        let s = status.run_summary.unwrap();
        assert_eq!((s.count, s.successful, s.failed), (2, 1, 1));
    }
}
