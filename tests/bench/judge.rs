//! `cargo bench --bench judge`: prints the judge's measured false-alarm rates, power and speed. Figures only,
//! no assertions (the tests assert the bounds with fewer runs); the README quotes this output.

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::time::Instant;

use canaryd::engine::judge::{
    Design, DistributionParams, ErrorRateParams, ErrorRateTest, Look, Mixture, judge_distribution,
    judge_error_rate,
};
use canaryd_testkit::judge_sim::distribution::{
    DistributionScenario, normal, simulate_distribution,
};
use canaryd_testkit::judge_sim::error_rate::{
    Binomial, ErrorRateScenario, first_verdicts, fraction_within, median_first, peer_first_fails,
    simulate_error_rate,
};
use canaryd_testkit::judge_sim::rng::Rng;

#[path = "judge/latency.rs"]
mod latency;
#[path = "judge/limits.rs"]
mod limits;

/// Runs per row: `default`, or the environment variable `var` for a quicker look while developing.
fn runs_per_row(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A fraction with its 95 % binomial (Wilson) interval.
fn with_interval(p: f64, n: usize) -> String {
    let (n, z) = (n as f64, 1.96);
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    format!(
        "{:.4} [{:.4}, {:.4}]",
        p,
        (centre - half).max(0.0),
        (centre + half).min(1.0)
    )
}

fn looks(m: Option<usize>) -> String {
    m.map_or("-".to_string(), |m| m.to_string())
}

fn error_rate_figures(runs: usize) {
    println!(
        "error-rate judge, {runs} seeded runs per row, 1,000 requests per side per look, confidence 0.95"
    );
    println!(
        "{:<52} {:>6} {:>27} {:>27} {:>9} {:>9}",
        "scenario", "looks", "P(any fail) [95% CI]", "P(any pass) [95% CI]", "med fail", "med pass"
    );
    let absolute = ErrorRateParams {
        max_absolute_increase: 0.002,
        ..ErrorRateParams::default()
    };
    let wide = ErrorRateParams {
        max_relative_increase: 0.20,
        ..ErrorRateParams::default()
    };
    let rows: Vec<(&str, ErrorRateScenario)> = vec![
        (
            "A/A 0.1%, margin 10%",
            ErrorRateScenario::new(runs, 200, 0.001, 0.001),
        ),
        (
            "A/A 1%, margin 10%",
            ErrorRateScenario::new(runs, 200, 0.01, 0.01),
        ),
        (
            "A/A 10%, margin 10%",
            ErrorRateScenario::new(runs, 200, 0.10, 0.10),
        ),
        (
            "at margin: 1% vs 1.1%",
            ErrorRateScenario::at_margin(runs, 200, 0.01, ErrorRateParams::default()),
        ),
        (
            "at margin: 0.5% vs 0.75% (r 10%, a 0.2 points)",
            ErrorRateScenario::at_margin(runs, 200, 0.005, absolute),
        ),
        (
            "regression 1% -> 2%",
            ErrorRateScenario::new(runs, 20, 0.01, 0.02),
        ),
        (
            "regression 1% -> 1.5%",
            ErrorRateScenario::new(runs, 60, 0.01, 0.015),
        ),
        (
            "A/A 1%, margin 20%",
            ErrorRateScenario {
                params: wide,
                ..ErrorRateScenario::new(runs, 300, 0.01, 0.01)
            },
        ),
    ];
    for (seed, (name, scenario)) in rows.iter().enumerate() {
        let s = simulate_error_rate(scenario, 1000 + seed as u64);
        println!(
            "{:<52} {:>6} {:>27} {:>27} {:>9} {:>9}",
            name,
            scenario.looks,
            with_interval(s.fail_fraction, scenario.runs),
            with_interval(s.pass_fraction, scenario.runs),
            looks(s.median_looks_to_fail),
            looks(s.median_looks_to_pass)
        );
    }
    let sparse = judge_error_rate(
        &ErrorRateParams::default(),
        &[Look {
            canary_errors: 5,
            canary_requests: 2000,
            baseline_errors: 0,
            baseline_requests: 2000,
        }],
    );
    if let Ok(r) = sparse {
        println!(
            "sparse: canary 5/2000, baseline 0/2000 -> {}",
            r.first().map_or(serde_json::Value::Null, |r| r.to_json())
        );
    }
}

/// The low-traffic table: 10 requests/s per track and a look a minute (600 requests per side per
/// look), baseline 1 %, confidence 0.95, margin 10 %. The same simulated traffic (one seed per row) judged by
/// the peers (a 1.5 % threshold with `failureLimit: 1`, Kayenta-style Mann-Whitney per look) and by the
/// sequential test with the `wide` mixture (before) and `focused` (now).
fn low_traffic_figures(runs: usize) {
    println!();
    println!(
        "error-rate judge at 10 requests/s per track, a look a minute, baseline 1%, confidence 0.95, margin 10%, {runs} seeded runs per row"
    );
    let columns = [
        "threshold 1.5%",
        "Kayenta-style",
        "wide, sequential",
        "focused, sequential",
        "focused, planned",
    ];
    println!(
        "{:<58} {:>20} {:>20} {:>20} {:>20} {:>20}",
        "", columns[0], columns[1], columns[2], columns[3], columns[4]
    );
    let rows: Vec<(&str, usize, f64, f64, Cell)> = vec![
        (
            "A/A false rollback, 10 / 60 / 200 looks",
            200,
            0.01,
            0.01,
            |f| within(f, &[10, 60, 200]),
        ),
        (
            "at the margin (1% vs 1.1%) false rollback, 200 looks",
            200,
            0.01,
            0.011,
            |f| within(f, &[200]),
        ),
        (
            "incident (both 2%) rolled back, 10 / 60 looks",
            60,
            0.02,
            0.02,
            |f| within(f, &[10, 60]),
        ),
        (
            "1.5x caught within 10 / 60 looks (median look over 60)",
            60,
            0.01,
            0.015,
            |f| caught(f, &[10, 60]),
        ),
        (
            "2x caught within 10 looks (median look)",
            60,
            0.01,
            0.02,
            |f| caught(f, &[10]),
        ),
    ];
    for (seed, (name, n, baseline, canary, cell)) in rows.into_iter().enumerate() {
        let seed = 3000 + seed as u64;
        let scenario = |mixture, design| ErrorRateScenario {
            requests_per_look: 600,
            params: ErrorRateParams {
                mixture,
                design,
                ..ErrorRateParams::default()
            },
            ..ErrorRateScenario::new(runs, n, baseline, canary)
        };
        // One seed per row: the same simulated traffic, judged by each rule.
        let peers = peer_first_fails(&scenario(Mixture::Focused, Design::Planned), seed, 0.015);
        let [wide, focused, planned] = [
            (Mixture::Wide, Design::Sequential),
            (Mixture::Focused, Design::Sequential),
            (Mixture::Focused, Design::Planned),
        ]
        .map(|(m, d)| first_verdicts(&scenario(m, d), seed).0);
        let cells = [&peers.threshold, &peers.kayenta, &wide, &focused, &planned].map(|f| cell(f));
        println!(
            "{:<58} {:>20} {:>20} {:>20} {:>20} {:>20}",
            name, cells[0], cells[1], cells[2], cells[3], cells[4]
        );
    }
}

/// The two designs away from the low-traffic table's traffic: 1 and 100 requests/s per track (60 and 6,000
/// requests per side per look), baseline 1 %, the same margin and confidence, the `focused` mixture.
fn design_figures(runs: usize) {
    println!();
    println!(
        "error-rate judge designs at 1 and 100 requests/s per track, a look a minute, baseline 1%, {runs} seeded runs per row"
    );
    println!(
        "{:<58} {:>22} {:>22} {:>22} {:>22}",
        "", "1/s sequential", "1/s planned", "100/s sequential", "100/s planned"
    );
    let rows: Vec<(&str, usize, f64, Cell)> = vec![
        ("A/A false rollback, 200 looks", 200, 0.01, |f| {
            within(f, &[200])
        }),
        ("at the margin (1% vs 1.1%), 200 looks", 200, 0.011, |f| {
            within(f, &[200])
        }),
        (
            "1.5x caught within 10 / 60 looks (median)",
            60,
            0.015,
            |f| caught(f, &[10, 60]),
        ),
        ("2x caught within 10 / 60 looks (median)", 60, 0.02, |f| {
            caught(f, &[10, 60])
        }),
    ];
    for (seed, (name, n, canary, cell)) in rows.into_iter().enumerate() {
        let seed = 5000 + seed as u64;
        let cells = [
            (60, Design::Sequential),
            (60, Design::Planned),
            (6000, Design::Sequential),
            (6000, Design::Planned),
        ]
        .map(|(requests_per_look, design)| {
            let scenario = ErrorRateScenario {
                requests_per_look,
                params: ErrorRateParams {
                    design,
                    ..ErrorRateParams::default()
                },
                ..ErrorRateScenario::new(runs, n, 0.01, canary)
            };
            cell(&first_verdicts(&scenario, seed).0)
        });
        println!(
            "{:<58} {:>22} {:>22} {:>22} {:>22}",
            name, cells[0], cells[1], cells[2], cells[3]
        );
    }
}

/// A table cell from each run's first rollback.
type Cell = fn(&[Option<usize>]) -> String;

/// Runs rolled back within each number of looks, in percent: `0.34/0.52%`.
fn within(firsts: &[Option<usize>], looks: &[usize]) -> String {
    let shares: Vec<String> = looks
        .iter()
        .map(|&l| format!("{:.2}", 100.0 * fraction_within(firsts, l)))
        .collect();
    format!("{}%", shares.join("/"))
}

/// [`within`] followed by the median first look: `33.3/95.5% (15)`.
fn caught(firsts: &[Option<usize>], looks_within: &[usize]) -> String {
    format!(
        "{} ({})",
        within(firsts, looks_within),
        looks(median_first(firsts))
    )
}

fn distribution_figures(runs: usize) {
    println!();
    println!(
        "distribution judge (one look), lognormal latencies median 100 ms, sigma 0.3, {runs} runs per row"
    );
    println!(
        "{:<52} {:>27} {:>27} {:>27}",
        "scenario", "P(fail) [95% CI]", "P(pass) [95% CI]", "CI covers shift"
    );
    let rows: Vec<(&str, DistributionScenario)> = vec![
        (
            "A/A, 100 per side, margin 0",
            DistributionScenario::aa(runs, 100, 0.0),
        ),
        (
            "A/A, 100 per side, margin 10%",
            DistributionScenario::aa(runs, 100, 0.10),
        ),
        (
            "+10 ms (at the 10% margin), 100 per side",
            DistributionScenario::shifted(runs, 100, 1.1),
        ),
        (
            "+30 ms, 100 per side",
            DistributionScenario::shifted(runs, 100, 1.3),
        ),
        (
            "+20 ms, 50 per side",
            DistributionScenario::shifted(runs, 50, 1.2),
        ),
    ];
    for (seed, (name, scenario)) in rows.iter().enumerate() {
        let s = simulate_distribution(scenario, 2000 + seed as u64);
        println!(
            "{:<52} {:>27} {:>27} {:>27}",
            name,
            with_interval(s.fail_fraction, scenario.runs),
            with_interval(s.pass_fraction, scenario.runs),
            with_interval(s.coverage, scenario.runs)
        );
    }
}

fn per_call<T>(calls: usize, mut f: impl FnMut(usize) -> T) -> f64 {
    let start = Instant::now();
    for i in 0..calls {
        std::hint::black_box(f(i));
    }
    start.elapsed().as_secs_f64() / calls as f64
}

/// A cumulative history; `varying` gives every look its own request split (its own pool).
fn history(n: usize, varying: bool) -> Vec<Look> {
    let mut rng = Rng::new(7);
    let binomial = Binomial::new(1000, 0.01);
    let mut l = Look::default();
    (0..n)
        .map(|i| {
            let canary = if varying { 500 + i as u64 } else { 1000 };
            l.canary_requests += canary;
            l.baseline_requests += 1000;
            l.canary_errors += binomial.sample(&mut rng) * canary / 1000;
            l.baseline_errors += binomial.sample(&mut rng);
            l
        })
        .collect()
}

fn speed_figures() {
    println!();
    println!("speed (release build, this machine)");
    let params = ErrorRateParams::default();
    for (looks, varying) in [(200, false), (200, true)] {
        let h = history(looks, varying);
        let observe = per_call(200, |_| {
            ErrorRateTest::replay(&params, &h).map(|t| t.verdict())
        }) / looks as f64;
        let full = per_call(20, |_| judge_error_rate(&params, &h).map(|r| r.len())) / looks as f64;
        let splits = if varying {
            "a new request split every look"
        } else {
            "one request split"
        };
        println!(
            "error rate, {looks} looks, {splits}: verdict only {:.2} us/look, with ratio bounds {:.1} us/look (last look {:.1} us)",
            observe * 1e6,
            full * 1e6,
            per_call(20, |_| ErrorRateTest::replay(&params, &h)
                .map(|t| t.result()))
                * 1e6
                - observe * looks as f64 * 1e6
        );
    }
    let mut rng = Rng::new(8);
    for n in [100usize, 1_000, 100_000] {
        let canary: Vec<f64> = (0..n)
            .map(|_| 100.0 * (0.3 * normal(&mut rng)).exp())
            .collect();
        let baseline: Vec<f64> = (0..n)
            .map(|_| 100.0 * (0.3 * normal(&mut rng)).exp())
            .collect();
        let calls = if n > 10_000 { 5 } else { 200 };
        let t = per_call(calls, |_| {
            judge_distribution(&canary, &baseline, &DistributionParams::default()).map(|r| r.shift)
        });
        println!(
            "distribution, {n} samples per side: {:.3} ms per judgement",
            t * 1e3
        );
    }
}

/// The sections to print: all, or those `JUDGE_BENCH_ONLY` names (comma-separated: error-rate, low-traffic,
/// designs, limits, distribution, latency, speed).
fn wanted(section: &str) -> bool {
    std::env::var("JUDGE_BENCH_ONLY")
        .map_or(true, |only| only.split(',').any(|s| s.trim() == section))
}

fn main() {
    let start = Instant::now();
    let runs = runs_per_row("JUDGE_BENCH_RUNS", 10_000);
    if wanted("error-rate") {
        error_rate_figures(runs);
    }
    if wanted("low-traffic") {
        low_traffic_figures(runs);
    }
    if wanted("designs") {
        design_figures(runs);
    }
    if wanted("limits") {
        limits::figures(runs);
    }
    if wanted("distribution") {
        distribution_figures(runs);
    }
    if wanted("latency") {
        // Each latency run simulates every request of both tracks: fewer runs per row.
        latency::figures(runs_per_row("JUDGE_LATENCY_RUNS", 2_000));
    }
    if wanted("speed") {
        speed_figures();
    }
    println!("\ntotal {:.1} s", start.elapsed().as_secs_f64());
}
