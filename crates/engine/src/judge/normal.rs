//! The standard normal tail `sf(z) = P(Z > z)` and its inverse, for the Mann-Whitney normal approximation and
//! the Hodges-Lehmann interval ranks. Owns only these two functions; it must stay accurate to ~1e-14 relative
//! in the tails (p-values are compared with SciPy's `norm.sf` to 1e-9 relative), so no crude approximations.

/// `P(Z > z)` for a standard normal `Z`, accurate in relative terms far into the upper tail.
pub fn sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The `z` with `sf(z) = p`, for `0 < p < 1`, by bisection on [`sf`] (called a few times per judgement, so
/// exactness matters more than speed). NaN outside (0, 1).
pub fn isf(p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    let (mut lo, mut hi) = (-40.0_f64, 40.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if sf(mid) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The complementary error function. Below 2 the Maclaurin series of erf loses at most a few ulps to
/// cancellation (erfc(2) ≈ 0.005, so ~1e-14 relative); from 2 on, the continued fraction of Abramowitz & Stegun
/// 7.1.14 converges quickly and keeps full relative precision until exp(-x²) underflows.
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.0 {
        return 1.0 - erf_series(x);
    }
    // erfc(x) = exp(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated by modified Lentz.
    const TINY: f64 = 1e-300;
    let mut f = TINY;
    let mut c = f;
    let mut d = 0.0;
    for n in 1..500 {
        let a = if n == 1 { 1.0 } else { (n - 1) as f64 / 2.0 };
        d = x + a * d;
        if d == 0.0 {
            d = TINY;
        }
        c = x + a / c;
        if c == 0.0 {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() * f / std::f64::consts::PI.sqrt()
}

/// erf(x) = 2/√π · Σ (-1)ⁿ x^(2n+1) / (n! (2n+1)), for |x| < 2.
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x; // (-1)ⁿ x^(2n+1) / n!
    let mut sum = x;
    for n in 1..200 {
        term *= -x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn sf_matches_known_tail_values() {
        // SciPy 1.17's norm.sf at these points.
        assert!(close(sf(0.0), 0.5, 1e-15));
        assert!(close(sf(1.959963984540054), 0.025, 1e-13));
        assert!(close(sf(-1.0), 0.8413447460685429, 1e-14));
        assert!(close(sf(3.0), 0.0013498980316300933, 1e-13));
        assert!(close(sf(10.0), 7.61985302416047e-24, 1e-12));
        assert!(close(sf(30.0), 4.906713927147908e-198, 1e-11));
    }

    #[test]
    fn isf_inverts_sf() {
        for p in [0.5, 0.1, 0.025, 0.005, 1e-6] {
            assert!(close(sf(isf(p)), p, 1e-12), "p = {p}");
        }
        assert!(isf(0.0).is_nan() && isf(1.0).is_nan());
    }
}
