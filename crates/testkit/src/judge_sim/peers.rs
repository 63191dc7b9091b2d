//! The peers canaryd's judge is compared with in the bench and the tests, applied to simulated traffic: a
//! Kayenta-style Mann-Whitney test run at every look, and an absolute threshold with Argo's `failureLimit`.
//! Both are built on canaryd's own statistics where they share them (the Mann-Whitney interval is
//! `judge_distribution`'s), so the comparison is of the rules, not of implementations.

use canaryd::engine::judge::{Direction, DistributionParams, judge_distribution};

/// Kayenta's Mann-Whitney classifier as its judge applies it at every look: the canary's per-interval values
/// against the baseline's since the start, classified High (a failed canary) when the two-sided 95%
/// interval of the Hodges-Lehmann shift lies entirely above 0 (no effect-size threshold). Too few values for
/// an interval is no verdict.
pub fn kayenta_high(canary: &[f64], baseline: &[f64]) -> bool {
    let params = DistributionParams {
        direction: Direction::Either,
        confidence: 0.95,
        max_relative_shift: 0.0,
        min_samples: 1,
    };
    judge_distribution(canary, baseline, &params)
        .is_ok_and(|r| r.shift_lower.is_some_and(|lower| lower > 0.0))
}

/// Argo's limit on a threshold metric: the look at which failed measurements first exceed `failure_limit`,
/// given per look whether the measurement failed.
pub fn failure_limit_exceeded(
    failed: impl IntoIterator<Item = bool>,
    failure_limit: usize,
) -> Option<usize> {
    let mut failures = 0;
    failed
        .into_iter()
        .zip(1..)
        .find(|&(failed, _)| {
            failures += usize::from(failed);
            failures > failure_limit
        })
        .map(|(_, look)| look)
}
