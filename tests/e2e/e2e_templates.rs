//! Every template in `analysis-templates/` end to end: `canaryd analyze --from/--to --output json` against a
//! real Prometheus holding series shaped like the real exporters' (generic HTTP instrumentation, Istio's
//! sidecars, the NGINX ingress controller, kube-state-metrics), at least one healthy and one failing canary
//! each, and no traffic or stopped traffic always Inconclusive.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fixtures wait for real servers on real time.

use std::sync::OnceLock;

use crate::CANARYD;
use canaryd::api::AnalysisPhase;
use canaryd_testkit::prometheus;
use canaryd_testkit::prometheus::{
    Analyze, DEFAULT_BUCKETS, ISTIO_BUCKETS_MS, Latency, Prometheus, Scenario, Traffic, at,
    finished_minute, steady,
};

use AnalysisPhase::{Failed, Inconclusive, Successful};

/// 20 requests/s with 1 % errors until minute 5, then none: the series stay, their rates drop to 0.
fn stopped(m: f64) -> Traffic {
    Traffic {
        rps: if m < 5.0 { 20.0 } else { 0.0 },
        errors: 0.01,
    }
}

fn latency(value: f64) -> impl Fn(f64) -> Latency {
    move |_| Latency { rps: 20.0, value }
}

fn stopped_latency(value: f64) -> impl Fn(f64) -> Latency {
    move |m| Latency {
        rps: stopped(m).rps,
        value,
    }
}

// --- generic HTTP instrumentation: http_requests_total{namespace, service, code} and its histogram ---

fn http(s: Scenario, service: &str, traffic: impl Fn(f64) -> Traffic) -> Scenario {
    s.requests(
        "http_requests_total",
        &[
            ("job", "shop/checkout"),
            ("namespace", "shop"),
            ("service", service),
            ("method", "GET"),
        ],
        "code",
        traffic,
    )
}

fn http_latency(s: Scenario, service: &str, latency: impl Fn(f64) -> Latency) -> Scenario {
    s.histogram(
        "http_request_duration_seconds",
        &[
            ("job", "shop/checkout"),
            ("namespace", "shop"),
            ("service", service),
        ],
        DEFAULT_BUCKETS,
        latency,
    )
}

// --- Istio: the sidecar's standard metrics, as each reporter labels them ---

/// The label set Istio's telemetry writes on `istio_requests_total` and its duration histogram.
fn istio_labels<'a>(
    reporter: &'a str,
    workload: &'a str,
    service: &'a str,
    version: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("connection_security_policy", "mutual_tls"),
        ("destination_canonical_revision", version),
        ("destination_canonical_service", workload),
        (
            "destination_principal",
            "spiffe://cluster.local/ns/shop/sa/default",
        ),
        ("destination_service", service),
        ("destination_service_name", service),
        ("destination_service_namespace", "shop"),
        ("destination_version", version),
        ("destination_workload", workload),
        ("destination_workload_namespace", "shop"),
        ("reporter", reporter),
        ("request_protocol", "http"),
        ("response_flags", "-"),
        ("source_canonical_service", "frontend"),
        ("source_workload", "frontend"),
        ("source_workload_namespace", "shop"),
    ]
}

fn istio(
    s: Scenario,
    reporter: &str,
    workload: &str,
    service: &str,
    traffic: impl Fn(f64) -> Traffic,
) -> Scenario {
    let labels = istio_labels(reporter, workload, service, "v2");
    s.requests("istio_requests_total", &labels, "response_code", traffic)
}

fn istio_latency(
    s: Scenario,
    workload: &str,
    service: &str,
    latency: impl Fn(f64) -> Latency,
) -> Scenario {
    let labels = istio_labels("destination", workload, service, "v2");
    s.histogram(
        "istio_request_duration_milliseconds",
        &labels,
        ISTIO_BUCKETS_MS,
        latency,
    )
}

// --- NGINX ingress controller: nginx_ingress_controller_requests, canary label empty for stable traffic ---

fn nginx(s: Scenario, ingress: &str, canary: &str, traffic: impl Fn(f64) -> Traffic) -> Scenario {
    let service = format!("{ingress}-stable");
    s.requests(
        "nginx_ingress_controller_requests",
        &[
            ("canary", canary),
            ("controller_class", "k8s.io/ingress-nginx"),
            ("controller_namespace", "ingress-nginx"),
            ("controller_pod", "ingress-nginx-controller-7d9f8b6c5-x2x7k"),
            ("ingress", ingress),
            ("method", "GET"),
            ("namespace", "shop"),
            ("path", "/"),
            ("service", &service),
        ],
        "status",
        traffic,
    )
}

// --- kube-state-metrics: restarts per container ---

fn restarts(s: Scenario, pod: &str, restarts: impl Fn(f64) -> f64) -> Scenario {
    s.counter(
        "kube_pod_container_status_restarts_total",
        &[
            ("container", "app"),
            ("instance", "10.0.3.7:8080"),
            ("job", "kube-state-metrics"),
            ("namespace", "shop"),
            ("pod", pod),
            ("uid", "3f1c2a9e-5b7d-4e8f-9a06-1c2d3e4f5a6b"),
        ],
        restarts,
    )
}

/// One restart at each of the given minutes.
fn restarting_at(minutes: &'static [f64]) -> impl Fn(f64) -> f64 {
    move |m| minutes.iter().filter(|at| m >= **at).count() as f64
}

fn scenario() -> Scenario {
    let s = Scenario::new(40);

    let s = http(s, "checkout-good", steady(20.0, 0.002));
    let s = http(s, "checkout-flawless", steady(20.0, 0.0));
    let s = http(s, "checkout-bad", steady(20.0, 0.05));
    let s = http(s, "checkout-stopped", stopped);
    let s = http_latency(s, "checkout-good", latency(0.08));
    let s = http_latency(s, "checkout-bad", latency(0.7));
    let s = http_latency(s, "checkout-stopped", stopped_latency(0.08));

    // reviews: canary and stable share the workload (Argo Rollouts), told apart by destination_service_name;
    // the stable is the bad one, and the client side reports errors the server never saw.
    let s = istio(
        s,
        "destination",
        "reviews",
        "reviews-canary",
        steady(20.0, 0.001),
    );
    let s = istio(
        s,
        "destination",
        "reviews",
        "reviews-stable",
        steady(20.0, 0.08),
    );
    let s = istio(s, "source", "reviews", "reviews-canary", steady(20.0, 0.3));
    let s = istio_latency(s, "reviews", "reviews-canary", latency(40.0));
    let s = istio_latency(s, "reviews", "reviews-stable", latency(1500.0));
    // ratings: a canary workload of its own (Flagger style) that fails and is slow.
    let s = istio(
        s,
        "destination",
        "ratings-canary",
        "ratings",
        steady(20.0, 0.06),
    );
    let s = istio_latency(s, "ratings-canary", "ratings", latency(700.0));
    let s = istio(s, "destination", "details", "details", stopped);
    let s = istio_latency(s, "details", "details", stopped_latency(40.0));

    // storefront: a healthy canary next to a failing stable; search: the canary fails.
    let s = nginx(s, "storefront", "", steady(50.0, 0.04));
    let s = nginx(
        s,
        "storefront",
        "shop-storefront-canary-80",
        steady(10.0, 0.001),
    );
    let s = nginx(s, "search", "", steady(50.0, 0.001));
    let s = nginx(s, "search", "shop-search-canary-80", steady(10.0, 0.07));
    let s = nginx(s, "legacy", "shop-legacy-canary-80", stopped);
    // catalog: only stable traffic so far.
    let s = nginx(s, "catalog", "", steady(50.0, 0.001));

    // checkout: the canary (hash 6d4f8b7c9) never restarts, the stable's pod does; payments' canary
    // restarts at minute 13.
    let s = restarts(s, "checkout-6d4f8b7c9-q8x2m", restarting_at(&[]));
    let s = restarts(s, "checkout-6d4f8b7c9-z7k4p", restarting_at(&[]));
    let s = restarts(s, "checkout-5c8d7e6f4-h2j9w", restarting_at(&[12.0]));
    let s = restarts(s, "payments-7f9c6b5d8-m4n6b", restarting_at(&[]));
    restarts(s, "payments-7f9c6b5d8-t5r3e", restarting_at(&[13.0, 16.0]))
}

fn prometheus() -> &'static Prometheus {
    static SERVER: OnceLock<Prometheus> = OnceLock::new();
    prometheus::shared(&SERVER, scenario)
}

/// A shipped template with `args` against the shared server, from minute 10 to 30. The server is the
/// configured default (as the chart's `prometheus.address` sets it), not `--prometheus`: the shipped
/// templates name no address of their own, so the one canaryd is configured with reaches them.
fn run(template: &str, args: &[(&str, &str)]) -> prometheus::Run {
    args.iter()
        .fold(Analyze::shipped(CANARYD, template), |a, (k, v)| a.arg(k, v))
        .default_prometheus(prometheus())
        .minutes(10, 30)
        .run()
}

const SHOP: (&str, &str) = ("namespace", "shop");

#[test]
fn success_rate_passes_a_healthy_service() {
    let r = run("success-rate.yaml", &[("service", "checkout-good"), SHOP]);
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    assert_eq!(r.counters("success-rate"), (10, 10, 0, 0, 0));
    r.assert_each_value_near("success-rate", 0.998);
}

#[test]
fn success_rate_fails_a_service_with_five_percent_errors() {
    let r = run("success-rate.yaml", &[("service", "checkout-bad"), SHOP]);
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    assert_eq!(r.counters("success-rate"), (2, 0, 2, 0, 0));
    r.assert_each_value_near("success-rate", 0.95);
}

#[test]
fn error_rate_passes_a_healthy_service() {
    let r = run("error-rate.yaml", &[("service", "checkout-good"), SHOP]);
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    r.assert_each_value_near("error-rate", 0.002);
}

#[test]
fn error_rate_counts_a_service_without_any_5xx_series_as_zero_errors() {
    let r = run("error-rate.yaml", &[("service", "checkout-flawless"), SHOP]);
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    assert_eq!(r.values("error-rate"), ["[0]"; 10]);
}

#[test]
fn error_rate_fails_a_service_with_five_percent_errors() {
    let r = run("error-rate.yaml", &[("service", "checkout-bad"), SHOP]);
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    assert_eq!(r.counters("error-rate"), (2, 0, 2, 0, 0));
}

#[test]
fn latency_p99_passes_a_service_answering_in_80_ms() {
    let r = run("latency-p99.yaml", &[("service", "checkout-good"), SHOP]);
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    assert_eq!(r.counters("latency-p99"), (10, 10, 0, 0, 0));
    r.assert_each_value_near("latency-p99", 0.0995);
}

#[test]
fn latency_p99_fails_a_service_answering_in_700_ms() {
    let r = run("latency-p99.yaml", &[("service", "checkout-bad"), SHOP]);
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    assert_eq!(r.counters("latency-p99"), (2, 0, 2, 0, 0));
    r.assert_each_value_near("latency-p99", 0.995);
}

#[test]
fn istio_success_rate_passes_the_canary_service_of_a_shared_workload() {
    let r = run(
        "istio-success-rate.yaml",
        &[("workload", "reviews"), SHOP, ("service", "reviews-canary")],
    );
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    r.assert_each_value_near("istio-success-rate", 0.999);
}

#[test]
fn istio_success_rate_fails_the_stable_service_of_the_same_workload() {
    let r = run(
        "istio-success-rate.yaml",
        &[("workload", "reviews"), SHOP, ("service", "reviews-stable")],
    );
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
}

#[test]
fn istio_success_rate_fails_a_canary_workload_with_six_percent_errors() {
    let r = run(
        "istio-success-rate.yaml",
        &[("workload", "ratings-canary"), SHOP],
    );
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    r.assert_each_value_near("istio-success-rate", 0.94);
}

#[test]
fn istio_latency_p99_passes_a_canary_answering_in_40_ms() {
    let r = run(
        "istio-latency-p99.yaml",
        &[("workload", "reviews"), SHOP, ("service", "reviews-canary")],
    );
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    assert_eq!(r.counters("istio-latency-p99"), (10, 10, 0, 0, 0));
    r.assert_each_value_near("istio-latency-p99", 49.7);
}

#[test]
fn istio_latency_p99_fails_a_canary_answering_in_700_ms() {
    let r = run(
        "istio-latency-p99.yaml",
        &[("workload", "ratings-canary"), SHOP],
    );
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    r.assert_each_value_near("istio-latency-p99", 995.0);
}

#[test]
fn nginx_success_rate_passes_a_healthy_canary_behind_a_failing_stable() {
    let r = run(
        "nginx-ingress-success-rate.yaml",
        &[("ingress", "storefront"), SHOP],
    );
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    r.assert_each_value_near("nginx-ingress-success-rate", 0.999);
}

#[test]
fn nginx_success_rate_fails_a_canary_with_seven_percent_errors() {
    let r = run(
        "nginx-ingress-success-rate.yaml",
        &[
            ("ingress", "search"),
            SHOP,
            ("canary-upstream", "shop-search-canary-80"),
        ],
    );
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    r.assert_each_value_near("nginx-ingress-success-rate", 0.93);
}

#[test]
fn container_restarts_passes_a_canary_whose_pods_never_restart() {
    let r = run(
        "container-restarts.yaml",
        &[("rollout", "checkout"), SHOP, ("canary-hash", "6d4f8b7c9")],
    );
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    assert_eq!(r.values("container-restarts"), ["[0]"; 10]);
}

#[test]
fn container_restarts_fails_at_the_first_look_after_a_canary_pod_restarts() {
    let r = run(
        "container-restarts.yaml",
        &[("rollout", "payments"), SHOP, ("canary-hash", "7f9c6b5d8")],
    );
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    assert_eq!(
        r.message(),
        Some("Metric \"container-restarts\" assessed Failed due to failed (1) > failureLimit (0)")
    );
    assert_eq!(r.values("container-restarts"), ["[0]", "[0]", "[0]", "[1]"]);
    assert_eq!(finished_minute(r.first("container-restarts", Failed)), 13.0);
}

#[test]
fn the_prometheus_address_arg_is_used_when_no_flag_overrides_it() {
    let r = Analyze::shipped(CANARYD, "success-rate.yaml")
        .arg("service", "checkout-good")
        .arg("namespace", "shop")
        .arg("prometheus-address", prometheus().url())
        .minutes(10, 30)
        .run();
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    assert_eq!(r.counters("success-rate"), (10, 10, 0, 0, 0));
}

fn web_smoke(json_path: &str, expected: &str) -> prometheus::Run {
    let url = format!("{}/api/v1/status/buildinfo", prometheus().url());
    Analyze::shipped(CANARYD, "web-smoke.yaml")
        .arg("url", &url)
        .arg("json-path", json_path)
        .arg("expected", expected)
        .minutes(10, 30)
        .run()
}

/// web-smoke's endpoint here is the real Prometheus' own JSON API: `{"status":"success","data":{...}}`.
#[test]
fn web_smoke_passes_when_the_field_has_the_expected_value() {
    let r = web_smoke("{$.status}", "success");
    assert_eq!((r.code, r.phase()), (0, Some(Successful)), "{r:#?}");
    assert_eq!(r.counters("web-smoke"), (3, 3, 0, 0, 0));
    assert_eq!(r.values("web-smoke"), ["success"; 3]);
}

#[test]
fn web_smoke_fails_at_the_first_unexpected_answer() {
    let r = web_smoke("{$.status}", "ok");
    assert_eq!((r.code, r.phase()), (1, Some(Failed)), "{r:#?}");
    assert_eq!(r.counters("web-smoke"), (1, 0, 1, 0, 0));
}

/// Argo retries an Error 10 s later whatever the interval, and the 5th Error in a row ends the metric.
fn assert_five_errors_ten_seconds_apart(r: &prometheus::Run, message_start: &str) {
    assert_eq!(
        (r.code, r.phase()),
        (4, Some(AnalysisPhase::Error)),
        "{r:#?}"
    );
    assert_eq!(r.counters("web-smoke"), (0, 0, 0, 0, 5));
    let message = r.message().unwrap_or_default();
    assert!(message.starts_with(message_start), "{message}");
    let started: Vec<f64> = r
        .metric("web-smoke")
        .measurements
        .iter()
        .map(|m| finished_minute(m) * 60.0)
        .collect();
    assert_eq!(started, [600.0, 610.0, 620.0, 630.0, 640.0]);
}

#[test]
fn web_smoke_ends_in_error_when_the_endpoint_does_not_answer() {
    let closed = prometheus::closed_port_url();
    let r = Analyze::shipped(CANARYD, "web-smoke.yaml")
        .arg("url", &closed)
        .minutes(10, 30)
        .run();
    assert_five_errors_ten_seconds_apart(
        &r,
        &format!(
            "Metric \"web-smoke\" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4): \"Error Message: cannot connect to {closed}"
        ),
    );
}

#[test]
fn web_smoke_ends_in_error_when_the_field_is_missing() {
    let r = web_smoke("{$.data.nonexistent}", "ok");
    assert_five_errors_ten_seconds_apart(
        &r,
        "Metric \"web-smoke\" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4)",
    );
}

/// A shipped template, its args, and the value every look stores.
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

/// Each traffic template with args that select series which do not exist (result `[]`: no such service,
/// a canary Service or canary upstream that has had no requests yet while the stable has) or stopped
/// counting (0/0 = NaN).
const QUIET: &[Case] = &[
    ("success-rate.yaml", &[("service", "nobody"), SHOP], "[]"),
    (
        "success-rate.yaml",
        &[("service", "checkout-stopped"), SHOP],
        "[NaN]",
    ),
    ("error-rate.yaml", &[("service", "nobody"), SHOP], "[]"),
    (
        "error-rate.yaml",
        &[("service", "checkout-stopped"), SHOP],
        "[NaN]",
    ),
    ("latency-p99.yaml", &[("service", "nobody"), SHOP], "[]"),
    (
        "latency-p99.yaml",
        &[("service", "checkout-stopped"), SHOP],
        "[NaN]",
    ),
    (
        "istio-success-rate.yaml",
        &[
            ("workload", "reviews"),
            SHOP,
            ("service", "reviews-preview"),
        ],
        "[]",
    ),
    (
        "istio-success-rate.yaml",
        &[("workload", "details"), SHOP],
        "[NaN]",
    ),
    (
        "istio-latency-p99.yaml",
        &[("workload", "nobody"), SHOP],
        "[]",
    ),
    (
        "istio-latency-p99.yaml",
        &[("workload", "details"), SHOP],
        "[NaN]",
    ),
    (
        "nginx-ingress-success-rate.yaml",
        &[("ingress", "catalog"), SHOP],
        "[]",
    ),
    (
        "nginx-ingress-success-rate.yaml",
        &[("ingress", "legacy"), SHOP],
        "[NaN]",
    ),
    (
        "container-restarts.yaml",
        &[("rollout", "checkout"), SHOP, ("canary-hash", "0000000000")],
        "[]",
    ),
];

#[test]
fn no_traffic_and_stopped_traffic_are_inconclusive_for_every_template() {
    for (template, args, value) in QUIET {
        let r = run(template, args);
        let metric = template.trim_end_matches(".yaml");
        assert_eq!(
            (r.code, r.phase()),
            (3, Some(Inconclusive)),
            "{template} {args:?}: {r:#?}"
        );
        assert_eq!(r.counters(metric), (4, 0, 0, 4, 0), "{template} {args:?}");
        assert_eq!(r.values(metric), [*value; 4], "{template} {args:?}");
    }
}

#[test]
fn the_exporter_shaped_series_answer_as_built() {
    let p = prometheus();
    let nginx_stable = p.instant(
        "sum(rate(nginx_ingress_controller_requests{ingress=\"storefront\",canary=\"\"}[2m]))",
        at(20),
    );
    assert_eq!(
        nginx_stable,
        vec![50.0],
        "stable traffic has an empty canary label"
    );
    let istio_source = p.instant(
        "sum(rate(istio_requests_total{reporter=\"source\",destination_workload=\"reviews\"}[2m]))",
        at(20),
    );
    assert_eq!(istio_source, vec![20.0]);
    let restarts = p.instant(
        "kube_pod_container_status_restarts_total{pod=\"payments-7f9c6b5d8-t5r3e\"}",
        at(20),
    );
    assert_eq!(restarts, vec![2.0]);
}
