//! `plumb history`: one test point's runs in order, with their change points.

use super::db::{filter, open_existing, store_err};
use crate::args::{HistoryArgs, HistoryFormat};
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
        let f = RunFilter {
            spec_key: a.spec_key.clone(),
            ..filter(&a.filter)
        };
        store.runs(&f).map_err(store_err)?
    };
    runs.retain(|r| r.record.complete);
    let keys: BTreeMap<&str, String> = runs
        .iter()
        .map(|r| (r.record.spec_key.as_str(), r.record.spec.summary()))
        .collect();
    if keys.len() > 1 {
        let named: Vec<String> = keys
            .iter()
            .take(10)
            .map(|(k, s)| format!("  --spec-key {k}  ({s})"))
            .collect();
        return Err(Failure::usage(format!(
            "history: {} test points match; name one with --spec-key (or --experiment and --point):\n{}",
            keys.len(),
            named.join("\n")
        )));
    }
    if runs.is_empty() {
        return Err(Failure::usage(
            "history: no complete stored run matches; see `plumb list`".to_string(),
        ));
    }
    Ok(runs)
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
    let text = if a.changes {
        plumb_report::history::changes_only(&h)
    } else {
        match a.format {
            HistoryFormat::Terminal => plumb_report::history::terminal(&h),
            HistoryFormat::Markdown => plumb_report::history::markdown(&h),
            HistoryFormat::Json => {
                serde_json::to_string_pretty(&h)
                    .map_err(|e| Failure::usage(format!("cannot encode the history: {e}")))?
                    + "\n"
            }
            HistoryFormat::Mail => {
                let by_id = |id: i64| runs.iter().find(|r| r.id.0 == id).expect("in the series");
                let mut out = String::new();
                for c in &h.changes {
                    let side = |id: i64| {
                        let r = by_id(id);
                        Side::new(
                            format!("{} (run {id})", r.record.label),
                            vec![r.record.clone()],
                            r.env.clone(),
                        )
                    };
                    let (before, after) = (side(c.before_run), side(c.after_run));
                    let cmp = plumb_compare::compare(
                        &before,
                        &after,
                        &plumb_stats::CompareParams::default(),
                    );
                    let detail = plumb_report::compare::terminal(&cmp);
                    out.push_str(&plumb_report::history::mail(&h, c, &detail));
                    out.push('\n');
                }
                if out.is_empty() {
                    out = format!("no change in {} ({})\n", h.summary, h.method);
                }
                out
            }
        }
    };
    crate::out!("{text}");
    Ok(0)
}
