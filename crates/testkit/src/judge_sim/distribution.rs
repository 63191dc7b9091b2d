//! Seeded simulations of the distribution judge on lognormal latencies, shared by its tests
//! (`judge_distribution`) and the bench. Runs are fully determined by their seed.

use canaryd::engine::judge::{DistributionParams, Verdict, judge_distribution};

use super::rng::Rng;

/// Standard normal (Box-Muller; one of the pair is discarded to keep the state simple).
pub fn normal(rng: &mut Rng) -> f64 {
    let u = 1.0 - rng.uniform();
    let v = rng.uniform();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Lognormal latencies (median 100, σ 0.3) for the baseline; the canary's are the same plus `shift`.
#[derive(Debug, Clone)]
pub struct DistributionScenario {
    pub runs: usize,
    pub samples: usize,
    pub shift: f64,
    pub params: DistributionParams,
}

impl DistributionScenario {
    /// Canary and baseline from the same distribution, with the given margin.
    pub fn aa(runs: usize, samples: usize, max_relative_shift: f64) -> DistributionScenario {
        DistributionScenario {
            runs,
            samples,
            shift: 0.0,
            params: DistributionParams {
                max_relative_shift,
                ..DistributionParams::default()
            },
        }
    }

    /// The canary slower by `factor` of the baseline median (as an additive shift), default parameters.
    pub fn shifted(runs: usize, samples: usize, factor: f64) -> DistributionScenario {
        DistributionScenario {
            runs,
            samples,
            shift: (factor - 1.0) * 100.0,
            params: DistributionParams::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DistributionSummary {
    pub fail_fraction: f64,
    pub pass_fraction: f64,
    /// Runs whose shift interval contains the true shift.
    pub coverage: f64,
}

pub fn simulate_distribution(s: &DistributionScenario, seed: u64) -> DistributionSummary {
    let mut rng = Rng::new(seed);
    let (mut fails, mut passes, mut covered) = (0usize, 0usize, 0usize);
    let latency = |rng: &mut Rng| 100.0 * (0.3 * normal(rng)).exp();
    for _ in 0..s.runs {
        let baseline: Vec<f64> = (0..s.samples).map(|_| latency(&mut rng)).collect();
        let canary: Vec<f64> = (0..s.samples)
            .map(|_| latency(&mut rng) + s.shift)
            .collect();
        let Ok(r) = judge_distribution(&canary, &baseline, &s.params) else {
            break;
        };
        fails += usize::from(r.verdict == Verdict::Fail);
        passes += usize::from(r.verdict == Verdict::Pass);
        let inside = r.shift_lower.is_some_and(|l| l <= s.shift)
            && r.shift_upper.is_some_and(|u| u >= s.shift);
        covered += usize::from(inside);
    }
    let runs = s.runs.max(1) as f64;
    DistributionSummary {
        fail_fraction: fails as f64 / runs,
        pass_fraction: passes as f64 / runs,
        coverage: covered as f64 / runs,
    }
}
