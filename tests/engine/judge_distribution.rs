//! The distribution judge: p-values and U against SciPy (committed fixtures), the Hodges-Lehmann shift and
//! interval, verdict rules, NaN handling, and seeded simulations of its false-alarm rate and power.

use canaryd::engine::judge::{Direction, DistributionParams, Verdict, judge_distribution};
use canaryd_testkit::judge_sim::distribution::{
    DistributionScenario, normal, simulate_distribution,
};
use canaryd_testkit::judge_sim::rng;
use serde_json::Value;

fn fixture() -> Value {
    let text = include_str!("../fixtures/judge/mannwhitney.json");
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

fn assert_relative(actual: f64, expected: f64, tolerance: f64, what: &str) {
    let scale = expected.abs().max(f64::MIN_POSITIVE);
    assert!(
        (actual - expected).abs() <= tolerance * scale,
        "{what}: got {actual:e}, SciPy says {expected:e}"
    );
}

#[test]
fn p_values_and_u_equal_scipy_for_every_fixture_case() {
    let fixture = fixture();
    let cases = fixture["cases"].as_array().cloned().unwrap_or_default();
    assert!(cases.len() >= 9, "fixture file has too few cases");
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let (canary, baseline) = (numbers(&case["canary"]), numbers(&case["baseline"]));
        for (direction, label) in [
            (Direction::Increase, "increase"),
            (Direction::Decrease, "decrease"),
            (Direction::Either, "either"),
        ] {
            let expected = &case["mannWhitney"][label];
            let params = DistributionParams {
                direction,
                min_samples: 1,
                ..DistributionParams::default()
            };
            let r = judge_distribution(&canary, &baseline, &params).expect("valid parameters");
            let what = format!("{name}/{label}");
            assert_relative(
                r.u,
                expected["u"].as_f64().unwrap_or(f64::NAN),
                1e-12,
                &format!("{what} U"),
            );
            let p = expected["pValue"].as_f64().unwrap_or(f64::NAN);
            assert_relative(r.p_value, p, 1e-9, &format!("{what} p-value"));
            checked += 1;
        }
    }
    assert_eq!(checked, cases.len() * 3);
}

#[test]
fn shift_median_and_interval_equal_numpy_on_the_materialised_differences() {
    let fixture = fixture();
    for case in fixture["cases"].as_array().cloned().unwrap_or_default() {
        let name = case["name"].as_str().unwrap_or("?");
        let params = DistributionParams {
            min_samples: 1,
            ..DistributionParams::default()
        };
        let r = judge_distribution(
            &numbers(&case["canary"]),
            &numbers(&case["baseline"]),
            &params,
        )
        .expect("valid parameters");
        assert_relative(
            r.shift,
            case["shift"].as_f64().unwrap_or(f64::NAN),
            1e-12,
            name,
        );
        assert_relative(
            r.canary_median,
            case["canaryMedian"].as_f64().unwrap_or(f64::NAN),
            1e-12,
            name,
        );
        assert_relative(
            r.baseline_median,
            case["baselineMedian"].as_f64().unwrap_or(f64::NAN),
            1e-12,
            name,
        );
        assert_eq!(
            r.shift_lower,
            case["shiftLower"].as_f64(),
            "{name} lower bound"
        );
        assert_eq!(
            r.shift_upper,
            case["shiftUpper"].as_f64(),
            "{name} upper bound"
        );
    }
}

fn latencies(median: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = rng::Rng::new(seed);
    (0..n)
        .map(|_| median * (0.3 * normal(&mut rng)).exp())
        .collect()
}

#[test]
fn clearly_slower_canary_fails_and_equal_canary_passes() {
    let params = DistributionParams::default();
    let baseline = latencies(100.0, 300, 1);
    let slow = judge_distribution(&latencies(130.0, 300, 2), &baseline, &params).expect("valid");
    assert_eq!(slow.verdict, Verdict::Fail, "{slow:?}");
    assert!(slow.shift > 10.0 && slow.p_value < 1e-6, "{slow:?}");
    let same = judge_distribution(&latencies(100.0, 300, 3), &baseline, &params).expect("valid");
    assert_eq!(same.verdict, Verdict::Pass, "{same:?}");
    assert!(
        same.shift_upper
            .is_some_and(|u| u <= 0.1 * same.baseline_median)
    );
}

#[test]
fn a_faster_canary_is_not_a_latency_failure_but_is_for_either_direction() {
    let baseline = latencies(100.0, 300, 4);
    let fast = latencies(70.0, 300, 5);
    let increase =
        judge_distribution(&fast, &baseline, &DistributionParams::default()).expect("valid");
    assert_eq!(increase.verdict, Verdict::Pass);
    let either = DistributionParams {
        direction: Direction::Either,
        ..DistributionParams::default()
    };
    assert_eq!(
        judge_distribution(&fast, &baseline, &either)
            .expect("valid")
            .verdict,
        Verdict::Fail
    );
    let decrease = DistributionParams {
        direction: Direction::Decrease,
        ..DistributionParams::default()
    };
    assert_eq!(
        judge_distribution(&fast, &baseline, &decrease)
            .expect("valid")
            .verdict,
        Verdict::Fail
    );
}

#[test]
fn a_significant_but_small_shift_is_not_a_failure() {
    // 3 % slower with 5,000 samples a side: Mann-Whitney is sure, but 3 % is inside the 10 % margin.
    let baseline = latencies(100.0, 5000, 6);
    let canary = latencies(103.0, 5000, 7);
    let r = judge_distribution(&canary, &baseline, &DistributionParams::default()).expect("valid");
    assert!(r.p_value < 0.05, "{r:?}");
    assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
}

#[test]
fn too_few_samples_are_inconclusive_whatever_they_show() {
    let r = judge_distribution(
        &latencies(300.0, 19, 8),
        &latencies(100.0, 19, 9),
        &DistributionParams::default(),
    )
    .expect("valid");
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(r.p_value < 0.05, "the statistics are still reported: {r:?}");
}

#[test]
fn nan_samples_are_dropped_counted_and_never_reach_the_numbers() {
    let mut canary = latencies(100.0, 50, 10);
    canary.extend([f64::NAN, f64::INFINITY, f64::NAN]);
    let mut baseline = latencies(100.0, 50, 11);
    baseline.push(f64::NAN);
    let r = judge_distribution(&canary, &baseline, &DistributionParams::default()).expect("valid");
    assert_eq!((r.canary_samples, r.baseline_samples), (50, 50));
    assert!(r.p_value.is_finite() && r.shift.is_finite() && r.u.is_finite());
    assert_eq!(
        r.note().as_deref(),
        Some("dropped 3 canary and 1 baseline samples that were NaN or infinite")
    );
}

#[test]
fn empty_samples_give_null_numbers_in_json_and_exact_field_names() {
    let r = judge_distribution(&[], &[1.0, 2.0], &DistributionParams::default()).expect("valid");
    assert_eq!(r.verdict, Verdict::Inconclusive);
    let json = r.to_json();
    let keys: Vec<&str> = json
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut expected = vec![
        "verdict",
        "canaryMedian",
        "baselineMedian",
        "shift",
        "shiftLower",
        "shiftUpper",
        "pValue",
        "u",
        "canarySamples",
        "baselineSamples",
    ];
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    assert_eq!(json["verdict"], "inconclusive");
    assert!(json["canaryMedian"].is_null() && json["pValue"].is_null() && json["u"].is_null());
    assert_eq!(json["baselineMedian"], 1.5);
}

#[test]
fn bad_parameters_are_errors_not_panics() {
    let bad = DistributionParams {
        confidence: 1.0,
        ..DistributionParams::default()
    };
    let err = judge_distribution(&[1.0], &[1.0], &bad).expect_err("confidence 1 is invalid");
    assert!(err.to_string().contains("confidence"), "{err}");
    let negative = DistributionParams {
        max_relative_shift: -0.1,
        ..DistributionParams::default()
    };
    assert!(judge_distribution(&[1.0], &[1.0], &negative).is_err());
}

#[test]
fn identical_distributions_rarely_fail_a_single_look() {
    // 2,000 seeded A/A comparisons of 50 lognormal latencies a side, margin 0 so only the test's own level
    // protects: the false-alarm rate must stay within 1 - confidence plus three binomial standard errors.
    let s = simulate_distribution(&DistributionScenario::aa(2000, 50, 0.0), 42);
    let tolerance = 0.05 + 3.0 * (0.05_f64 * 0.95 / 2000.0).sqrt();
    assert!(s.fail_fraction <= tolerance, "{s:?}");
}

#[test]
fn a_thirty_percent_slower_canary_fails_nearly_always_with_a_hundred_samples() {
    let s = simulate_distribution(&DistributionScenario::shifted(500, 100, 1.3), 43);
    assert!(s.fail_fraction >= 0.95, "{s:?}");
    assert_eq!(
        s.pass_fraction, 0.0,
        "a 30 % slower canary must never pass a 10 % margin: {s:?}"
    );
}

#[test]
fn the_shift_interval_covers_the_true_shift_at_the_stated_confidence() {
    let s = simulate_distribution(&DistributionScenario::shifted(1000, 60, 1.2), 44);
    let tolerance = 0.95 - 3.0 * (0.05_f64 * 0.95 / 1000.0).sqrt();
    assert!(s.coverage >= tolerance, "{s:?}");
}

proptest::proptest! {
    // Seeds of past failures go beside this file (judge_distribution.proptest-regressions), as they did when it
    // was a test crate of its own; proptest's default, for a module of a main.rs, is
    // ../proptest-regressions/judge_distribution.txt.
    #![proptest_config(proptest::test_runner::Config {
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..proptest::test_runner::Config::default()
    })]

    #[test]
    fn shift_is_the_median_of_the_materialised_differences(
        canary in proptest::collection::vec(-1e6f64..1e6, 1..40),
        baseline in proptest::collection::vec(-1e6f64..1e6, 1..40),
        round in proptest::bool::ANY,
    ) {
        // Rounding to integers makes many differences tie, the hard case for the bisection.
        let fix = |v: Vec<f64>| if round { v.iter().map(|x| (x / 1e5).round()).collect() } else { v };
        let (canary, baseline) = (fix(canary), fix(baseline));
        let params = DistributionParams { min_samples: 1, ..DistributionParams::default() };
        let r = judge_distribution(&canary, &baseline, &params).expect("valid parameters");
        let mut d: Vec<f64> = canary.iter().flat_map(|x| baseline.iter().map(move |y| x - y)).collect();
        d.sort_by(f64::total_cmp);
        let n = d.len();
        let expected = if n % 2 == 1 { d[n / 2] } else { 0.5 * (d[n / 2 - 1] + d[n / 2]) };
        proptest::prop_assert_eq!(r.shift, expected);
    }
}
