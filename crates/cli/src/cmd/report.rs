//! `plumb report`: an experiment, or labels and runs, as terminal text,
//! Markdown, and with --html one self-contained page with plots.

use super::db::store_err;
use crate::args::{Format, ReportArgs};
use crate::Failure;
use plumb_report::sweep::{self, Lines, TaggedRun};
use plumb_spec::experiment::PointId;
use plumb_store::{RunFilter, Store};

/// What `plumb report` with no names reports: the most recent experiment
/// when the newest run belongs to one, else the two most recently used
/// labels (the older one first, as the baseline).
fn most_recent(store: &Store) -> Result<(Option<String>, Vec<String>), Failure> {
    let newest = store
        .list(&RunFilter {
            limit: Some(1),
            ..RunFilter::default()
        })
        .map_err(store_err)?;
    let Some(newest) = newest.first() else {
        return Err(Failure::usage(
            "the result database holds no runs; name labels or runs, or --experiment NAME",
        ));
    };
    if let Some((name, _)) = store.experiments().map_err(store_err)?.first() {
        let runs = store.experiment_runs(name, None).map_err(store_err)?;
        if runs.last().is_some_and(|(_, r)| r.id == newest.id) {
            return Ok((Some(name.clone()), Vec::new()));
        }
    }
    let mut labels: Vec<String> = store
        .labels()
        .map_err(store_err)?
        .into_iter()
        .take(2)
        .map(|(l, _)| l)
        .collect();
    labels.reverse();
    Ok((None, labels))
}

pub fn exec(a: ReportArgs) -> Result<i32, Failure> {
    let store = super::db::open_existing(&a.db)?;
    let (experiment, names) = if a.experiment.is_none() && a.names.is_empty() {
        let (experiment, names) = most_recent(&store)?;
        match &experiment {
            Some(name) => eprintln!("reporting experiment {name}, the most recent"),
            None => eprintln!(
                "reporting label{} {}, of the most recent runs",
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ),
        }
        (experiment, names)
    } else {
        (a.experiment.clone(), a.names.clone())
    };
    let Lines {
        title,
        entries,
        mut sides,
    } = match (&experiment, names.is_empty()) {
        (Some(name), true) => {
            let runs = store
                .experiment_runs(name, a.label.as_deref())
                .map_err(store_err)?;
            if runs.is_empty() {
                return Err(Failure::usage(format!(
                    "--experiment: no stored runs of experiment '{name}'{}",
                    a.label
                        .as_ref()
                        .map(|l| format!(" under label {l}"))
                        .unwrap_or_default()
                )));
            }
            let runs = runs
                .into_iter()
                .map(|(t, r)| {
                    let run = TaggedRun {
                        point: PointId::parse(&t.point),
                        record: r.record,
                        env: r.env,
                    };
                    (run, t.variant_rank)
                })
                .collect();
            sweep::experiment_lines(name, runs)
        }
        (None, false) => sweep::named_lines(
            names
                .iter()
                .map(|n| super::db::side(&store, n))
                .collect::<Result<_, _>>()?,
        ),
        _ => {
            return Err(Failure::usage(
                "name labels or runs, or --experiment NAME (not both)",
            ))
        }
    };
    if let Some(b) = &a.baseline {
        let i = sides.iter().position(|s| &s.name == b).ok_or_else(|| {
            Failure::usage(format!(
                "--baseline: no line named '{b}'; the lines are {}",
                sides
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let s = sides.remove(i);
        sides.insert(0, s);
    }
    let comparisons: Vec<_> = sides
        .iter()
        .skip(1)
        .map(|s| plumb_compare::compare(&sides[0], s, &plumb_stats::CompareParams::default()))
        .collect();
    let report = sweep::build(&title, &entries, comparisons, a.cliff_factor);
    match a.format {
        Format::Terminal => crate::out!("{}", sweep::terminal(&report)),
        Format::Markdown => crate::out!("{}", sweep::markdown(&report)),
        other => {
            return Err(super::db::unwritten(
                other,
                "a report",
                crate::args::of::REPORT,
            ))
        }
    }
    if let Some(path) = &a.html {
        std::fs::write(path, sweep::html(&report))
            .map_err(|e| Failure::usage(format!("--html {}: {e}", path.display())))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(0)
}
