//! Latency judged as the share of slow requests (`slow-requests-vs-baseline.yaml`): on simulated latency
//! histograms the sequential test keeps its false-rollback bound over 200 looks (where Kayenta's per-look
//! Mann-Whitney on the same traffic does not), ignores a cluster-wide slowdown that an absolute p99 threshold
//! rolls back on, and catches a 30% slower canary within a few looks.
//! The template counts as slow what the simulation does, with the judge's defaults.

use std::path::Path;

use canaryd::api::compare::{COMPARE_PLUGIN, ErrorRateCompare};
use canaryd::api::decode::decode;
use canaryd::cli::load::parse_documents;
use canaryd::engine::compare::error_rate_params;
use canaryd::engine::judge::ErrorRateParams;
use canaryd_testkit::judge_sim::error_rate::fraction_within;
use canaryd_testkit::judge_sim::latency::{
    Counts, LatencyScenario, Rule, SLOW_BOUND, first_fails, histogram_quantile, normal_sf,
    slow_requests,
};

/// Seeded runs per scenario (each simulates every request; the bench runs 10,000). At most 1 - confidence =
/// 5% of A/A runs may roll back; the tests fail above that plus three binomial standard errors,
/// 0.05 + 3·sqrt(0.05·0.95/200) ≈ 0.096.
const RUNS: usize = 200;

fn bound(runs: usize) -> f64 {
    0.05 + 3.0 * (0.05_f64 * 0.95 / runs as f64).sqrt()
}

fn only(rule: Rule, scenario: &LatencyScenario, seed: u64) -> Vec<Option<usize>> {
    first_fails(scenario, seed, &[rule])
        .pop()
        .unwrap_or_default()
}

/// On the same traffic, why latency needs a sequential test: Kayenta's Mann-Whitney run at every look on the
/// growing samples rolls back equal tracks more often the longer it watches, past 1 - confidence.
#[test]
fn the_slow_request_test_keeps_its_bound_over_two_hundred_looks_of_equal_latencies_where_a_per_look_test_does_not()
 {
    let firsts = first_fails(
        &LatencyScenario::new(RUNS, 200, 1.0, 1.0),
        11,
        &[Rule::Sequential, Rule::Kayenta],
    );
    let rolled_back = fraction_within(&firsts[0], 200);
    let (ten, all) = (
        fraction_within(&firsts[1], 10),
        fraction_within(&firsts[1], 200),
    );
    println!(
        "A/A rolled back within 200 looks: {rolled_back}; per-look Mann-Whitney within 10 / 200: {ten} / {all}"
    );
    assert!(
        rolled_back <= bound(RUNS),
        "A/A rolled back in {rolled_back}"
    );
    assert!(all > ten, "no growth with looks: {ten} then {all}");
    assert!(
        all > bound(RUNS),
        "the per-look test within the bound: {all}"
    );
}

/// The guarantee's hardest case: the canary's slow share exactly at the boundary, 10% above the baseline's.
#[test]
fn the_slow_request_test_keeps_its_bound_over_two_hundred_looks_at_the_margin() {
    let firsts = only(
        Rule::Sequential,
        &LatencyScenario::at_margin(RUNS, 200, 0.10),
        15,
    );
    let rolled_back = fraction_within(&firsts, 200);
    println!("at the margin, rolled back within 200 looks: {rolled_back}");
    assert!(
        rolled_back <= bound(RUNS),
        "at the margin rolled back in {rolled_back}"
    );
}

#[test]
fn a_cluster_wide_slowdown_rolls_back_the_threshold_rule_but_not_the_slow_request_test() {
    let scenario = LatencyScenario::new(RUNS, 30, 1.5, 1.5);
    let firsts = first_fails(&scenario, 12, &[Rule::Threshold, Rule::Sequential]);
    let (threshold, sequential) = (
        fraction_within(&firsts[0], 30),
        fraction_within(&firsts[1], 30),
    );
    assert!(
        threshold > 0.95,
        "the threshold rule rolled back {threshold}"
    );
    assert!(
        sequential <= bound(RUNS),
        "both 50% slower: rolled back {sequential}"
    );
}

#[test]
fn a_canary_thirty_percent_slower_is_caught_within_three_looks() {
    let firsts = only(
        Rule::Sequential,
        &LatencyScenario::new(RUNS, 10, 1.3, 1.0),
        13,
    );
    let caught = fraction_within(&firsts, 3);
    assert!(caught >= 0.95, "caught within 3 looks in {caught}");
}

#[test]
fn the_shipped_slow_request_template_counts_what_the_simulation_does_with_the_judges_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("analysis-templates")
        .join("slow-requests-vs-baseline.yaml");
    let text = std::fs::read_to_string(&path).expect("shipped template");
    let (docs, err) = parse_documents(&path, &text);
    assert!(err.is_none(), "{err:?}");
    let template = &docs[0].value["spec"];
    let default = template["args"]
        .as_array()
        .and_then(|args| args.iter().find(|a| a["name"] == "slow-seconds"))
        .and_then(|a| a["value"].as_str())
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(default, Some(SLOW_BOUND));
    let spec = &template["metrics"][0]["provider"]["plugin"][COMPARE_PLUGIN]["errorRate"];
    let (e, unknown) = decode::<ErrorRateCompare>(spec).expect("decodes");
    assert!(unknown.is_empty(), "{unknown:?}");
    assert_eq!(error_rate_params(&e), ErrorRateParams::default());
    for side in [&e.canary, &e.baseline] {
        assert!(
            side.errors.contains("le=\"{{args.slow-seconds}}\"")
                && side.errors.contains("_count{")
                && side.requests.contains("_count{"),
            "slow = all requests minus those at or under the bound: {side:?}"
        );
    }
}

#[test]
fn histogram_quantile_interpolates_as_prometheus_does() {
    // 100 requests: 50 in (0.1, 0.25], 50 in (0.25, 0.5]. The median is the top of the first.
    let mut counts = Counts::default();
    counts[5] = 50;
    counts[6] = 50;
    assert_eq!(histogram_quantile(0.5, &counts), 0.25);
    assert!((histogram_quantile(0.99, &counts) - (0.25 + 0.25 * 49.0 / 50.0)).abs() < 1e-12);
    counts[11] = 900;
    assert_eq!(histogram_quantile(0.99, &counts), 10.0, "above every bound");
    assert!(histogram_quantile(0.99, &Counts::default()).is_nan());
}

#[test]
fn the_simulations_normal_tail_matches_known_values() {
    assert!((normal_sf(0.0) - 0.5).abs() < 1e-6);
    assert!((normal_sf(1.959_964) - 0.025).abs() < 1e-6);
    assert!((normal_sf(-1.0) - 0.841_344_7).abs() < 1e-6);
}

#[test]
fn slow_requests_are_those_above_the_bound() {
    let mut counts = Counts::default();
    counts[5] = 7; // le 0.25: not slow
    counts[6] = 2;
    counts[11] = 1;
    assert_eq!(slow_requests(&counts), 3);
}
