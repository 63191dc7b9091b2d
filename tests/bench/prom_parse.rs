//! Speed of the pure Prometheus answer parser on large answers: a 10,000-series vector (target < 5 ms)
//! and a 1,000-series × 60-sample matrix. Prints figures; asserts only that the parse is correct.
//! Run: `cargo bench --bench prom_parse`.

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::hint::black_box;
use std::time::{Duration, Instant};

use canaryd::engine::value::MetricValue;
use canaryd::providers::parse_query_response;

fn labels(i: usize) -> String {
    format!(
        r#"{{"__name__":"http_request_duration_seconds","namespace":"shop","service":"checkout","pod":"checkout-7d9f8c6b5-{i:05}","instance":"10.1.{}.{}:8080","job":"kubernetes-pods","code":"200"}}"#,
        i / 256,
        i % 256
    )
}

fn value(i: usize) -> String {
    match i % 1000 {
        0 => "NaN".to_string(),
        1 => "+Inf".to_string(),
        _ => format!("{}", (i as f64) * 0.000123 + 0.5),
    }
}

fn vector(series: usize) -> String {
    let items: Vec<String> = (0..series)
        .map(|i| {
            format!(
                r#"{{"metric":{},"value":[1767268800.123,"{}"]}}"#,
                labels(i),
                value(i)
            )
        })
        .collect();
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
        items.join(",")
    )
}

fn matrix(series: usize, samples: usize) -> String {
    let items: Vec<String> = (0..series)
        .map(|i| {
            let values: Vec<String> = (0..samples)
                .map(|s| format!(r#"[{},"{}"]"#, 1767268800 + 60 * s, value(i * samples + s)))
                .collect();
            format!(
                r#"{{"metric":{},"values":[{}]}}"#,
                labels(i),
                values.join(",")
            )
        })
        .collect();
    format!(
        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#,
        items.join(",")
    )
}

fn measure(name: &str, body: &[u8], expected_len: usize) {
    let runs = 50;
    for _ in 0..5 {
        black_box(parse_query_response(black_box(body)).ok());
    }
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let parsed = parse_query_response(black_box(body));
        times.push(start.elapsed());
        match parsed.map(|p| p.value) {
            Ok(MetricValue::Numbers(ns)) if ns.len() == expected_len => {}
            other => panic!("{name}: unexpected parse result {:?}", other.map(|_| ())),
        }
    }
    times.sort();
    let median = times[runs / 2];
    let mb = body.len() as f64 / 1e6;
    println!(
        "{name:<40} {mb:>6.2} MB  min {:>7.3} ms  median {:>7.3} ms  max {:>7.3} ms  ({:.0} MB/s at median)",
        times[0].as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3,
        times[runs - 1].as_secs_f64() * 1e3,
        mb / median.as_secs_f64(),
    );
}

fn main() {
    measure(
        "vector, 10,000 series (target < 5 ms)",
        vector(10_000).as_bytes(),
        10_000,
    );
    measure(
        "matrix, 1,000 series x 60 samples",
        matrix(1_000, 60).as_bytes(),
        60_000,
    );
}
