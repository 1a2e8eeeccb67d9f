//! Change-point detection over a series of results in time order (one value
//! per run of a benchmark), as Apache Otava (formerly Hunter, built on
//! MongoDB's signal-processing-algorithms) does it: E-divisive means
//! (Matteson & James 2014) with a permutation significance test.
//!
//! What is done, exactly:
//! 1. Every segment of the series (at first the whole of it) gets its best
//!    single split: the τ maximising, over the ends κ > τ of the second
//!    sample (every κ up to 2000 values, else the segment's end), the scaled
//!    energy statistic Q(τ, κ) = m n / (m + n) · Ê with α = 1, where
//!    Ê = 2/(m n)·ΣΣ|x_i − y_j| − C(m,2)⁻¹·Σ_{i<k}|x_i − x_k| − C(n,2)⁻¹·Σ_{j<k}|y_j − y_k|
//!    for the m values before τ and the n from τ up to κ, both at least
//!    `min_size`.
//! 2. The strongest candidate over all segments is tested by shuffling the
//!    values of its segment `permutations` times and redoing step 1 on each
//!    shuffle: p = (1 + #(shuffled max Q ≥ observed Q)) / (permutations + 1).
//!    If p ≤ `max_p` the segment is cut there and step 2 repeats; the first
//!    candidate with p > `max_p` ends the search.
//! 3. Change points whose relative change of means is below `min_magnitude`
//!    are then dropped one at a time, smallest first, recomputing the means
//!    of the merged neighbours after each drop (Hunter's merge, without its
//!    re-test of the p-values: a reported p is the one from step 2).
//!
//! Because the search stops at the first failed test, the chance that a
//! series with no change gets any change point is that of the first test
//! alone, at most `max_p`.

use serde::{Deserialize, Serialize};

use crate::describe::mean;
use crate::rng::Rng;
use crate::verdict::DEFAULT_SEED;

/// Settings of [`change_points`]; [`describe`] states them for an output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangeParams {
    /// A candidate is accepted when its permutation p-value is at most this.
    pub max_p: f64,
    /// Smallest |mean_after − mean_before| / |mean_before| a change point
    /// must show to be reported; 0 turns the filter off.
    pub min_magnitude: f64,
    /// Shuffles per test; p is never below 1 / (permutations + 1), so 0
    /// accepts nothing unless `max_p` ≥ 1.
    pub permutations: u32,
    /// Fewest values on either side of a split. Values below 2 are taken as
    /// 2: the within-segment term of Ê needs a pair. 2 lets a regression in
    /// the last two runs be flagged; the permutation test, not this bound,
    /// is what keeps short noisy stretches from being reported.
    pub min_size: usize,
    /// Seed of the shuffles, so a series and its settings always give the
    /// same answer.
    pub seed: u64,
}

impl Default for ChangeParams {
    fn default() -> ChangeParams {
        ChangeParams {
            max_p: 0.05,
            min_magnitude: 0.0,
            permutations: 199,
            min_size: 2,
            seed: DEFAULT_SEED,
        }
    }
}

/// A change of regime in a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    /// First index of the new regime.
    pub index: usize,
    /// Mean from the previous change point (or the start) up to `index`.
    pub mean_before: f64,
    /// Mean from `index` up to the next change point (or the end).
    pub mean_after: f64,
    /// (mean_after − mean_before) / mean_before: 0 when the means are
    /// equal (a change of spread only), ±infinite when only mean_before is 0.
    pub change: f64,
    /// Permutation p-value of the split when it was accepted.
    pub p: f64,
}

/// Change points in time order; the means are over the neighbouring
/// segments (between the previous and next accepted change points).
/// Empty for a series with a non-finite value (distances to it are
/// meaningless) or with fewer than 2 · `min_size` values.
pub fn change_points(xs: &[f64], params: &ChangeParams) -> Vec<ChangePoint> {
    let min_size = params.min_size.max(2);
    if xs.len() < 2 * min_size || xs.iter().any(|x| !x.is_finite()) {
        return Vec::new();
    }
    let mut rng = Rng::new(params.seed);
    // (start, end, best split relative to start with its Q); only the two
    // halves of a cut segment need a new search.
    let mut segments = vec![(0, xs.len(), best_split(xs, min_size))];
    let mut cuts: Vec<(usize, f64)> = Vec::new();
    loop {
        let strongest = segments
            .iter()
            .enumerate()
            .filter_map(|(k, &(start, end, best))| best.map(|(t, q)| (k, start, end, t, q)))
            .max_by(|a, b| a.4.total_cmp(&b.4));
        let Some((k, start, end, t, q)) = strongest else {
            break;
        };
        let p = permutation_p(&xs[start..end], q, params.permutations, min_size, &mut rng);
        if p > params.max_p {
            break;
        }
        let cut = start + t;
        cuts.push((cut, p));
        segments.swap_remove(k);
        segments.push((start, cut, best_split(&xs[start..cut], min_size)));
        segments.push((cut, end, best_split(&xs[cut..end], min_size)));
    }
    cuts.sort_by_key(|&(index, _)| index);

    loop {
        let points = with_means(xs, &cuts);
        // Smallest first, because dropping one widens its neighbours'
        // segments and so changes their magnitudes.
        let weakest = points
            .iter()
            .enumerate()
            .filter(|(_, c)| c.change.abs() < params.min_magnitude)
            .min_by(|a, b| a.1.change.abs().total_cmp(&b.1.change.abs()))
            .map(|(k, _)| k);
        match weakest {
            Some(k) => {
                cuts.remove(k);
            }
            None => return points,
        }
    }
}

/// One line naming the algorithm and its settings, for every output to state.
pub fn describe(params: &ChangeParams) -> String {
    // Rounded so that 0.07 shows as "7 %", not "7.000000000000001 %".
    let percent = (params.min_magnitude * 100.0 * 1e6).round() / 1e6;
    format!(
        "E-divisive means (energy statistic, alpha 1), permutation test with {} shuffles \
         (seed {}), p <= {}, at least {} values per segment, minimum change {} %",
        params.permutations,
        params.seed,
        params.max_p,
        params.min_size.max(2),
        percent
    )
}

/// Longest segment searched over every end of its second sample: the
/// search keeps an n × n table of distance sums; a longer segment compares
/// each split with the rest of the segment only.
const KAPPA_MAX: usize = 2000;

/// The split of `xs` with the largest Q, as (index of the first value after
/// it, Q). As in Matteson and James, the values after the split are taken up
/// to each later end κ in turn, not only to the end of the segment: a
/// stretch that moved and came back (a regression that was fixed) is then
/// as plain as a step.
fn best_split(xs: &[f64], min_size: usize) -> Option<(usize, f64)> {
    let n = xs.len();
    let min_size = min_size.max(2);
    if n < 2 * min_size {
        return None;
    }
    if n > KAPPA_MAX {
        return split_to_end(xs, min_size);
    }
    // sums[k][i]: distances from x_k to x_0 .. x_(i-1), so that a sum over
    // any run of values is one subtraction, and the search O(n²).
    let sums: Vec<Vec<f64>> = xs
        .iter()
        .map(|xk| {
            let mut row = Vec::with_capacity(n + 1);
            row.push(0.0);
            for x in xs {
                row.push(row.last().unwrap() + (xk - x).abs());
            }
            row
        })
        .collect();
    let d = |k: usize, from: usize, to: usize| sums[k][to] - sums[k][from];
    let mut best: Option<(usize, f64)> = None;
    let mut within_left = 0.0;
    for tau in 1..n {
        within_left += d(tau - 1, 0, tau - 1);
        if tau < min_size {
            continue;
        }
        let m = tau as f64;
        let (mut across, mut within_right) = (0.0, 0.0);
        for kappa in tau..n {
            across += d(kappa, 0, tau);
            within_right += d(kappa, tau, kappa);
            let r = (kappa - tau + 1) as f64;
            if kappa + 1 - tau < min_size {
                continue;
            }
            let q = divergence(across, within_left, within_right, m, r);
            if best.is_none_or(|(_, b)| q > b) {
                best = Some((tau, q));
            }
        }
    }
    best
}

/// Q, the scaled energy distance between `m` values and the `r` after them,
/// from the sums of pairwise distances across the two groups and within each.
fn divergence(across: f64, within_left: f64, within_right: f64, m: f64, r: f64) -> f64 {
    let energy = 2.0 * across / (m * r)
        - 2.0 * within_left / (m * (m - 1.0))
        - 2.0 * within_right / (r * (r - 1.0));
    m * r / (m + r) * energy
}

/// The split of `xs` with the largest Q of the values before it against all
/// those after it, over splits leaving at least `min_size` (≥ 2) values
/// each side.
fn split_to_end(xs: &[f64], min_size: usize) -> Option<(usize, f64)> {
    let n = xs.len();
    if n < 2 * min_size {
        return None;
    }
    let dist = |t: usize, others: std::ops::Range<usize>| -> f64 {
        others.map(|i| (xs[i] - xs[t]).abs()).sum()
    };
    // Sums of distances over pairs left of the split, right of it and across
    // it, updated as the split moves right one value at a time: O(n²) in all
    // instead of O(n²) per split.
    let mut within_left = 0.0;
    let mut within_right: f64 = (0..n).map(|j| dist(j, j + 1..n)).sum();
    let mut across = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for t in 0..n - min_size {
        let to_left = dist(t, 0..t);
        let to_right = dist(t, t + 1..n);
        within_left += to_left;
        within_right -= to_right;
        across += to_right - to_left;
        let (m, r) = ((t + 1) as f64, (n - t - 1) as f64);
        if t + 1 < min_size {
            continue;
        }
        let q = divergence(across, within_left, within_right, m, r);
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((t + 1, q));
        }
    }
    best
}

/// Share of shuffles of `segment` (counting the observed order once) whose
/// best split is at least as strong as the observed one.
fn permutation_p(
    segment: &[f64],
    observed: f64,
    permutations: u32,
    min_size: usize,
    rng: &mut Rng,
) -> f64 {
    // A shuffle equivalent to the observed order can differ from it in the
    // last bits of its sums; the slack counts it as a tie, as it should.
    let threshold = observed - 1e-9 * observed.abs();
    let mut shuffled = segment.to_vec();
    let mut at_least = 0u32;
    for _ in 0..permutations {
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.below(i + 1));
        }
        if best_split(&shuffled, min_size).is_some_and(|(_, q)| q >= threshold) {
            at_least += 1;
        }
    }
    f64::from(1 + at_least) / (f64::from(permutations) + 1.0)
}

/// Change points at `cuts` (sorted) with the means of their neighbouring
/// segments.
fn with_means(xs: &[f64], cuts: &[(usize, f64)]) -> Vec<ChangePoint> {
    (0..cuts.len())
        .map(|k| {
            let (index, p) = cuts[k];
            let start = if k == 0 { 0 } else { cuts[k - 1].0 };
            let end = cuts.get(k + 1).map_or(xs.len(), |c| c.0);
            let (before, after) = (mean(&xs[start..index]), mean(&xs[index..end]));
            let change = if after == before {
                0.0
            } else {
                (after - before) / before
            };
            ChangePoint {
                index,
                mean_before: before,
                mean_after: after,
                change,
                p,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `levels` as (value, count) runs, plus gaussian noise of sd `sd`.
    fn steps(levels: &[(f64, usize)], sd: f64, seed: u64) -> Vec<f64> {
        let mut rng = Rng::new(seed);
        levels
            .iter()
            .flat_map(|&(v, n)| std::iter::repeat_n(v, n))
            .map(|v| v + sd * rng.normal())
            .collect()
    }

    #[test]
    fn incremental_sums_match_the_definition() {
        let xs = steps(&[(5.0, 7), (9.0, 6)], 1.5, 3);
        let direct = |t: usize| energy_q(&xs[..t], &xs[t..]);
        let (t, q) = (3..=xs.len() - 3)
            .map(|t| (t, direct(t)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let (bt, bq) = split_to_end(&xs, 3).unwrap();
        assert_eq!(bt, t);
        assert!((bq - q).abs() < 1e-9 * q.abs(), "{bq} vs {q}");
        // Over every end of the second sample, by the same definition.
        let mut best = (0, f64::NEG_INFINITY);
        for kappa in 6..=xs.len() {
            for t in 3..=kappa - 3 {
                let (x, y) = (&xs[..t], &xs[t..kappa]);
                let q = energy_q(x, y);
                if q > best.1 {
                    best = (t, q);
                }
            }
        }
        let (bt, bq) = best_split(&xs, 3).unwrap();
        assert_eq!(bt, best.0);
        assert!(
            (bq - best.1).abs() < 1e-9 * best.1.abs(),
            "{bq} vs {}",
            best.1
        );
    }

    fn energy_q(x: &[f64], y: &[f64]) -> f64 {
        let (m, n) = (x.len() as f64, y.len() as f64);
        let pairs = |v: &[f64]| -> f64 {
            (0..v.len())
                .flat_map(|i| (i + 1..v.len()).map(move |k| (i, k)))
                .map(|(i, k)| (v[i] - v[k]).abs())
                .sum()
        };
        let across: f64 = x
            .iter()
            .flat_map(|a| y.iter().map(move |b| (a - b).abs()))
            .sum();
        let e = 2.0 / (m * n) * across
            - pairs(x) / (m * (m - 1.0) / 2.0)
            - pairs(y) / (n * (n - 1.0) / 2.0);
        m * n / (m + n) * e
    }

    #[test]
    fn one_step() {
        let xs = steps(&[(100.0, 20), (120.0, 20)], 2.0, 1);
        let found = change_points(&xs, &ChangeParams::default());
        assert_eq!(found.len(), 1, "{found:?}");
        let c = &found[0];
        assert_eq!(c.index, 20);
        assert!((c.mean_before - 100.0).abs() < 1.5, "{c:?}");
        assert!((c.mean_after - 120.0).abs() < 1.5, "{c:?}");
        assert!((c.change - 0.2).abs() < 0.03, "{c:?}");
        assert!(c.p <= 0.05, "{c:?}");
    }

    #[test]
    fn two_steps() {
        let xs = steps(&[(100.0, 15), (130.0, 15), (90.0, 15)], 2.0, 2);
        let found = change_points(&xs, &ChangeParams::default());
        let indices: Vec<usize> = found.iter().map(|c| c.index).collect();
        assert_eq!(indices, [15, 30], "{found:?}");
        // Means are over the neighbouring segments only.
        assert!((found[0].mean_after - 130.0).abs() < 1.5, "{found:?}");
        assert!((found[1].mean_before - 130.0).abs() < 1.5, "{found:?}");
        assert!((found[1].mean_after - 90.0).abs() < 1.5, "{found:?}");
    }

    #[test]
    fn a_stretch_that_moved_and_came_back_is_cut_at_both_ends() {
        // Four runs each side of a four-run regression, with noise of 10 %:
        // no single split of the whole series stands out, the stretch does.
        let xs = [
            9.49, 9.19, 9.39, 8.9, 2.50, 3.03, 2.50, 2.68, 8.35, 8.39, 8.23, 8.57,
        ];
        let found = change_points(&xs, &ChangeParams::default());
        let indices: Vec<usize> = found.iter().map(|c| c.index).collect();
        assert_eq!(indices, [4, 8], "{found:?}");
        assert!(found[0].change < -0.6 && found[1].change > 1.5, "{found:?}");
    }

    #[test]
    fn false_alarm_rate_is_at_most_max_p() {
        let runs = 500u64;
        let alarms = (0..runs)
            .filter(|&i| {
                let xs = steps(&[(100.0, 30)], 2.0, 2 * i);
                let params = ChangeParams {
                    seed: 2 * i + 1,
                    ..ChangeParams::default()
                };
                !change_points(&xs, &params).is_empty()
            })
            .count();
        let rate = alarms as f64 / runs as f64;
        let margin = 3.0 * (0.05 * 0.95 / runs as f64).sqrt();
        assert!(rate <= 0.05 + margin, "false-alarm rate {rate}");
    }

    #[test]
    fn min_magnitude_drops_small_changes() {
        let xs = steps(&[(100.0, 20), (101.0, 20)], 0.1, 4);
        let found = change_points(&xs, &ChangeParams::default());
        assert_eq!(found.iter().map(|c| c.index).collect::<Vec<_>>(), [20]);
        assert!(found[0].p <= 0.05);
        let strict = ChangeParams {
            min_magnitude: 0.05,
            ..ChangeParams::default()
        };
        assert!(change_points(&xs, &strict).is_empty());
    }

    #[test]
    fn non_finite_or_short_input_is_empty() {
        let params = ChangeParams::default();
        let mut xs = steps(&[(100.0, 20), (120.0, 20)], 2.0, 1);
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            xs[7] = bad;
            assert!(change_points(&xs, &params).is_empty());
        }
        assert!(change_points(&[], &params).is_empty());
        assert!(change_points(&[1.0, 2.0, 50.0], &params).is_empty());
        let tiny = ChangeParams {
            min_size: 0,
            ..params
        };
        assert!(change_points(&[1.0, 2.0, 50.0], &tiny).is_empty());
        let wide = ChangeParams {
            min_size: 10,
            ..params
        };
        let clean = steps(&[(100.0, 10), (120.0, 9)], 2.0, 1);
        assert!(change_points(&clean, &wide).is_empty());
    }

    #[test]
    fn describe_states_the_settings() {
        let params = ChangeParams {
            min_magnitude: 0.07,
            ..ChangeParams::default()
        };
        assert_eq!(
            describe(&params),
            "E-divisive means (energy statistic, alpha 1), permutation test with 199 shuffles \
             (seed 1), p <= 0.05, at least 2 values per segment, minimum change 7 %"
        );
    }
}
