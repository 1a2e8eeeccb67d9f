//! `plumb history`: one test point's runs in order, with their change points.

use super::db::{filter, open_existing, store_err};
use crate::args::{Format, HistoryArgs};
use crate::Failure;
use plumb_compare::Side;
use plumb_store::{RunFilter, StoredRun};
use std::collections::BTreeMap;

/// The stored runs of the one test point the flags name, complete ones
/// only, oldest first.
fn point_runs(store: &plumb_store::Store, a: &HistoryArgs) -> Result<Vec<StoredRun>, Failure> {
    let mut runs: Vec<StoredRun> = if let (Some(exp), Some(point)) = (&a.experiment, &a.point) {
        store
            .experiment_runs(exp, a.filter.label.as_deref())
            .map_err(store_err)?
            .into_iter()
            .filter(|(tag, _)| &tag.point == point)
            .map(|(_, run)| run)
            .collect()
    } else {
        // A part of a run of parts (`RUN_KEY/NAME`) is read from its runs.
        let (key, part) = match a.spec_key.as_deref().map(|k| k.split_once('/')) {
            Some(Some((key, part))) => (Some(key.to_string()), Some(part)),
            _ => (a.spec_key.clone(), None),
        };
        let f = RunFilter {
            spec_key: key,
            ..filter(&a.filter)
        };
        let runs = store.runs(&f).map_err(store_err)?;
        match part {
            Some(part) => part_runs(runs, part)?,
            None => runs,
        }
    };
    runs.retain(|r| r.record.complete);
    let keys: BTreeMap<&str, String> = runs
        .iter()
        .map(|r| {
            (
                r.record.spec_key.as_str(),
                plumb_compare::point_summary(&r.record),
            )
        })
        .collect();
    if keys.len() > 1 {
        return Err(Failure::usage(several_points(&keys)));
    }
    if runs.is_empty() {
        return Err(Failure::usage(
            "history: no complete stored run matches; see `plumb list`".to_string(),
        ));
    }
    Ok(runs)
}

/// Part `part` of each of `runs`, as a run of its own
/// ([`plumb_samples::RunRecord::part_views`]).
fn part_runs(runs: Vec<StoredRun>, part: &str) -> Result<Vec<StoredRun>, Failure> {
    let Some(first) = runs.first() else {
        return Ok(runs);
    };
    let names: Vec<&str> = first
        .record
        .spec
        .parts
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    if !names.contains(&part) {
        return Err(Failure::usage(format!(
            "--spec-key: the runs of {} have no part {part}; their parts: {}",
            first.record.spec_key,
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    }
    Ok(runs
        .into_iter()
        .filter_map(|r| {
            let view = r.record.part_view(part)?;
            Some(StoredRun { record: view, ..r })
        })
        .collect())
}

/// The error for flags that match several test points: the first few
/// named, and how many more there are.
fn several_points(keys: &BTreeMap<&str, String>) -> String {
    const SHOWN: usize = 10;
    let mut named: Vec<String> = keys
        .iter()
        .take(SHOWN)
        .map(|(k, s)| format!("  --spec-key {k}  ({s})"))
        .collect();
    if keys.len() > SHOWN {
        named.push(format!(
            "  and {} more (`plumb list --format json` gives every spec key)",
            keys.len() - SHOWN
        ));
    }
    format!(
        "history: {} test points match; name one with --spec-key (or --experiment and --point):\n{}",
        keys.len(),
        named.join("\n")
    )
}

/// The history in `format`; with `changes`, only its change points. `runs`
/// are the series' runs, which a mail compares around each change.
fn render(
    h: &plumb_compare::history::History,
    format: Format,
    changes: bool,
    runs: &[StoredRun],
) -> Result<String, Failure> {
    let compared = |before: i64, after: i64| {
        let side = |id: i64| {
            let r = runs.iter().find(|r| r.id.0 == id).expect("in the series");
            Side::new(
                format!("{} (run {id})", r.record.label),
                vec![r.record.clone()],
                r.env.clone(),
            )
        };
        let cmp = plumb_compare::compare(
            &side(before),
            &side(after),
            &plumb_stats::CompareParams::default(),
        );
        plumb_report::compare::terminal(&cmp)
    };
    plumb_report::history::render(h, format, changes, &compared).map_err(Failure::usage)
}

pub fn history(a: HistoryArgs) -> Result<i32, Failure> {
    let store = open_existing(&a.db)?;
    let mut runs = point_runs(&store, &a)?;
    if !a.labels.is_empty() {
        let at = |l: &str| a.labels.iter().position(|x| x == l);
        runs.retain(|r| at(&r.record.label).is_some());
        // Label order first, then time within a label.
        runs.sort_by_key(|r| (at(&r.record.label), r.record.started_at.clone()));
        if runs.is_empty() {
            return Err(Failure::usage(format!(
                "--labels {}: no run of the test point is under these labels",
                a.labels.join(",")
            )));
        }
    }
    let params = plumb_stats::ChangeParams {
        max_p: a.max_p,
        min_magnitude: a.min_change,
        ..plumb_stats::ChangeParams::default()
    };
    let series: Vec<(i64, &plumb_samples::RunRecord)> =
        runs.iter().map(|r| (r.id.0, &r.record)).collect();
    let h = plumb_compare::history::history(&series, &params)
        .ok_or_else(|| Failure::usage("history: no run with a complete iteration".to_string()))?;
    if let Some(path) = &a.html {
        std::fs::write(path, plumb_report::history::html(&h))
            .map_err(|e| Failure::usage(format!("--html {}: cannot write: {e}", path.display())))?;
    }
    let text = render(&h, a.format, a.changes, &runs)?;
    crate::out!("{text}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_compare::history::{Change, History, HistoryChange};

    #[test]
    fn more_matching_points_than_are_named_are_counted() {
        let summaries: Vec<(String, String)> = (0..14)
            .map(|i| (format!("key{i:02}"), format!("stream {i}")))
            .collect();
        let keys: BTreeMap<&str, String> = summaries
            .iter()
            .map(|(k, s)| (k.as_str(), s.clone()))
            .collect();
        let text = several_points(&keys);
        assert!(text.starts_with("history: 14 test points match"), "{text}");
        assert_eq!(text.matches("--spec-key key").count(), 10, "{text}");
        assert!(text.ends_with("and 4 more (`plumb list --format json` gives every spec key)"));
        let few: BTreeMap<&str, String> = keys.into_iter().take(3).collect();
        assert!(!several_points(&few).contains("more"));
    }

    #[test]
    fn the_changes_as_json_are_the_change_points_with_their_fields() {
        let change = HistoryChange {
            index: 4,
            before_run: 4,
            after_run: 5,
            between: Change {
                before_label: "nightly-04".into(),
                after_label: "nightly-05".into(),
                mean_before: 10e9,
                mean_after: 2.83e9,
                change: -0.717,
                p: 0.015,
                regression: true,
            },
        };
        let h = History {
            spec_key: "7307bc2dbea14553".into(),
            summary: "stream send 1 flow".into(),
            metric: plumb_samples::Metric::Throughput,
            unit: "bit/s",
            method: "E-divisive means".into(),
            runs: Vec::new(),
            changes: vec![change],
        };
        let text = render(&h, Format::Json, true, &[]).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["spec_key"], "7307bc2dbea14553");
        assert_eq!(v["metric"], "throughput");
        let c = &v["changes"][0];
        assert_eq!(c["before_label"], "nightly-04");
        assert_eq!(c["after_run"], 5);
        assert_eq!(c["regression"], true);
        assert_eq!(c["p"], 0.015);
        assert!(v.get("runs").is_none());
        let line = render(&h, Format::Terminal, true, &[]).unwrap();
        assert!(line.starts_with("stream send 1 flow [7307bc2dbea14553]: between run 4"));
    }
}
