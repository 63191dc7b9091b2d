//! The error-rate judge's `planned` design: part of α on one exact test at a planned look, the rest on the
//! sequential mixture. It fails where the exact binomial tail says, at the look its rule plans, keeps the
//! guarantee over 200 looks at 10 requests/s per track, and catches a 1.5× regression by the tenth look where
//! the sequential design alone needs about fifteen.

use canaryd::engine::judge::{Design, ErrorRateParams, ErrorRateTest, Look, Mixture, Verdict};
use canaryd_testkit::judge_sim::error_rate::{
    ErrorRateScenario, first_verdicts, fraction_within, median_first,
};

/// `looks - 1` looks of 1,000 requests per side without an error, then a last one holding all the errors.
fn errors_at_last_look(looks: u64, canary_errors: u64, baseline_errors: u64) -> Vec<Look> {
    (1..=looks)
        .map(|k| {
            let last = k == looks;
            Look {
                canary_errors: if last { canary_errors } else { 0 },
                canary_requests: 1000 * k,
                baseline_errors: if last { baseline_errors } else { 0 },
                baseline_requests: 1000 * k,
            }
        })
        .collect()
}

fn verdict(design: Design, looks: &[Look]) -> Verdict {
    let params = ErrorRateParams {
        design,
        ..ErrorRateParams::default()
    };
    ErrorRateTest::replay(&params, looks)
        .expect("valid counts")
        .verdict()
}

#[test]
fn the_planned_look_fails_at_the_count_its_exact_binomial_tail_allows() {
    // 150 errors by the tenth look (above N*/4, about 51, at an equal split): the planned look. With
    // xc canary errors, ψ = 1.1·(1 - p)/(1 - 1.1·p) at p = (150 - xc)/10,000 and θ0 = ψ/(1 + ψ) ≈ 0.52396;
    // P(Binomial(150, θ0) >= 90) = 0.0369 <= 0.04 (its share of α), P(>= 89) = 0.0523 (SciPy's binom.sf).
    assert_eq!(
        verdict(Design::Planned, &errors_at_last_look(10, 90, 60)),
        Verdict::Fail
    );
    assert_eq!(
        verdict(Design::Planned, &errors_at_last_look(10, 89, 61)),
        Verdict::Inconclusive
    );
    // The sequential mixture alone is far from crossing there: the fail above is the planned look's.
    assert_eq!(
        verdict(Design::Sequential, &errors_at_last_look(10, 90, 60)),
        Verdict::Inconclusive
    );
    // At the ninth look 150 errors are below N* (about 203): the look is not yet due.
    assert_eq!(
        verdict(Design::Planned, &errors_at_last_look(9, 90, 60)),
        Verdict::Inconclusive
    );
    // With N* errors it is due whatever the look: 240 errors at the second look, the baseline at 4.5 %
    // (θ0 ≈ 0.52506): 145 of them the canary's fails (tail 0.0082), 140 does not (0.0405).
    assert_eq!(
        verdict(Design::Planned, &errors_at_last_look(2, 145, 95)),
        Verdict::Fail
    );
    assert_eq!(
        verdict(Design::Planned, &errors_at_last_look(2, 140, 100)),
        Verdict::Inconclusive
    );
}

#[test]
fn the_planned_look_is_taken_once_and_its_verdict_stays() {
    // Taken at the tenth look and passed over (89 of 150): later looks with the same share never retry it.
    let mut looks = errors_at_last_look(10, 89, 61);
    for k in 11..=14 {
        looks.push(Look {
            canary_errors: 89 + 9 * (k - 10),
            canary_requests: 1000 * k,
            baseline_errors: 61 + 6 * (k - 10),
            baseline_requests: 1000 * k,
        });
    }
    assert_eq!(verdict(Design::Planned, &looks), Verdict::Inconclusive);
    // A fail stays a fail, even when the canary's later errors would not have failed it.
    let mut looks = errors_at_last_look(10, 90, 60);
    looks.push(Look {
        canary_errors: 90,
        canary_requests: 11_000,
        baseline_errors: 120,
        baseline_requests: 11_000,
    });
    assert_eq!(verdict(Design::Planned, &looks), Verdict::Fail);
}

#[test]
fn with_an_absolute_margin_planned_decides_as_sequential() {
    let with = |design| ErrorRateParams {
        design,
        max_absolute_increase: 0.001,
        ..ErrorRateParams::default()
    };
    let looks = errors_at_last_look(10, 120, 60);
    let judge = |design| {
        ErrorRateTest::replay(&with(design), &looks)
            .expect("valid")
            .result()
    };
    assert_eq!(judge(Design::Planned), judge(Design::Sequential));
}

fn low_traffic(runs: usize, looks: usize, canary: f64, design: Design) -> ErrorRateScenario {
    ErrorRateScenario {
        requests_per_look: 600,
        params: ErrorRateParams {
            mixture: Mixture::Focused,
            design,
            ..ErrorRateParams::default()
        },
        ..ErrorRateScenario::new(runs, looks, 0.01, canary)
    }
}

#[test]
fn planned_keeps_the_guarantee_over_two_hundred_looks_at_ten_requests_per_second() {
    let runs = 1000;
    let above = |p: f64| p + 3.0 * (p * (1.0 - p) / runs as f64).sqrt();
    let (fails, _) = first_verdicts(&low_traffic(runs, 200, 0.011, Design::Planned), 41);
    let at_margin = fraction_within(&fails, 200);
    assert!(at_margin <= above(0.05), "{at_margin}");
    let (fails, _) = first_verdicts(&low_traffic(runs, 200, 0.01, Design::Planned), 42);
    let aa = fraction_within(&fails, 200);
    assert!(aa <= above(0.01), "{aa}");
}

#[test]
fn planned_catches_one_and_a_half_times_by_the_tenth_look_where_sequential_needs_longer() {
    let runs = 1000;
    let catch = |canary, design| first_verdicts(&low_traffic(runs, 60, canary, design), 43).0;
    let (planned, sequential) = (
        catch(0.015, Design::Planned),
        catch(0.015, Design::Sequential),
    );
    let (p, s) = (median_first(&planned), median_first(&sequential));
    println!("1.5x median look: planned {p:?}, sequential {s:?}");
    assert!(p.is_some_and(|p| p <= 10), "{p:?}");
    assert!(s.is_some_and(|s| s > 10), "{s:?}");
    assert!(fraction_within(&planned, 60) >= 0.93);
    let two = catch(0.02, Design::Planned);
    assert!(fraction_within(&two, 10) >= 0.95);
}

#[test]
fn designs_are_named_planned_and_sequential() {
    assert_eq!("planned".parse(), Ok(Design::Planned));
    assert_eq!("sequential".parse(), Ok(Design::Sequential));
    assert_eq!(
        "fixed".parse::<Design>(),
        Err("\"fixed\" is not one of planned, sequential".to_string())
    );
    assert_eq!(Design::Sequential.to_string(), "sequential");
    assert_eq!(ErrorRateParams::default().design, Design::Planned);
}
