//! The error-rate judge's sparse-traffic guard: an analysis undecided on too little traffic says how many
//! requests per side a verdict would have needed, and `canaryd/compare` never turns such a look into a pass.

use canaryd::api::AnalysisPhase;
use canaryd::engine::compare::{Judgement, error_rate_look, judged_phase};
use canaryd::engine::judge::{ErrorRateParams, ErrorRateTest, Look, Sparse, Verdict};

fn look(ce: u64, cr: u64, be: u64, br: u64) -> Look {
    Look {
        canary_errors: ce,
        canary_requests: cr,
        baseline_errors: be,
        baseline_requests: br,
    }
}

fn decides(params: &ErrorRateParams, l: Look) -> bool {
    ErrorRateTest::replay(params, &[l]).is_ok_and(|t| t.verdict() != Verdict::Inconclusive)
}

/// Whether `n` requests per side, with `ceil(2n·rate)` errors all on one side, reach any verdict.
fn one_sided_decides(params: &ErrorRateParams, n: u64, rate: f64) -> bool {
    let errors = ((2 * n) as f64 * rate).ceil() as u64;
    decides(params, look(errors, n, 0, n)) || decides(params, look(0, n, errors, n))
}

#[test]
fn too_few_requests_are_inconclusive_with_the_requests_a_verdict_needs() {
    let params = ErrorRateParams::default();
    // 3 errors in 1,200 requests: 0.25 %.
    let r = ErrorRateTest::replay(&params, &[look(2, 600, 1, 600)])
        .expect("valid counts")
        .result();
    assert_eq!(r.verdict, Verdict::Inconclusive);
    let Some(Sparse {
        requests_needed: Some(needed),
    }) = r.sparse
    else {
        panic!("600 requests per side at 0.25 % are too few: {r:?}");
    };
    // The figure is the test's own boundary: the most one-sided evidence that rate allows decides at
    // `needed` requests per side and not one request earlier.
    let rate = 3.0 / 1200.0;
    assert!(one_sided_decides(&params, needed, rate), "{needed}");
    assert!(!one_sided_decides(&params, needed - 1, rate), "{needed}");
    assert!(needed > 600, "{needed}");
    assert_eq!(
        r.sparse_message().as_deref(),
        Some(
            format!(
                "too few requests for any verdict: canary served 600 requests, baseline 600; at the error \
                 rate seen (3 in 1200) no verdict is possible below {needed} requests per side"
            )
            .as_str()
        )
    );
    assert_eq!(r.to_json()["sparse"]["requestsNeeded"], needed);
}

#[test]
fn below_min_requests_the_needed_requests_are_at_least_min_requests() {
    let params = ErrorRateParams::default();
    // 40 % errors would decide on a handful of requests, but not before minRequests on both sides.
    let r = ErrorRateTest::replay(&params, &[look(80, 200, 0, 200)])
        .expect("valid counts")
        .result();
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert_eq!(
        r.sparse,
        Some(Sparse {
            requests_needed: Some(params.min_requests)
        })
    );
}

#[test]
fn without_any_error_and_no_absolute_margin_no_request_count_is_enough() {
    let r = ErrorRateTest::replay(&ErrorRateParams::default(), &[look(0, 5000, 0, 5000)])
        .expect("valid counts")
        .result();
    assert_eq!(
        r.sparse,
        Some(Sparse {
            requests_needed: None
        })
    );
    assert_eq!(
        r.sparse_message().as_deref(),
        Some(
            "too few errors for any verdict: canary served 5000 requests, baseline 5000, without any error; \
             with maxAbsoluteIncrease 0 only errors are evidence"
        )
    );
    // With an absolute margin error-free requests are evidence that the canary is within it.
    let absolute = ErrorRateParams {
        max_absolute_increase: 0.002,
        ..ErrorRateParams::default()
    };
    let r = ErrorRateTest::replay(&absolute, &[look(0, 500, 0, 500)])
        .expect("valid counts")
        .result();
    assert!(
        matches!(r.sparse, Some(Sparse { requests_needed: Some(n) }) if n > 500),
        "{r:?}"
    );
}

#[test]
fn enough_traffic_or_a_verdict_is_not_sparse() {
    let params = ErrorRateParams::default();
    // Undecided because the rates are close, not because the traffic is thin.
    let close = ErrorRateTest::replay(&params, &[look(105, 10_000, 100, 10_000)])
        .expect("valid counts")
        .result();
    assert_eq!(close.verdict, Verdict::Inconclusive);
    assert_eq!(close.sparse, None);
    assert_eq!(close.sparse_message(), None);
    assert!(close.to_json().get("sparse").is_none());
    let failed = ErrorRateTest::replay(&params, &[look(30, 2000, 0, 2000)])
        .expect("valid counts")
        .result();
    assert_eq!((failed.verdict, failed.sparse), (Verdict::Fail, None));
}

#[test]
fn a_sparse_look_carries_its_reason_to_the_measurement_and_never_passes() {
    let params = ErrorRateParams::default();
    let (_, judgement, _) = error_rate_look(
        &params,
        [Some(2), Some(600), Some(1), Some(600)],
        Vec::new(),
    )
    .expect("valid counts");
    assert_eq!(judgement.verdict, Verdict::Inconclusive);
    assert!(
        judgement
            .sparse
            .as_deref()
            .is_some_and(|m| m.starts_with("too few requests for any verdict")),
        "{judgement:?}"
    );
    // A condition such as `result.verdict != "fail"` would call it Successful: the guard says Inconclusive.
    assert_eq!(
        judged_phase(&judgement, Some(AnalysisPhase::Successful)),
        AnalysisPhase::Inconclusive
    );
    assert_eq!(judged_phase(&judgement, None), AnalysisPhase::Inconclusive);
    assert_eq!(
        judged_phase(&judgement, Some(AnalysisPhase::Failed)),
        AnalysisPhase::Failed
    );
    // With enough traffic the conditions and the verdict decide as before.
    let (_, plenty, _) = error_rate_look(
        &params,
        [Some(105), Some(10_000), Some(100), Some(10_000)],
        Vec::new(),
    )
    .expect("valid counts");
    assert_eq!(plenty.sparse, None);
    assert_eq!(
        judged_phase(&plenty, Some(AnalysisPhase::Successful)),
        AnalysisPhase::Successful
    );
    let pass = Judgement::from(Verdict::Pass);
    assert_eq!(judged_phase(&pass, None), AnalysisPhase::Successful);
}
