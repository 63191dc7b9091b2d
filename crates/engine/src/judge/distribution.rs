//! The distribution judge: is the canary's distribution (latency, payload size, ...) shifted in the bad
//! direction by more than a practical margin, compared with the baseline sampled over the same window?
//!
//! Statistics: the Mann-Whitney U test with tie and continuity corrections under the normal approximation
//! (numerically SciPy's `mannwhitneyu(canary, baseline, method="asymptotic", use_continuity=True)`: `u` is
//! SciPy's U1, the canary's rank sum minus n1(n1+1)/2), and the Hodges-Lehmann shift, the median of all
//! pairwise differences canary − baseline, with its distribution-free confidence interval from the ordered
//! differences (Lehmann 1963; Hollander & Wolfe, "Nonparametric Statistical Methods", §4.3).
//!
//! `fail` is a level-(1 − confidence) test of "no difference" plus a practical-significance filter on the
//! point estimate, not a test of "shift > margin": a canary exactly at the margin fails about half the time
//! (see the bench). `pass` is the conservative claim: the two-sided interval lies inside the margin.
//!
//! This is a fixed-sample test: judging the same growing samples again and again inflates false alarms
//! (unlike [`super::error_rate`]). The pairwise differences are never materialised: order statistics are found
//! by bisection over f64 values with a two-pointer count, O((n1 + n2) log) time and O(n1 + n2) memory.
//! This module must not do I/O and never panics on samples; non-finite samples are dropped and counted.

use serde::Serialize;

use super::{JudgeError, Verdict, alpha, non_negative, normal};

/// Which difference is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The canary being larger is bad (latency). Mann-Whitney `alternative="greater"`.
    #[default]
    Increase,
    /// The canary being smaller is bad (throughput). `alternative="less"`.
    Decrease,
    /// Any difference is bad. `alternative="two-sided"`.
    Either,
}

impl std::str::FromStr for Direction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "increase" => Ok(Direction::Increase),
            "decrease" => Ok(Direction::Decrease),
            "either" => Ok(Direction::Either),
            other => Err(format!(
                "unknown direction `{other}`: expected increase, decrease or either"
            )),
        }
    }
}

/// What the distribution judge allows and how sure it must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DistributionParams {
    pub direction: Direction,
    /// `fail` needs a p-value below `1 - confidence`; the shift interval is two-sided at `confidence`.
    pub confidence: f64,
    /// The allowed shift, as a fraction of |baseline median|.
    pub max_relative_shift: f64,
    /// Samples each side needs before any verdict other than `inconclusive`.
    pub min_samples: usize,
}

impl Default for DistributionParams {
    fn default() -> Self {
        DistributionParams {
            direction: Direction::Increase,
            confidence: 0.95,
            max_relative_shift: 0.10,
            min_samples: 20,
        }
    }
}

/// The judgement. Numbers are NaN (JSON null) when a side has no samples; `shift_lower`/`shift_upper` are
/// `None` when the samples are too small for an interval at this confidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DistributionResult {
    pub verdict: Verdict,
    pub canary_median: f64,
    pub baseline_median: f64,
    pub shift: f64,
    pub shift_lower: Option<f64>,
    pub shift_upper: Option<f64>,
    pub p_value: f64,
    pub u: f64,
    pub canary_samples: usize,
    pub baseline_samples: usize,
    /// Non-finite (NaN or infinite) samples dropped before judging; reported by [`Self::note`], not in JSON.
    #[serde(skip)]
    pub canary_dropped: usize,
    #[serde(skip)]
    pub baseline_dropped: usize,
}

impl DistributionResult {
    /// The camelCase JSON object; non-finite numbers become `null`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Says how many samples were dropped, if any.
    pub fn note(&self) -> Option<String> {
        (self.canary_dropped + self.baseline_dropped > 0).then(|| {
            format!(
                "dropped {} canary and {} baseline samples that were NaN or infinite",
                self.canary_dropped, self.baseline_dropped
            )
        })
    }
}

/// The Mann-Whitney statistic U1 and p-value for `direction`.
struct MannWhitney {
    u: f64,
    p_value: f64,
}

/// Judges canary against baseline samples. Errors only for bad parameters.
pub fn judge_distribution(
    canary: &[f64],
    baseline: &[f64],
    params: &DistributionParams,
) -> Result<DistributionResult, JudgeError> {
    let alpha = alpha(params.confidence)?;
    let max_shift = non_negative("maxRelativeShift", params.max_relative_shift)?;
    let x = finite_sorted(canary);
    let y = finite_sorted(baseline);
    let test = mann_whitney_sorted(&x, &y, params.direction);
    let shift = hodges_lehmann(&x, &y);
    let (shift_lower, shift_upper) = shift_interval(&x, &y, params.confidence).unzip();
    let baseline_median = median(&y);
    let margin = max_shift * baseline_median.abs();
    let significant = test.p_value < alpha;
    let enough = x.len() >= params.min_samples.max(1) && y.len() >= params.min_samples.max(1);
    let within_above = shift_upper.is_some_and(|u| u <= margin);
    let within_below = shift_lower.is_some_and(|l| l >= -margin);
    let (worse, within) = match params.direction {
        Direction::Increase => (shift > margin, within_above),
        Direction::Decrease => (shift < -margin, within_below),
        Direction::Either => (shift.abs() > margin, within_above && within_below),
    };
    let verdict = if !enough {
        Verdict::Inconclusive
    } else if significant && worse {
        Verdict::Fail
    } else if within {
        Verdict::Pass
    } else {
        Verdict::Inconclusive
    };
    Ok(DistributionResult {
        verdict,
        canary_median: median(&x),
        baseline_median,
        shift,
        shift_lower,
        shift_upper,
        p_value: test.p_value,
        u: test.u,
        canary_samples: x.len(),
        baseline_samples: y.len(),
        canary_dropped: canary.len() - x.len(),
        baseline_dropped: baseline.len() - y.len(),
    })
}

/// Finite samples, ascending, with -0.0 turned into 0.0 so that the two zeros tie as SciPy's ranks do.
fn finite_sorted(samples: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = samples
        .iter()
        .filter(|s| s.is_finite())
        .map(|s| s + 0.0)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Mann-Whitney U as SciPy computes it, on sorted finite samples. NaN when a side is empty.
fn mann_whitney_sorted(x: &[f64], y: &[f64], direction: Direction) -> MannWhitney {
    if x.is_empty() || y.is_empty() {
        return MannWhitney {
            u: f64::NAN,
            p_value: f64::NAN,
        };
    }
    let (n1, n2) = (x.len() as f64, y.len() as f64);
    // Merge the sorted samples; walk runs of equal values, giving each its average rank.
    let (mut i, mut j, mut rank) = (0usize, 0usize, 0usize);
    let (mut canary_rank_sum, mut tie_term) = (0.0_f64, 0.0_f64);
    while i < x.len() || j < y.len() {
        let value = match (x.get(i), y.get(j)) {
            (Some(&a), Some(&b)) => a.min(b),
            (Some(&a), None) => a,
            (None, Some(&b)) => b,
            (None, None) => break,
        };
        let from_canary = x
            .get(i..)
            .map_or(0, |r| r.iter().take_while(|&&v| v == value).count());
        let from_baseline = y
            .get(j..)
            .map_or(0, |r| r.iter().take_while(|&&v| v == value).count());
        let t = (from_canary + from_baseline) as f64;
        // Ranks rank+1 ..= rank+t average to rank + (t+1)/2.
        canary_rank_sum += from_canary as f64 * (rank as f64 + (t + 1.0) / 2.0);
        tie_term += t * t * t - t;
        rank += from_canary + from_baseline;
        i += from_canary;
        j += from_baseline;
    }
    let u1 = canary_rank_sum - n1 * (n1 + 1.0) / 2.0;
    let u2 = n1 * n2 - u1;
    let (u, sides) = match direction {
        Direction::Increase => (u1, 1.0),
        Direction::Decrease => (u2, 1.0),
        Direction::Either => (u1.max(u2), 2.0),
    };
    let n = n1 + n2;
    let mu = n1 * n2 / 2.0;
    let s = (n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
    // With every sample tied s is 0 and z is -inf: p = 1, as in SciPy.
    let z = (u - mu - 0.5) / s;
    MannWhitney {
        u: u1,
        p_value: (sides * normal::sf(z)).clamp(0.0, 1.0),
    }
}

/// Median of sorted samples, NaN when empty.
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match (sorted.get((n.max(1) - 1) / 2), sorted.get(n / 2)) {
        (Some(a), Some(b)) => 0.5 * (a + b),
        _ => f64::NAN,
    }
}

/// The Hodges-Lehmann shift: median of all differences canary − baseline.
fn hodges_lehmann(x: &[f64], y: &[f64]) -> f64 {
    let total = pair_count(x, y);
    if total == 0 {
        return f64::NAN;
    }
    let low = nth_difference(x, y, total.div_ceil(2));
    let high = nth_difference(x, y, total / 2 + 1);
    if total % 2 == 1 {
        low
    } else {
        0.5 * (low + high)
    }
}

/// The distribution-free interval `[D(k), D(N+1-k)]` over the ordered differences, with
/// `k = floor(N/2 - z·sqrt(N(n1+n2+1)/12))`, `z` the normal `1 - (1-confidence)/2` quantile (no tie
/// correction in the ranks). `None` when `k < 1`: too few samples for this confidence.
fn shift_interval(x: &[f64], y: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let total = pair_count(x, y);
    let z = normal::isf((1.0 - confidence) / 2.0);
    let n = (x.len() + y.len()) as f64;
    let k = (total as f64 / 2.0 - z * (total as f64 * (n + 1.0) / 12.0).sqrt()).floor();
    if k.is_nan() || k < 1.0 {
        return None;
    }
    let k = k as u64;
    Some((nth_difference(x, y, k), nth_difference(x, y, total + 1 - k)))
}

fn pair_count(x: &[f64], y: &[f64]) -> u64 {
    (x.len() as u64).saturating_mul(y.len() as u64)
}

/// The `rank`-th smallest (1-based) of the differences `x[i] - y[j]` as f64 computes them: the smallest f64
/// `d` with at least `rank` differences `<= d`, found by bisection over the ordered f64 values (at most 64
/// steps). Needs non-empty sorted finite inputs and `1 <= rank <= N`.
fn nth_difference(x: &[f64], y: &[f64], rank: u64) -> f64 {
    let (Some(&x_min), Some(&x_max), Some(&y_min), Some(&y_max)) =
        (x.first(), x.last(), y.first(), y.last())
    else {
        return f64::NAN;
    };
    let at_least = |d: f64| count_at_most(x, y, d) >= rank;
    let (mut below, mut above) = (order_key(x_min - y_max), order_key(x_max - y_min));
    if at_least(from_order_key(below)) {
        return from_order_key(below);
    }
    // Invariant: too few differences <= from_order_key(below); enough <= from_order_key(above).
    while i128::from(above) - i128::from(below) > 1 {
        let mid = ((i128::from(below) + i128::from(above)) / 2) as i64;
        if at_least(from_order_key(mid)) {
            above = mid;
        } else {
            below = mid;
        }
    }
    from_order_key(above)
}

/// How many differences `x[i] - y[j]` are `<= d`. Rounding is monotone, so for each `x[i]` the qualifying
/// `j` form a suffix whose start only moves right as `x[i]` grows.
fn count_at_most(x: &[f64], y: &[f64], d: f64) -> u64 {
    let mut start = 0usize;
    let mut count = 0u64;
    for &xi in x {
        while y.get(start).is_some_and(|&yj| xi - yj > d) {
            start += 1;
        }
        count += (y.len() - start) as u64;
    }
    count
}

/// Maps finite f64s onto i64s in the same order (both zeros to 0), so bisection can run over every f64.
fn order_key(d: f64) -> i64 {
    let bits = d.to_bits() as i64;
    if bits < 0 { i64::MIN - bits } else { bits }
}

fn from_order_key(key: i64) -> f64 {
    if key < 0 {
        -f64::from_bits(key.unsigned_abs())
    } else {
        f64::from_bits(key as u64)
    }
}
