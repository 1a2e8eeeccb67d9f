//! Two-sample tests: Welch's t-test for means and the Mann-Whitney U test
//! for when the normality behind Welch is doubtful.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use crate::describe::mean_var;

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
    if a.len() < 2 || b.len() < 2 || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (qa, qb) = (va / na, vb / nb);
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

/// Welch's interval at `level` of `mean(b) - mean(a)`, the difference a
/// report shows beside the p-value of [`welch`]. None where [`welch`] is.
pub fn welch_difference(a: &[f64], b: &[f64], level: f64) -> Option<(f64, f64)> {
    let w = welch(b, a)?;
    let (_, va) = mean_var(a);
    let (_, vb) = mean_var(b);
    let diff = crate::describe::mean(b) - crate::describe::mean(a);
    let se = (va / a.len() as f64 + vb / b.len() as f64).sqrt();
    if se == 0.0 {
        return Some((diff, diff));
    }
    let crit = StudentsT::new(0.0, 1.0, w.df)
        .ok()?
        .inverse_cdf(1.0 - (1.0 - level) / 2.0);
    Some((diff - crit * se, diff + crit * se))
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
    let mut tie_term = 0.0f64;
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
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let ua = ra - (na * (na + 1)) as f64 / 2.0;
    let ub = rb - (nb * (nb + 1)) as f64 / 2.0;
    let (u_min, u_max) = (ua.min(ub), ua.max(ub));

    let p = if na <= EXACT_MAX && nb <= EXACT_MAX && tie_term == 0.0 {
        // Without ties U is an integer.
        2.0 * exact_cdf(na, nb, u_min as usize)
    } else {
        let (fa, fb, fnn) = (na as f64, nb as f64, n as f64);
        let mu = fa * fb / 2.0;
        let var = fa * fb / 12.0 * ((fnn + 1.0) - tie_term / (fnn * (fnn - 1.0)));
        if var <= 0.0 {
            // Every value tied: no evidence of any difference.
            1.0
        } else {
            let z = (u_max - mu - 0.5) / var.sqrt();
            2.0 * Normal::standard().sf(z)
        }
    };
    Some(p.clamp(0.0, 1.0))
}

/// `P(U <= u)` under the null for group sizes `m` and `n` (no ties), from
/// the count of arrangements with each U. Depends on the sizes only as an
/// unordered pair, which keeps the test symmetric.
fn exact_cdf(m: usize, n: usize, u: usize) -> f64 {
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
    let counts = &prev[n];
    let total: u64 = counts.iter().sum();
    let below: u64 = counts.iter().take(u + 1).sum();
    below as f64 / total as f64
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
    fn the_difference_interval_holds_the_difference_and_matches_welch() {
        let a = [10.0, 11.0, 9.5, 10.5];
        let b = [12.0, 12.5, 11.5, 13.0];
        let (lo, hi) = welch_difference(&a, &b, 0.95).unwrap();
        let d = 12.25 - 10.25;
        assert!(lo < d && d < hi);
        // Excludes 0 exactly when Welch's p is below 0.05.
        assert!(welch(&a, &b).unwrap().p < 0.05 && lo > 0.0);
        let c = [10.2, 9.8, 10.9, 10.1];
        let (lo, hi) = welch_difference(&a, &c, 0.95).unwrap();
        assert!(welch(&a, &c).unwrap().p > 0.05 && lo < 0.0 && hi > 0.0);
    }
}
