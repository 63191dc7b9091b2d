//! Evaluations per second of compiled conditions on one core, for the shapes Argo users write. Prints
//! figures; asserts nothing about speed. Targets: >= 1,000,000/s for `result[0] >= 0.95`, >= 200,000/s for
//! `all(result, # < 1000)` over 100 values.

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::hint::black_box;
use std::time::{Duration, Instant};

use canaryd::engine::condition::Condition;
use canaryd::engine::value::MetricValue;

fn measure(source: &str, value: &MetricValue, what: &str) {
    let condition = match Condition::compile(source) {
        Ok(c) => c,
        Err(e) => {
            println!("{source:<72} does not compile: {e}");
            return;
        }
    };
    let expected = condition.evaluate(value);
    // Warm up, then time batches until about a second has passed.
    for _ in 0..10_000 {
        let _ = black_box(condition.evaluate(black_box(value)));
    }
    let mut runs: u64 = 0;
    let start = Instant::now();
    let cpu_start = thread_cpu_ns();
    while start.elapsed() < Duration::from_secs(1) {
        for _ in 0..1_000 {
            let outcome = condition.evaluate(black_box(value));
            black_box(&outcome);
        }
        runs += 1_000;
    }
    let wall = start.elapsed().as_secs_f64();
    // CPU time of this thread: the machine is shared, so wall-clock rates understate what one core does.
    let cpu = match (cpu_start, thread_cpu_ns()) {
        (Some(a), Some(b)) if b > a => format!(
            "{:>12.0} evals/s per CPU-second",
            runs as f64 / ((b - a) as f64 / 1e9)
        ),
        _ => "CPU time unavailable".to_string(),
    };
    println!(
        "{source:<70} {what:<17} {:>12.0} evals/s wall  {cpu}  -> {expected:?}",
        runs as f64 / wall,
    );
}

/// Nanoseconds this thread has run on a CPU (Linux schedstat), if the kernel provides it.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn main() {
    let hundred: Vec<f64> = (0..100).map(|i| f64::from(i) * 9.5).collect();
    let vector = MetricValue::Numbers(vec![0.97]);
    let range = MetricValue::Numbers(hundred);
    let web = MetricValue::Json(serde_json::json!({"successRate": 0.97, "status": "ok"}));
    let apdex = MetricValue::Json(serde_json::json!({"service_apdex": {"values": {"values": [
        {"id": "a", "value": "9950"}, {"id": "b", "value": "9901"}, {"id": "c", "value": "9990"}
    ]}}}));
    println!("canaryd condition evaluation, one core (cargo bench --bench conditions)");
    measure("result[0] >= 0.95", &vector, "vector of 1");
    measure("all(result, # < 1000)", &range, "vector of 100");
    measure("all(result, {# < 1000})", &range, "vector of 100");
    measure(
        "len(result) == 0 || result[0] < 0.05",
        &vector,
        "vector of 1",
    );
    measure(
        "isNaN(result[0]) || result[0] >= 0.95",
        &vector,
        "vector of 1",
    );
    measure(
        "default(result, 0) < 10",
        &MetricValue::Number(3.0),
        "scalar",
    );
    measure("result <= 0.01", &MetricValue::Number(0.005), "scalar");
    measure("result.successRate >= 0.95", &web, "JSON object");
    measure("result.status == 'ok'", &web, "JSON object");
    measure(
        "all(result.service_apdex.values.values, {asFloat(.value) >= 9900})",
        &apdex,
        "JSON, 3 elements",
    );
    measure(
        "mean(result) < 500 && max(result) < 1000",
        &range,
        "vector of 100",
    );
}
