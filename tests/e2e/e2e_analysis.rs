//! Argo's analysis rules end to end: `canaryd analyze --from/--to --output json` backtested against a real
//! Prometheus holding synthetic canaries (see `canaryd_testkit::prometheus` for how the data gets in). Each
//! canary is one `service` label value in one shared server; the templates are the shipped success-rate and
//! small fixtures in `tests/fixtures/e2e/`.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fixtures wait for real servers on real time.

use std::sync::OnceLock;

use crate::CANARYD;
use canaryd::api::{AnalysisPhase, RunSummary};
use canaryd_testkit::prometheus;
use canaryd_testkit::prometheus::{
    Analyze, DEFAULT_BUCKETS, Latency, Prometheus, Scenario, Traffic, at, finished_minute, numbers,
    steady,
};

use AnalysisPhase::{Failed, Inconclusive, Successful};

/// Errors switch from `before` to `after` at minute `at` (20 requests/s throughout).
fn switch(at: f64, before: f64, after: f64) -> impl Fn(f64) -> Traffic {
    move |m| Traffic {
        rps: 20.0,
        errors: if m < at { before } else { after },
    }
}

/// 20 requests/s with 1 % errors until minute `at`, then none: the counters stay, their rates drop to 0.
fn stopped_at(at: f64) -> impl Fn(f64) -> Traffic {
    move |m| Traffic {
        rps: if m < at { 20.0 } else { 0.0 },
        errors: 0.01,
    }
}

/// Every request takes `fast` seconds, except during minutes [from, to) when they take `slow`.
fn latency_spike(from: f64, to: f64, fast: f64, slow: f64) -> impl Fn(f64) -> Latency {
    move |m| Latency {
        rps: 20.0,
        value: if (from..to).contains(&m) { slow } else { fast },
    }
}

fn requests(s: Scenario, service: &str, traffic: impl Fn(f64) -> Traffic) -> Scenario {
    s.requests(
        "http_requests_total",
        &[("namespace", "shop"), ("service", service)],
        "code",
        traffic,
    )
}

fn latencies(s: Scenario, service: &str, latency: impl Fn(f64) -> Latency) -> Scenario {
    s.histogram(
        "http_request_duration_seconds",
        &[("namespace", "shop"), ("service", service)],
        DEFAULT_BUCKETS,
        latency,
    )
}

/// Every canary of this file, over 40 minutes from T0. Runs start at minute 10 unless a test says otherwise.
fn scenario() -> Scenario {
    let s = Scenario::new(40);
    let s = requests(s, "healthy", steady(20.0, 0.005));
    let s = requests(s, "degrading", switch(14.0, 0.005, 0.12));
    let s = requests(s, "warming-up", switch(12.0, 0.30, 0.002));
    let s = requests(s, "stopped", stopped_at(5.0));
    let s = requests(s, "mediocre", steady(20.0, 0.03));
    let s = requests(s, "recovering", switch(13.0, 0.05, 0.001));
    let s = requests(s, "slow", steady(20.0, 0.002));
    let s = latencies(s, "slow", latency_spike(0.0, 40.0, 0.08, 0.7));
    let s = latencies(s, "mediocre", latency_spike(0.0, 0.0, 0.08, 0.08));
    latencies(s, "spiky", latency_spike(11.0, 12.0, 0.08, 0.7))
}

fn prometheus() -> &'static Prometheus {
    static SERVER: OnceLock<Prometheus> = OnceLock::new();
    prometheus::shared(&SERVER, scenario)
}

fn success_rate(service: &str) -> Analyze {
    Analyze::shipped(CANARYD, "success-rate.yaml")
        .arg("service", service)
        .arg("namespace", "shop")
        .prometheus(prometheus())
}

fn fixture(name: &str, service: &str) -> Analyze {
    Analyze::fixture(CANARYD, name)
        .arg("service", service)
        .prometheus(prometheus())
}

fn summary(count: i32, successful: i32, failed: i32, inconclusive: i32) -> Option<RunSummary> {
    Some(RunSummary {
        count,
        successful,
        failed,
        inconclusive,
        error: 0,
    })
}

#[test]
fn the_backfilled_series_answer_with_the_rates_they_were_built_with() {
    let p = prometheus();
    let rate = |q: &str, minute| p.instant(q, at(minute));
    assert_eq!(
        rate(
            "sum(rate(http_requests_total{service=\"healthy\"}[2m]))",
            20
        ),
        vec![20.0]
    );
    let errors = rate(
        "sum(rate(http_requests_total{service=\"degrading\",code=\"500\"}[2m])) / sum(rate(http_requests_total{service=\"degrading\"}[2m]))",
        30,
    );
    assert!((errors[0] - 0.12).abs() < 1e-9, "{errors:?}");
    let stopped = rate(
        "sum(rate(http_requests_total{service=\"stopped\",code=\"500\"}[2m])) / sum(rate(http_requests_total{service=\"stopped\"}[2m]))",
        20,
    );
    assert!(stopped[0].is_nan(), "0/0 is NaN: {stopped:?}");
    assert_eq!(
        rate("http_requests_total{service=\"nobody\"}", 20),
        Vec::<f64>::new()
    );
    let p99 = rate(
        "histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{service=\"slow\"}[2m])))",
        20,
    );
    assert!(
        (p99[0] - 0.995).abs() < 1e-9,
        "0.7 s lies in (0.5, 1]: {p99:?}"
    );
}

#[test]
fn a_healthy_canary_passes_all_ten_looks() {
    let run = success_rate("healthy").minutes(10, 30).run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.phase(), Some(Successful));
    assert_eq!(run.counters("success-rate"), (10, 10, 0, 0, 0));
    run.assert_each_value_near("success-rate", 0.995);
    assert_eq!(run.status.run_summary, summary(1, 1, 0, 0));
}

#[test]
fn a_canary_that_degrades_mid_run_fails_after_the_degradation() {
    let run = success_rate("degrading").minutes(10, 30).run();
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.phase(), Some(Failed));
    assert_eq!(
        run.message(),
        Some("Metric \"success-rate\" assessed Failed due to failed (2) > failureLimit (1)")
    );
    assert_eq!(
        run.measurement_phases("success-rate"),
        [[Successful; 5].as_slice(), &[Failed, Failed]].concat()
    );
    let first_failure = finished_minute(run.first("success-rate", Failed));
    assert!(
        first_failure > 14.0,
        "failed at minute {first_failure}, before the canary degraded at 14"
    );
}

#[test]
fn initial_delay_skips_a_warm_up_spike() {
    let run = fixture("warm-up.yaml", "warming-up")
        .template("after-warm-up")
        .minutes(10, 30)
        .run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.phase(), Some(Successful));
    assert_eq!(run.counters("success-rate"), (5, 5, 0, 0, 0));
    let first = run.metric("success-rate").measurements[0].clone();
    assert_eq!(finished_minute(&first), 14.0);
}

#[test]
fn the_same_warm_up_spike_fails_without_initial_delay() {
    let run = fixture("warm-up.yaml", "warming-up")
        .template("from-the-start")
        .minutes(10, 30)
        .run();
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.phase(), Some(Failed));
    assert_eq!(run.counters("success-rate"), (1, 0, 1, 0, 0));
    assert_eq!(finished_minute(run.first("success-rate", Failed)), 10.0);
}

#[test]
fn a_canary_without_traffic_is_inconclusive_never_failed() {
    let run = success_rate("nobody").minutes(10, 30).run();
    assert_eq!(run.code, 3, "{run:#?}");
    assert_eq!(run.phase(), Some(Inconclusive));
    assert_eq!(
        run.message(),
        Some(
            "Metric \"success-rate\" assessed Inconclusive due to inconclusive (4) > inconclusiveLimit (3)"
        )
    );
    assert_eq!(run.counters("success-rate"), (4, 0, 0, 4, 0));
    assert_eq!(run.values("success-rate"), ["[]"; 4]);
}

#[test]
fn zero_requests_over_zero_requests_is_nan_and_inconclusive() {
    let run = success_rate("stopped").minutes(10, 30).run();
    assert_eq!(run.code, 3, "{run:#?}");
    assert_eq!(run.phase(), Some(Inconclusive));
    assert_eq!(run.counters("success-rate"), (4, 0, 0, 4, 0));
    assert_eq!(run.values("success-rate"), ["[NaN]"; 4]);
}

#[test]
fn a_canary_between_the_success_and_failure_thresholds_is_inconclusive() {
    let run = fixture("two-thresholds.yaml", "mediocre")
        .minutes(10, 30)
        .run();
    assert_eq!(run.code, 3, "{run:#?}");
    assert_eq!(
        run.message(),
        Some(
            "Metric \"success-rate\" assessed Inconclusive due to inconclusive (3) > inconclusiveLimit (2)"
        )
    );
    assert_eq!(run.counters("success-rate"), (3, 0, 0, 3, 0));
    run.assert_each_value_near("success-rate", 0.97);
}

#[test]
fn the_worst_metric_decides_the_run_failed_over_successful() {
    let run = fixture("several-metrics.yaml", "slow")
        .minutes(10, 30)
        .run();
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.phase(), Some(Failed));
    assert_eq!(
        run.message(),
        Some("Metric \"latency-p99\" assessed Failed due to failed (1) > failureLimit (0)")
    );
    assert_eq!(run.metric("success-rate").phase, Successful);
    assert_eq!(run.status.run_summary, summary(2, 1, 1, 0));
}

#[test]
fn the_worst_metric_decides_the_run_inconclusive_over_successful() {
    let run = fixture("several-metrics.yaml", "mediocre")
        .minutes(10, 30)
        .run();
    assert_eq!(run.code, 3, "{run:#?}");
    assert_eq!(run.phase(), Some(Inconclusive));
    assert_eq!(run.metric("latency-p99").phase, Successful);
    assert_eq!(run.status.run_summary, summary(2, 1, 0, 1));
}

#[test]
fn a_failing_dry_run_metric_is_reported_but_does_not_fail_the_run() {
    let run = fixture("dry-run.yaml", "healthy").minutes(10, 30).run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.phase(), Some(Successful));
    let budget = run.metric("error-budget");
    assert!(budget.dry_run);
    assert_eq!(budget.phase, Failed);
    assert_eq!(
        budget.message.as_deref(),
        Some("Metric assessed Failed due to failed (1) > failureLimit (0)")
    );
    assert_eq!(run.counters("success-rate"), (5, 5, 0, 0, 0));
    assert_eq!(run.status.run_summary, summary(1, 1, 0, 0));
    assert_eq!(run.status.dry_run_summary, summary(1, 0, 1, 0));
}

#[test]
fn three_good_looks_in_a_row_pass_a_recovering_canary_before_count() {
    let run = fixture("streak.yaml", "recovering").minutes(10, 30).run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.phase(), Some(Successful));
    let r = run.metric("success-rate");
    assert_eq!(r.consecutive_success, 3);
    assert_eq!(
        run.measurement_phases("success-rate"),
        [[Failed; 5].as_slice(), &[Successful; 3]].concat()
    );
}

#[test]
fn reaching_count_without_the_streak_fails_when_failures_are_not_limited() {
    let run = fixture("streak.yaml", "mediocre").minutes(10, 30).run();
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(
        run.message(),
        Some(
            "Metric \"success-rate\" assessed Failed due to count (10) reached with consecutiveSuccess (0) < consecutiveSuccessLimit (3)"
        )
    );
    assert_eq!(run.counters("success-rate"), (10, 0, 10, 0, 0));
}

#[test]
fn a_range_query_sees_a_latency_spike_inside_its_window() {
    let run = fixture("range-query.yaml", "spiky").minutes(14, 20).run();
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.counters("p99-every-minute"), (1, 0, 1, 0, 0));
    let values = numbers(run.values("p99-every-minute")[0]);
    assert_eq!(values.len(), 6, "minutes 9 to 14: {values:?}");
    assert!(values.iter().any(|v| *v > 0.5), "{values:?}");
}

#[test]
fn a_range_query_after_the_spike_has_moved_out_of_its_window_passes() {
    let run = fixture("range-query.yaml", "spiky").minutes(20, 30).run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.counters("p99-every-minute"), (1, 1, 0, 0, 0));
    let values = numbers(run.values("p99-every-minute")[0]);
    assert_eq!(values.len(), 6, "minutes 15 to 20: {values:?}");
    assert!(
        values.iter().all(|v| (v - 0.0995).abs() < 1e-9),
        "{values:?}"
    );
}

#[test]
fn a_backtest_window_shorter_than_the_analysis_ends_it_as_terminated() {
    let run = success_rate("healthy").minutes(10, 14).run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.phase(), Some(Successful));
    assert_eq!(run.message(), Some("Run Terminated"));
    assert_eq!(run.counters("success-rate"), (5, 5, 0, 0, 0));
}

/// The README's walk-through: the example series in `tests/fixtures/e2e/checkout.om` (20 requests/s, 0.4 %
/// errors, 30 s samples) and the shipped success-rate template, at its default and at a stricter threshold.
#[test]
fn the_readme_backtest_of_the_example_series_passes_at_99_and_fails_at_99_9_percent() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/e2e/checkout.om"),
    )
    .expect("the example series");
    let server = Prometheus::start_openmetrics(&text);
    let backtest = || {
        Analyze::shipped(CANARYD, "success-rate.yaml")
            .arg("service", "checkout")
            .arg("namespace", "shop")
            .prometheus(&server)
            .minutes(10, 25)
    };
    let run = backtest().run();
    assert_eq!((run.code, run.phase()), (0, Some(Successful)), "{run:#?}");
    run.assert_each_value_near("success-rate", 0.996);
    let strict = backtest().arg("threshold", "0.999").run();
    assert_eq!(
        (strict.code, strict.phase()),
        (1, Some(Failed)),
        "{strict:#?}"
    );
    assert_eq!(strict.counters("success-rate"), (2, 0, 2, 0, 0));
}
