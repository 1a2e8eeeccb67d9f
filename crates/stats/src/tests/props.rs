//! Property tests: symmetry and ranges that must hold for any input.

use proptest::prelude::*;

use crate::*;

fn sample(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-1e6f64..1e6, len)
}

/// Values with deliberate ties, which exercise the mid-ranks.
fn tied_sample(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec((0i32..8).prop_map(f64::from), len)
}

/// Positive, moderately noisy throughput-like values.
fn positive_sample(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<f64>> {
    (1.0f64..1e3).prop_flat_map(move |m| {
        prop::collection::vec((0.8f64..1.2).prop_map(move |f| m * f), len.clone())
    })
}

/// Mann-Whitney's p is the same with the samples swapped, and a probability.
fn mann_whitney_is_symmetric(a: &[f64], b: &[f64]) -> Result<(), TestCaseError> {
    let x = mann_whitney(a, b).unwrap();
    let y = mann_whitney(b, a).unwrap();
    prop_assert!((x - y).abs() <= 1e-12);
    prop_assert!((0.0..=1.0).contains(&x));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn welch_symmetric(a in sample(2..=30), b in sample(2..=30)) {
        let x = welch(&a, &b).unwrap();
        let y = welch(&b, &a).unwrap();
        prop_assert!((x.p - y.p).abs() <= 1e-12);
        prop_assert!((x.t + y.t).abs() <= 1e-12 * x.t.abs().max(1.0));
        prop_assert!((0.0..=1.0).contains(&x.p));
        prop_assert!(x.df >= 1.0 - 1e-9);
    }

    #[test]
    fn mann_whitney_symmetric(a in sample(1..=25), b in sample(1..=25)) {
        mann_whitney_is_symmetric(&a, &b)?;
    }

    #[test]
    fn mann_whitney_symmetric_with_ties(a in tied_sample(1..=25), b in tied_sample(1..=25)) {
        mann_whitney_is_symmetric(&a, &b)?;
    }

    #[test]
    fn t_interval_contains_mean(xs in sample(2..=40), level in 0.5f64..0.999) {
        let i = t_interval(&xs, level).unwrap();
        prop_assert!(i.lo <= i.mean && i.mean <= i.hi);
        prop_assert!(i.lo <= i.hi && i.half_width >= 0.0);
    }

    #[test]
    fn bootstrap_reproducible_and_covers_point(
        a in positive_sample(5..=15),
        b in positive_sample(5..=15),
        seed in any::<u64>(),
    ) {
        let x = bootstrap_ratio(&a, &b, 0.95, 400, seed).unwrap();
        let y = bootstrap_ratio(&a, &b, 0.95, 400, seed).unwrap();
        prop_assert_eq!(x, y);
        prop_assert!(x.lo <= x.mean && x.mean <= x.hi, "{:?}", x);
    }

    #[test]
    fn fieller_agrees_with_welch(
        a in prop::collection::vec(1.0f64..1e3, 2..=12),
        b in prop::collection::vec(1.0f64..1e3, 2..=12),
    ) {
        let w = welch(&a, &b).unwrap();
        let f = fieller_ratio(&a, &b, 0.95).unwrap();
        prop_assert!(f.lo >= 0.0 && f.lo <= f.mean && f.mean <= f.hi, "{:?}", f);
        // Away from the test's edge, where rounding could tip either way.
        // Away from the test's edge and the whole line (every ratio,
        // where neither mean is told from 0).
        if (w.p - 0.05).abs() > 1e-6 && (f.hi.is_finite() || f.lo > 0.0) {
            prop_assert_eq!(f.lo > 1.0 || f.hi < 1.0, w.p < 0.05, "{:?} p {}", f, w.p);
        }
    }

    #[test]
    fn a_verdict_agrees_with_its_interval(
        a in prop::collection::vec(1.0f64..1e3, 2..=12),
        b in prop::collection::vec(1.0f64..1e3, 2..=12),
    ) {
        let c = compare(&a, &b, &CompareParams::default()).unwrap();
        let left_out = c.ratio.lo > 1.0 || c.ratio.hi < 1.0;
        let decided = matches!(c.verdict, Verdict::Regression | Verdict::Improvement);
        prop_assert!(!decided || left_out, "{:?}", c);
        if (c.ratio.hi.is_finite() || c.ratio.lo > 0.0) && (c.welch.p - 0.05).abs() > 1e-6 {
            prop_assert_eq!(decided, left_out, "{:?}", c);
        }
    }

    #[test]
    fn jain_in_range(xs in prop::collection::vec(0.0f64..1e9, 1..=32)) {
        if let Some(j) = jain_fairness(&xs) {
            let n = xs.len() as f64;
            prop_assert!(j >= 1.0 / n - 1e-12 && j <= 1.0 + 1e-12);
        }
    }
}
