//! The verdict on one metric between two builds: the place where the
//! tests and intervals of this crate are combined into a decision.

use std::fmt;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use crate::describe::{Bimodality, Summary};
use crate::hypothesis::{welch, Welch};
use crate::interval::{fieller_ratio, Interval};

/// What a comparison concludes. `Inconclusive` is a first-class answer: a
/// lab that must always say better or worse would report noise as change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    NoChange,
    Inconclusive,
    /// Undecided, and a side has fewer iterations than any test needs to
    /// decide at alpha: [`Comparison::needed`] says how many.
    TooFew,
    /// Undecided, and a side's iterations sit on two levels
    /// ([`Comparison::bimodal`]): a mean between them describes neither.
    Bimodal,
}

impl fmt::Display for Verdict {
    /// Words for people ("no change"), unlike the serde names meant for
    /// machines ("no_change").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
            Verdict::TooFew => "too few iterations",
            Verdict::Bimodal => "bimodal",
        })
    }
}

/// Knobs of a comparison, stored with its result so that a verdict can be
/// reproduced exactly (the bootstrap seed included).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompareParams {
    /// Significance level of Welch's test.
    pub alpha: f64,
    /// Changes within ±this fraction are not worth reporting (0.02 = 2 %).
    pub noise_band: f64,
    /// Confidence level of the ratio interval and of each side's interval.
    pub level: f64,
    /// Bootstrap resamples, for a caller that asks for
    /// [`crate::bootstrap_ratio`] beside the verdict's Fieller interval.
    pub resamples: usize,
    /// Bootstrap seed, so the same data always gets the same interval.
    pub seed: u64,
    /// Throughput: true; latency or CPU cost: false.
    pub higher_is_better: bool,
}

/// The bootstrap seed when none is asked for, the same for every command.
pub const DEFAULT_SEED: u64 = 1;

impl Default for CompareParams {
    fn default() -> Self {
        CompareParams {
            alpha: 0.05,
            noise_band: 0.02,
            level: 0.95,
            resamples: 10_000,
            seed: DEFAULT_SEED,
            higher_is_better: true,
        }
    }
}

/// Everything behind a verdict, so that a report can show its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub a: Summary,
    pub b: Summary,
    /// `mean(b) / mean(a) - 1`: +0.05 means b is 5 % higher.
    pub change: f64,
    /// Welch's test of a against b (`t` follows `welch(a, b)`).
    pub welch: Welch,
    /// Fieller's interval of `mean(b) / mean(a)` (see
    /// [`crate::fieller_ratio`]): it leaves 1 out exactly where Welch's p is
    /// below `1 - level`.
    pub ratio: Interval,
    pub verdict: Verdict,
    /// With [`Verdict::TooFew`]: iterations a side at which a change of the
    /// noise band's size would be told at the spread observed
    /// ([`needed_a_side`]); None where that is more than [`NEEDED_MAX`].
    pub needed: Option<usize>,
    /// The sides whose iterations sit on two levels, `'A'` or `'B'`, with
    /// the levels: stated whatever the verdict, and the verdict itself when
    /// nothing was decided.
    pub bimodal: Vec<(char, Bimodality)>,
}

/// The most iterations a side that [`needed_a_side`] will name: beyond it
/// the spread, not the count, is the trouble.
pub const NEEDED_MAX: usize = 1000;

/// The fewest values a side at which a two-sided rank test of two equal
/// samples can reach `alpha` at all: its smallest p is `2 / C(2n, n)` (all
/// of one side above all of the other). 4 at alpha 0.05 (p 0.029; 3 gives
/// 0.1). Below it no test without a model of the noise can decide, and
/// Welch's test rests on a spread of two or three values.
pub fn fewest_to_decide(alpha: f64) -> usize {
    let mut n = 1usize;
    loop {
        // C(2n, n) by the product formula, in floats: exact far beyond any n
        // this loop reaches for a sane alpha.
        let ways: f64 = (1..=n).map(|k| (n + k) as f64 / k as f64).product();
        if 2.0 / ways < alpha || n >= 64 {
            return n;
        }
        n += 1;
    }
}

/// The power [`iterations_to_tell`] sizes a side for: a change of the size
/// asked is missed one time in five.
pub const POWER: f64 = 0.8;

/// Iterations a side at which a two-sided test at `alpha` tells a change
/// of `change` (a fraction of A's mean: 0.05 is 5 %) from none with
/// [`POWER`], where the iterations of A and B spread by `cv_a` and `cv_b`
/// (each side's standard deviation over A's mean):
/// `n = (z(1 - alpha/2) + z(POWER))^2 (cv_a^2 + cv_b^2) / change^2`, rounded
/// up; with equal spreads the textbook `2 (z + z)^2 CV^2 / change^2`. The
/// normal quantiles make it a floor for the handful of iterations where
/// Student's t is wider. None for a change or spread that is not a finite
/// positive (or, for the spread, zero) number, or alpha outside (0, 1).
pub fn iterations_to_tell(cv_a: f64, cv_b: f64, change: f64, alpha: f64) -> Option<usize> {
    let spread = cv_a * cv_a + cv_b * cv_b;
    let sane =
        change > 0.0 && change.is_finite() && spread.is_finite() && cv_a >= 0.0 && cv_b >= 0.0;
    if !sane || !crate::hypothesis::valid_level(alpha) {
        return None;
    }
    let z = Normal::new(0.0, 1.0).ok()?;
    let zz = z.inverse_cdf(1.0 - alpha / 2.0) + z.inverse_cdf(POWER);
    let n = (zz * zz * spread / (change * change)).ceil();
    // Past usize the answer is "never", which the caller's cap says better.
    (n < 1e15).then_some(n as usize)
}

/// Iterations a side to ask for when a point had too few: what
/// [`iterations_to_tell`] sizes for the spreads observed, at least the
/// fewest any test needs at alpha ([`fewest_to_decide`]) and at least one
/// more than the larger side `n` has now. None past [`NEEDED_MAX`], where
/// the spread, not the count, is what to work on.
pub fn needed_a_side(n: usize, cv_a: f64, cv_b: f64, change: f64, alpha: f64) -> Option<usize> {
    let n = iterations_to_tell(cv_a, cv_b, change, alpha)?
        .max(fewest_to_decide(alpha))
        .max(n + 1);
    (n <= NEEDED_MAX).then_some(n)
}

/// [`needed_a_side`] for two summaries, each spread taken over A's mean.
fn needed_of(a: &Summary, b: &Summary, change: f64, alpha: f64) -> Option<usize> {
    let over = a.mean.abs();
    needed_a_side(a.n.max(b.n), a.sd / over, b.sd / over, change, alpha)
}

/// Compares baseline `a` with candidate `b` and decides.
///
/// Rule, in order: if the whole ratio interval lies within
/// `[1 - noise_band, 1 + noise_band]` the change is too small to matter:
/// `NoChange`. Otherwise, if Welch's p < `alpha` *and* the ratio interval
/// lies entirely on one side of 1, the direction (with
/// `higher_is_better`) gives `Regression` or `Improvement`; with the
/// default level (`1 - alpha`) the two conditions are one, since the
/// interval is Fieller's for Welch's test. Undecided, a side on two levels
/// is `Bimodal`, a side with fewer iterations than any test needs
/// ([`fewest_to_decide`]) is `TooFew`, and anything else is `Inconclusive`.
///
/// None when either side has fewer than 2 values, holds a non-finite
/// value, or has `mean(a) == 0`.
pub fn compare(a: &[f64], b: &[f64], p: &CompareParams) -> Option<Comparison> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let sa = Summary::of(a)?;
    let sb = Summary::of(b)?;
    let w = welch(a, b)?;
    let ratio = fieller_ratio(a, b, p.level)?;
    let within_band = ratio.lo >= 1.0 - p.noise_band && ratio.hi <= 1.0 + p.noise_band;
    let bimodal: Vec<(char, Bimodality)> = [('A', a), ('B', b)]
        .into_iter()
        .filter_map(|(side, xs)| Some((side, crate::describe::bimodal(xs)?)))
        .collect();
    let fewest = fewest_to_decide(p.alpha);
    let mut needed = None;
    let verdict = if within_band {
        Verdict::NoChange
    } else if w.p < p.alpha && (ratio.lo > 1.0 || ratio.hi < 1.0) {
        let b_higher = ratio.lo > 1.0;
        if b_higher == p.higher_is_better {
            Verdict::Improvement
        } else {
            Verdict::Regression
        }
    } else if !bimodal.is_empty() {
        Verdict::Bimodal
    } else if sa.n.min(sb.n) < fewest {
        needed = needed_of(&sa, &sb, p.noise_band, p.alpha);
        Verdict::TooFew
    } else {
        Verdict::Inconclusive
    };
    Some(Comparison {
        a: sa,
        b: sb,
        change: sb.mean / sa.mean - 1.0,
        welch: w,
        ratio,
        verdict,
        needed,
        bimodal,
    })
}
