//! A notification trigger's `when` as Argo Rollouts evaluates it (`utils/record/record.go`'s `InitGetVars`):
//! `time.Now()` and `time.Parse(...)` (its `timeExprs`) with the methods and operators of Go's times and
//! durations, and `analysisRuns`, the AnalysisRuns of the Rollout's current revision
//! (`getAnalysisRunsFilterWithLabels`). The clock is the caller's: each test hands in the instant.

use std::collections::BTreeMap;

use canaryd::engine::condition::Condition;
use canaryd::engine::notify::config::Config;
use canaryd::engine::notify::{
    TRIGGER_VARIABLES, analysis_run_selector, analysis_runs_of, templates_to_send,
};
use canaryd::engine::value::MetricValue;
use canaryd::notify::settings::yaml_value;
use jiff::Timestamp;
use serde_json::{Value, json};

fn at(text: &str) -> Timestamp {
    text.parse().expect("a timestamp")
}

/// A Rollout paused at 10:00 on revision 3, its pods of hash `abc`.
fn paused() -> Value {
    json!({
        "metadata": {"name": "web", "annotations": {"rollout.argoproj.io/revision": "3"}},
        "status": {
            "currentPodHash": "abc",
            "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-01-02T10:00:00Z"}],
        },
    })
}

fn when(source: &str, variables: &Value, now: Timestamp) -> Result<bool, String> {
    let condition = Condition::compile_environment(source, TRIGGER_VARIABLES)
        .map_err(|e| format!("compile: {e}"))?;
    condition
        .evaluate_at(&MetricValue::Json(variables.clone()), now)
        .map_err(|e| e.to_string())
}

fn holds(source: &str, now: Timestamp) -> bool {
    let variables = json!({"rollout": paused(), "analysisRuns": null});
    when(source, &variables, now).unwrap_or_else(|e| panic!("{source}: {e}"))
}

#[test]
fn time_now_sub_time_parse_in_minutes_as_the_notifications_engine_documents_it() {
    let paused_five_minutes =
        "time.Now().Sub(time.Parse(rollout.status.pauseConditions[0].startTime)).Minutes() >= 5";
    assert!(!holds(paused_five_minutes, at("2026-01-02T10:04:59Z")));
    assert!(holds(paused_five_minutes, at("2026-01-02T10:05:00Z")));
    assert!(holds(paused_five_minutes, at("2026-01-02T11:00:00Z")));
}

#[test]
fn times_and_durations_follow_expr_langs_operators_and_gos_methods() {
    let now = at("2026-01-02T10:30:00Z");
    let start = "time.Parse(rollout.status.pauseConditions[0].startTime)";
    for (source, expected) in [
        (format!("time.Now() - {start} > duration('29m')"), true),
        (format!("time.Now() - {start} > duration('30m')"), false),
        (format!("{start} + duration('30m') == time.Now()"), true),
        (format!("time.Now() - duration('1h') < {start}"), true),
        (format!("{start}.Add(duration('1h30m')).After(now())"), true),
        (format!("{start}.Before(time.Now())"), true),
        (
            format!("{start}.Equal(time.Parse('2026-01-02T11:00:00+01:00'))"),
            true,
        ),
        (format!("{start}.Unix() == 1767348000"), true),
        (format!("time.Now().Sub({start}).Hours() == 0.5"), true),
        (format!("time.Now().Sub({start}).Seconds() == 1800"), true),
        (
            format!("time.Now().Sub({start}).Milliseconds() == 1800000"),
            true,
        ),
        (format!("time.Now().Sub({start}).String() == '30m0s'"), true),
        ("duration('90s').String() == '1m30s'".to_string(), true),
        ("duration('1h') >= duration('60m')".to_string(), true),
        (format!("{start} == 'a string'"), false),
    ] {
        assert_eq!(holds(&source, now), expected, "{source}");
    }
}

#[test]
fn a_time_that_does_not_parse_or_an_operator_that_does_not_apply_is_an_error_naming_it() {
    let variables = json!({"rollout": paused()});
    let now = at("2026-01-02T10:30:00Z");
    let error = |source: &str| match when(source, &variables, now) {
        Ok(b) => panic!("{source} gave {b}"),
        Err(e) => e,
    };
    let text = error("time.Parse(rollout.metadata.name) < time.Now()");
    assert!(text.contains(r#"parsing time "web" as RFC 3339"#), "{text}");
    let text = error("time.Now() > 5");
    assert!(
        text.contains("the time 2026-01-02T10:30:00Z and the number 5"),
        "{text}"
    );
    assert!(text.contains(".Minutes()"), "{text}");
    let text = error("duration('5 minutes') > duration('1m')");
    assert!(text.contains(r#"invalid duration "5 minutes""#), "{text}");
    let text = error("rollout.metadata.name.Minutes() > 1");
    assert!(
        text.contains("only a time or a duration has methods"),
        "{text}"
    );
}

#[test]
fn unknown_clock_functions_and_methods_are_refused_when_the_trigger_is_read() {
    for (source, says) in [
        ("time.Later() > 1", "unknown function `time.Later`"),
        ("time.Now().Fortnights() > 1", "unknown method `Fortnights`"),
        ("time.Now().Sub() > 1", "Sub() takes 1 argument, but got 0"),
        ("time > 1", "time.Now() or time.Parse(text)"),
        ("secrets.token == ''", "the names are rollout, analysisRuns"),
    ] {
        match Condition::compile_environment(source, TRIGGER_VARIABLES) {
            Ok(_) => panic!("{source} compiled"),
            Err(e) => assert!(e.message.contains(says), "{source}: {e}"),
        }
    }
    // An analysis has no clock: the same words are refused in its conditions.
    for source in ["now() > 1", "time.Now() > 1", "duration('1m') > 1"] {
        assert!(Condition::compile(source).is_err(), "{source}");
    }
}

/// An AnalysisRun of `revision`, created at `created`, in `phase`.
fn run(name: &str, revision: &str, created: &str, phase: &str) -> Value {
    json!({
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {"rollouts-pod-template-hash": "abc"},
            "annotations": {"rollout.argoproj.io/revision": revision},
        },
        "status": {"phase": phase},
    })
}

#[test]
fn analysis_runs_are_the_current_revisions_newest_first_as_record_go_chooses_them() {
    assert_eq!(
        analysis_run_selector(&paused()),
        "rollouts-pod-template-hash=abc"
    );
    assert_eq!(analysis_runs_of(&paused(), Vec::new()), Value::Null);
    let listed = vec![
        run("older", "3", "2026-01-02T09:00:00Z", "Successful"),
        run("other-revision", "2", "2026-01-02T09:30:00Z", "Failed"),
        run("newer", "3", "2026-01-02T10:00:00Z", "Failed"),
    ];
    let runs = analysis_runs_of(&paused(), listed);
    let names: Vec<&str> = runs
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|r| r["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["newer", "older"]);
    let only_other = vec![run("other-revision", "2", "2026-01-02T09:30:00Z", "Failed")];
    assert_eq!(analysis_runs_of(&paused(), only_other), json!([]));
}

#[test]
fn a_trigger_on_the_analysis_runs_fires_when_its_when_holds_over_them() {
    let data: BTreeMap<String, String> = [(
        "trigger.on-analysis-failed-long-paused".to_string(),
        "- send: [paged]\n  when: len(analysisRuns ?? []) > 0 && analysisRuns[0].status.phase == 'Failed' \
         && time.Now().Sub(time.Parse(rollout.status.pauseConditions[0].startTime)).Minutes() > 1"
            .to_string(),
    )]
    .into();
    let (config, errors) = Config::parse(&data, &BTreeMap::new(), &yaml_value);
    assert_eq!(errors, []);
    let trigger = "on-analysis-failed-long-paused";
    let sends = |runs: Vec<Value>, now: &str| {
        let runs = analysis_runs_of(&paused(), runs);
        templates_to_send(&config, trigger, &paused(), &runs, at(now)).expect("evaluates")
    };
    let failed = || vec![run("newer", "3", "2026-01-02T10:00:00Z", "Failed")];
    let passed = || vec![run("newer", "3", "2026-01-02T10:00:00Z", "Successful")];
    assert_eq!(
        sends(failed(), "2026-01-02T10:02:00Z"),
        [vec!["paged".to_string()]]
    );
    assert!(sends(failed(), "2026-01-02T10:00:30Z").is_empty());
    assert!(sends(passed(), "2026-01-02T10:02:00Z").is_empty());
    assert!(sends(Vec::new(), "2026-01-02T10:02:00Z").is_empty());
}
