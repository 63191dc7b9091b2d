//! A 24-hour backtest at a 1-minute interval against a local real Prometheus: wall time, and canaryd's CPU
//! time next to Prometheus' own for the same run (target: canaryd under 10% of Prometheus' CPU).
//! Run with `cargo bench --bench backtest`; prints figures, asserts nothing about speed.

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

#[path = "../support/mod.rs"]
mod support;

use std::time::Instant;

use support::{Analyze, Prometheus, Scenario, steady};

/// CPU seconds (user + system) of a process from /proc/PID/stat, or of this process' waited-for children.
fn cpu_seconds(pid: Option<u32>) -> f64 {
    let (user, system) = cpu_split(pid);
    user + system
}

/// (user, system) CPU seconds, as [`cpu_seconds`].
fn cpu_split(pid: Option<u32>) -> (f64, f64) {
    let path = pid.map_or("/proc/self/stat".to_string(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(&path).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // 0-based after ')': state is 0, utime 11, stime 12, cutime 13, cstime 14.
    let (a, b) = if pid.is_some() { (11, 12) } else { (13, 14) };
    // USER_HZ is 100 on Linux.
    let seconds = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0
    };
    (seconds(a), seconds(b))
}

/// The pid of the Prometheus serving `addr` (it runs under the harness' supervisor shell).
fn prometheus_pid(addr: &str) -> Option<u32> {
    let needle = format!("--web.listen-address={addr}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cmdline.starts_with("/usr/bin/prometheus") || cmdline.starts_with("prometheus"))
                .then_some(())
                .filter(|_| cmdline.contains(&needle))
                .map(|_| pid)
        })
}

fn main() {
    let minutes = 24 * 60 + 5;
    let built = Instant::now();
    let scenario = Scenario::new(minutes).requests(
        "http_requests_total",
        &[("service", "checkout")],
        "code",
        steady(50.0, 0.002),
    );
    let prometheus = Prometheus::start(&scenario);
    println!(
        "backfilled {minutes} minutes of series and started Prometheus in {:.2?}",
        built.elapsed()
    );
    let addr = prometheus.url().trim_start_matches("http://").to_string();
    let pid = prometheus_pid(&addr);

    let (prom_before, ours_before) = (pid.map(|p| cpu_seconds(Some(p))), cpu_split(None));
    let started = Instant::now();
    let run = Analyze::fixture("../bench/success-rate-indefinite.yaml")
        .arg("service", "checkout")
        .prometheus(&prometheus)
        .minutes(3, 3 + 24 * 60)
        .run();
    let wall = started.elapsed();
    let ours_after = cpu_split(None);
    let (user, system) = (ours_after.0 - ours_before.0, ours_after.1 - ours_before.1);
    let ours = user + system;
    let result = run.metric("success-rate");
    println!(
        "24 h backtest at 1 m: {} measurements ({} successful), phase {:?}, wall {:.2?} ({:.0} measurements/s)",
        result.count + result.error,
        result.successful,
        run.phase(),
        wall,
        f64::from(result.count + result.error) / wall.as_secs_f64()
    );
    match (pid, prom_before) {
        (Some(p), Some(before)) => {
            let theirs = cpu_seconds(Some(p)) - before;
            println!(
                "CPU: canaryd {ours:.2} s ({user:.2} user, {system:.2} system), Prometheus {theirs:.2} s for the same run: \
                 canaryd = {:.1}% of Prometheus",
                100.0 * ours / theirs.max(0.01)
            );
        }
        _ => println!("CPU: canaryd {ours:.2} s (the Prometheus process was not found in /proc)"),
    }
}
