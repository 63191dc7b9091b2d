//! The error-rate judge's mixtures: `focused` crosses where its hand-computed boundary says, keeps the
//! guarantee at 10 requests/s per track over 200 looks, catches regressions sooner than `wide`, and is what
//! the shipped templates use.

use std::path::Path;

use canaryd::api::compare::{COMPARE_PLUGIN, ErrorRateCompare};
use canaryd::api::decode::decode;
use canaryd::cli::load::parse_documents;
use canaryd::engine::compare::error_rate_params;
use canaryd::engine::judge::{Design, ErrorRateParams, ErrorRateTest, Look, Mixture, Verdict};
use canaryd_testkit::judge_sim::error_rate::{
    ErrorRateScenario, first_verdicts, fraction_within, median_first,
};

fn equal_split(canary_errors: u64, baseline_errors: u64) -> Look {
    Look {
        canary_errors,
        canary_requests: 10_000,
        baseline_errors,
        baseline_requests: 10_000,
    }
}

fn verdict(params: &ErrorRateParams, look: Look) -> Verdict {
    ErrorRateTest::replay(params, &[look])
        .expect("valid counts")
        .verdict()
}

#[test]
fn focused_fails_where_its_hand_computed_boundary_says() {
    // Equal split, margin 10 %: θ0 = 1.1/2.1; the focus point ρ = 1.45·1.1 has θ* = 1.595/2.595.
    let (t0, ts) = (1.1_f64 / 2.1, 1.595_f64 / 2.595);
    let log_lr = |xc: f64, xb: f64| xc * (ts / t0).ln() + xb * ((1.0 - ts) / (1.0 - t0)).ln();
    // The largest LR over all ρ, at the maximum-likelihood θ: bounds the wide tenth of the mixture.
    let largest = |xc: f64, xb: f64| {
        let t = xc / (xc + xb);
        xc * (t / t0).ln() + xb * ((1.0 - t) / (1.0 - t0)).ln()
    };
    let threshold = 20.0_f64.ln();
    // All of α on the mixture: the sequential design.
    // 99 canary errors against 60: 0.9·LR* alone reaches 1/α (ln 0.9 + 3.1326 = 3.0272 >= 2.9957).
    assert!(0.9_f64.ln() + log_lr(99.0, 60.0) >= threshold);
    // 98: even 0.9·LR* + 0.1·(largest LR) stays below it (e^2.9737 < 20).
    assert!((0.9 * log_lr(98.0, 60.0).exp() + 0.1 * largest(98.0, 60.0).exp()).ln() < threshold);
    let focused = ErrorRateParams {
        design: Design::Sequential,
        ..ErrorRateParams::default()
    };
    assert_eq!(focused.mixture, Mixture::Focused);
    assert_eq!(verdict(&focused, equal_split(99, 60)), Verdict::Fail);
    assert_eq!(
        verdict(&focused, equal_split(98, 60)),
        Verdict::Inconclusive
    );
}

fn low_traffic(
    runs: usize,
    looks: usize,
    baseline: f64,
    canary: f64,
    mixture: Mixture,
) -> ErrorRateScenario {
    ErrorRateScenario {
        requests_per_look: 600,
        params: ErrorRateParams {
            mixture,
            design: Design::Sequential,
            ..ErrorRateParams::default()
        },
        ..ErrorRateScenario::new(runs, looks, baseline, canary)
    }
}

#[test]
fn both_mixtures_keep_the_guarantee_over_two_hundred_looks_at_ten_requests_per_second() {
    let runs = 1000;
    // Three binomial standard errors above each bound.
    let above = |p: f64| p + 3.0 * (p * (1.0 - p) / runs as f64).sqrt();
    for (seed, mixture) in [(21, Mixture::Focused), (22, Mixture::Wide)] {
        // At the boundary (1 % vs 1.1 %) `fail` is a false claim allowed 1 - confidence of the runs.
        let (fails, _) = first_verdicts(&low_traffic(runs, 200, 0.01, 0.011, mixture), seed);
        let at_margin = fraction_within(&fails, 200);
        assert!(at_margin <= above(0.05), "{mixture}: {at_margin}");
        // A/A: the target, at most 1 % false rollbacks over 200 looks.
        let (fails, _) = first_verdicts(&low_traffic(runs, 200, 0.01, 0.01, mixture), seed + 10);
        let aa = fraction_within(&fails, 200);
        assert!(aa <= above(0.01), "{mixture}: {aa}");
    }
}

#[test]
fn focused_catches_one_and_a_half_and_two_times_sooner_than_wide() {
    let runs = 400;
    let catch =
        |canary, mixture| first_verdicts(&low_traffic(runs, 60, 0.01, canary, mixture), 31).0;
    let (wide, focused) = (catch(0.015, Mixture::Wide), catch(0.015, Mixture::Focused));
    let (wide_median, focused_median) = (median_first(&wide), median_first(&focused));
    println!("1.5x median look: wide {wide_median:?}, focused {focused_median:?}");
    assert!(
        focused_median < wide_median,
        "{focused_median:?} vs {wide_median:?}"
    );
    assert!(fraction_within(&focused, 60) >= 0.95);
    let (wide, focused) = (catch(0.02, Mixture::Wide), catch(0.02, Mixture::Focused));
    let (w, f) = (fraction_within(&wide, 10), fraction_within(&focused, 10));
    println!("2x within 10 looks: wide {w}, focused {f}");
    assert!(f > w, "{f} vs {w}");
}

#[test]
fn mixtures_are_named_focused_and_wide() {
    assert_eq!("focused".parse(), Ok(Mixture::Focused));
    assert_eq!("wide".parse(), Ok(Mixture::Wide));
    assert_eq!(
        "narrow".parse::<Mixture>(),
        Err("\"narrow\" is not one of focused, wide".to_string())
    );
    assert_eq!(Mixture::Wide.to_string(), "wide");
}

/// The command line's defaults are `ErrorRateParams::default()` (clap's `default_value_t`), so this is what
/// makes `canaryd judge error-rate` without flags decide as the templates do.
#[test]
fn the_shipped_error_rate_templates_use_the_judges_defaults() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("analysis-templates");
    let mut seen = 0;
    for file in ["error-rate-vs-baseline.yaml", "progressive-sync-gate.yaml"] {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).expect("shipped template");
        let (docs, err) = parse_documents(&path, &text);
        assert!(err.is_none(), "{err:?}");
        for doc in docs {
            let metrics = doc.value["spec"]["metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for m in metrics {
                let spec = &m["provider"]["plugin"][COMPARE_PLUGIN]["errorRate"];
                if spec.is_null() {
                    continue;
                }
                let (e, unknown) = decode::<ErrorRateCompare>(spec).expect("decodes");
                assert!(unknown.is_empty(), "{unknown:?}");
                assert_eq!(error_rate_params(&e), ErrorRateParams::default(), "{file}");
                assert_eq!(
                    e.mixture,
                    Some(Mixture::Focused),
                    "{file} says which mixture"
                );
                assert_eq!(e.design, Some(Design::Planned), "{file} says which design");
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 3, "both error-rate templates and the gate");
}
