//! The verdict on one metric between two builds: the place where the
//! tests and intervals of this crate are combined into a decision.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::describe::Summary;
use crate::hypothesis::{welch, Welch};
use crate::interval::{bootstrap_ratio, Interval};

/// What a comparison concludes. `Inconclusive` is a first-class answer: a
/// lab that must always say better or worse would report noise as change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    NoChange,
    Inconclusive,
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
    /// Confidence level of the bootstrap ratio interval.
    pub level: f64,
    /// Bootstrap resamples; 10 000 keeps the 95 % interval ends stable to
    /// well under the noise band.
    pub resamples: usize,
    /// Bootstrap seed, so the same data always gets the same verdict.
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub a: Summary,
    pub b: Summary,
    /// `mean(b) / mean(a) - 1`: +0.05 means b is 5 % higher.
    pub change: f64,
    /// Welch's test of a against b (`t` follows `welch(a, b)`).
    pub welch: Welch,
    /// Bootstrap interval of `mean(b) / mean(a)`.
    pub ratio: Interval,
    pub verdict: Verdict,
}

/// Compares baseline `a` with candidate `b` and decides.
///
/// Rule, in order: if the whole bootstrap interval of the ratio lies within
/// `[1 - noise_band, 1 + noise_band]` the change is too small to matter:
/// `NoChange`. Otherwise, if Welch's p < `alpha` *and* the ratio interval
/// lies entirely on one side of 1, the direction (with
/// `higher_is_better`) gives `Regression` or `Improvement`. Anything else
/// is `Inconclusive`. Requiring both the test and the interval keeps the
/// false-verdict rate of an A/A comparison at or below `alpha`, which the
/// percentile bootstrap alone (too narrow on ~10 values) would exceed.
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
    let ratio = bootstrap_ratio(a, b, p.level, p.resamples, p.seed)?;
    let within_band = ratio.lo >= 1.0 - p.noise_band && ratio.hi <= 1.0 + p.noise_band;
    let verdict = if within_band {
        Verdict::NoChange
    } else if w.p < p.alpha && (ratio.lo > 1.0 || ratio.hi < 1.0) {
        let b_higher = ratio.lo > 1.0;
        if b_higher == p.higher_is_better {
            Verdict::Improvement
        } else {
            Verdict::Regression
        }
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
    })
}
