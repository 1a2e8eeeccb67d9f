//! Unit tests against known values. Reference numbers marked "scipy" come
//! from scipy 1.17 (`scipy.stats`).

use super::{close, normals};
use crate::rng::Rng;
use crate::*;

// Wikipedia "Welch's t-test", example 1.
const A1: [f64; 15] = [
    27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
];
const A2: [f64; 15] = [
    27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
];

#[test]
fn summary_basic() {
    let s = Summary::of(&[3.0, 1.0, 4.0, 1.0, 5.0, 9.0]).unwrap();
    assert_eq!(s.n, 6);
    assert!(close(s.mean, 23.0 / 6.0, 1e-12));
    // Σ(x - m)² = Σx² - (Σx)²/n = 133 - 529/6 = 269/6; divided by n - 1 = 5.
    assert!(close(s.sd, (269.0_f64 / 30.0).sqrt(), 1e-12));
    assert_eq!((s.min, s.max, s.median), (1.0, 9.0, 3.5));
    let one = Summary::of(&[7.0]).unwrap();
    assert_eq!((one.sd, one.median), (0.0, 7.0));
    assert!(Summary::of(&[]).is_none());
    assert!(Summary::of(&[1.0, f64::NAN]).is_none());
}

#[test]
fn t_interval_one_to_ten() {
    // scipy: t.interval(0.95, 9, loc=5.5, scale=sem(1..=10))
    let xs: Vec<f64> = (1..=10).map(f64::from).collect();
    let i = t_interval(&xs, 0.95).unwrap();
    assert!(close(i.mean, 5.5, 1e-12));
    assert!(close(i.lo, 3.334_149_410_331_831, 1e-9), "{i:?}");
    assert!(close(i.hi, 7.665_850_589_668_169, 1e-9), "{i:?}");
    assert!(close(i.half_width, 2.165_850_589_668_169, 1e-9));
    assert_eq!(i.level, 0.95);
    assert!(close(
        i.relative_half_width(),
        2.165_850_589_668_169 / 5.5,
        1e-9
    ));
}

#[test]
fn t_interval_edges() {
    assert!(t_interval(&[1.0], 0.95).is_none());
    assert!(t_interval(&[1.0, 2.0], 1.0).is_none());
    assert!(t_interval(&[1.0, 2.0], 0.0).is_none());
    let c = t_interval(&[4.0, 4.0, 4.0], 0.95).unwrap();
    assert_eq!((c.lo, c.hi, c.half_width), (4.0, 4.0, 0.0));
    let z = t_interval(&[-1.0, 1.0], 0.95).unwrap();
    assert_eq!(z.relative_half_width(), f64::INFINITY);
}

#[test]
fn required_iterations() {
    let tight = [100.0, 100.5, 99.5, 100.2, 99.8];
    assert!(required_iterations_met(&tight, 0.95, 0.01));
    assert!(!required_iterations_met(&tight, 0.95, 0.001));
    assert!(!required_iterations_met(&[100.0], 0.95, 0.5));
}

#[test]
fn welch_wikipedia_example() {
    // scipy: ttest_ind(A1, A2, equal_var=False)
    let w = welch(&A1, &A2).unwrap();
    assert!(close(w.t, -2.455_356_398_286_006, 1e-9), "{w:?}");
    assert!(close(w.df, 24.988_529_290_231_416, 1e-9), "{w:?}");
    assert!(close(w.p, 0.021_378_001_462_866_992, 1e-9), "{w:?}");
}

#[test]
fn welch_unequal_sizes() {
    // Wikipedia example 2; scipy: ttest_ind(b1, b2, equal_var=False)
    let b1 = [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8];
    let b2 = [
        21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5, 23.6,
        21.5, 22.5, 23.5, 21.5, 21.8,
    ];
    let w = welch(&b1, &b2).unwrap();
    assert!(close(w.t, -1.565_433_523_598_503_7, 1e-9), "{w:?}");
    assert!(close(w.df, 9.904_741_248_650_831, 1e-9), "{w:?}");
    assert!(close(w.p, 0.148_841_696_605_328_17, 1e-9), "{w:?}");
    let r = welch(&b2, &b1).unwrap();
    assert_eq!((r.t, r.df, r.p), (-w.t, w.df, w.p));
}

#[test]
fn welch_zero_variance() {
    let same = welch(&[5.0, 5.0, 5.0], &[5.0, 5.0]).unwrap();
    assert_eq!((same.t, same.p, same.df), (0.0, 1.0, 3.0));
    let diff = welch(&[5.0, 5.0, 5.0], &[6.0, 6.0]).unwrap();
    assert_eq!(diff.p, 0.0);
    assert_eq!(diff.t, f64::NEG_INFINITY);
    // One side constant: still the ordinary formula, finite.
    let one = welch(&[5.0, 5.0, 5.0], &[5.0, 6.0, 7.0]).unwrap();
    assert!(one.p > 0.0 && one.p < 1.0 && close(one.df, 2.0, 1e-12));
    assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
    assert!(welch(&[1.0, f64::INFINITY], &[1.0, 2.0]).is_none());
}

#[test]
fn mann_whitney_exact_separated() {
    // Exact two-sided: 2 / C(10, 5) = 2 / 252.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b = [6.0, 7.0, 8.0, 9.0, 10.0];
    let p = mann_whitney(&a, &b).unwrap();
    assert!(close(p, 2.0 / 252.0, 1e-15), "{p}");
    assert!(close(p, 0.007_94, 1e-5));
    assert_eq!(p, mann_whitney(&b, &a).unwrap());
}

#[test]
fn mann_whitney_exact_interleaved() {
    // scipy: mannwhitneyu(a, b, alternative="two-sided", method="exact")
    let a = [1.1, 2.3, 3.5, 4.2, 7.7, 8.1];
    let b = [3.9, 5.0, 6.2, 9.4, 10.8, 11.5, 12.0];
    let p = mann_whitney(&a, &b).unwrap();
    assert!(close(p, 0.051_282_051_282_051_28, 1e-12), "{p}");
    assert_eq!(p, mann_whitney(&b, &a).unwrap());
}

#[test]
fn mann_whitney_exact_identical_order_is_one() {
    // U_a = U_b: the two-sided p caps at 1.
    let p = mann_whitney(&[1.0, 4.0], &[2.0, 3.0]).unwrap();
    assert_eq!(p, 1.0);
}

#[test]
fn mann_whitney_normal_with_ties() {
    // Ties force the normal approximation.
    // scipy: mannwhitneyu(c1, c2, alternative="two-sided") (asymptotic)
    let c1 = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let c2 = [
        3.0, 4.0, 5.0, 5.0, 6.0, 7.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 12.0,
    ];
    let p = mann_whitney(&c1, &c2).unwrap();
    assert!(close(p, 0.013_930_400_902_991_502, 1e-9), "{p}");
    assert_eq!(p, mann_whitney(&c2, &c1).unwrap());
}

#[test]
fn mann_whitney_normal_large() {
    // n = 25 per side forces the normal approximation.
    // scipy: mannwhitneyu(arange(1, 26), arange(8, 33) + 0.5,
    //                     alternative="two-sided", method="asymptotic")
    let a: Vec<f64> = (1..=25).map(f64::from).collect();
    let b: Vec<f64> = (8..=32).map(|x| f64::from(x) + 0.5).collect();
    let p = mann_whitney(&a, &b).unwrap();
    assert!(close(p, 0.002_035_157_807_278_379, 1e-9), "{p}");
}

#[test]
fn mann_whitney_all_tied_and_empty() {
    assert_eq!(mann_whitney(&[2.0, 2.0], &[2.0, 2.0, 2.0]), Some(1.0));
    assert!(mann_whitney(&[], &[1.0]).is_none());
}

#[test]
fn bootstrap_reproducible_and_sane() {
    let a = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5];
    let b = [90.0, 91.0, 89.5, 90.5, 88.0, 91.5];
    let x = bootstrap_ratio(&a, &b, 0.95, 2000, 42).unwrap();
    let y = bootstrap_ratio(&a, &b, 0.95, 2000, 42).unwrap();
    assert_eq!(x, y);
    assert!(close(x.mean, 540.5 / 600.5, 1e-12));
    assert!(x.lo < x.mean && x.mean < x.hi && x.hi < 1.0, "{x:?}");
    assert!(close(x.half_width, (x.hi - x.lo) / 2.0, 1e-15));
    let other = bootstrap_ratio(&a, &b, 0.95, 2000, 43).unwrap();
    assert_ne!(x.lo, other.lo);
    assert!(bootstrap_ratio(&[0.0, 0.0], &b, 0.95, 10, 1).is_none());
    assert!(bootstrap_ratio(&a, &b, 0.95, 0, 1).is_none());
    assert!(bootstrap_ratio(&[], &b, 0.95, 10, 1).is_none());
}

#[test]
fn mad_outliers_flags_the_stall() {
    let xs = [25.1, 24.9, 25.0, 25.2, 24.8, 12.0, 25.05, 24.95];
    assert_eq!(mad_outliers(&xs, MAD_THRESHOLD), vec![5]);
    let calm = [25.1, 24.9, 25.0, 25.2, 24.8, 25.05, 24.95];
    assert!(mad_outliers(&calm, MAD_THRESHOLD).is_empty());
    assert!(mad_outliers(&[], MAD_THRESHOLD).is_empty());
    assert_eq!(mad_outliers(&[1.0, f64::NAN, 1.0], MAD_THRESHOLD), vec![1]);
}

#[test]
fn mad_outliers_zero_mad_falls_back() {
    // More than half identical: MAD = 0, mean absolute deviation decides.
    let xs = [5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 100.0];
    assert_eq!(mad_outliers(&xs, MAD_THRESHOLD), vec![6]);
    // All identical: nothing to flag.
    assert!(mad_outliers(&[3.0; 8], MAD_THRESHOLD).is_empty());
    // Rounding-sized deviations are never flagged.
    let mut tiny = [1e10; 10];
    tiny[3] = 1e10 * (1.0 + 1e-12);
    assert!(mad_outliers(&tiny, MAD_THRESHOLD).is_empty());
}

#[test]
fn bimodal_two_levels() {
    let xs = [20.1, 30.2, 19.8, 29.9, 20.0, 30.1, 20.3, 29.7, 19.9, 30.0];
    let b = bimodal(&xs).unwrap();
    assert_eq!((b.low_n, b.high_n), (5, 5));
    assert!(close(b.low_mean, 20.02, 1e-9) && close(b.high_mean, 29.98, 1e-9));
    // Uneven split, noisier levels (3 %).
    let mut rng = Rng::new(7);
    let mut ys = normals(&mut rng, 7, 20.0, 0.6);
    ys.extend(normals(&mut rng, 3, 30.0, 0.9));
    let b = bimodal(&ys).unwrap();
    assert_eq!((b.low_n, b.high_n), (7, 3));
}

#[test]
fn bimodal_edges() {
    assert!(bimodal(&[20.0, 20.0, 30.0, 30.0, 30.0]).is_none()); // n < 6
    assert!(bimodal(&[20.0, 30.0, 30.0, 30.0, 30.0, 30.0]).is_none()); // one alone
    assert!(bimodal(&[5.0; 10]).is_none());
    // Clear in sd terms but a step under 5 % of the mean.
    let quiet = [100.0, 100.01, 100.0, 100.01, 103.0, 103.01, 103.0, 103.01];
    assert!(bimodal(&quiet).is_none());
}

/// Fraction of unimodal normal samples (mean 25, 3 % noise) of size `n`
/// that `bimodal` calls two-level.
fn bimodal_rate(rng: &mut Rng, sizes: impl Iterator<Item = usize>) -> f64 {
    let (mut fired, mut trials) = (0u32, 0u32);
    for n in sizes {
        trials += 1;
        if bimodal(&normals(rng, n, 25.0, 0.75)).is_some() {
            fired += 1;
        }
    }
    f64::from(fired) / f64::from(trials)
}

#[test]
fn bimodal_false_positive_rate() {
    let mut rng = Rng::new(2024);
    // Ten iterations, the common run length.
    let rate = bimodal_rate(&mut rng, (0..3000).map(|_| 10));
    assert!(rate < 0.02, "n = 10: false-positive rate {rate}");
    // Every length a run might have, 6 to 30.
    let rate = bimodal_rate(&mut rng, (0..5000).map(|t| 6 + t % 25));
    assert!(rate < 0.02, "n = 6..=30: false-positive rate {rate}");
    eprintln!("bimodal false-positive rate, n = 6..=30: {rate}");
}

#[test]
fn bimodal_power_on_two_levels() {
    // Ten iterations at ~20 or ~30 with 3 % noise, in varying proportions.
    let mut rng = Rng::new(99);
    let trials = 1000;
    let mut found = 0;
    for t in 0..trials {
        let low = 2 + t % 7;
        let mut xs = normals(&mut rng, low, 20.0, 0.6);
        xs.extend(normals(&mut rng, 10 - low, 30.0, 0.9));
        if bimodal(&xs).is_some_and(|b| b.low_n == low) {
            found += 1;
        }
    }
    let rate = f64::from(found) / f64::from(trials as u32);
    eprintln!("bimodal detection rate, 20 vs 30 at 3 % noise, n = 10: {rate}");
    assert!(rate >= 0.95, "two levels found in only {rate}");
}

#[test]
fn jain() {
    assert_eq!(jain_fairness(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
    assert!(close(
        jain_fairness(&[1.0, 0.0, 0.0, 0.0]).unwrap(),
        0.25,
        1e-15
    ));
    // (1+2+3)² / (3 · 14) = 36 / 42
    assert!(close(
        jain_fairness(&[1.0, 2.0, 3.0]).unwrap(),
        36.0 / 42.0,
        1e-15
    ));
    assert_eq!(jain_fairness(&[]), None);
    assert_eq!(jain_fairness(&[0.0, 0.0]), None);
}

#[test]
fn cliffs_in_a_sweep() {
    let sweep = [
        (64.0, 10.0),
        (128.0, 11.0),
        (256.0, 30.0), // 11 -> 30: jump after index 1
        (512.0, 31.0),
        (1024.0, 9.0), // 31 -> 9: drop after index 3
        (2048.0, 9.5),
    ];
    assert_eq!(cliffs(&sweep, 2.0), vec![1, 3]);
    assert_eq!(cliffs(&sweep, 0.5), vec![1, 3]);
    assert!(cliffs(&sweep, 5.0).is_empty());
    assert_eq!(cliffs(&[(1.0, 0.0), (2.0, 0.0), (3.0, 4.0)], 2.0), vec![1]);
    assert!(cliffs(&[(1.0, 1.0)], 2.0).is_empty());
    let steps = cliff_steps(&sweep.map(|(_, m)| m), 2.0);
    assert_eq!(steps.len(), 2);
    assert_eq!((steps[0].index, steps[0].falls), (1, false));
    assert!(close(steps[0].ratio, 30.0 / 11.0, 1e-12));
    assert_eq!((steps[1].index, steps[1].falls), (3, true));
    assert!(close(steps[1].ratio, 31.0 / 9.0, 1e-12));
}

#[test]
fn a_mean_with_its_interval_degrades_to_the_mean() {
    assert_eq!(mean_with_interval(&[], 0.95), (0.0, 0.0, 0.0));
    assert_eq!(mean_with_interval(&[4.0], 0.95), (4.0, 4.0, 4.0));
    // A sample that crosses 0 gets the plain Student-t interval.
    let crossing = [-3.0, 1.0, 5.0];
    let (m, lo, hi) = mean_with_interval(&crossing, 0.95);
    let t = t_interval(&crossing, 0.95).unwrap();
    assert_eq!((m, lo, hi), (t.mean, t.lo, t.hi));
}

#[test]
fn a_positive_means_interval_stays_positive_however_few_the_iterations() {
    // Two iterations of a rate: the t interval runs below 0.
    let rate = [50_000.0, 160_000.0];
    let t = t_interval(&rate, 0.95).unwrap();
    assert!(t.lo < 0.0, "{t:?}");
    let (m, lo, hi) = mean_with_interval(&rate, 0.95);
    assert_eq!(m, 105_000.0);
    assert!(lo > 0.0 && lo < m && hi > m, "{lo} .. {hi}");
    // Symmetric on the log scale, by the t interval's own spread.
    assert!(close((m / lo).ln(), (hi / m).ln(), 1e-12));
    assert!(close((hi / m).ln(), t.half_width / m, 1e-12));
    // With many tight iterations it is the t interval to within rounding.
    let (m, lo, hi) = mean_with_interval(&A1, 0.95);
    let t = t_interval(&A1, 0.95).unwrap();
    assert!(
        (lo / t.lo - 1.0).abs() < 0.01 && (hi / t.hi - 1.0).abs() < 0.01,
        "{m} {lo} {hi} {t:?}"
    );
}

#[test]
fn fieller_leaves_one_out_exactly_where_welch_rejects() {
    // Wikipedia's example: p 0.021, so the 95 % interval leaves 1 out and
    // the 99 % one holds it.
    let w = welch(&A1, &A2).unwrap();
    let f = fieller_ratio(&A1, &A2, 0.95).unwrap();
    assert!(f.lo > 1.0, "{f:?} p {}", w.p);
    let f = fieller_ratio(&A1, &A2, 0.99).unwrap();
    assert!(f.lo < 1.0 && 1.0 < f.hi, "{f:?} p {}", w.p);
    // At the level 1 - p the test sits on its edge, so 1 is an end.
    let edge = fieller_ratio(&A1, &A2, 1.0 - w.p).unwrap();
    assert!(close(edge.lo, 1.0, 1e-9), "{edge:?}");
    // A clear change: the interval is all above 1 and holds the point.
    let b: Vec<f64> = A1.iter().map(|x| x * 1.5).collect();
    let f = fieller_ratio(&A1, &b, 0.95).unwrap();
    assert!(f.lo > 1.0 && f.lo < 1.5 && 1.5 < f.hi, "{f:?}");
    // Equal constants: the interval is the point.
    let f = fieller_ratio(&[2.0, 2.0], &[3.0, 3.0], 0.95).unwrap();
    assert_eq!((f.lo, f.hi), (1.5, 1.5));
    // A baseline indistinguishable from 0: no upper end, and a lower one
    // below 1 where Welch's test does not tell the two apart...
    let f = fieller_ratio(&[-1.0, 2.0], &[3.0, 3.1], 0.95).unwrap();
    assert!(f.lo > 0.0 && f.lo < 1.0 && f.hi == f64::INFINITY, "{f:?}");
    // ...and above 1 where it does: a B far above an A near 0 (a probe's
    // wait as a queue drains, against none).
    let (a, b) = ([0.3, 0.5, 11.5], [110.0, 126.0, 144.0]);
    let f = fieller_ratio(&a, &b, 0.95).unwrap();
    assert!(welch(&a, &b).unwrap().p < 0.05);
    assert!(f.lo > 1.0 && f.hi == f64::INFINITY, "{f:?}");
    // Neither side told from 0: every ratio.
    let f = fieller_ratio(&[-1.0, 2.0], &[-3.0, 4.0], 0.95).unwrap();
    assert_eq!((f.lo, f.hi), (0.0, f64::INFINITY));
    assert!(fieller_ratio(&[1.0], &A1, 0.95).is_none());
    assert!(fieller_ratio(&[0.0, 0.0], &A1, 0.95).is_none());
    assert!(fieller_ratio(&A1, &A2, 1.0).is_none());
}

#[test]
fn the_fewest_iterations_any_rank_test_needs() {
    // 2 / C(2n, n): 0.33, 0.1, 0.029 at n = 2, 3, 4; 0.0079 at 5.
    assert_eq!(fewest_to_decide(0.05), 4);
    assert_eq!(fewest_to_decide(0.01), 5);
    assert_eq!(fewest_to_decide(0.2), 3);
}

#[test]
fn iterations_to_tell_a_change_follow_the_textbook_formula() {
    // n = 2 (z(1 - alpha/2) + z(0.8))² CV² / change², by hand:
    // (1.959964 + 0.841621)² = 7.848880 at alpha 0.05.
    // 2 × 7.848880 × 0.05² / 0.05² = 15.70: 16 a side.
    assert_eq!(iterations_to_tell(0.05, 0.05, 0.05, 0.05), Some(16));
    // 2 × 7.848880 × 0.03² / 0.05² = 5.65: 6.
    assert_eq!(iterations_to_tell(0.03, 0.03, 0.05, 0.05), Some(6));
    // 2 × 7.848880 × 0.1² / 0.02² = 392.44: 393.
    assert_eq!(iterations_to_tell(0.1, 0.1, 0.02, 0.05), Some(393));
    // At alpha 0.01, (2.575829 + 0.841621)² = 11.678968: 23.36, so 24.
    assert_eq!(iterations_to_tell(0.05, 0.05, 0.05, 0.01), Some(24));
    // Unequal spreads add their variances: (0.02² + 0.06²) = 2 × 0.04472²,
    // 7.848880 × 0.004 / 0.05² = 12.56: 13.
    assert_eq!(iterations_to_tell(0.02, 0.06, 0.05, 0.05), Some(13));
    // No spread needs no iterations for the formula; no change, or a
    // nonsense alpha, has no answer.
    assert_eq!(iterations_to_tell(0.0, 0.0, 0.05, 0.05), Some(0));
    assert_eq!(iterations_to_tell(0.05, 0.05, 0.0, 0.05), None);
    assert_eq!(iterations_to_tell(0.05, 0.05, 0.05, 1.5), None);
    assert_eq!(iterations_to_tell(f64::NAN, 0.05, 0.05, 0.05), None);

    // What to ask for: the formula's count, but never fewer than a rank
    // test needs at alpha, nor fewer than one more than a side has.
    assert_eq!(needed_a_side(3, 0.05, 0.05, 0.05, 0.05), Some(16));
    assert_eq!(needed_a_side(2, 0.0, 0.0, 0.05, 0.05), Some(4));
    assert_eq!(needed_a_side(20, 0.05, 0.05, 0.05, 0.05), Some(21));
    assert_eq!(needed_a_side(3, 0.1, 0.1, 0.02, 0.05), Some(393));
    // Past the cap the spread is what to work on.
    assert_eq!(needed_a_side(3, 0.5, 0.5, 0.02, 0.05), None);
    assert_eq!(needed_a_side(3, 0.05, 0.05, 0.0, 0.05), None);
}

#[test]
fn too_few_iterations_say_so_with_the_number_needed() {
    let p = CompareParams::default();
    // Two iterations a side, a change of thousands of percent that one
    // wild iteration makes undecidable: not "inconclusive" but too few,
    // and the interval beside it holds 1 as the verdict says.
    let a = [20.0, 26.0];
    let b = [20_000.0, 200_000.0];
    let c = compare(&a, &b, &p).unwrap();
    assert_eq!(c.verdict, Verdict::TooFew, "{c:?}");
    assert!(c.ratio.lo < 1.0 && c.ratio.hi > 1.0, "{:?}", c.ratio);
    assert!(c.ratio.lo >= 0.0);
    // The spread of those is far beyond any count worth naming.
    assert_eq!(c.needed, None);
    assert_eq!(Verdict::TooFew.to_string(), "too few iterations");
    // 100 and 104 against 98 and 102: sd √8 a side over A's mean 102, a CV
    // of 2.77 %; telling the 2 % noise band takes
    // 2 (1.960 + 0.842)² 0.0277² / 0.02² = 30.2, so 31 a side.
    let c = compare(&[100.0, 104.0], &[98.0, 102.0], &p).unwrap();
    assert_eq!(c.verdict, Verdict::TooFew, "{c:?}");
    assert_eq!(c.needed, Some(31));
    // The same two iterations a side, clear enough for Welch: decided.
    let c = compare(&[100.0, 101.0], &[150.0, 151.0], &p).unwrap();
    assert_eq!(c.verdict, Verdict::Improvement);
    assert_eq!(c.needed, None);
}

#[test]
fn a_side_on_two_levels_is_named_with_both_levels() {
    let p = CompareParams::default();
    let a = [23.0, 22.5, 23.2, 22.8, 23.1, 22.9, 23.0, 22.7];
    // Pipelined iterations that mostly stall like A's, two of them running
    // a hundred times faster.
    let b = [21.0, 2561.0, 22.0, 21.5, 2549.0, 21.8, 21.2, 22.1];
    let c = compare(&a, &b, &p).unwrap();
    assert_eq!(c.verdict, Verdict::Bimodal, "{c:?}");
    assert!(c.ratio.lo < 1.0, "the interval agrees: {:?}", c.ratio);
    let (side, levels) = c.bimodal[0];
    assert_eq!(side, 'B');
    assert!(close(levels.low_mean, 21.6, 1e-9) && levels.low_n == 6);
    assert!(close(levels.high_mean, 2555.0, 1e-9) && levels.high_n == 2);
    // Decided in spite of two levels: the verdict stands, the levels are
    // still stated.
    let b: Vec<f64> = [30.0, 30.5, 29.8, 30.2, 60.0, 60.5, 59.8, 60.2].to_vec();
    let c = compare(&a, &b, &p).unwrap();
    assert_eq!(c.verdict, Verdict::Improvement);
    assert_eq!(c.bimodal.len(), 1);
}

#[test]
fn verdict_names() {
    assert_eq!(Verdict::NoChange.to_string(), "no change");
    assert_eq!(Verdict::Regression.to_string(), "regression");
    assert_eq!(Verdict::Improvement.to_string(), "improvement");
    assert_eq!(Verdict::Inconclusive.to_string(), "inconclusive");
    assert_eq!(Verdict::Bimodal.to_string(), "bimodal");
}

#[test]
fn compare_rules() {
    let p = CompareParams::default();
    assert_eq!(p.resamples, 10_000);
    let a = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1];
    // 10 % lower throughput: regression.
    let lower: Vec<f64> = a.iter().map(|x| x * 0.9).collect();
    let c = compare(&a, &lower, &p).unwrap();
    assert_eq!(c.verdict, Verdict::Regression);
    assert!(close(c.change, -0.1, 1e-12));
    assert!(c.ratio.hi < 1.0 && c.welch.p < 0.05);
    // The same change where lower is better (latency): improvement.
    let lat = CompareParams {
        higher_is_better: false,
        ..p
    };
    assert_eq!(
        compare(&a, &lower, &lat).unwrap().verdict,
        Verdict::Improvement
    );
    let higher: Vec<f64> = a.iter().map(|x| x * 1.1).collect();
    assert_eq!(
        compare(&a, &higher, &p).unwrap().verdict,
        Verdict::Improvement
    );
    // A 0.1 % change with tight data: within the noise band.
    let same: Vec<f64> = a.iter().map(|x| x * 1.001).collect();
    assert_eq!(compare(&a, &same, &p).unwrap().verdict, Verdict::NoChange);
    // Very noisy small samples: cannot tell.
    let wild_a = [50.0, 150.0, 80.0, 120.0];
    let wild_b = [60.0, 140.0, 70.0, 135.0];
    assert_eq!(
        compare(&wild_a, &wild_b, &p).unwrap().verdict,
        Verdict::Inconclusive
    );
    assert!(compare(&[1.0], &a, &p).is_none());
    assert!(compare(&a, &[1.0], &p).is_none());
    // Reproducible from the seed.
    assert_eq!(compare(&a, &lower, &p), compare(&a, &lower, &p));
}
