//! Seeded simulations of the error-rate judge: exact binomial counts per look for canary and baseline,
//! shared by its tests (`judge_error_rate`) and the bench (which runs more of them). Runs are fully determined
//! by their seed.

use canaryd::engine::judge::{ErrorRateParams, ErrorRateTest, Look, Verdict};

use super::peers::{failure_limit_exceeded, kayenta_high};
use super::rng::Rng;

/// Exact Binomial(n, p) sampling by inversion of a precomputed CDF table (n and p are fixed per scenario).
pub struct Binomial {
    cdf: Vec<f64>,
}

impl Binomial {
    pub fn new(n: u64, p: f64) -> Binomial {
        // log pmf by the recurrence pmf(k+1)/pmf(k) = (n-k)/(k+1) · p/(1-p), normalised at the end.
        let mut log_pmf = Vec::with_capacity(n as usize + 1);
        let mut current = n as f64 * (1.0 - p).ln();
        for k in 0..=n {
            log_pmf.push(current);
            current += ((n - k) as f64 / (k + 1) as f64).ln() + (p / (1.0 - p)).ln();
        }
        let max = log_pmf.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut total = 0.0;
        let mut cdf: Vec<f64> = log_pmf
            .iter()
            .map(|l| {
                total += (l - max).exp();
                total
            })
            .collect();
        for c in &mut cdf {
            *c /= total;
        }
        Binomial { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.uniform();
        self.cdf.partition_point(|&c| c <= u) as u64
    }
}

/// Canary and baseline each serve `requests_per_look` requests between looks at fixed error rates.
#[derive(Debug, Clone)]
pub struct ErrorRateScenario {
    pub runs: usize,
    pub looks: usize,
    pub requests_per_look: u64,
    pub baseline_rate: f64,
    pub canary_rate: f64,
    pub params: ErrorRateParams,
}

impl ErrorRateScenario {
    pub fn new(
        runs: usize,
        looks: usize,
        baseline_rate: f64,
        canary_rate: f64,
    ) -> ErrorRateScenario {
        ErrorRateScenario {
            runs,
            looks,
            requests_per_look: 1000,
            baseline_rate,
            canary_rate,
            params: ErrorRateParams::default(),
        }
    }

    /// The canary exactly at the null's boundary `baseline × (1 + r) + a`.
    pub fn at_margin(
        runs: usize,
        looks: usize,
        baseline_rate: f64,
        params: ErrorRateParams,
    ) -> ErrorRateScenario {
        let canary =
            baseline_rate * (1.0 + params.max_relative_increase) + params.max_absolute_increase;
        ErrorRateScenario {
            params,
            ..ErrorRateScenario::new(runs, looks, baseline_rate, canary)
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ErrorRateSummary {
    /// Runs that said `fail` at some look / `pass` at some look.
    pub fail_fraction: f64,
    pub pass_fraction: f64,
    /// Median over runs of the first look saying `fail` (`pass`); `None` when fewer than half the runs did.
    pub median_looks_to_fail: Option<usize>,
    pub median_looks_to_pass: Option<usize>,
}

pub fn simulate_error_rate(s: &ErrorRateScenario, seed: u64) -> ErrorRateSummary {
    let (first_fail, first_pass) = first_verdicts(s, seed);
    ErrorRateSummary {
        fail_fraction: fraction(&first_fail),
        pass_fraction: fraction(&first_pass),
        median_looks_to_fail: median_first(&first_fail),
        median_looks_to_pass: median_first(&first_pass),
    }
}

/// Per run, the first look that said `fail` and the first that said `pass` (`None`: never).
pub fn first_verdicts(
    s: &ErrorRateScenario,
    seed: u64,
) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
    let mut first_fail = Vec::with_capacity(s.runs);
    let mut first_pass = Vec::with_capacity(s.runs);
    for errors in traffic(s, seed) {
        let Ok(mut test) = ErrorRateTest::new(&s.params) else {
            break;
        };
        let mut look = Look::default();
        let (mut fail_at, mut pass_at) = (None, None);
        for (number, &(canary, baseline)) in (1..).zip(&errors) {
            look.canary_requests += s.requests_per_look;
            look.baseline_requests += s.requests_per_look;
            look.canary_errors += canary;
            look.baseline_errors += baseline;
            match test.observe(&look) {
                Ok(Verdict::Fail) => fail_at = fail_at.or(Some(number)),
                Ok(Verdict::Pass) => pass_at = pass_at.or(Some(number)),
                _ => {}
            }
            if fail_at.is_some() {
                break; // `fail` is final: later looks cannot change the run's outcome.
            }
        }
        first_fail.push(fail_at);
        first_pass.push(pass_at);
    }
    (first_fail, first_pass)
}

/// The scenario's simulated traffic: per run, the errors canary and baseline served between looks. A seed
/// gives the same traffic to [`first_verdicts`] and [`peer_first_fails`].
pub fn traffic(s: &ErrorRateScenario, seed: u64) -> impl Iterator<Item = Vec<(u64, u64)>> {
    let mut rng = Rng::new(seed);
    let canary = Binomial::new(s.requests_per_look, s.canary_rate);
    let baseline = Binomial::new(s.requests_per_look, s.baseline_rate);
    let looks = s.looks;
    (0..s.runs).map(move |_| {
        (0..looks)
            .map(|_| (canary.sample(&mut rng), baseline.sample(&mut rng)))
            .collect()
    })
}

/// Per run, the look at which each peer rule first rolled back (`None`: never within the scenario's looks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerFirstFails {
    /// `error-rate.yaml`'s shape: the canary's rate over the last 2 looks above `max_error_rate`, rolled
    /// back on the second such look (`failureLimit: 1`).
    pub threshold: Vec<Option<usize>>,
    /// Mann-Whitney on each track's error rate per look since the start, at every look
    /// ([`kayenta_high`]).
    pub kayenta: Vec<Option<usize>>,
}

/// The peers' rules on the same traffic as [`first_verdicts`] with the same seed.
pub fn peer_first_fails(s: &ErrorRateScenario, seed: u64, max_error_rate: f64) -> PeerFirstFails {
    let mut out = PeerFirstFails::default();
    let per_look = s.requests_per_look as f64;
    for errors in traffic(s, seed) {
        let over = (0..errors.len()).map(|i| {
            let recent = errors.get(i.saturating_sub(1)..=i).unwrap_or_default();
            let canary: u64 = recent.iter().map(|e| e.0).sum();
            canary as f64 / (per_look * recent.len() as f64) > max_error_rate
        });
        out.threshold.push(failure_limit_exceeded(over, 1));
        let canary: Vec<f64> = errors.iter().map(|e| e.0 as f64 / per_look).collect();
        let baseline: Vec<f64> = errors.iter().map(|e| e.1 as f64 / per_look).collect();
        out.kayenta.push(
            (1..=errors.len()).find(|&look| kayenta_high(&canary[..look], &baseline[..look])),
        );
    }
    out
}

/// The fraction of runs whose first verdict came at all.
pub fn fraction(firsts: &[Option<usize>]) -> f64 {
    fraction_within(firsts, usize::MAX)
}

/// The fraction of runs whose first verdict came at look `looks` or earlier.
pub fn fraction_within(firsts: &[Option<usize>], looks: usize) -> f64 {
    firsts
        .iter()
        .filter(|f| f.is_some_and(|l| l <= looks))
        .count() as f64
        / firsts.len().max(1) as f64
}

/// The median first look, `None` when fewer than half the runs reached the verdict.
pub fn median_first(firsts: &[Option<usize>]) -> Option<usize> {
    let mut v: Vec<usize> = firsts.iter().map(|f| f.unwrap_or(usize::MAX)).collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().filter(|&m| m != usize::MAX)
}
