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
