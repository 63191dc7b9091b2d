//! The pictures' numbers and sentence, read from the view model without HTML; then what the markup must
//! keep (thresholds drawn, nothing that is not a number drawn, strings from outside escaped).

use serde_json::json;

use super::model::{ConditionKind, MetricView, Picture, RunView};
use super::section;
use crate::api::{AnalysisPhase, AnalysisRun};
use crate::engine::condition::thresholds::Comparison;
use crate::engine::judge::Verdict;

fn run(value: serde_json::Value) -> AnalysisRun {
    match serde_json::from_value(value) {
        Ok(run) => run,
        Err(e) => panic!("fixture: {e}"),
    }
}

fn only_metric(run: &AnalysisRun) -> MetricView {
    let view = RunView::of(run);
    assert_eq!(view.metrics.len(), 1);
    view.metrics[0].clone()
}

/// A `canaryd/compare` error-rate run whose status holds `looks` (`ce:cr:be:br,...`).
fn compare_run(looks: &str) -> AnalysisRun {
    run(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": "checkout-abc-2", "namespace": "shop"},
        "spec": {"metrics": [{"name": "errors", "interval": "1m", "provider": {"plugin": {"canaryd/compare": {
            "errorRate": {
                "canary": {"errors": "sum(e{v=\"c\"})", "requests": "sum(r{v=\"c\"})"},
                "baseline": {"errors": "sum(e{v=\"b\"})", "requests": "sum(r{v=\"b\"})"},
                "maxRelativeIncrease": 0.1, "confidence": 0.95
            }}}}}]},
        "status": {"phase": "Failed", "metricResults": [{
            "name": "errors", "phase": "Failed", "count": 4, "failed": 1,
            "metadata": {"canaryd.io/compare-looks": looks}
        }]}
    }))
}

/// Four times the baseline's error rate on 300 requests per side per look: the judge fails at look 4.
const FAILS_AT_FOUR: &str = "12:300:3:300,24:600:6:600,36:900:9:900,48:1200:12:1200";

#[test]
fn a_run_failed_by_the_compare_judge_shows_each_look_the_deciding_look_and_why() {
    let metric = only_metric(&compare_run(FAILS_AT_FOUR));
    let Picture::ErrorRate(view) = metric.picture else {
        panic!("not an error-rate picture: {:?}", metric.picture);
    };
    assert_eq!(view.looks.len(), 4);
    let verdicts: Vec<Verdict> = view.looks.iter().map(|l| l.result.verdict).collect();
    assert_eq!(
        verdicts,
        [
            Verdict::Inconclusive,
            Verdict::Inconclusive,
            Verdict::Inconclusive,
            Verdict::Fail
        ]
    );
    assert_eq!(view.decided_at, Some(4));
    assert_eq!(view.verdict, Verdict::Fail);
    let fourth = &view.looks[3];
    assert_eq!(
        (fourth.result.canary_rate, fourth.result.baseline_rate),
        (0.04, 0.01)
    );
    assert!(
        (fourth.allowed_rate - 0.011).abs() < 1e-12,
        "baseline x 1.1"
    );
    let lower = fourth.result.ratio_lower.unwrap_or(0.0);
    assert!(
        lower > 1.1,
        "the bound clears the margin when the judge fails: {lower}"
    );
    assert_eq!(
        view.sentence,
        "the canary's error rate exceeds the baseline's by more than 10% with 95% confidence after 4 looks \
         (canary 4% of 1200 requests, baseline 1% of 1200)"
    );
}

#[test]
fn the_sentence_follows_the_verdict_and_the_margin_the_metric_sets() {
    let sentence = |looks: &str| match only_metric(&compare_run(looks)).picture {
        Picture::ErrorRate(view) => view.sentence,
        other => panic!("{other:?}"),
    };
    assert_eq!(sentence(""), "no look yet: neither side has served traffic");
    let three = "9:300:3:300,18:600:6:600,27:900:9:900";
    assert!(
        sentence(three).starts_with(
            "no verdict after 3 looks: with 95% confidence the canary's error rate is between "
        ),
        "{}",
        sentence(three)
    );
    assert!(
        sentence("1:20:1:20")
            .starts_with("no verdict after 1 look: too few requests for any verdict"),
        "{}",
        sentence("1:20:1:20")
    );
    let even: Vec<String> = (1..=12)
        .map(|i| format!("{}:{}:{}:{}", i * 50, i * 10000, i * 100, i * 10000))
        .collect();
    let passed = sentence(&even.join(","));
    assert!(
        passed.starts_with(
            "the canary's error rate is at most 10% above the baseline's with 95% confidence after "
        ),
        "{passed}"
    );
    let mut absolute = compare_run(FAILS_AT_FOUR);
    if let Some(plugin) = absolute.spec.metrics[0].provider.plugin.as_mut()
        && let Some(config) = plugin.get_mut("canaryd/compare")
    {
        config["errorRate"]["maxAbsoluteIncrease"] = json!(0.001);
    }
    match only_metric(&absolute).picture {
        Picture::ErrorRate(view) => assert!(
            view.sentence
                .contains("by more than 10% plus 0.1 percentage points"),
            "{}",
            view.sentence
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unreadable_look_history_is_said_not_drawn() {
    let metric = only_metric(&compare_run("1:2:x"));
    assert!(
        matches!(&metric.picture, Picture::Unreadable(why) if why.contains("unreadable look")),
        "{:?}",
        metric.picture
    );
}

fn prometheus_run(values: &[&str]) -> AnalysisRun {
    let measurements: Vec<serde_json::Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({"phase": "Successful", "value": v,
                   "startedAt": format!("2026-01-01T00:0{i}:00Z"), "finishedAt": format!("2026-01-01T00:0{i}:00Z")})
        })
        .collect();
    run(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": "checkout-abc-2"},
        "spec": {"metrics": [{"name": "error-ratio", "successCondition": "result[0] < 0.05",
            "failureCondition": "result[0] >= 0.2",
            "provider": {"prometheus": {"query": "sum(rate(e[1m]))"}}}]},
        "status": {"phase": "Running", "startedAt": "2026-01-01T00:00:00Z",
            "metricResults": [{"name": "error-ratio", "phase": "Running", "measurements": measurements}]}
    }))
}

#[test]
fn a_prometheus_metric_is_drawn_over_time_with_its_conditions_thresholds() {
    let run = prometheus_run(&["[0.01]", "[0.02]", "[0.04]"]);
    let Picture::Measurements(view) = only_metric(&run).picture else {
        panic!("not measurements");
    };
    assert_eq!(view.series, ["result[0]"]);
    let points: Vec<(f64, Vec<f64>)> = view
        .points
        .iter()
        .map(|p| (p.seconds, p.numbers.clone()))
        .collect();
    assert_eq!(
        points,
        [(0.0, vec![0.01]), (60.0, vec![0.02]), (120.0, vec![0.04])]
    );
    let lines: Vec<_> = view
        .thresholds
        .iter()
        .map(|t| (t.condition, t.series, t.comparison, t.value))
        .collect();
    assert_eq!(
        lines,
        [
            (ConditionKind::Success, 0, Comparison::Below, 0.05),
            (ConditionKind::Failure, 0, Comparison::AtLeast, 0.2)
        ]
    );
    let html = section(&run);
    assert!(html.contains("<line class=\"success\""), "{html}");
    assert!(
        html.contains(">success: result[0] &lt; 0.05</text>"),
        "{html}"
    );
    assert!(
        html.contains(">failure: result[0] &gt;= 0.2</text>"),
        "{html}"
    );
    assert_eq!(html.matches("<circle").count(), 3);
}

#[test]
fn measurements_without_numbers_are_listed_but_not_drawn() {
    let run = prometheus_run(&["[NaN]", "", "[]", "[0.5]"]);
    let Picture::Measurements(view) = only_metric(&run).picture else {
        panic!("not measurements");
    };
    assert_eq!(view.points.len(), 4);
    let drawn: Vec<bool> = view
        .points
        .iter()
        .map(|p| p.numbers[0].is_finite())
        .collect();
    assert_eq!(drawn, [false, false, false, true]);
    let html = section(&run);
    assert_eq!(html.matches("<circle").count(), 1, "{html}");
    let svg = html
        .split("<svg")
        .nth(1)
        .and_then(|s| s.split("</svg>").next())
        .unwrap_or("");
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    assert_eq!(
        html.matches("<tr><td>").count(),
        4,
        "each measurement is still listed"
    );

    let empty = prometheus_run(&[]);
    assert!(section(&empty).contains("no measurements yet"));
    let mut pending = empty.clone();
    pending.status = None;
    assert_eq!(only_metric(&pending).phase, None);
    assert!(section(&pending).contains("phase-Pending"));
}

#[test]
fn strings_from_outside_are_escaped() {
    let mut run = prometheus_run(&["<script>alert(1)</script>"]);
    run.metadata.name = Some("<script>alert(2)</script>".to_string());
    if let Some(status) = run.status.as_mut() {
        status.message = Some("<img src=x onerror=alert(3)>".to_string());
        status.phase = Some(AnalysisPhase::Failed);
        if let Some(result) = status.result_mut("error-ratio") {
            result.name = "<script>alert(4)</script>".to_string();
        }
    }
    run.spec.metrics[0].name = "<script>alert(4)</script>".to_string();
    let html = section(&run);
    assert!(
        !html.contains("<script") && !html.contains("<img"),
        "{html}"
    );
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;img src=x onerror=alert(3)&gt;"));
    assert!(html.contains("metric &lt;script&gt;alert(4)&lt;/script&gt;"));
}

#[test]
fn a_condition_s_placeholders_take_the_run_s_arg_values() {
    let mut run = prometheus_run(&["[0.995]"]);
    run.spec.metrics[0].success_condition =
        Some("len(result) > 0 && !isNaN(result[0]) && result[0] >= {{args.threshold}}".to_string());
    run.spec.metrics[0].failure_condition = Some("result[0] < {{args.missing}}".to_string());
    run.spec.args = Some(vec![
        serde_json::from_value(json!({"name": "threshold", "value": "0.99"}))
            .unwrap_or_else(|e| panic!("{e}")),
    ]);
    let Picture::Measurements(view) = only_metric(&run).picture else {
        panic!("not measurements");
    };
    let lines: Vec<_> = view
        .thresholds
        .iter()
        .map(|t| (t.condition, t.comparison, t.value))
        .collect();
    assert_eq!(
        lines,
        [(ConditionKind::Success, Comparison::AtLeast, 0.99)],
        "an arg the run does not give draws nothing"
    );
}
