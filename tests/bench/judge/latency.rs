//! The latency table: simulated latency histograms judged once a minute by a p99 threshold, a Kayenta-style
//! Mann-Whitney per look, canaryd's distribution judge as `latency-vs-baseline.yaml` configures it, and
//! canaryd's sequential test on slow requests (`slow-requests-vs-baseline.yaml`), on the same traffic.

use canaryd_testkit::judge_sim::latency::{LatencyScenario, Rule, first_fails};

use super::{Cell, caught, within};

/// The table, `runs` seeded runs per row (`JUDGE_LATENCY_RUNS`, 2,000 by default).
pub fn figures(runs: usize) {
    println!();
    println!(
        "latency at 10 requests/s per track, a look a minute: log-normal latencies (median 150 ms, sigma 0.45, p99 about 0.43 s) in Prometheus' default buckets, {runs} seeded runs per row"
    );
    let columns = [
        "p99 > 0.5 s twice",
        "Kayenta-style",
        "template, once at 10",
        "sequential, slow > 0.25 s",
    ];
    println!(
        "{:<54} {:>20} {:>20} {:>20} {:>26}",
        "", columns[0], columns[1], columns[2], columns[3]
    );
    // (row, looks, canary factor, baseline factor, cell)
    let rows: [(&str, usize, f64, f64, Cell); 4] = [
        (
            "A/A false rollback, 10 / 60 / 200 looks",
            200,
            1.0,
            1.0,
            |f| within(f, &[10, 60, 200]),
        ),
        (
            "canary 10% slower: caught within 10 looks (median)",
            60,
            1.1,
            1.0,
            |f| caught(f, &[10]),
        ),
        (
            "canary 30% slower: caught within 10 looks (median)",
            60,
            1.3,
            1.0,
            |f| caught(f, &[10]),
        ),
        (
            "both 50% slower: rolled back, 10 / 60 looks",
            60,
            1.5,
            1.5,
            |f| within(f, &[10, 60]),
        ),
    ];
    for (seed, (name, looks, canary, baseline, cell)) in rows.into_iter().enumerate() {
        let f = first_fails(
            &LatencyScenario::new(runs, looks, canary, baseline),
            4000 + seed as u64,
            &Rule::ALL,
        );
        let cells: Vec<String> = f.iter().map(|firsts| cell(firsts)).collect();
        println!(
            "{:<54} {:>20} {:>20} {:>20} {:>26}",
            name, cells[0], cells[1], cells[2], cells[3]
        );
    }
}
