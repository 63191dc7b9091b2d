//! Seeded simulation of latency histograms for canary and baseline, judged once a minute by four rules side by
//! side: a p99 threshold (the shape of `latency-p99.yaml`), a Kayenta-style Mann-Whitney per look,
//! canaryd's distribution judge as `latency-vs-baseline.yaml` configures it, and canaryd's sequential test on
//! the share of slow requests (`slow-requests-vs-baseline.yaml`). Shared by the engine tests
//! (`judge_latency`) and the bench, which runs more of them. Runs are fully determined by their seed.
//!
//! Every request draws a log-normal latency and lands in the bucket Prometheus' client would count it in
//! (Prometheus' default bounds, which the shipped templates' `http_request_duration_seconds_bucket` assume);
//! the simulation keeps each track's bucket counts per half minute. Queries are modelled exactly, without
//! Prometheus' extrapolation: `rate(...[1m])` at a time is the last two halves' counts, `histogram_quantile`
//! interpolates linearly inside the bucket as Prometheus does. Traffic is steady from two minutes before the
//! analysis starts, so every window is full from the first look.

use canaryd::engine::judge::{
    DistributionParams, ErrorRateParams, ErrorRateTest, Look, Verdict, judge_distribution,
};

use super::distribution::normal;
use super::peers::{failure_limit_exceeded, kayenta_high};
use super::rng::Rng;
use crate::prometheus::DEFAULT_BUCKETS;

/// Requests per bucket (not cumulative) in one half minute; the last entry is above the highest bound.
pub type Counts = [u64; DEFAULT_BUCKETS.len() + 1];

/// The `le` bound above which `slow-requests-vs-baseline.yaml` counts a request as slow (its default).
pub const SLOW_BOUND: f64 = 0.25;

/// `latency-p99.yaml`'s default `max-p99` (seconds), the threshold rule's bound.
pub const MAX_P99: f64 = 0.5;

/// The look at which `latency-vs-baseline.yaml` judges (its `initialDelay` of 10 minutes, `count: 1`).
pub const TEMPLATE_LOOK: usize = 10;

/// Canary and baseline serve `requests_per_second` each; latencies are log-normal with the baseline's
/// `median` (seconds) and `sigma` (of ln latency), each track's multiplied by its factor.
#[derive(Debug, Clone)]
pub struct LatencyScenario {
    pub runs: usize,
    pub looks: usize,
    pub requests_per_second: u64,
    pub median: f64,
    pub sigma: f64,
    pub canary_factor: f64,
    pub baseline_factor: f64,
}

impl LatencyScenario {
    /// 10 requests/s per track, median 150 ms, σ 0.45 (p99 about 0.43 s, 13% of requests above 0.25 s).
    pub fn new(runs: usize, looks: usize, canary_factor: f64, baseline_factor: f64) -> Self {
        LatencyScenario {
            runs,
            looks,
            requests_per_second: 10,
            median: 0.15,
            sigma: 0.45,
            canary_factor,
            baseline_factor,
        }
    }

    /// The canary exactly at the slow-request test's boundary: its share above [`SLOW_BOUND`] is the
    /// baseline's times `1 + max_relative_increase` (the hardest case for the test's guarantee).
    pub fn at_margin(runs: usize, looks: usize, max_relative_increase: f64) -> Self {
        let base = LatencyScenario::new(runs, looks, 1.0, 1.0);
        let slow_share =
            |factor: f64| normal_sf((SLOW_BOUND.ln() - (base.median * factor).ln()) / base.sigma);
        let target = slow_share(1.0) * (1.0 + max_relative_increase);
        // The share grows with the factor: bisect for the factor that hits the target.
        let (mut low, mut high) = (1.0, 2.0);
        for _ in 0..60 {
            let mid = 0.5 * (low + high);
            if slow_share(mid) < target {
                low = mid;
            } else {
                high = mid;
            }
        }
        LatencyScenario {
            canary_factor: 0.5 * (low + high),
            ..base
        }
    }
}

/// P(Z > z) for a standard normal Z (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7).
pub fn normal_sf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let upper = 0.5 * poly * (-x * x).exp();
    if z >= 0.0 { upper } else { 1.0 - upper }
}

/// The rules judged side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `latency-p99.yaml`: canary p99 over the last 2 minutes above [`MAX_P99`], rolled back on the second
    /// such look (`failureLimit: 1`).
    Threshold,
    /// Mann-Whitney on the per-minute p99 of each track since the start, at every look ([`kayenta_high`]).
    Kayenta,
    /// `latency-vs-baseline.yaml`: the distribution judge once, at look [`TEMPLATE_LOOK`], on p99 samples.
    Template,
    /// `slow-requests-vs-baseline.yaml`: the sequential error-rate test on requests above [`SLOW_BOUND`].
    Sequential,
}

impl Rule {
    pub const ALL: [Rule; 4] = [
        Rule::Threshold,
        Rule::Kayenta,
        Rule::Template,
        Rule::Sequential,
    ];

    /// The look at which this rule first rolled back on one run's traffic.
    fn first_fail(self, canary: &[Counts], baseline: &[Counts], looks: usize) -> Option<usize> {
        match self {
            Rule::Threshold => threshold_rule(canary, looks),
            Rule::Kayenta => kayenta_rule(canary, baseline, looks),
            Rule::Template => template_rule(canary, baseline, looks),
            Rule::Sequential => sequential_rule(canary, baseline, looks),
        }
    }
}

/// Runs the scenario; each run's traffic is judged by every rule in `rules`. Per rule (in that order), per
/// run, the look at which it first rolled back (`None`: never within the scenario's looks).
pub fn first_fails(s: &LatencyScenario, seed: u64, rules: &[Rule]) -> Vec<Vec<Option<usize>>> {
    let mut rng = Rng::new(seed);
    let mut out = vec![Vec::with_capacity(s.runs); rules.len()];
    for _ in 0..s.runs {
        let (canary, baseline) = run_traffic(s, &mut rng);
        for (firsts, rule) in out.iter_mut().zip(rules) {
            firsts.push(rule.first_fail(&canary, &baseline, s.looks));
        }
    }
    out
}

/// Half minutes simulated before the analysis starts (the threshold rule's 2-minute window needs them).
const LEAD: usize = 4;

/// One run's half-minute histograms per track: `LEAD` halves before the start, then two per look.
fn run_traffic(s: &LatencyScenario, rng: &mut Rng) -> (Vec<Counts>, Vec<Counts>) {
    let per_half = s.requests_per_second * 30;
    let halves = LEAD + 2 * s.looks;
    let canary = z_bounds(s, s.canary_factor);
    let baseline = z_bounds(s, s.baseline_factor);
    let track = |bounds: &[f64; DEFAULT_BUCKETS.len()], rng: &mut Rng| {
        (0..halves)
            .map(|_| {
                let mut counts = Counts::default();
                for _ in 0..per_half {
                    let z = normal(rng);
                    counts[bounds.partition_point(|&b| b < z)] += 1;
                }
                counts
            })
            .collect::<Vec<_>>()
    };
    let c = track(&canary, rng);
    let b = track(&baseline, rng);
    (c, b)
}

/// The bucket bounds in standard-normal units for a track: latency `median·factor·e^(σz)` is at most
/// `le` exactly when `z <= (ln(le) − ln(median·factor)) / σ`. Prometheus' `le` is inclusive, as here.
fn z_bounds(s: &LatencyScenario, factor: f64) -> [f64; DEFAULT_BUCKETS.len()] {
    std::array::from_fn(|i| (DEFAULT_BUCKETS[i].ln() - (s.median * factor).ln()) / s.sigma)
}

/// The counts of the halves `from..to` added up (what `increase`/`rate` over that range sees).
fn window(halves: &[Counts], from: usize, to: usize) -> Counts {
    let mut sum = Counts::default();
    for half in halves.get(from..to).unwrap_or_default() {
        for (total, n) in sum.iter_mut().zip(half) {
            *total += n;
        }
    }
    sum
}

/// Prometheus' `histogram_quantile(q, ...)` over per-bucket counts: the rank `q·total` located in its
/// bucket and interpolated linearly between the bucket's bounds (from 0 for the first); the highest finite
/// bound when it falls above it; NaN without requests.
pub fn histogram_quantile(q: f64, counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return f64::NAN;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        let Some(&upper) = DEFAULT_BUCKETS.get(i) else {
            break;
        };
        if (below + n) as f64 >= rank {
            let lower = i.checked_sub(1).map_or(0.0, |j| DEFAULT_BUCKETS[j]);
            return lower + (upper - lower) * (rank - below as f64) / n as f64;
        }
        below += n;
    }
    DEFAULT_BUCKETS.last().copied().unwrap_or(f64::NAN)
}

/// The half index at which look `look` (1-based) is taken.
fn look_end(look: usize) -> usize {
    LEAD + 2 * look
}

fn threshold_rule(canary: &[Counts], looks: usize) -> Option<usize> {
    let over = (1..=looks).map(|look| {
        let end = look_end(look);
        histogram_quantile(0.99, &window(canary, end - 4, end)) > MAX_P99
    });
    failure_limit_exceeded(over, 1)
}

/// Each track's p99 per minute of the analysis, up to look `look`.
fn minute_p99s(halves: &[Counts], look: usize) -> Vec<f64> {
    (1..=look)
        .map(|m| histogram_quantile(0.99, &window(halves, look_end(m) - 2, look_end(m))))
        .collect()
}

fn kayenta_rule(canary: &[Counts], baseline: &[Counts], looks: usize) -> Option<usize> {
    let (c, b) = (minute_p99s(canary, looks), minute_p99s(baseline, looks));
    (1..=looks).find(|&look| kayenta_high(&c[..look], &b[..look]))
}

/// `latency-vs-baseline.yaml`: at its one look, p99 samples every 30 s over the 10 minutes (21 per track,
/// the range query's both ends included), each over the `[1m]` before it.
fn template_rule(canary: &[Counts], baseline: &[Counts], looks: usize) -> Option<usize> {
    if looks < TEMPLATE_LOOK {
        return None;
    }
    let samples = |halves: &[Counts]| -> Vec<f64> {
        (0..=2 * TEMPLATE_LOOK)
            .map(|i| histogram_quantile(0.99, &window(halves, LEAD + i - 2, LEAD + i)))
            .collect()
    };
    let r = judge_distribution(
        &samples(canary),
        &samples(baseline),
        &DistributionParams::default(),
    );
    r.ok()
        .filter(|r| r.verdict == Verdict::Fail)
        .map(|_| TEMPLATE_LOOK)
}

/// Requests above [`SLOW_BOUND`] in a window's counts.
pub fn slow_requests(counts: &Counts) -> u64 {
    let first_slow = DEFAULT_BUCKETS.partition_point(|&le| le <= SLOW_BOUND);
    counts[first_slow..].iter().sum()
}

fn sequential_rule(canary: &[Counts], baseline: &[Counts], looks: usize) -> Option<usize> {
    let mut test = ErrorRateTest::new(&ErrorRateParams::default()).ok()?;
    (1..=looks).find(|&look| {
        let (c, b) = (
            window(canary, LEAD, look_end(look)),
            window(baseline, LEAD, look_end(look)),
        );
        let cumulative = Look {
            canary_errors: slow_requests(&c),
            canary_requests: c.iter().sum(),
            baseline_errors: slow_requests(&b),
            baseline_requests: b.iter().sum(),
        };
        test.observe(&cumulative) == Ok(Verdict::Fail)
    })
}
