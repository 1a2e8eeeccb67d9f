//! Calibration of the verdict on synthetic normal data, with the product's
//! own parameters (alpha, noise band, bootstrap resample count): an A/A
//! comparison claims a change at most as often as alpha allows, and a shift
//! as small as the noise is found as often as theory says a t-test can.

use super::normals;
use crate::rng::Rng;
use crate::*;
use statrs::distribution::StudentsT;
use statrs::distribution::{Binomial, ChiSquared, Continuous, ContinuousCDF, DiscreteCDF, Normal};

const TRIALS: usize = 1000;
const N: usize = 10;
/// Standard deviation of one iteration's value, as a fraction of the mean:
/// what a quiet host gives between iterations of a stream run.
const NOISE: f64 = 0.03;

/// The product's comparison parameters (those `plumb compare` uses when
/// given no option), with a seed per trial.
fn params(seed: u64) -> CompareParams {
    CompareParams {
        seed,
        ..CompareParams::default()
    }
}

/// The smallest count of successes out of `n` trials of probability `p`
/// whose upper tail is below `tail`: a count at or above it means the true
/// rate is above `p`, with a false alarm of this test itself below `tail`.
fn binomial_upper_limit(n: usize, p: f64, tail: f64) -> usize {
    let b = Binomial::new(p, n as u64).unwrap();
    (0..=n)
        .find(|&k| k > 0 && b.sf(k as u64 - 1) < tail)
        .unwrap()
}

#[test]
fn aa_false_alarm_rate_is_within_alpha_at_the_products_resample_count() {
    let defaults = CompareParams::default();
    assert_eq!(defaults.resamples, 10_000, "the count plumb compare uses");
    let mut rng = Rng::new(0xA11CE);
    let mut false_alarms = 0usize;
    for t in 0..TRIALS {
        let a = normals(&mut rng, N, 100.0, NOISE * 100.0);
        let b = normals(&mut rng, N, 100.0, NOISE * 100.0);
        let c = compare(&a, &b, &params(t as u64)).unwrap();
        if matches!(c.verdict, Verdict::Regression | Verdict::Improvement) {
            false_alarms += 1;
        }
    }
    // At a true rate of alpha, reaching `limit` has a chance below 1 in
    // 1000: failing here means the rate is above alpha, not bad luck.
    let limit = binomial_upper_limit(TRIALS, defaults.alpha, 1e-3);
    eprintln!(
        "A/A false alarms: {false_alarms} of {TRIALS} (alpha {}, limit {limit})",
        defaults.alpha
    );
    assert!(
        false_alarms < limit,
        "A/A false alarms {false_alarms} of {TRIALS}: above alpha {} (limit {limit})",
        defaults.alpha
    );
}

/// Power of the two-sided two-sample Student t-test at `alpha` with `n`
/// values per side and a true shift of `d` standard deviations: the
/// non-central t distribution's mass beyond the critical values, integrated
/// over the chi-square of the pooled variance.
fn t_test_power(n: usize, d: f64, alpha: f64) -> f64 {
    let df = 2.0 * n as f64 - 2.0;
    let crit = StudentsT::new(0.0, 1.0, df)
        .unwrap()
        .inverse_cdf(1.0 - alpha / 2.0);
    let delta = d / (2.0 / n as f64).sqrt();
    let z = Normal::new(0.0, 1.0).unwrap();
    let chi = ChiSquared::new(df).unwrap();
    // Simpson's rule over the chi-square's support (its mass beyond 10 df
    // standard deviations is negligible).
    let hi = df + 10.0 * (2.0 * df).sqrt();
    let steps = 20_000;
    let h = hi / steps as f64;
    let g = |v: f64| {
        let s = (v / df).sqrt();
        chi.pdf(v) * (z.cdf(delta - crit * s) + z.cdf(-delta - crit * s))
    };
    let mut sum = g(0.0) + g(hi);
    for i in 1..steps {
        sum += g(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    sum * h / 3.0
}

#[test]
fn the_t_test_power_formula_matches_known_values() {
    // Cohen's tables and R's power.t.test: n = 10 per side, d = 1, alpha
    // 0.05 gives 0.5620; n = 20 gives 0.8689.
    assert!((t_test_power(10, 1.0, 0.05) - 0.5620).abs() < 0.001);
    assert!((t_test_power(20, 1.0, 0.05) - 0.8689).abs() < 0.001);
    // No shift: the test's own size.
    assert!((t_test_power(10, 0.0, 0.05) - 0.05).abs() < 0.001);
}

#[test]
fn a_drop_as_small_as_the_noise_is_found_as_often_as_theory_predicts() {
    // A 3 % drop at 3 % noise with 10 iterations a side is one standard
    // deviation: a t-test finds it only about half of the time, so the
    // verdict's rate of finding it is measured against that, not against a
    // generous "nearly always" that a large shift would pass anyway.
    let shift = 0.03;
    let sd = NOISE * 100.0;
    let alpha = CompareParams::default().alpha;
    let theory = t_test_power(N, shift * 100.0 / sd, alpha);
    let mut rng = Rng::new(0xB0B);
    let mut found = 0usize;
    let mut wrong_way = 0usize;
    for t in 0..TRIALS {
        let a = normals(&mut rng, N, 100.0, sd);
        let b = normals(&mut rng, N, 100.0 * (1.0 - shift), sd);
        match compare(&a, &b, &params(t as u64)).unwrap().verdict {
            Verdict::Regression => found += 1,
            Verdict::Improvement => wrong_way += 1,
            _ => {}
        }
    }
    let rate = found as f64 / TRIALS as f64;
    // Three binomial standard deviations of the observed rate, and below
    // it a further 0.03: the verdict uses Welch's degrees of freedom (at
    // most the 18 of the pooled test, so slightly less power) and also
    // needs the bootstrap interval to exclude 1.
    let sigma = (theory * (1.0 - theory) / TRIALS as f64).sqrt();
    eprintln!(
        "3 % drop at 3 % noise, n {N}: found {rate}, theory {theory:.4}, wrong way {wrong_way}"
    );
    assert!(
        rate <= theory + 3.0 * sigma && rate >= theory - 3.0 * sigma - 0.03,
        "found in {rate} of trials; a t-test's power is {theory:.4} (±{:.3})",
        3.0 * sigma
    );
    // A drop called an improvement is the worst error: with the shift one
    // standard deviation it must essentially never happen.
    assert!(wrong_way <= 1, "{wrong_way} drops called an improvement");
}
