//! `analysis-templates/progressive-sync-gate.yaml` end to end, as tests/e2e_templates.rs runs every shipped
//! template: `canaryd analyze --from/--to --output json` against a real Prometheus holding one app's series
//! from several clusters, told apart by the `cluster` label as on a global Prometheus. A healthy cluster
//! passes only at the end of the soak, a rising error rate fails the gate during it, no traffic is
//! Inconclusive; the vs-baseline variant fails a regression the absolute thresholds let through.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fixtures wait for real servers on real time.

use std::sync::OnceLock;

use crate::CANARYD;
use canaryd::api::AnalysisPhase::{Failed, Inconclusive, Successful};
use canaryd_testkit::prometheus;
use canaryd_testkit::prometheus::{
    Analyze, DEFAULT_BUCKETS, Latency, Prometheus, Scenario, Traffic, finished_minute, steady,
};

const FILE: &str = "progressive-sync-gate.yaml";

fn cluster(s: Scenario, name: &str, traffic: impl Fn(f64) -> Traffic, p99: f64) -> Scenario {
    let labels = [
        ("cluster", name),
        ("job", "checkout"),
        ("namespace", "shop"),
        ("service", "checkout"),
    ];
    let rps = traffic(0.0).rps;
    s.requests("http_requests_total", &labels, "code", traffic)
        .histogram(
            "http_request_duration_seconds",
            &labels,
            DEFAULT_BUCKETS,
            move |_| Latency { rps, value: p99 },
        )
}

fn scenario() -> Scenario {
    let s = Scenario::new(60);
    let s = cluster(s, "prod-east", steady(50.0, 0.002), 0.08);
    // The new version's errors rise from minute 25, fifteen minutes into its soak.
    let s = cluster(
        s,
        "prod-west",
        |m| Traffic {
            rps: 50.0,
            errors: if m < 25.0 { 0.002 } else { 0.04 },
        },
        0.08,
    );
    let s = cluster(s, "prod-slow", steady(50.0, 0.002), 0.7);
    // Under the 1% threshold, but four times the old version's rate.
    let s = cluster(s, "prod-worse", steady(50.0, 0.008), 0.08);
    // The clusters still on the old version.
    let s = cluster(s, "prod-north", steady(50.0, 0.002), 0.08);
    cluster(s, "prod-south", steady(50.0, 0.002), 0.08)
}

fn prometheus() -> &'static Prometheus {
    static SERVER: OnceLock<Prometheus> = OnceLock::new();
    prometheus::shared(&SERVER, scenario)
}

/// The gate for `cluster`, started at minute 10 with a 30-minute soak, backtested to minute 50.
fn gate(template: &str, cluster: &str) -> Analyze {
    Analyze::shipped(CANARYD, FILE)
        .template(template)
        .arg("app", "checkout")
        .arg("namespace", "shop")
        .arg("cluster", cluster)
        .prometheus(prometheus())
        .minutes(10, 50)
}

#[test]
fn a_healthy_cluster_passes_at_the_end_of_the_soak_and_not_before() {
    let r = gate("progressive-sync-gate", "prod-east").run();
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    for metric in ["error-rate", "latency-p99"] {
        assert_eq!(r.counters(metric), (30, 30, 0, 0, 0), "{metric}");
        // Thirty looks a minute apart, the last at the end of the 30-minute soak (the status keeps the
        // last ten).
        let last = r.metric(metric).measurements.last().expect("measurements");
        assert_eq!(finished_minute(last).floor(), 40.0, "{metric}");
    }
    let completed = r.status.completed_at.as_ref().expect("completedAt");
    assert_eq!(prometheus::minutes_after_t0(completed.0).floor(), 40.0);
}

#[test]
fn a_rising_error_rate_fails_the_gate_during_the_soak() {
    let r = gate("progressive-sync-gate", "prod-west").run();
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    let failed = finished_minute(r.first("error-rate", Failed));
    assert!(
        (25.0..28.0).contains(&failed),
        "the first failed look at minute {failed}, expected soon after the rise at 25"
    );
    assert_eq!(r.metric("error-rate").failed, 2);
    assert!(
        r.metric("error-rate").count < 30,
        "the gate failed before the soak ended"
    );
}

#[test]
fn a_slow_cluster_fails_on_latency() {
    let r = gate("progressive-sync-gate", "prod-slow").run();
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    assert_eq!(r.metric("latency-p99").phase, Failed);
}

#[test]
fn a_cluster_without_traffic_is_inconclusive_and_waits_for_a_person() {
    let r = gate("progressive-sync-gate", "prod-nowhere").run();
    assert_eq!((r.code, r.phase()), (3, Some(Inconclusive)), "{r:#?}");
    assert_eq!(r.counters("error-rate"), (4, 0, 0, 4, 0));
}

#[test]
fn the_absolute_gate_lets_a_small_regression_through_and_the_comparison_fails_it() {
    let plain = gate("progressive-sync-gate", "prod-worse").run();
    assert_eq!(plain.phase(), Some(Successful), "{plain:#?}");
    let compared = gate("progressive-sync-gate-vs-baseline", "prod-worse")
        .arg("baseline-clusters", "prod-north|prod-south")
        .run();
    assert_eq!(
        (compared.code, compared.phase()),
        (1, Some(Failed)),
        "{compared:#?}"
    );
    assert_eq!(compared.metric("error-rate-vs-baseline").phase, Failed);
}

#[test]
fn the_comparison_passes_a_cluster_like_the_old_version_only_after_the_soak() {
    let r = gate("progressive-sync-gate-vs-baseline", "prod-east")
        .arg("baseline-clusters", "prod-north|prod-south")
        .run();
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    let last = r.metric("error-rate").measurements.last().expect("looks");
    assert_eq!(finished_minute(last).floor(), 40.0);
}
