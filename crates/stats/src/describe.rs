//! Descriptive statistics and shape checks on one sample: the numbers a
//! run reports about its own iterations before any comparison is made.

use serde::{Deserialize, Serialize};

/// The conventional cut-off for the modified z-score (Iglewicz and Hoaglin):
/// loose enough that ordinary run-to-run noise is never flagged.
pub const MAD_THRESHOLD: f64 = 3.5;

/// Scales a median absolute deviation to a standard deviation for normal
/// data (1 / Φ⁻¹(0.75)), which is what makes the modified z-score
/// comparable with an ordinary z-score.
const MAD_SCALE: f64 = 0.6745;

/// Scales a mean absolute deviation to a standard deviation for normal data
/// (√(π/2)); used only when the MAD is zero.
const MEAN_AD_SCALE: f64 = 1.253_314;

/// Deviations this small relative to the median are rounding, not
/// behaviour, and are never flagged.
const RELATIVE_FLOOR: f64 = 1e-9;

/// The shape of a sample at a glance, so reports need not recompute it and
/// every consumer agrees on the sample (n - 1) standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1 denominator); 0 for a single value,
    /// where no spread has been observed.
    pub sd: f64,
    pub min: f64,
    pub max: f64,
    pub median: f64,
}

impl Summary {
    /// None for an empty sample or one holding a non-finite value: a NaN
    /// or infinite measurement means a broken iteration, and a summary
    /// built on it would look valid while meaning nothing.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let sorted = sorted(xs);
        let (mean, var) = mean_var(xs);
        Some(Summary {
            n: xs.len(),
            mean,
            sd: var.sqrt(),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            median: median_sorted(&sorted),
        })
    }
}

pub(crate) fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The arithmetic mean; 0 for an empty sample, as nothing measured.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Mean and sample variance by two passes, which stays accurate for values
/// like 2.5e10 bit/s with small spread where the one-pass formula cancels.
/// The variance is 0 for fewer than two values.
pub(crate) fn mean_var(xs: &[f64]) -> (f64, f64) {
    let m = mean(xs);
    if xs.len() < 2 {
        return (m, 0.0);
    }
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    (m, ss / (xs.len() - 1) as f64)
}

/// Median of an already sorted, non-empty slice.
pub(crate) fn median_sorted(s: &[f64]) -> f64 {
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// Flags iterations that look like a different experiment (a stalled
/// link, a noisy neighbour) by the modified z-score
/// `0.6745 · |x - median| / MAD`, which unlike a mean/sd z-score is not
/// dragged along by the very outliers it looks for.
///
/// When more than half the values are identical the MAD is 0 and the score
/// is undefined; the score then falls back to `|x - median| / (1.253314 ·
/// mean absolute deviation from the median)`, the usual substitute. If that
/// is also 0 every value equals the median and nothing is flagged.
/// Deviations below 1e-9 of |median| are never flagged (rounding, not
/// behaviour). Non-finite values are always flagged and are left out of the
/// median and MAD. Returns indices in increasing order.
pub fn mad_outliers(xs: &[f64], threshold: f64) -> Vec<usize> {
    let finite: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        return (0..xs.len()).collect();
    }
    let med = median_sorted(&sorted(&finite));
    let devs: Vec<f64> = finite.iter().map(|x| (x - med).abs()).collect();
    let mad = median_sorted(&sorted(&devs));
    let floor = RELATIVE_FLOOR * med.abs();
    let scale = if mad > 0.0 {
        mad / MAD_SCALE
    } else {
        MEAN_AD_SCALE * mean(&devs)
    };
    xs.iter()
        .enumerate()
        .filter(|&(_, &x)| {
            if !x.is_finite() {
                return true;
            }
            let d = (x - med).abs();
            scale > 0.0 && d > floor && d / scale > threshold
        })
        .map(|(i, _)| i)
        .collect()
}

/// Two levels found in one sample: the result of a run is then better
/// described by two numbers than by a mean with a wide interval (real
/// throughput runs do this when flows land on different cores or paths).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bimodality {
    pub low_mean: f64,
    pub high_mean: f64,
    pub low_n: usize,
    pub high_n: usize,
}

/// Detects a sample that sits on two levels, so that a run can say so
/// instead of reporting a mean no iteration came near.
///
/// Rule: sort; among the splits that leave at least 2 values on each side,
/// take the one with the largest gap between adjacent sorted values (the
/// lowest such split on ties). It is bimodal when n >= 6 and the distance
/// between the two group means exceeds both `4 + 30 / n` pooled
/// within-group standard deviations and 5 % of |overall mean|.
///
/// The sd factor is 4 for long runs and stricter for short ones (9 at
/// n = 6, 7 at n = 10, 5 at n = 30), because the split is chosen to look
/// separated and with few values the pooled sd behind it rests on almost
/// nothing: a flat factor of 4 fires on ~10 % of small unimodal normal
/// samples, this one on about 1 % or less at every n (simulated). The 5 %
/// floor keeps very quiet runs with a tiny step from being called two
/// levels. Two levels 20 vs 30 with 3 % noise are found in ~85 % of samples
/// at n = 6 and essentially always from n = 10. None when not bimodal, or
/// for fewer than 6 or non-finite values.
pub fn bimodal(xs: &[f64]) -> Option<Bimodality> {
    let n = xs.len();
    if n < 6 || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let s = sorted(xs);
    let mut split = 2;
    let mut best = f64::NEG_INFINITY;
    for k in 2..=n - 2 {
        let gap = s[k] - s[k - 1];
        if gap > best {
            best = gap;
            split = k;
        }
    }
    let (low, high) = s.split_at(split);
    let (ml, vl) = mean_var(low);
    let (mh, vh) = mean_var(high);
    let pooled =
        (((low.len() - 1) as f64 * vl + (high.len() - 1) as f64 * vh) / (n - 2) as f64).sqrt();
    let diff = mh - ml;
    let overall = mean(xs).abs();
    let factor = 4.0 + 30.0 / n as f64;
    (diff > factor * pooled && diff > 0.05 * overall).then_some(Bimodality {
        low_mean: ml,
        high_mean: mh,
        low_n: low.len(),
        high_n: high.len(),
    })
}

/// Jain's fairness index `(Σx)² / (n · Σx²)`: 1 when all flows got the
/// same share, 1/n when one flow took everything, which makes it the
/// standard single number for comparing how evenly parallel streams fared.
/// None for an empty slice or when every value is 0 (nothing to share).
pub fn jain_fairness(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if sq == 0.0 || !sq.is_finite() || !sum.is_finite() {
        return None;
    }
    Some(sum * sum / (xs.len() as f64 * sq))
}

/// Finds where a sweep (message size, flow count, ...) falls off or jumps
/// up a cliff, since those steps, not the smooth parts, are what a report
/// should point at. `points` are (axis, metric) already sorted by axis;
/// index `i` is reported when `metric[i+1] / metric[i]` is above `factor`
/// or below `1 / factor`. A factor below 1 is read as its reciprocal. A
/// step from 0 to non-zero counts as a cliff; 0 to 0 does not.
pub fn cliffs(points: &[(f64, f64)], factor: f64) -> Vec<usize> {
    cliff_indexes(points, factor)
}

/// A step between adjacent points of a sweep that counts as a cliff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cliff {
    /// The step is from point `index` to `index + 1`.
    pub index: usize,
    /// The larger side over the smaller: how many times the metric fell or
    /// rose (infinite for a step to or from 0).
    pub ratio: f64,
    /// True when the metric falls across the step.
    pub falls: bool,
}

/// The cliffs of a line of metric values in axis order, each with its
/// direction and size (see [`cliffs`] for what counts).
pub fn cliff_steps(values: &[f64], factor: f64) -> Vec<Cliff> {
    let pts: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (i as f64, *v))
        .collect();
    cliff_indexes(&pts, factor)
        .into_iter()
        .map(|index| {
            let (a, b) = (values[index], values[index + 1]);
            let falls = b < a;
            Cliff {
                index,
                ratio: if falls { a / b } else { b / a },
                falls,
            }
        })
        .collect()
}

fn cliff_indexes(points: &[(f64, f64)], factor: f64) -> Vec<usize> {
    let f = if factor < 1.0 { 1.0 / factor } else { factor };
    points
        .windows(2)
        .enumerate()
        .filter(|(_, w)| {
            let r = w[1].1 / w[0].1;
            r > f || r < 1.0 / f
        })
        .map(|(i, _)| i)
        .collect()
}
