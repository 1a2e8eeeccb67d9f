//! Calibration of the verdict on synthetic normal data: an A/A comparison
//! must rarely claim a change, and a 10 % shift must nearly always be seen.

use super::normals;
use crate::rng::Rng;
use crate::*;

const TRIALS: usize = 1000;
const N: usize = 10;
const NOISE: f64 = 0.03;

fn params(seed: u64) -> CompareParams {
    CompareParams {
        resamples: 2000,
        seed,
        ..CompareParams::default()
    }
}

#[test]
fn aa_false_verdict_rate_within_alpha() {
    let mut rng = Rng::new(0xA11CE);
    let mut false_verdicts = 0usize;
    for t in 0..TRIALS {
        let a = normals(&mut rng, N, 100.0, NOISE * 100.0);
        let b = normals(&mut rng, N, 100.0, NOISE * 100.0);
        let c = compare(&a, &b, &params(t as u64)).unwrap();
        if matches!(c.verdict, Verdict::Regression | Verdict::Improvement) {
            false_verdicts += 1;
        }
    }
    let alpha = CompareParams::default().alpha;
    let limit = alpha + 3.0 * (alpha * (1.0 - alpha) / TRIALS as f64).sqrt();
    let rate = false_verdicts as f64 / TRIALS as f64;
    eprintln!("A/A false-verdict rate: {rate} (limit {limit})");
    assert!(rate <= limit, "A/A false-verdict rate {rate} > {limit}");
}

#[test]
fn ten_percent_drop_detected() {
    let mut rng = Rng::new(0xB0B);
    let mut detected = 0usize;
    for t in 0..TRIALS {
        let a = normals(&mut rng, N, 100.0, NOISE * 100.0);
        let b = normals(&mut rng, N, 90.0, NOISE * 90.0);
        let c = compare(&a, &b, &params(t as u64)).unwrap();
        if c.verdict == Verdict::Regression {
            detected += 1;
        }
    }
    let rate = detected as f64 / TRIALS as f64;
    eprintln!("10 % drop detected as regression: {rate}");
    assert!(rate >= 0.95, "10 % drop detected in only {rate}");
}
