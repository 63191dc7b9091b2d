//! The error-rate judge: is the canary's error rate worse than the baseline's by more than a margin, judged
//! from cumulative counts and valid however often it looks.
//!
//! Method: a mixture sequential probability ratio test on error arrivals (Lindon, Sanden & Shirikian, "Rapid
//! regression detection in software deployments through sequential testing", KDD 2022). Between two looks the
//! canary served `nc` requests and the baseline `nb`; if their error rates are `pc = ρ·pb`, an error is the
//! canary's with probability `θ(ρ) = ρ·nc / (ρ·nc + nb)`. For each alternative ρ the product over increments of
//! `θ(ρ)^xc (1-θ(ρ))^xb / (θ(ρ0)^xc (1-θ(ρ0))^xb)` is a nonnegative supermartingale whenever `pc <= ρ0·pb`;
//! a mixture over ρ > ρ0 is one too, so by Ville's inequality it ever reaches `1/α` with probability at most
//! `α`, however many looks. `fail` is that crossing for the boundary `ρ0 = 1 + maxRelativeIncrease`; `pass` is
//! the mirrored test (mixture over ρ < ρ0) rejecting "the canary is worse than the margin".
//!
//! The mixture may be any probability distribution over the alternatives ([`Mixture`]): if each `M_i` is a
//! nonnegative supermartingale starting at 1 and `w_i >= 0` sum to 1, then
//! `E[Σ w_i M_i(t+1) | F_t] = Σ w_i E[M_i(t+1) | F_t] <= Σ w_i M_i(t)`, so the mixture is one too, point
//! masses included. `Focused` (the default) puts 0.9 on ρ = 1.45·ρ0 and 0.1 on `Wide`'s half-normal grid;
//! `pass` always mixes with `Wide`.
//!
//! Exact for binomial counts, not only Poisson ones: with `a = θ(ρ)/θ(ρ0)` and `b = (1-θ(ρ))/(1-θ(ρ0))`,
//! `E[a^xc b^xb] = (1 + pc(a-1))^nc (1 + pb(b-1))^nb <= exp(nc·pc(a-1) + nb·pb(b-1))` (as `ln(1+x) <= x`), and
//! the exponent equals `(θ-θ0)(ρ0·nc + nb)(pc/ρ0 - pb)`, which is `<= 0` under either null.
//!
//! The absolute margin `A` (null: `pc <= ρ0·pb + A`) enters as the compensator `exp(-A·nc·(a-1))` on each
//! increment's factor: the bound above then becomes `exp(nc(pc-A)(a-1) + nb·pb(b-1))` with `pc - A <= ρ0·pb`,
//! so the supermartingale property, and with it the guarantee, holds exactly (for `fail` and, with the signs
//! reversed, for `pass`). Conservative only in that it bounds the binomial by the Poisson moment generating
//! function.
//!
//! Increments are pooled by their exact request split (θ depends on it); everything is derived from the
//! sequence of cumulative looks, so replaying the history after a restart gives bit-identical verdicts.
//! This module must not read a clock or do I/O, and never panics on counts: bad counts are a [`JudgeError`].

use serde::Serialize;

use super::mixture::{Mixture, crossed, log_sum_exp, mixture_points};
use super::planned::{Design, PLANNED_SHARE, PlannedLook};
use super::{JudgeError, Verdict, alpha, non_negative};

/// What the error-rate judge allows and how sure it must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorRateParams {
    /// `r` in the null `canary rate <= baseline rate × (1 + r) + a`.
    pub max_relative_increase: f64,
    /// `a` in the same null, in rate units (0.001 = 0.1 percentage points).
    pub max_absolute_increase: f64,
    /// Probability of never saying `fail` when the canary is within the margin (and of never saying `pass`
    /// when it is not), over all looks together.
    pub confidence: f64,
    /// Requests each side must have served before any verdict other than `inconclusive`.
    pub min_requests: u64,
    /// Which regressions the `fail` test spends its evidence on.
    pub mixture: Mixture,
    /// Whether the `fail` test spends part of its α on a planned look ([`Design`]).
    pub design: Design,
}

impl Default for ErrorRateParams {
    fn default() -> Self {
        ErrorRateParams {
            max_relative_increase: 0.10,
            max_absolute_increase: 0.0,
            confidence: 0.95,
            min_requests: 500,
            mixture: Mixture::Focused,
            design: Design::Planned,
        }
    }
}

/// Cumulative counts at one look, since the canary started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Look {
    pub canary_errors: u64,
    pub canary_requests: u64,
    pub baseline_errors: u64,
    pub baseline_requests: u64,
}

/// The judgement at one look. Rates are NaN (JSON null) while a side has served nothing; `ratio_lower` and
/// `ratio_upper` are each a one-sided anytime-valid bound on `canary rate / baseline rate` at the configured
/// confidence (the pair covers jointly with at least `1 - 2(1 - confidence)`), `None` while unbounded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorRateResult {
    pub verdict: Verdict,
    pub canary_errors: u64,
    pub canary_requests: u64,
    pub canary_rate: f64,
    pub baseline_errors: u64,
    pub baseline_requests: u64,
    pub baseline_rate: f64,
    pub ratio_lower: Option<f64>,
    pub ratio_upper: Option<f64>,
    /// Set while undecided on too little traffic for any verdict (see [`ErrorRateTest::sparse`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sparse: Option<Sparse>,
}

/// Too little traffic for any verdict: `requests_needed` per side is the fewest with which the test could
/// decide at the error rate seen so far; `None` when no error has been seen and `maxAbsoluteIncrease` is 0,
/// so that error-free requests alone can never decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sparse {
    pub requests_needed: Option<u64>,
}

impl ErrorRateResult {
    /// The camelCase JSON object; non-finite numbers become `null`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Why the look is undecided when traffic was too sparse for any verdict, in an SRE's terms.
    pub fn sparse_message(&self) -> Option<String> {
        let needed = self.sparse?.requests_needed;
        let served = format!(
            "canary served {} requests, baseline {}",
            self.canary_requests, self.baseline_requests
        );
        Some(match needed {
            Some(n) => {
                let errors = self.canary_errors + self.baseline_errors;
                let requests = self.canary_requests + self.baseline_requests;
                format!(
                    "too few requests for any verdict: {served}; at the error rate seen ({errors} in {requests}) \
                     no verdict is possible below {n} requests per side"
                )
            }
            None => format!(
                "too few errors for any verdict: {served}, without any error; with maxAbsoluteIncrease 0 \
                 only errors are evidence"
            ),
        })
    }
}

/// Judges every look of a cumulative history: one result per look, in order.
pub fn judge_error_rate(
    params: &ErrorRateParams,
    looks: &[Look],
) -> Result<Vec<ErrorRateResult>, JudgeError> {
    let mut test = ErrorRateTest::new(params)?;
    looks
        .iter()
        .map(|look| {
            test.observe(look)?;
            Ok(test.result())
        })
        .collect()
}

/// The interval search covers ratios e^±30; beyond that it reports the bracket end.
const RATIO_SEARCH_BOUND: f64 = 30.0;
/// Bisection stops when the bound is known to 0.01 % of its value.
const RATIO_TOLERANCE: f64 = 1e-4;
/// The sparse-traffic search looks no further than this many requests per side (about 2^40).
const REQUESTS_SEARCH_LIMIT: u64 = 1 << 40;

/// The sequential test's state: rebuilt by replaying the cumulative looks, never stored elsewhere.
#[derive(Debug, Clone)]
pub struct ErrorRateTest {
    params: ErrorRateParams,
    /// `ln(1/α)` of the `fail` mixture (its share of α) and of the `pass` one.
    log_threshold_fail: f64,
    log_threshold: f64,
    /// The planned look of `Design::Planned`, with the rest of the `fail` test's α.
    planned: Option<PlannedLook>,
    boundary: f64,
    deltas: Vec<f64>,
    /// Log prior weight of each point for `fail` (above the boundary) and `pass` (below); `-inf`: unused.
    log_weights_above: Vec<f64>,
    log_weights_below: Vec<f64>,
    /// Log likelihood ratio at each mixture point, above (`fail`) and below (`pass`) the boundary.
    log_lr_above: Vec<f64>,
    log_lr_below: Vec<f64>,
    largest_above: f64,
    largest_below: f64,
    pools: Vec<Pool>,
    /// Index into `pools` of the last increment's split, whose coefficients are cached.
    last_pool: Option<usize>,
    coefficients: Coefficients,
    last: Look,
    looks: usize,
    failed: bool,
    passed: bool,
}

/// Increments that split their requests in the same exact ratio, with their errors summed.
#[derive(Debug, Clone)]
struct Pool {
    canary_share: (u64, u64),
    /// `ln(nc/nb)`: θ(ρ) = logistic(ln ρ + offset).
    offset: f64,
    canary_errors: u64,
    baseline_errors: u64,
}

/// Per mixture point, for one request split: the change of `ln θ` and `ln(1-θ)` from the boundary, and
/// `θ/θ0 - 1` for the absolute-margin compensator; above then below the boundary.
#[derive(Debug, Clone, Default)]
struct Coefficients {
    above: Vec<[f64; 3]>,
    below: Vec<[f64; 3]>,
}

impl ErrorRateTest {
    pub fn new(params: &ErrorRateParams) -> Result<Self, JudgeError> {
        let alpha = alpha(params.confidence)?;
        let relative = non_negative("maxRelativeIncrease", params.max_relative_increase)?;
        let absolute = non_negative("maxAbsoluteIncrease", params.max_absolute_increase)?;
        if absolute >= 1.0 {
            return Err(JudgeError::BadParameter {
                name: "maxAbsoluteIncrease",
                expected: "below 1 (it is a rate)",
                value: absolute,
            });
        }
        let boundary = (1.0 + relative).ln();
        // The planned look's conditional test knows the relative margin only.
        let planned = (params.design == Design::Planned && absolute == 0.0)
            .then(|| PlannedLook::new(alpha * PLANNED_SHARE, boundary));
        let (deltas, log_weights_above, log_weights_below) =
            mixture_points(params.mixture, planned.is_some());
        let fail_alpha = if planned.is_some() {
            alpha * (1.0 - PLANNED_SHARE)
        } else {
            alpha
        };
        Ok(ErrorRateTest {
            params: *params,
            log_threshold_fail: -fail_alpha.ln(),
            log_threshold: -alpha.ln(),
            planned,
            boundary,
            log_weights_above,
            log_weights_below,
            log_lr_above: vec![0.0; deltas.len()],
            log_lr_below: vec![0.0; deltas.len()],
            largest_above: 0.0,
            largest_below: 0.0,
            deltas,
            pools: Vec::new(),
            last_pool: None,
            coefficients: Coefficients::default(),
            last: Look::default(),
            looks: 0,
            failed: false,
            passed: false,
        })
    }

    /// Rebuilds the state from a cumulative history (after a restart): the same verdicts as live.
    pub fn replay(params: &ErrorRateParams, looks: &[Look]) -> Result<Self, JudgeError> {
        let mut test = ErrorRateTest::new(params)?;
        for look in looks {
            test.observe(look)?;
        }
        Ok(test)
    }

    /// Adds the next cumulative look and returns the verdict. A rejected look leaves the state unchanged.
    pub fn observe(&mut self, look: &Look) -> Result<Verdict, JudgeError> {
        let number = self.looks + 1;
        let (xc, nc) = increment(
            number,
            "canary",
            self.last.canary_errors,
            self.last.canary_requests,
            look.canary_errors,
            look.canary_requests,
        )?;
        let (xb, nb) = increment(
            number,
            "baseline",
            self.last.baseline_errors,
            self.last.baseline_requests,
            look.baseline_errors,
            look.baseline_requests,
        )?;
        self.looks = number;
        self.last = *look;
        // With one side idle an error's owner is certain whatever ρ is: such increments carry no evidence.
        if nc > 0 && nb > 0 {
            let pool = self.pool_for(nc, nb);
            if let Some(p) = self.pools.get_mut(pool) {
                p.canary_errors += xc;
                p.baseline_errors += xb;
            }
            let margin_requests = self.params.max_absolute_increase * nc as f64;
            let (xc, xb) = (xc as f64, xb as f64);
            // One pass that also tracks the largest LR, the cheap bound `crossed` starts from.
            for (lrs, coefficients, largest) in [
                (
                    &mut self.log_lr_above,
                    &self.coefficients.above,
                    &mut self.largest_above,
                ),
                (
                    &mut self.log_lr_below,
                    &self.coefficients.below,
                    &mut self.largest_below,
                ),
            ] {
                *largest = f64::NEG_INFINITY;
                for (lr, c) in lrs.iter_mut().zip(coefficients) {
                    *lr += xc * c[0] + xb * c[1] - margin_requests * c[2];
                    if *lr > *largest {
                        *largest = *lr;
                    }
                }
            }
        }
        let enough = look.canary_requests >= self.params.min_requests
            && look.baseline_requests >= self.params.min_requests;
        // A crossing is final, so a crossed side needs no more checks.
        if let Some(planned) = &mut self.planned {
            self.failed |= planned.observe(xc, nc, xb, nb, enough);
        }
        if enough && !self.failed {
            self.failed = crossed(
                self.log_threshold_fail,
                self.largest_above,
                &self.log_weights_above,
                &self.log_lr_above,
            );
        }
        if enough && !self.passed {
            self.passed = crossed(
                self.log_threshold,
                self.largest_below,
                &self.log_weights_below,
                &self.log_lr_below,
            );
        }
        Ok(self.verdict())
    }

    /// `fail` once the regression test has crossed (it stays crossed: the guarantee covers the first
    /// crossing), else `pass` once the mirrored test has, else `inconclusive`.
    pub fn verdict(&self) -> Verdict {
        if self.failed {
            Verdict::Fail
        } else if self.passed {
            Verdict::Pass
        } else {
            Verdict::Inconclusive
        }
    }

    /// The full judgement at the latest look, with rates and the anytime-valid ratio bounds.
    pub fn result(&self) -> ErrorRateResult {
        let l = &self.last;
        ErrorRateResult {
            verdict: self.verdict(),
            canary_errors: l.canary_errors,
            canary_requests: l.canary_requests,
            canary_rate: l.canary_errors as f64 / l.canary_requests as f64,
            baseline_errors: l.baseline_errors,
            baseline_requests: l.baseline_requests,
            baseline_rate: l.baseline_errors as f64 / l.baseline_requests as f64,
            ratio_lower: self.ratio_bound(1.0),
            ratio_upper: self.ratio_bound(-1.0),
            sparse: self.sparse(),
        }
    }

    /// `Some` when the test is undecided and the traffic so far is below the fewest requests per side with
    /// which it could reach any verdict at the error rate seen (pooled over both sides). That figure comes
    /// from the test's own boundary: the fewest `n` for which a single look of `n` requests per side, holding
    /// `ceil(2n·rate)` errors all on the canary (`fail`) or all on the baseline (`pass`), the most one-sided
    /// evidence that rate allows, crosses `1/α`. Real traffic needs more, so it is a lower bound.
    pub fn sparse(&self) -> Option<Sparse> {
        if self.verdict() != Verdict::Inconclusive {
            return None;
        }
        let l = &self.last;
        let requests = l.canary_requests.saturating_add(l.baseline_requests);
        let errors = l.canary_errors.saturating_add(l.baseline_errors);
        let rate = if requests == 0 {
            0.0
        } else {
            errors as f64 / requests as f64
        };
        let needed = self.fewest_deciding_requests(rate);
        let served = l.canary_requests.min(l.baseline_requests);
        match needed {
            Some(n) if n <= served => None,
            _ => Some(Sparse {
                requests_needed: needed,
            }),
        }
    }

    /// The search behind [`ErrorRateTest::sparse`]: doubling, then bisection on the requests per side.
    fn fewest_deciding_requests(&self, rate: f64) -> Option<u64> {
        let decides = |n: u64| {
            let errors = ((2 * n) as f64 * rate).ceil().min(n as f64) as u64;
            let one_sided = |canary_errors, baseline_errors| {
                ErrorRateTest::new(&self.params)
                    .and_then(|mut t| {
                        t.observe(&Look {
                            canary_errors,
                            canary_requests: n,
                            baseline_errors,
                            baseline_requests: n,
                        })
                    })
                    .is_ok_and(|v| v != Verdict::Inconclusive)
            };
            one_sided(errors, 0) || one_sided(0, errors)
        };
        let mut high = 1;
        while !decides(high) {
            if high >= REQUESTS_SEARCH_LIMIT {
                return None;
            }
            high *= 2;
        }
        let mut low = high / 2; // does not decide (or is 0)
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if decides(mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Some(high)
    }

    /// Finds (or creates) the pool of this request split and loads its coefficients.
    fn pool_for(&mut self, nc: u64, nb: u64) -> usize {
        let g = gcd(nc, nb);
        let share = (nc / g, nb / g);
        if let Some(i) = self.last_pool
            && self.pools.get(i).is_some_and(|p| p.canary_share == share)
        {
            return i;
        }
        let index = match self.pools.iter().position(|p| p.canary_share == share) {
            Some(i) => i,
            None => {
                self.pools.push(Pool {
                    canary_share: share,
                    offset: (share.0 as f64).ln() - (share.1 as f64).ln(),
                    canary_errors: 0,
                    baseline_errors: 0,
                });
                self.pools.len() - 1
            }
        };
        let offset = self.pools.get(index).map_or(0.0, |p| p.offset);
        let at = |u: f64| (log_theta(u + offset), log_theta(-(u + offset)));
        let (t0, s0) = at(self.boundary);
        let side = |sign: f64| -> Vec<[f64; 3]> {
            self.deltas
                .iter()
                .map(|d| {
                    let (t, s) = at(self.boundary + sign * d);
                    [t - t0, s - s0, (t - t0).exp_m1()]
                })
                .collect()
        };
        self.coefficients = Coefficients {
            above: side(1.0),
            below: side(-1.0),
        };
        self.last_pool = Some(index);
        index
    }

    /// The conditional log likelihood of all errors at `u = ln ρ`; concave in `u`.
    fn log_likelihood(&self, u: f64) -> f64 {
        self.pools
            .iter()
            .map(|p| {
                let z = u + p.offset;
                p.canary_errors as f64 * log_theta(z) + p.baseline_errors as f64 * log_theta(-z)
            })
            .sum()
    }

    /// Log mixture statistic for the boundary `e^u`, testing ratios above it (`sign = 1`) or below (`-1`),
    /// without the absolute margin: the ratio bounds are about the pure rate ratio.
    fn boundary_statistic(&self, u: f64, sign: f64) -> f64 {
        let base = self.log_likelihood(u);
        let weights = if sign > 0.0 {
            &self.log_weights_above
        } else {
            &self.log_weights_below
        };
        log_sum_exp(
            weights
                .iter()
                .zip(&self.deltas)
                .map(|(w, d)| w + self.log_likelihood(u + sign * d) - base),
        )
    }

    /// The lower (`sign = 1`) or upper (`-1`) ratio bound: the edge of the set of boundaries the one-sided
    /// test rejects. Concavity of the log likelihood makes that set a half-line, so bisection finds its edge;
    /// the reported bound is on the rejected side, so it never claims more than the test does.
    fn ratio_bound(&self, sign: f64) -> Option<f64> {
        let threshold = if sign > 0.0 {
            self.log_threshold_fail
        } else {
            self.log_threshold
        };
        let rejected = |u: f64| self.boundary_statistic(u, sign) >= threshold;
        // Rejected boundaries lie below the lower bound and above the upper bound.
        let (mut inside, mut outside) = (sign * RATIO_SEARCH_BOUND, -sign * RATIO_SEARCH_BOUND);
        if !rejected(outside) {
            return None;
        }
        if rejected(inside) {
            return Some(inside.exp());
        }
        while (inside - outside).abs() > RATIO_TOLERANCE {
            let mid = 0.5 * (inside + outside);
            if rejected(mid) {
                outside = mid;
            } else {
                inside = mid;
            }
        }
        Some(outside.exp())
    }
}

/// Validates one side of a look against the previous look and returns its (errors, requests) increment.
fn increment(
    look: usize,
    side: &'static str,
    errors_before: u64,
    requests_before: u64,
    errors: u64,
    requests: u64,
) -> Result<(u64, u64), JudgeError> {
    let field = |errors_field| match (side, errors_field) {
        ("canary", true) => "canary_errors",
        ("canary", false) => "canary_requests",
        (_, true) => "baseline_errors",
        (_, false) => "baseline_requests",
    };
    if errors > requests {
        return Err(JudgeError::ErrorsExceedRequests {
            look,
            side,
            errors,
            requests,
        });
    }
    let decreased = |before, after, errors_field| JudgeError::CountDecreased {
        look,
        field: field(errors_field),
        before,
        after,
    };
    let new_requests = requests
        .checked_sub(requests_before)
        .ok_or_else(|| decreased(requests_before, requests, false))?;
    let new_errors = errors
        .checked_sub(errors_before)
        .ok_or_else(|| decreased(errors_before, errors, true))?;
    if new_errors > new_requests {
        return Err(JudgeError::IncrementInconsistent {
            look,
            side,
            errors: new_errors,
            requests: new_requests,
        });
    }
    Ok((new_errors, new_requests))
}

/// `ln θ` for `θ = logistic(z)`, stable for any `z` (`ln(1-θ)` is `log_theta(-z)`).
fn log_theta(z: f64) -> f64 {
    // ln σ(z) = -softplus(-z) = -(max(-z, 0) + ln(1 + e^-|z|))
    -((-z).max(0.0) + (-z.abs()).exp().ln_1p())
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
