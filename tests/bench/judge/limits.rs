//! Yardsticks for the low-traffic targets (issue 37): on the same simulated traffic as the low-traffic table
//! (10 requests/s per track, a look a minute, baseline 1 %, margin 10 %), how far the best test of the judge's
//! own family gets, and what spending part of α on one fixed look would buy.
//!
//! - `point ρ/ρ0 = c`: the likelihood ratio of who owned the errors at the single alternative `c·ρ0`, rejected
//!   at `1/α`. Every mixture the judge can use is a weighted average of these, so at a given true ratio none
//!   beats the best of them by more than the log of its weight there: this row is the family's ceiling.
//! - `look 10 only`: a fixed-sample test at look 10 (the canary's share of all errors against Binomial(N, θ0),
//!   θ0 = ρ0/(1+ρ0), exact only while errors are Poisson arrivals): never rejects at another look.
//! - `point + look 10`: both, with α split between them (a union bound keeps the sum).
//!
//! These are computed here, for an equal request split only, as yardsticks: they are not the judge.

use canaryd_testkit::judge_sim::error_rate::{ErrorRateScenario, traffic};

use super::{caught, within};

/// `point`: the alternative's ratio to the boundary ρ0 and the α its likelihood ratio is given (0: unused);
/// `look10`: the α of the fixed-sample test at look 10 (0: unused).
struct Yardstick {
    name: &'static str,
    point: f64,
    point_alpha: f64,
    look10_alpha: f64,
}

const CHECKPOINT: usize = 10;
const BOUNDARY: f64 = 1.1;

/// `P(Binomial(n, p) >= x)`, summed from the log pmf.
fn upper_tail(n: u64, x: u64, p: f64) -> f64 {
    let step = (p / (1.0 - p)).ln();
    let mut log_pmf = n as f64 * (1.0 - p).ln();
    let mut tail = 0.0;
    for k in 0..=n {
        if k >= x {
            tail += log_pmf.exp();
        }
        log_pmf += ((n - k) as f64 / (k + 1) as f64).ln() + step;
    }
    tail
}

/// Per run, the first look at which the yardstick rejects "within the margin".
fn first_rejections(y: &Yardstick, s: &ErrorRateScenario, seed: u64) -> Vec<Option<usize>> {
    let theta = |ratio: f64| ratio / (1.0 + ratio);
    let t0 = theta(BOUNDARY);
    let t1 = theta(y.point * BOUNDARY);
    let (a, b) = ((t1 / t0).ln(), ((1.0 - t1) / (1.0 - t0)).ln());
    let threshold = if y.point_alpha > 0.0 {
        -y.point_alpha.ln()
    } else {
        f64::INFINITY
    };
    traffic(s, seed)
        .map(|errors| {
            let (mut log_lr, mut canary, mut total) = (0.0, 0u64, 0u64);
            (1..).zip(&errors).find_map(|(look, &(xc, xb))| {
                log_lr += xc as f64 * a + xb as f64 * b;
                canary += xc;
                total += xc + xb;
                let fixed = look == CHECKPOINT
                    && y.look10_alpha > 0.0
                    && upper_tail(total, canary, t0) <= y.look10_alpha;
                (log_lr >= threshold || fixed).then_some(look)
            })
        })
        .collect()
}

/// Kullback-Leibler divergence of Bernoulli(p) from Bernoulli(q).
fn kl(p: f64, q: f64) -> f64 {
    p * (p / q).ln() + (1.0 - p) * ((1.0 - p) / (1.0 - q)).ln()
}

pub fn figures(runs: usize) {
    println!();
    println!(
        "yardsticks at 10 requests/s per track, a look a minute, baseline 1%, margin 10%, {runs} seeded runs per row (the low-traffic table's traffic)"
    );
    let yardsticks = [
        ("point rho/rho0 = 1.3, alpha 0.05", 1.3, 0.05, 0.0),
        ("point rho/rho0 = 1.45, alpha 0.05", 1.45, 0.05, 0.0),
        ("point rho/rho0 = 1.6, alpha 0.05", 1.6, 0.05, 0.0),
        ("point rho/rho0 = 1.8, alpha 0.05", 1.8, 0.05, 0.0),
        ("look 10 only, alpha 0.05", 1.0, 0.0, 0.05),
        ("point 1.45 at 0.035 + look 10 at 0.015", 1.45, 0.035, 0.015),
        ("point 1.3 at 0.01 + look 10 at 0.04", 1.3, 0.01, 0.04),
    ]
    .map(|(name, point, point_alpha, look10_alpha)| Yardstick {
        name,
        point,
        point_alpha,
        look10_alpha,
    });
    let columns = [
        "A/A 200 looks",
        "margin 200 looks",
        "1.5x in 10/60 (med)",
        "2x in 10 (med)",
    ];
    println!(
        "{:<42} {:>16} {:>16} {:>22} {:>16}",
        "", columns[0], columns[1], columns[2], columns[3]
    );
    // The low-traffic table's rows and seeds (3000 + row), so the traffic is the same.
    let scenario = |looks, canary| ErrorRateScenario {
        requests_per_look: 600,
        ..ErrorRateScenario::new(runs, looks, 0.01, canary)
    };
    let rows = [
        (3000, scenario(200, 0.01)),
        (3001, scenario(200, 0.011)),
        (3003, scenario(60, 0.015)),
        (3004, scenario(60, 0.02)),
    ];
    for y in &yardsticks {
        let f: Vec<Vec<Option<usize>>> = rows
            .iter()
            .map(|(seed, s)| first_rejections(y, s, *seed))
            .collect();
        let cell = |i: usize| f.get(i).map_or(&[][..], |v| v.as_slice());
        println!(
            "{:<42} {:>16} {:>16} {:>22} {:>16}",
            y.name,
            within(cell(0), &[200]),
            within(cell(1), &[200]),
            caught(cell(2), &[10, 60]),
            caught(cell(3), &[10]),
        );
    }
    // Wald's bound on the expected number of looks of any sequential test that says `fail` at most α of the
    // time at the margin and catches the regression with probability 1 - β: E[T] >= (the two-point
    // divergence of its decisions) / (the expected evidence per look).
    let (alpha, beta) = (0.05_f64, 0.05_f64);
    let decisions = (1.0 - beta) * ((1.0 - beta) / alpha).ln() + beta * (beta / (1.0 - alpha)).ln();
    for ratio in [1.5, 2.0] {
        let errors_per_look = 600.0 * 0.01 * (1.0 + ratio);
        let per_look = errors_per_look * kl(ratio / (1.0 + ratio), BOUNDARY / (1.0 + BOUNDARY));
        println!(
            "{ratio}x: {per_look:.3} nats of evidence per look against the margin; any test with 5% false alarms there and 95% power needs at least {:.1} looks on average (Wald)",
            decisions / per_look
        );
    }
}
