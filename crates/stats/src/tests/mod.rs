//! Tests with hand-checked or scipy-checked numbers, property tests and a
//! calibration of the verdict on synthetic data.

mod calibration;
mod props;
mod units;

use crate::rng::Rng;

/// `n` normal values with the given mean and standard deviation.
pub(crate) fn normals(rng: &mut Rng, n: usize, mean: f64, sd: f64) -> Vec<f64> {
    (0..n).map(|_| mean + sd * rng.normal()).collect()
}

pub(crate) fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}
