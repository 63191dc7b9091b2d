//! The planned look of the error-rate judge's `fail` test (`design: planned`): one exact test of the canary's
//! share of the errors, at a look fixed in advance, with part of α; the sequential mixture keeps the rest.
//!
//! Conditional on how many errors each increment held (`N_k`) and on its request split, the canary's share of
//! an increment's errors is Binomial(N_k, θ0_k) at the null's boundary, with θ0_k = ψ·nc / (ψ·nc + nb), the
//! increments independent. For Poisson error arrivals ψ = ρ0 exactly; for binomial requests at a baseline rate
//! p the boundary's odds ratio is ψ = ρ0·(1 − p) / (1 − ρ0·p), taken here at the baseline's observed rate (at
//! 1 % it is 1.001·ρ0). Below the boundary the canary's count is stochastically smaller, so the boundary is the
//! worst case. The test keeps the exact null distribution of the canary's cumulative count (a convolution of
//! the increments' binomials) and, at the planned look, fails the canary when the count seen is in the upper
//! tail of probability at most `α_p`.
//!
//! The planned look is the first look at which both sides have served `minRequests` and either the errors
//! seen reach `N*`, or the look is the `PLANNED_LOOK`th or later and the errors reach `N* / 4`. Which look
//! that is depends on the errors' totals and the requests only, never on who owned the errors, so given the
//! totals it is fixed and the test's level is exactly `α_p` or less; by the union bound the two tests together
//! say `fail` with probability at most α, however many looks. `N*` is the number of errors with which one look
//! at level `α_p` catches a ratio of `DESIGN_RATIO × ρ0` two times in three, for the request split seen (about
//! 200 at an equal split and a 10 % margin): at high traffic the look comes as soon as there is that much
//! evidence; at low traffic at the tenth look, where a 1.5× regression is caught half the time; at very low
//! traffic (a request a second) once `N* / 4` errors are in, so that its α is not left unused for hours.
//!
//! Pure computation: no clock, no I/O, no panics on counts.

use serde::{Deserialize, Serialize};

use super::normal::isf;

/// How the `fail` test spends its α (1 − confidence): all on the sequential mixture, or part of it on a planned
/// look. Either keeps the guarantee over any number of looks; `pass` is the same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Design {
    /// `PLANNED_SHARE` of α on the planned look, the rest on the mixture: at low traffic a 1.5× regression
    /// is decided by about the tenth look where the mixture alone needs about fifteen. Without an absolute
    /// margin only; with `maxAbsoluteIncrease` above 0 it is `Sequential`.
    #[default]
    Planned,
    /// All of α on the sequential mixture: the fastest on large regressions (2× and more).
    Sequential,
}

/// The share of α the planned look spends under `Design::Planned`.
pub(super) const PLANNED_SHARE: f64 = 0.8;

impl std::fmt::Display for Design {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Design::Planned => "planned",
            Design::Sequential => "sequential",
        })
    }
}

impl std::str::FromStr for Design {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "planned" => Ok(Design::Planned),
            "sequential" => Ok(Design::Sequential),
            other => Err(format!("{other:?} is not one of planned, sequential")),
        }
    }
}

/// The regression the planned look is sized for, as a ratio to the boundary ρ0: 1.5× the baseline at the
/// default 10 % margin.
const DESIGN_RATIO: f64 = 1.5 / 1.1;
/// The power `N*` gives the planned look against `DESIGN_RATIO × ρ0` (its normal quantile): two in three.
const DESIGN_POWER_Z: f64 = 0.43;
/// The look at which the planned look comes at the latest, given `N* / 4` errors by then.
const PLANNED_LOOK: usize = 10;
/// Binomial probabilities below `e^-LOG_CUTOFF` of the mode's are dropped from the convolution.
const LOG_CUTOFF: f64 = 60.0;

#[derive(Debug, Clone)]
pub(super) struct PlannedLook {
    alpha: f64,
    /// `ln ρ0`.
    boundary: f64,
    /// The null probability of each cumulative canary error count from `mass_offset` on (counts outside the
    /// window have less than `e^-LOG_CUTOFF` of the mode's).
    mass_offset: u64,
    mass: Vec<f64>,
    looks: usize,
    canary_errors: u64,
    errors: u64,
    canary_requests: u64,
    baseline_requests: u64,
    baseline_errors: u64,
    /// The planned look has been taken (or cannot be): nothing more to do.
    over: bool,
    crossed: bool,
}

impl PlannedLook {
    /// `alpha`: the part of α this test may spend; `boundary`: `ln ρ0`.
    pub(super) fn new(alpha: f64, boundary: f64) -> PlannedLook {
        PlannedLook {
            alpha,
            boundary,
            mass_offset: 0,
            mass: vec![1.0],
            looks: 0,
            canary_errors: 0,
            errors: 0,
            canary_requests: 0,
            baseline_requests: 0,
            baseline_errors: 0,
            over: false,
            crossed: false,
        }
    }

    /// Adds one increment (errors and requests of each side since the previous look) and says whether the
    /// planned look has failed the canary (it stays failed). `enough`: both sides have served `minRequests`.
    pub(super) fn observe(&mut self, xc: u64, nc: u64, xb: u64, nb: u64, enough: bool) -> bool {
        self.looks += 1;
        self.canary_requests = self.canary_requests.saturating_add(nc);
        self.baseline_requests = self.baseline_requests.saturating_add(nb);
        self.baseline_errors = self.baseline_errors.saturating_add(xb);
        if self.over {
            return self.crossed;
        }
        let Some(odds) = self.boundary_odds() else {
            self.end();
            return false;
        };
        let increment = xc.saturating_add(xb);
        let (offset, values) = binomial(increment, share(odds, nc, nb));
        self.mass = convolve(&self.mass, &values);
        self.mass_offset = self.mass_offset.saturating_add(offset);
        self.canary_errors = self.canary_errors.saturating_add(xc);
        self.errors = self.errors.saturating_add(increment);
        let planned = self.planned_errors(odds);
        let due = self.errors as f64 >= planned
            || (self.looks >= PLANNED_LOOK && self.errors as f64 >= planned / 4.0);
        if enough && due {
            let first = lowest_failing(&self.mass, self.alpha);
            self.crossed = self.canary_errors >= self.mass_offset.saturating_add(first as u64);
            self.end();
        }
        self.crossed
    }

    fn end(&mut self) {
        self.over = true;
        self.mass = Vec::new();
    }

    /// ψ, the odds ratio at the boundary for binomial requests at the baseline's observed rate; `None` when
    /// that rate leaves no room below 100 % for the boundary (then this test takes no part).
    fn boundary_odds(&self) -> Option<f64> {
        let rho = self.boundary.exp();
        let p = if self.baseline_requests == 0 {
            0.0
        } else {
            self.baseline_errors as f64 / self.baseline_requests as f64
        };
        (rho * p < 0.99).then(|| rho * (1.0 - p) / (1.0 - rho * p))
    }

    /// `N*`: the errors with which one look at level `α_p` catches `DESIGN_RATIO × ρ0` with the design's
    /// power (normal approximation), for the cumulative request split.
    fn planned_errors(&self, odds: f64) -> f64 {
        let (nc, nb) = (self.canary_requests, self.baseline_requests);
        let theta0 = share(odds, nc, nb);
        let theta1 = share(odds * DESIGN_RATIO, nc, nb);
        let spread = (theta0 * (1.0 - theta0)).sqrt() * isf(self.alpha)
            + (theta1 * (1.0 - theta1)).sqrt() * DESIGN_POWER_Z;
        let gap = theta1 - theta0;
        if gap > 0.0 && spread.is_finite() {
            (spread / gap).powi(2)
        } else {
            f64::INFINITY
        }
    }
}

/// The probability that an error of an increment is the canary's, at odds ratio `odds`.
fn share(odds: f64, nc: u64, nb: u64) -> f64 {
    match (nc, nb) {
        (0, _) => 0.0,
        (_, 0) => 1.0,
        _ => {
            let c = odds * nc as f64;
            c / (c + nb as f64)
        }
    }
}

/// The lowest count (an index into `mass`) whose tail probability `P(X >= count)` is at most `alpha`;
/// `mass.len()` when even the top count's is above it.
fn lowest_failing(mass: &[f64], alpha: f64) -> usize {
    let mut tail = 0.0;
    let mut first = mass.len();
    for (i, m) in mass.iter().enumerate().rev() {
        tail += m;
        if tail > alpha {
            break;
        }
        first = i;
    }
    first
}

/// Binomial(n, p) probabilities as `(offset, values)`: `values[i]` is `P(X = offset + i)`, keeping the counts
/// within `e^-LOG_CUTOFF` of the mode, found from the mode outward so the work is the window's, not `n`'s.
fn binomial(n: u64, p: f64) -> (u64, Vec<f64>) {
    if n == 0 || p <= 0.0 {
        return (0, vec![1.0]);
    }
    if p >= 1.0 {
        return (n, vec![1.0]);
    }
    let log_odds = (p / (1.0 - p)).ln();
    let mode = (((n as f64 + 1.0) * p).floor() as u64).min(n);
    // ln pmf(k+1) - ln pmf(k) = ln((n-k)/(k+1)) + ln(p/(1-p)).
    let mut below = Vec::new();
    let mut log = 0.0;
    let mut k = mode;
    while k > 0 {
        log -= ((n - k + 1) as f64 / k as f64).ln() + log_odds;
        if log < -LOG_CUTOFF {
            break;
        }
        below.push(log);
        k -= 1;
    }
    let mut above = Vec::new();
    let (mut log, mut k) = (0.0, mode);
    while k < n {
        log += ((n - k) as f64 / (k + 1) as f64).ln() + log_odds;
        if log < -LOG_CUTOFF {
            break;
        }
        above.push(log);
        k += 1;
    }
    let offset = mode - below.len() as u64;
    let logs: Vec<f64> = below
        .into_iter()
        .rev()
        .chain(std::iter::once(0.0))
        .chain(above)
        .collect();
    let total: f64 = logs.iter().map(|l| l.exp()).sum();
    (offset, logs.iter().map(|l| l.exp() / total).collect())
}

/// The distribution of the sum of two independent counts, each given from its own offset (which add).
fn convolve(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; (a.len() + b.len()).saturating_sub(1)];
    for (i, x) in a.iter().enumerate() {
        if *x == 0.0 {
            continue;
        }
        for (o, y) in out.iter_mut().skip(i).zip(b) {
            *o += x * y;
        }
    }
    out
}
