//! The history of one test point: its metric run after run, in time order
//! or in the order of a list of labels (nightly kernels), each run with its
//! interval, and the changes in that series found by E-divisive means.

use plumb_samples::{Metric, RunRecord};
use plumb_stats::{ChangeParams, ChangePoint};
use serde::Serialize;

/// One run of the series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRun {
    /// The store's local number of the run.
    pub run: i64,
    pub uuid: Option<String>,
    pub started_at: String,
    pub label: String,
    /// Mean of the complete iterations, with its 95 % Student-t interval.
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    pub iterations: usize,
}

/// A change of a series, between two neighbouring points of it (runs, or
/// kernels measured one after another): what `plumb history` and `plumb lab
/// watch` report alike.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub before_label: String,
    pub after_label: String,
    /// Means of the values between the neighbouring changes.
    pub mean_before: f64,
    pub mean_after: f64,
    /// (after - before) / before.
    pub change: f64,
    pub p: f64,
    /// Whether the change is for the worse: a lower rate, or a higher
    /// latency.
    pub regression: bool,
}

impl Change {
    fn at(c: &ChangePoint, before_label: &str, after_label: &str, higher_is_better: bool) -> Self {
        Change {
            before_label: before_label.to_string(),
            after_label: after_label.to_string(),
            mean_before: c.mean_before,
            mean_after: c.mean_after,
            change: c.change,
            p: c.p,
            regression: (c.mean_after < c.mean_before) == higher_is_better,
        }
    }
}

/// A change of a test point's series, between two neighbouring runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryChange {
    /// The position in `runs` of the first run after the change.
    pub index: usize,
    /// The run before the change and the first after it (local numbers).
    pub before_run: i64,
    pub after_run: i64,
    #[serde(flatten)]
    pub between: Change,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub spec_key: String,
    pub summary: String,
    pub metric: Metric,
    pub unit: &'static str,
    /// The change-point algorithm and its settings, in words.
    pub method: String,
    pub runs: Vec<HistoryRun>,
    pub changes: Vec<HistoryChange>,
}

/// The series of `runs` (complete runs of one test point, with their local
/// numbers, already in the order to show) and its changes.
pub fn history(runs: &[(i64, &RunRecord)], params: &ChangeParams) -> Option<History> {
    let (_, first) = runs.first()?;
    let metric = first.metric();
    let series: Vec<HistoryRun> = runs
        .iter()
        .filter_map(|(id, r)| {
            let xs = r.metric_values();
            if xs.is_empty() {
                return None;
            }
            let (mean, lo, hi) = plumb_stats::mean_with_interval(&xs, 0.95);
            Some(HistoryRun {
                run: *id,
                uuid: r.uuid.clone(),
                started_at: r.started_at.clone(),
                label: r.label.clone(),
                mean,
                lo,
                hi,
                iterations: xs.len(),
            })
        })
        .collect();
    let means: Vec<f64> = series.iter().map(|r| r.mean).collect();
    let changes = plumb_stats::change_points(&means, params)
        .into_iter()
        .map(|c: ChangePoint| {
            let (before, after) = (&series[c.index - 1], &series[c.index]);
            HistoryChange {
                index: c.index,
                before_run: before.run,
                after_run: after.run,
                between: Change::at(&c, &before.label, &after.label, metric.higher_is_better()),
            }
        })
        .collect();
    Some(History {
        spec_key: first.spec_key.clone(),
        summary: crate::point_summary(first),
        metric,
        unit: metric.unit(),
        method: plumb_stats::describe_change_points(params),
        runs: series,
        changes,
    })
}

/// The changes of a series of kernels, each with every iteration it was
/// measured over, in the order they were measured: E-divisive means over
/// all the iterations, so that two kernels a side with a few iterations
/// each can show a change (over one value a kernel, p of at most 0.05 needs
/// four a side). A change that falls between two iterations of one kernel
/// (its own drift) is not a kernel's: it is counted in the second value.
pub fn kernel_changes(
    kernels: &[(String, Vec<f64>)],
    higher_is_better: bool,
    params: &ChangeParams,
) -> (Vec<Change>, usize) {
    let values: Vec<f64> = kernels
        .iter()
        .flat_map(|(_, xs)| xs.iter().copied())
        .collect();
    // The index of each kernel's first value: where a kernel's change falls.
    let mut starts = Vec::new();
    let mut at = 0;
    for (_, xs) in kernels {
        starts.push(at);
        at += xs.len();
    }
    let mut within = 0;
    let mut changes = Vec::new();
    for c in plumb_stats::change_points(&values, params) {
        let Some(k) = starts.iter().position(|&s| s == c.index).filter(|&k| k > 0) else {
            within += 1;
            continue;
        };
        changes.push(Change::at(
            &c,
            &kernels[k - 1].0,
            &kernels[k].0,
            higher_is_better,
        ));
    }
    (changes, within)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(label: &str, throughput: &[f64]) -> RunRecord {
        let mut r = plumb_samples::testing::with_throughput(throughput);
        r.label = label.into();
        r
    }

    #[test]
    fn a_step_is_named_by_the_runs_and_labels_it_falls_between() {
        let mut recs = Vec::new();
        for i in 0..12 {
            let base = if i < 6 { 10e9 } else { 8.8e9 };
            let wobble = [0.0, 0.05e9, -0.04e9, 0.02e9][i % 4];
            let t = base + wobble;
            recs.push(record(&format!("k{i}"), &[t * 0.99, t, t * 1.01]));
        }
        let runs: Vec<(i64, &RunRecord)> = recs
            .iter()
            .enumerate()
            .map(|(i, r)| (i as i64 + 1, r))
            .collect();
        let h = history(&runs, &ChangeParams::default()).unwrap();
        assert_eq!(h.runs.len(), 12);
        assert!(h.runs[0].lo < h.runs[0].mean && h.runs[0].mean < h.runs[0].hi);
        assert_eq!(h.changes.len(), 1, "{:?}", h.changes);
        assert_eq!((h.changes[0].before_run, h.changes[0].after_run), (6, 7));
        let c = &h.changes[0].between;
        assert_eq!(
            (c.before_label.as_str(), c.after_label.as_str()),
            ("k5", "k6")
        );
        assert!(c.regression && (c.change + 0.12).abs() < 0.01, "{c:?}");
        assert!(c.p <= 0.05);
        assert!(h.method.contains("E-divisive"), "{}", h.method);
    }

    #[test]
    fn two_kernels_a_side_of_three_iterations_show_their_change_at_the_boundary() {
        let k = |name: &str, base: f64| (name.to_string(), vec![base * 0.97, base, base * 1.04]);
        let series = [
            k("6.12.115", 6.2e6),
            k("6.12.117", 6.0e6),
            k("6.1.0-56", 4.2e6),
            k("6.1.0-57", 4.3e6),
        ];
        let (changes, within) = kernel_changes(&series, true, &ChangeParams::default());
        assert_eq!(within, 0);
        assert_eq!(changes.len(), 1, "{changes:?}");
        let c = &changes[0];
        assert_eq!(
            (c.before_label.as_str(), c.after_label.as_str()),
            ("6.12.117", "6.1.0-56")
        );
        assert!(c.regression && c.p <= 0.05 && c.change < -0.25, "{c:?}");
        // One value a kernel: too few for the test to call it.
        let means: Vec<(String, Vec<f64>)> = series
            .iter()
            .map(|(n, xs)| (n.clone(), vec![xs[1]]))
            .collect();
        assert!(kernel_changes(&means, true, &ChangeParams::default())
            .0
            .is_empty());
        // Lower is better: the same drop is an improvement.
        assert!(!kernel_changes(&series, false, &ChangeParams::default()).0[0].regression);
    }
}
