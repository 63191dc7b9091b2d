//! Against a local real Prometheus: a 24-hour `analyze` backtest at a 1-minute interval, and 168 hourly
//! `rehearse` starts of a one-hour Rollout with two metrics at 1 m: queries sent, wall time, and canaryd's
//! CPU time next to Prometheus' own for the same work (targets: backtest under 0.1 s with canaryd under 10%
//! of Prometheus' CPU; the rehearsals under 10 s).
//! Run with `cargo bench --bench backtest`; prints figures, asserts nothing about speed.

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::time::Instant;

use canaryd_testkit::cli::Canaryd;
use canaryd_testkit::prometheus;
use canaryd_testkit::prometheus::{Analyze, Prometheus, Scenario, steady};

const CANARYD: Canaryd = canaryd_testkit::canaryd!();

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

/// Prints canaryd's CPU next to Prometheus' for one measured stretch.
fn print_cpu(ours: (f64, f64), prometheus: Option<f64>) {
    let (user, system) = ours;
    let total = user + system;
    match prometheus {
        Some(theirs) => println!(
            "  CPU: canaryd {total:.2} s ({user:.2} user, {system:.2} system), Prometheus {theirs:.2} s: \
             canaryd = {:.1}% of Prometheus",
            100.0 * total / theirs.max(0.01)
        ),
        None => {
            println!("  CPU: canaryd {total:.2} s (the Prometheus process was not found in /proc)")
        }
    }
}

/// 168 hourly `canaryd rehearse` starts (`--every 1h`) of tests/fixtures/bench/rehearse-hourly.yaml, a
/// one-hour Rollout with two metrics measured every minute, in one process.
fn hourly_rehearsals(prometheus: &Prometheus, pid: Option<u32>) {
    let (from, until) = (prometheus::at(5), prometheus::at(5 + 167 * 60));
    let queries = prometheus.queries_served();
    let (prom_before, ours_before) = (pid.map(|p| cpu_seconds(Some(p))), cpu_split(None));
    let started = Instant::now();
    let out = CANARYD
        .command()
        .args([
            "rehearse",
            "-f",
            "tests/fixtures/bench/rehearse-hourly.yaml",
            "--prometheus",
            prometheus.url(),
            "--from",
            &from.to_string(),
            "--every",
            "1h",
            "--until",
            &until.to_string(),
        ])
        .output()
        .expect("the canaryd binary runs");
    let wall = started.elapsed();
    let ours_after = cpu_split(None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!(
        "168 hourly rehearsals of a one-hour Rollout, two metrics at 1 m: exit {:?}, wall {wall:.2?}, {} queries",
        out.status.code(),
        prometheus.queries_served() - queries
    );
    for line in stdout.lines().skip_while(|l| !l.ends_with("rehearsals:")) {
        println!("  {line}");
    }
    print_cpu(
        (ours_after.0 - ours_before.0, ours_after.1 - ours_before.1),
        pid.zip(prom_before)
            .map(|(p, before)| cpu_seconds(Some(p)) - before),
    );
}

fn main() {
    // A week of starts and an hour after the last, for the rehearsals; the first day for the backtest.
    let minutes = 169 * 60 + 5;
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

    let queries = prometheus.queries_served();
    let (prom_before, ours_before) = (pid.map(|p| cpu_seconds(Some(p))), cpu_split(None));
    let started = Instant::now();
    let run = Analyze::fixture(CANARYD, "../bench/success-rate-indefinite.yaml")
        .arg("service", "checkout")
        .prometheus(&prometheus)
        .minutes(3, 3 + 24 * 60)
        .run();
    let wall = started.elapsed();
    let ours_after = cpu_split(None);
    let result = run.metric("success-rate");
    println!(
        "24 h backtest at 1 m: {} measurements ({} successful), phase {:?}, wall {:.2?}, {} queries",
        result.count + result.error,
        result.successful,
        run.phase(),
        wall,
        prometheus.queries_served() - queries
    );
    print_cpu(
        (ours_after.0 - ours_before.0, ours_after.1 - ours_before.1),
        pid.zip(prom_before)
            .map(|(p, before)| cpu_seconds(Some(p)) - before),
    );
    hourly_rehearsals(&prometheus, pid);
}
