//! Two-sample tests: Welch's t-test for means and the Mann-Whitney U test
//! for when the normality behind Welch is doubtful.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use crate::describe::mean_var;

/// A confidence level an interval or a test can be asked for: in (0, 1).
pub(crate) fn valid_level(level: f64) -> bool {
    level > 0.0 && level < 1.0
}

/// Welch's test result, kept whole so that reports can show the statistic
/// and degrees of freedom behind a p-value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// `(mean(a) - mean(b)) / se`, the sign convention of
    /// `scipy.stats.ttest_ind(a, b)`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Two-sided Welch test, because benchmark variance often changes with the
/// code under test and Student's pooled-variance test then misleads.
///
/// None when either side has fewer than 2 values or any value is not
/// finite. When both sides have zero variance the statistic is undefined;
/// equal constants then give `t = 0, p = 1` and different constants
/// `t = ±∞, p = 0`, with `df = n_a + n_b - 2`. The result is symmetric:
/// swapping `a` and `b` negates `t` and leaves `df` and `p` bit-identical.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    welch_of(Moments::of(a)?, Moments::of(b)?)
}

/// A side's mean, sample variance and count: all Welch's test reads of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moments {
    pub mean: f64,
    pub var: f64,
    pub n: f64,
}

impl Moments {
    /// None for fewer than 2 values or a value that is not finite.
    pub(crate) fn of(xs: &[f64]) -> Option<Moments> {
        if xs.len() < 2 || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let (mean, var) = mean_var(xs);
        Some(Moments::new(mean, var, xs.len()))
    }

    pub(crate) fn new(mean: f64, var: f64, n: usize) -> Moments {
        Moments {
            mean,
            var,
            n: n as f64,
        }
    }

    /// The variance of the mean.
    pub(crate) fn var_of_mean(&self) -> f64 {
        self.var / self.n
    }
}

/// [`welch`] from each side's moments (at least 2 values a side), so that
/// a caller can ask what the test would say of other counts.
pub(crate) fn welch_of(a: Moments, b: Moments) -> Option<Welch> {
    let (na, nb) = (a.n, b.n);
    let (ma, mb) = (a.mean, b.mean);
    let (qa, qb) = (a.var_of_mean(), b.var_of_mean());
    let se2 = qa + qb;
    let diff = ma - mb;
    if se2 == 0.0 {
        let df = na + nb - 2.0;
        return Some(if diff == 0.0 {
            Welch { t: 0.0, df, p: 1.0 }
        } else {
            Welch {
                t: diff.signum() * f64::INFINITY,
                df,
                p: 0.0,
            }
        });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0));
    let p = if t.is_infinite() {
        0.0
    } else {
        let dist = StudentsT::new(0.0, 1.0, df).ok()?;
        (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0)
    };
    Some(Welch { t, df, p })
}

/// Benjamini-Hochberg adjusted p-values (q-values), in the order given:
/// calling a test significant where its q is below `alpha` keeps the
/// expected share of false discoveries among those called below `alpha`,
/// for however many tests were made at once (independent or positively
/// dependent tests).
pub fn benjamini_hochberg(ps: &[f64]) -> Vec<f64> {
    let m = ps.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| ps[i].total_cmp(&ps[j]));
    let mut q = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(ps[i] * m as f64 / (rank + 1) as f64);
        q[i] = running.min(1.0);
    }
    q
}

/// Largest group size for which the exact null distribution is used.
const EXACT_MAX: usize = 20;

/// Two-sided p-value of the Mann-Whitney U test, written here rather than
/// taken from statrs because its exact path returns the complement for some
/// argument orders; this one satisfies `p(a, b) == p(b, a)` exactly.
///
/// Exact (counts of U by dynamic programming, `p = 2 · P(U <= min(U_a,
/// U_b))`, capped at 1) when both sides have at most 20 values and the
/// pooled sample has no ties; otherwise the normal approximation with the
/// tie-corrected variance and a 0.5 continuity correction. This matches
/// `scipy.stats.mannwhitneyu(a, b, alternative="two-sided")` in both
/// regimes. None when a side is empty or a value is not finite.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (na, nb) = (a.len(), b.len());
    let n = na + nb;
    // Pool with group tags and rank with mid-ranks for ties.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut ra, mut rb) = (0.0f64, 0.0f64);
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their mean; a half-integer, so sums stay exact.
        let rank = (i + 1 + j) as f64 / 2.0;
        for &(_, in_a) in &pooled[i..j] {
            if in_a {
                ra += rank;
            } else {
                rb += rank;
            }
        }
        i = j;
    }
    let ua = ra - (na * (na + 1)) as f64 / 2.0;
    let ub = rb - (nb * (nb + 1)) as f64 / 2.0;
    let (u_min, u_max) = (ua.min(ub), ua.max(ub));
    let p = match null_of(na, nb, pooled.chunk_by(|x, y| x.0 == y.0).map(<[_]>::len)) {
        // Without ties U is an integer.
        Null::Exact(counts) => {
            let total: u64 = counts.iter().sum();
            let below: u64 = counts.iter().take(u_min as usize + 1).sum();
            2.0 * below as f64 / total as f64
        }
        // Every value tied: no evidence of any difference.
        Null::Normal { sd, .. } if sd <= 0.0 => 1.0,
        Null::Normal { mean, sd } => 2.0 * Normal::standard().sf((u_max - mean - 0.5) / sd),
    };
    Some(p.clamp(0.0, 1.0))
}

/// The distribution of U where the two sides do not differ.
enum Null {
    /// How many arrangements give each U, from 0 to m·n: with at most
    /// [`EXACT_MAX`] values a side and no ties. Depends on the sizes only
    /// as an unordered pair, which keeps the test symmetric.
    Exact(Vec<u64>),
    /// The normal approximation, its variance corrected for ties.
    Normal { mean: f64, sd: f64 },
}

/// The null of U for `m` and `n` values, given the lengths of the runs of
/// equal values in their pooled sample.
fn null_of(m: usize, n: usize, runs: impl Iterator<Item = usize>) -> Null {
    // Σ (t³ - t) over the runs: what ties take from U's variance.
    let ties: f64 = runs
        .map(|t| {
            let t = t as f64;
            t * t * t - t
        })
        .sum();
    if m <= EXACT_MAX && n <= EXACT_MAX && ties == 0.0 {
        return Null::Exact(exact_counts(m, n));
    }
    let (fm, fn_, all) = (m as f64, n as f64, (m + n) as f64);
    let var = fm * fn_ / 12.0 * ((all + 1.0) - ties / (all * (all - 1.0)));
    Null::Normal {
        mean: fm * fn_ / 2.0,
        sd: var.max(0.0).sqrt(),
    }
}

/// How many arrangements of `m` and `n` untied values have each U, from 0
/// to `m * n`.
fn exact_counts(m: usize, n: usize) -> Vec<u64> {
    let (m, n) = (m.min(n), m.max(n));
    // counts[j][k]: arrangements of i a's and j b's with U = k, built up
    // over i with f(i, j, k) = f(i-1, j, k-j) + f(i, j-1, k).
    let mut prev: Vec<Vec<u64>> = (0..=n).map(|_| vec![1u64]).collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<u64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1u64]);
        for j in 1..=n {
            let mut row = vec![0u64; i * j + 1];
            for (k, c) in prev[j].iter().enumerate() {
                row[k + j] += c;
            }
            for (k, c) in cur[j - 1].iter().enumerate() {
                row[k] += c;
            }
            cur.push(row);
        }
        prev = cur;
    }
    prev.swap_remove(n)
}

/// How far `b` lies from `a` without assuming a distribution: the
/// Hodges-Lehmann estimate (the median of every difference `b_j - a_i`)
/// and its interval at `level`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

/// The shift of `b` against `a` with Moses's interval: the differences
/// ranked `c` and `m·n + 1 - c`, where `c - 1` is the largest U that
/// [`mann_whitney`] rejects at `1 - level`. The interval is the test
/// turned around, so it leaves 0 out exactly where the test's p is at
/// most `1 - level` (in the exact regime; nearly so with ties), where a
/// mean's interval beside a rank test's verdict can disagree with it.
///
/// None where [`mann_whitney`] is, for a level outside (0, 1), and where
/// the sides are too small for the test ever to reject at that level (3
/// and 3 at 95 %).
pub fn hodges_lehmann(a: &[f64], b: &[f64], level: f64) -> Option<Shift> {
    if a.is_empty()
        || b.is_empty()
        || !valid_level(level)
        || a.iter().chain(b).any(|x| !x.is_finite())
    {
        return None;
    }
    let (m, n) = (a.len(), b.len());
    let mut d: Vec<f64> = b
        .iter()
        .flat_map(|y| a.iter().map(move |x| y - x))
        .collect();
    d.sort_by(f64::total_cmp);
    let estimate = crate::describe::median_sorted(&d);
    let tail = (1.0 - level) / 2.0;
    let mut pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    pooled.sort_by(f64::total_cmp);
    let c = match null_of(m, n, pooled.chunk_by(|x, y| x == y).map(<[_]>::len)) {
        Null::Exact(counts) => {
            let total: u64 = counts.iter().sum();
            let mut below = 0u64;
            counts
                .iter()
                .position(|&k| {
                    below += k;
                    below as f64 / total as f64 > tail
                })
                .unwrap_or(0)
        }
        // mann_whitney rejects where min U < mean - 0.5 - z·sd.
        Null::Normal { mean, sd } => {
            let z = Normal::standard().inverse_cdf(1.0 - tail);
            (mean - 0.5 - z * sd).ceil().max(0.0) as usize
        }
    };
    if c == 0 {
        return None;
    }
    Some(Shift {
        estimate,
        lo: d[c - 1],
        hi: d[d.len() - c],
    })
}

#[cfg(test)]
mod many_tests {
    use super::*;

    #[test]
    fn benjamini_hochberg_matches_r_p_adjust() {
        // p.adjust(c(0.01, 0.04, 0.03, 0.005, 0.2), "BH") in R.
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005, 0.2]);
        let want = [0.025, 0.05, 0.05, 0.025, 0.2];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
        assert!(benjamini_hochberg(&[]).is_empty());
    }

    #[test]
    fn the_shift_of_two_apart_samples_is_their_median_difference() {
        // wilcox.test(11:14, 1:4, conf.int = TRUE) in R: 10, [7, 13].
        let s = hodges_lehmann(&[1.0, 2.0, 3.0, 4.0], &[11.0, 12.0, 13.0, 14.0], 0.95).unwrap();
        assert_eq!((s.estimate, s.lo, s.hi), (10.0, 7.0, 13.0));
        // Three a side: even the farthest apart give p = 0.1, so no 95 %
        // interval exists.
        assert_eq!(
            hodges_lehmann(&[1.0, 2.0, 3.0], &[7.0, 8.0, 9.0], 0.95),
            None
        );
        assert_eq!(hodges_lehmann(&[], &[1.0], 0.95), None);
        assert_eq!(hodges_lehmann(&[1.0, 2.0], &[1.0, 2.0], 1.0), None);
        assert_eq!(hodges_lehmann(&[f64::NAN, 1.0], &[1.0, 2.0], 0.95), None);
    }

    #[test]
    fn the_shift_interval_leaves_out_zero_exactly_where_mann_whitney_rejects() {
        let mut rng = crate::Rng::new(7);
        let mut draw = |shift: f64| shift + rng.uniform();
        let mut rejected = [0usize; 2];
        // Sizes on both sides of the exact regime's limit, shifts from none
        // to plain.
        for (m, n) in [(4, 4), (5, 9), (12, 20), (20, 20), (21, 25), (40, 30)] {
            for k in 0..60 {
                let shift = (k % 6) as f64 * 0.12;
                let a: Vec<f64> = (0..m).map(|_| draw(0.0)).collect();
                let b: Vec<f64> = (0..n).map(|_| draw(shift)).collect();
                let p = mann_whitney(&a, &b).unwrap();
                let s = hodges_lehmann(&a, &b, 0.95).unwrap();
                assert!(s.lo <= s.estimate && s.estimate <= s.hi, "{s:?}");
                let excludes = s.lo > 0.0 || s.hi < 0.0;
                assert_eq!(excludes, p <= 0.05, "m {m} n {n} p {p} {s:?}");
                rejected[usize::from(excludes)] += 1;
            }
        }
        // Both answers were met many times, so the agreement means something.
        assert!(rejected[0] > 50 && rejected[1] > 50, "{rejected:?}");
    }
}
