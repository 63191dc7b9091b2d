//! canaryd/compare end to end against a real Prometheus: canary judged against baseline with the shipped
//! `error-rate-vs-baseline.yaml` and `latency-vs-baseline.yaml`. The point of comparing: a cluster-wide
//! incident (both tracks at 5% errors) passes the comparison while the absolute `success-rate.yaml` fails;
//! a canary-only regression fails it; no traffic is Inconclusive.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fixtures wait for real servers on real time.

use std::path::Path;
use std::sync::OnceLock;

use crate::CANARYD;
use canaryd::api::AnalysisPhase::{Failed, Inconclusive, Successful};
use canaryd_testkit::offline_page;
use canaryd_testkit::prometheus;
use canaryd_testkit::prometheus::{
    Analyze, DEFAULT_BUCKETS, Latency, Prometheus, Scenario, Traffic, steady,
};

fn http(s: Scenario, service: &str, traffic: impl Fn(f64) -> Traffic) -> Scenario {
    s.requests(
        "http_requests_total",
        &[("namespace", "shop"), ("service", service)],
        "code",
        traffic,
    )
}

fn latency(s: Scenario, service: &str, seconds: f64) -> Scenario {
    s.histogram(
        "http_request_duration_seconds",
        &[("namespace", "shop"), ("service", service)],
        DEFAULT_BUCKETS,
        move |_| Latency {
            rps: 50.0,
            value: seconds,
        },
    )
}

/// Pairs of tracks over 60 minutes: `<pair>-canary` and `<pair>-baseline`.
fn scenario() -> Scenario {
    let s = Scenario::new(60);
    // A cluster-wide incident: both tracks at 5% errors.
    let s = http(s, "incident-canary", steady(100.0, 0.05));
    let s = http(s, "incident-baseline", steady(100.0, 0.05));
    // The canary alone regresses: 1% → 3% from minute 15.
    let s = http(s, "regress-canary", |m| Traffic {
        rps: 50.0,
        errors: if m < 15.0 { 0.01 } else { 0.03 },
    });
    let s = http(s, "regress-baseline", steady(50.0, 0.01));
    // Latency: the canary answers in 0.3 s instead of 0.08 s; another pair is identical.
    let s = latency(s, "slow-canary", 0.3);
    let s = latency(s, "slow-baseline", 0.08);
    let s = latency(s, "same-canary", 0.08);
    latency(s, "same-baseline", 0.08)
}

fn prometheus() -> &'static Prometheus {
    static SERVER: OnceLock<Prometheus> = OnceLock::new();
    prometheus::shared(&SERVER, scenario)
}

fn versus(template: &str, name: &str, pair: &str) -> Analyze {
    Analyze::shipped(CANARYD, template)
        .template(name)
        .arg("canary-service", &format!("{pair}-canary"))
        .arg("baseline-service", &format!("{pair}-baseline"))
        .arg("namespace", "shop")
        .prometheus(prometheus())
}

#[test]
fn a_cluster_wide_incident_passes_the_comparison_but_fails_the_absolute_threshold() {
    let compared = versus(
        "error-rate-vs-baseline.yaml",
        "error-rate-vs-baseline",
        "incident",
    )
    .minutes(5, 40)
    .run();
    assert_eq!(compared.phase(), Some(Successful), "{:?}", compared.status);
    assert_eq!(compared.code, 0);
    let absolute = Analyze::shipped(CANARYD, "success-rate.yaml")
        .arg("service", "incident-canary")
        .arg("namespace", "shop")
        .prometheus(prometheus())
        .minutes(5, 40)
        .run();
    assert_eq!(absolute.phase(), Some(Failed));
}

/// The same run's offline report in headless Chromium with the network cut off: the rates per look, the
/// look that decided and the sentence saying why, from the judge's numbers (the screenshot is kept under the
/// target folder).
#[test]
fn the_report_of_a_failed_comparison_says_why_in_a_browser() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let page = dir.path().join("compare.html");
    let run = versus(
        "error-rate-vs-baseline.yaml",
        "error-rate-vs-baseline",
        "regress",
    )
    .minutes(5, 40)
    .report(&page)
    .run();
    assert_eq!(run.phase(), Some(Failed), "{:?}", run.status);
    let metadata = run.metric("error-rate-vs-baseline").metadata.clone();
    let looks = metadata
        .and_then(|m| m.get("canaryd.io/compare-looks").cloned())
        .map_or(0, |l| l.split(',').count());
    assert!(looks > 1, "{looks}");
    let dom = offline_page::dump_dom(&page);
    let why = format!(
        "the canary's error rate exceeds the baseline's by more than 10% with 95% confidence after {looks} looks (canary "
    );
    assert!(dom.contains(&why), "{why} not in {dom}");
    assert!(
        dom.contains(&format!(">decided at look {looks}</text>")),
        "{dom}"
    );
    assert_eq!(
        dom.matches("<svg class=\"chart\"").count(),
        2,
        "rates, and their ratio against the margin"
    );
    assert!(dom.contains(">margin 1.1</text>"), "{dom}");
    assert_eq!(dom.matches("<tr class=\"decided\">").count(), 1, "{dom}");
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots/compare.png");
    offline_page::screenshot(&page, &png);
}

#[test]
fn a_canary_only_regression_fails_the_comparison_after_it_starts() {
    let run = versus(
        "error-rate-vs-baseline.yaml",
        "error-rate-vs-baseline",
        "regress",
    )
    .minutes(5, 40)
    .run();
    assert_eq!(run.phase(), Some(Failed), "{:?}", run.status);
    assert_eq!(run.code, 1);
    let failed = run.first("error-rate-vs-baseline", Failed);
    assert!(
        prometheus::finished_minute(failed) > 15.0,
        "failed before the regression: {failed:?}"
    );
    assert_eq!(
        run.message(),
        Some(
            "Metric \"error-rate-vs-baseline\" assessed Failed due to failed (1) > failureLimit (0)"
        )
    );
    let value: serde_json::Value =
        serde_json::from_str(failed.value.as_deref().unwrap_or("{}")).expect("JSON value");
    assert_eq!(value["verdict"], "fail");
    assert!(
        value["ratioLower"].as_f64().is_some_and(|r| r > 1.1),
        "{value}"
    );
}

#[test]
fn no_traffic_on_either_side_is_inconclusive_never_failed() {
    let run = versus(
        "error-rate-vs-baseline.yaml",
        "error-rate-vs-baseline",
        "nobody",
    )
    .minutes(5, 50)
    .run();
    assert_eq!(run.phase(), Some(Inconclusive), "{:?}", run.status);
    assert_eq!(run.code, 3);
    let (count, successful, failed, inconclusive, error) = run.counters("error-rate-vs-baseline");
    assert_eq!(
        (count, successful, failed, inconclusive, error),
        (30, 0, 0, 30, 0)
    );
    // The sparse-traffic guard's reason reaches the run's message, after Argo's own.
    let message = run.status.message.clone().unwrap_or_default();
    assert!(
        message.contains(
            "Error Message: too few errors for any verdict: canary served 0 requests, baseline 0"
        ),
        "{message}"
    );
}

#[test]
fn a_slower_canary_fails_the_latency_comparison_and_an_equal_one_passes() {
    let slow = versus("latency-vs-baseline.yaml", "latency-vs-baseline", "slow")
        .minutes(5, 30)
        .run();
    assert_eq!(slow.phase(), Some(Failed), "{:?}", slow.status);
    let same = versus("latency-vs-baseline.yaml", "latency-vs-baseline", "same")
        .minutes(5, 30)
        .run();
    assert_eq!(same.phase(), Some(Successful), "{:?}", same.status);
    let value: serde_json::Value = serde_json::from_str(
        same.metric("p99-vs-baseline").measurements[0]
            .value
            .as_deref()
            .unwrap_or("{}"),
    )
    .expect("JSON value");
    assert_eq!(value["verdict"], "pass");
    assert!(
        value["canarySamples"].as_u64().is_some_and(|n| n >= 20),
        "{value}"
    );
}
