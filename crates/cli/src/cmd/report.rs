//! `plumb report`: an experiment, or labels and runs, as terminal text,
//! Markdown, and with --html one self-contained page with plots.

use super::db::store_err;
use crate::args::{ReportArgs, ReportFormat};
use crate::Failure;
use plumb_compare::{Side, SideRun};
use plumb_report::sweep::{self, Entry};
use plumb_samples::RunRecord;
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
    let store = super::db::open(&a.db)?;
    let mut entries: Vec<Entry> = Vec::new();
    let mut sides: Vec<Side> = Vec::new();
    let title;
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
    match (&experiment, names.is_empty()) {
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
            let mut labels: Vec<String> =
                runs.iter().map(|(_, r)| r.record.label.clone()).collect();
            labels.sort();
            labels.dedup();
            let variants = runs.iter().any(|(t, _)| t.variant.is_some());
            for (t, r) in &runs {
                let series = match (&t.variant, labels.len() > 1) {
                    (Some(v), false) => v.clone(),
                    (Some(v), true) => format!("{}/{v}", r.record.label),
                    (None, _) => r.record.label.clone(),
                };
                let point = PointId::parse(&t.point);
                entries.push(Entry {
                    series: series.clone(),
                    coords: point.coords.clone(),
                    record: r.record.clone(),
                });
                // Points match across variants and labels by their place
                // in the matrix, whatever else their variant changed.
                let run = SideRun {
                    key: point.without_variant().to_string(),
                    record: r.record.clone(),
                };
                match sides.iter_mut().find(|s| s.name == series) {
                    Some(s) => {
                        s.runs.push(run);
                        if r.env.is_some() {
                            s.env = r.env.clone();
                        }
                    }
                    None => sides.push(Side {
                        name: series,
                        runs: vec![run],
                        env: r.env.clone(),
                    }),
                }
            }
            title = format!(
                "experiment {name}: {} run{}, {}",
                runs.len(),
                if runs.len() == 1 { "" } else { "s" },
                if variants {
                    format!("{} variants", sides.len())
                } else {
                    format!(
                        "label{} {}",
                        if labels.len() == 1 { "" } else { "s" },
                        labels.join(", ")
                    )
                }
            );
        }
        (None, false) => {
            for n in &names {
                sides.push(super::db::side(&store, n)?);
            }
            let all: Vec<(&str, &RunRecord)> = sides
                .iter()
                .flat_map(|s| s.records().map(move |r| (s.name.as_str(), r)))
                .collect();
            let coords = sweep::varying_coords(&all.iter().map(|(_, r)| *r).collect::<Vec<_>>());
            for ((series, r), c) in all.iter().zip(coords) {
                entries.push(Entry {
                    series: series.to_string(),
                    coords: c,
                    record: (*r).clone(),
                });
            }
            title = format!("report of {}", names.join(", "));
        }
        _ => {
            return Err(Failure::usage(
                "name labels or runs, or --experiment NAME (not both)",
            ))
        }
    }
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
        ReportFormat::Terminal => print!("{}", sweep::terminal(&report)),
        ReportFormat::Markdown => print!("{}", sweep::markdown(&report)),
    }
    if let Some(path) = &a.html {
        std::fs::write(path, sweep::html(&report))
            .map_err(|e| Failure::usage(format!("--html {}: {e}", path.display())))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(0)
}
