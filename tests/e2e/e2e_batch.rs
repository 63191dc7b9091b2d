//! Range-batched Prometheus queries (providers/batch.rs) against a real Prometheus: at every measurement
//! time of a backtest, the batched provider answers exactly what an instant query at that time answers,
//! for a one-series vector, a scalar, a vector of several series, an empty vector, NaN and the `@ start()` /
//! `@ end()` modifiers, on the grid and off it; and it sends far fewer requests.

#![allow(clippy::disallowed_methods)]

use std::sync::OnceLock;

use canaryd::api::Metric;
use canaryd::measure::{MeasureAt, Providers};
use canaryd::providers::provider::{Progress, RunRef};
use canaryd_testkit::prometheus::{Prometheus, Scenario, Traffic, at, shared};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

static PROMETHEUS: OnceLock<Prometheus> = OnceLock::new();

fn prometheus() -> &'static Prometheus {
    shared(&PROMETHEUS, || {
        // Errors come and go, and traffic stops for a while (0/0 is NaN).
        let traffic = |minute: f64| Traffic {
            rps: if (50.0..56.0).contains(&minute) {
                0.0
            } else {
                10.0 + minute % 7.0
            },
            errors: if (20.0..30.0).contains(&minute) {
                0.2
            } else {
                0.01 * (minute % 3.0)
            },
        };
        Scenario::new(90).requests(
            "http_requests_total",
            &[("service", "web")],
            "code",
            traffic,
        )
    })
}

fn metric(query: &str, count: i32) -> Metric {
    serde_json::from_value(json!({
        "name": "m", "interval": "1m", "count": count,
        "provider": {"prometheus": {"query": query}}
    }))
    .expect("a metric")
}

/// The rendered value of one measurement at `time`, as a status would store it.
async fn measure(providers: &Providers, metric: &Metric, time: Timestamp) -> String {
    let at = MeasureAt {
        now: time,
        eval_time: Some(time),
        secrets: &[],
        window_start: time,
        result: None,
        run: &RunRef::local("batch", "default", time),
    };
    let provider = providers.of(metric).expect("a prometheus provider");
    let progress = provider.measure(metric, at).await;
    match progress {
        Progress::Finished(Ok(answer)) => answer.result.value.render(),
        Progress::Finished(Err(e)) => panic!("{time}: {e}"),
        Progress::Running { .. } | Progress::Ended { .. } => {
            panic!("{time}: a Prometheus query answers at once")
        }
    }
}

const QUERIES: &[&str] = &[
    // One series.
    r#"sum(rate(http_requests_total{service="web",code!~"5.."}[2m])) / sum(rate(http_requests_total{service="web"}[2m]))"#,
    // A scalar.
    r#"scalar(sum(rate(http_requests_total{service="web"}[1m])))"#,
    // Several series: the server's order of an instant vector is kept.
    r#"sum by (code) (rate(http_requests_total{service="web"}[1m]))"#,
    // Series that come and go (errors only some minutes), and an empty vector.
    r#"rate(http_requests_total{service="web",code="500"}[30s]) > 0.05"#,
    r#"rate(http_requests_total{service="nothing"}[1m])"#,
    // `@ start()` and `@ end()` are the evaluation time in an instant query, the range's ends in a range query.
    r#"sum(rate(http_requests_total{service="web"}[1m] @ end()))"#,
    r#"scalar(sum(rate(http_requests_total{service="web"}[1m] @ start())))"#,
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Providers whose Prometheus queries are range-batched up to `end`, as a backtest's are.
fn batched(prometheus: &Prometheus, end: Timestamp) -> Providers {
    Providers::new(Some(prometheus.url().to_string())).with_batched_prometheus(Some(end))
}

#[test]
fn batched_values_equal_instant_values_at_every_measurement_time() {
    let prometheus = prometheus();
    let runtime = runtime();
    let end = at(88);
    let plain = Providers::new(Some(prometheus.url().to_string()));
    let batched = batched(prometheus, end);
    // On the grid from minute 3, then off it by 10 s after minute 40 (an Error's retry), then on the new grid.
    let times: Vec<Timestamp> = (3..=40)
        .map(at)
        .chain((40..=87).map(|m| at(m) + SignedDuration::from_secs(10)))
        .collect();
    for query in QUERIES {
        let m = metric(query, 100);
        for &t in &times {
            let want = runtime.block_on(measure(&plain, &m, t));
            let got = runtime.block_on(measure(&batched, &m, t));
            assert_eq!(got, want, "{query} at {t}");
        }
    }
}

#[test]
fn a_metric_measured_every_interval_costs_two_requests_not_one_per_measurement() {
    let prometheus = prometheus();
    let runtime = runtime();
    let batched = batched(prometheus, at(80));
    let m = metric(QUERIES[0], 60);
    let before = prometheus.queries_served();
    for minute in 10..70 {
        runtime.block_on(measure(&batched, &m, at(minute)));
    }
    assert_eq!(
        prometheus.queries_served() - before,
        2,
        "one instant query and one range query for 60 measurements"
    );
}

#[test]
fn a_query_of_several_series_sends_no_range_query_it_would_not_use() {
    let prometheus = prometheus();
    let runtime = runtime();
    let batched = batched(prometheus, at(80));
    // Two series (200 and 500) at every step: a range answer could answer none of them.
    let m = metric(QUERIES[2], 60);
    let before = prometheus.queries_served();
    for minute in 10..20 {
        let value = runtime.block_on(measure(&batched, &m, at(minute)));
        assert_eq!(value.matches(',').count(), 1, "two series: {value}");
    }
    assert_eq!(
        prometheus.queries_served() - before,
        10,
        "one instant query per measurement and no range query"
    );
}
