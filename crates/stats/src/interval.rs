//! Confidence intervals: Student-t for one mean (how many iterations are
//! enough), its log-scale form for a positive mean (what a report shows),
//! Fieller's interval for a ratio of means (how big a change between two
//! builds is, in agreement with Welch's test) and a percentile bootstrap of
//! the same ratio.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::describe::{mean, mean_var};
use crate::hypothesis::{valid_level, welch_of, Moments};
use crate::rng::Rng;

/// A confidence interval with its centre, so that a consumer can show
/// either "x ± h" or "[lo, hi]" without recomputing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The point estimate (a mean, or for a bootstrap the point ratio).
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    /// `(hi - lo) / 2`; for an asymmetric (bootstrap) interval this is the
    /// average of the two sides, not the distance from `mean` to either end.
    pub half_width: f64,
    /// Confidence level, e.g. 0.95.
    pub level: f64,
}

impl Interval {
    /// An interval from its ends, around a point estimate that need not be
    /// its middle.
    fn around(point: f64, lo: f64, hi: f64, level: f64) -> Interval {
        Interval {
            mean: point,
            lo,
            hi,
            half_width: (hi - lo) / 2.0,
            level,
        }
    }

    /// The precision target of a run is relative ("±1 % of the mean"),
    /// because throughput spans orders of magnitude across specs. Infinite
    /// when the mean is 0, so that such a target is never met by accident.
    pub fn relative_half_width(&self) -> f64 {
        if self.mean == 0.0 {
            f64::INFINITY
        } else {
            self.half_width / self.mean.abs()
        }
    }
}

/// The two-sided Student-t critical value of a `level` interval.
fn t_critical(df: f64, level: f64) -> Option<f64> {
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(dist.inverse_cdf(1.0 - (1.0 - level) / 2.0))
}

/// Student-t interval of the mean, the honest interval for the handful of
/// iterations a network benchmark can afford (the normal interval is too
/// narrow below ~30). None for fewer than 2 values, a non-finite value, or
/// a level outside (0, 1).
pub fn t_interval(xs: &[f64], level: f64) -> Option<Interval> {
    if xs.len() < 2 || !valid_level(level) || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len() as f64;
    let (m, var) = mean_var(xs);
    let half_width = t_critical(n - 1.0, level)? * (var / n).sqrt();
    Some(Interval {
        mean: m,
        lo: m - half_width,
        hi: m + half_width,
        half_width,
        level,
    })
}

/// The mean of `xs` and its interval at `level`, as (mean, lo, hi): what a
/// report shows for one point. Where every value is positive (a rate, a
/// latency, a cost) the Student-t interval is taken on the log scale
/// (`mean · exp(±t · se / mean)`, the delta method), so that it stays
/// positive however few the iterations: two iterations of 50 and 160 k tx/s
/// give 8.7 k .. 1.3 M, not -133 k .. 342 k. Otherwise the plain Student-t
/// interval. Below two values the interval is the mean itself; an empty
/// sample is all 0.
pub fn mean_with_interval(xs: &[f64], level: f64) -> (f64, f64, f64) {
    let m = mean(xs);
    let Some(i) = t_interval(xs, level) else {
        return (m, m, m);
    };
    if m > 0.0 && xs.iter().all(|&x| x > 0.0) {
        let spread = i.half_width / m;
        (m, m * (-spread).exp(), m * spread.exp())
    } else {
        (m, i.lo, i.hi)
    }
}

/// Fieller's interval of `mean(b) / mean(a)` at `level`, with Welch's
/// degrees of freedom for the difference of means: the set of ratios `r`
/// for which Welch's test of `mean(b) = r · mean(a)` does not reject. At
/// `r = 1` that test is [`crate::welch`] itself, so the interval leaves 1
/// out exactly where Welch's p is below `1 - level`: a verdict taken from
/// the test never disagrees with the interval printed beside it, however
/// few the iterations (a bootstrap of two values per side is far too
/// narrow). Ratios of positive quantities are not negative, so the lower
/// end is cut at 0; where `mean(a)` is itself not distinguishable from 0
/// the set is unbounded and `hi` is infinite: it is every ratio from the
/// upper root on where `mean(b)` is told from 0 (the other root is then
/// negative), so that a B far above an A near 0 still leaves 1 out, and
/// every ratio otherwise.
///
/// None when a side has fewer than 2 values, a value is not finite, the
/// level is outside (0, 1) or `mean(a)` is 0.
pub fn fieller_ratio(a: &[f64], b: &[f64], level: f64) -> Option<Interval> {
    let (sa, sb) = (Moments::of(a)?, Moments::of(b)?);
    let w = welch_of(sa, sb)?;
    let (ma, mb) = (sa.mean, sb.mean);
    if !valid_level(level) || ma == 0.0 {
        return None;
    }
    let (qa, qb) = (sa.var_of_mean(), sb.var_of_mean());
    let point = mb / ma;
    let t = t_critical(w.df, level)?;
    let t2 = t * t;
    // (mb - r·ma)² <= t²·(qb + r²·qa), a quadratic in r: c2·r² - 2·c1·r + c0 <= 0.
    let c2 = ma * ma - t2 * qa;
    let c1 = ma * mb;
    let c0 = mb * mb - t2 * qb;
    let disc = c1 * c1 - c2 * c0;
    let (lo, hi) = if c2 > 0.0 {
        let root = disc.max(0.0).sqrt();
        ((c1 - root) / c2, (c1 + root) / c2)
    } else if c2 < 0.0 && c0 > 0.0 && disc > 0.0 {
        // Opening downward, the set is outside the roots: one negative
        // (their product c0 / c2 is), the other where the positive ratios
        // begin.
        ((c1 - disc.sqrt()) / c2, f64::INFINITY)
    } else {
        (0.0, f64::INFINITY)
    };
    let lo = lo.max(0.0);
    Some(Interval::around(point, lo, hi, level))
}

/// Whether a run has iterated enough: the t interval's relative half width
/// is at most `width` (e.g. 0.01 for ±1 %). False while no interval exists
/// (fewer than 2 values), so a loop calling this keeps iterating.
pub fn required_iterations_met(xs: &[f64], level: f64, width: f64) -> bool {
    t_interval(xs, level).is_some_and(|i| i.relative_half_width() <= width)
}

/// Percentile bootstrap interval of `mean(b) / mean(a)`, because a change
/// between builds is judged as a ratio and the ratio of two noisy means has
/// no convenient closed-form interval. Each side is resampled independently
/// with replacement, `resamples` times, from a PRNG seeded with `seed`: the
/// same inputs and seed give a bit-identical interval. Quantiles use linear
/// interpolation between order statistics (R type 7). `mean` in the result
/// is the point ratio, `half_width` is `(hi - lo) / 2`.
///
/// Meant for positive metrics. None when a side is empty, a value is not
/// finite, `mean(a)` is 0, `resamples` is 0, or the level is outside (0, 1).
pub fn bootstrap_ratio(
    a: &[f64],
    b: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    if a.is_empty()
        || b.is_empty()
        || resamples == 0
        || !valid_level(level)
        || a.iter().chain(b).any(|x| !x.is_finite())
    {
        return None;
    }
    let ma = mean(a);
    if ma == 0.0 {
        return None;
    }
    let point = mean(b) / ma;
    let mut rng = Rng::new(seed);
    let mut ratios: Vec<f64> = (0..resamples)
        .map(|_| {
            let sa = resample_mean(a, &mut rng);
            let sb = resample_mean(b, &mut rng);
            sb / sa
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    let lo = quantile_sorted(&ratios, tail);
    let hi = quantile_sorted(&ratios, 1.0 - tail);
    Some(Interval::around(point, lo, hi, level))
}

fn resample_mean(xs: &[f64], rng: &mut Rng) -> f64 {
    let n = xs.len();
    let sum: f64 = (0..n).map(|_| xs[rng.below(n)]).sum();
    sum / n as f64
}

/// Type-7 quantile of a sorted, non-empty slice.
fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    let h = (s.len() - 1) as f64 * q;
    let i = h.floor() as usize;
    let frac = h - i as f64;
    match s.get(i + 1) {
        Some(&next) if frac > 0.0 => s[i] + frac * (next - s[i]),
        _ => s[i],
    }
}
