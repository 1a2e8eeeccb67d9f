//! `plumb report`: an experiment, or labels and runs, as terminal text,
//! Markdown, and with --html one self-contained page with plots.

use super::db::store_err;
use crate::args::{ReportArgs, ReportFormat};
use crate::Failure;
use plumb_compare::{Side, SideRun};
use plumb_report::sweep::{self, Entry};
use plumb_samples::{EnvChange, Environment, RunRecord};
use plumb_spec::experiment::PointId;
use plumb_store::{RunFilter, Store};

/// A spec field as experiments and `plumb run` flags name it: the last part
/// of its JSON path without a unit suffix (`socket.pacing_rate_bps` is
/// `pacing_rate`, `duration_ms` is `duration`).
fn field_name(path: &str) -> String {
    let last = path.rsplit('.').next().unwrap_or(path);
    ["_bps", "_ms", "_us", "_ppm"]
        .iter()
        .filter_map(|u| last.strip_suffix(u))
        .find(|f| plumb_spec::experiment::FIELDS.contains(f))
        .unwrap_or(last)
        .to_string()
}

/// The spec fields that differ between the runs, as coordinates of each;
/// a field a run leaves unset is `-`.
fn varying_fields(runs: &[&RunRecord]) -> Vec<Vec<(String, String)>> {
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Null => {}
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, x, out);
                }
            }
            serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let flat: Vec<Vec<(String, String)>> = runs
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            flatten(
                "",
                &serde_json::to_value(&r.spec).unwrap_or_default(),
                &mut out,
            );
            out
        })
        .collect();
    let mut keys: Vec<String> = Vec::new();
    for f in &flat {
        for (k, _) in f {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let value = |f: &Vec<(String, String)>, k: &str| {
        f.iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| "-".into())
    };
    let varying: Vec<String> = keys
        .into_iter()
        .filter(|k| {
            let first = value(&flat[0], k);
            flat.iter().any(|f| value(f, k) != first)
        })
        .collect();
    flat.iter()
        .map(|f| {
            varying
                .iter()
                .map(|k| (field_name(k), value(f, k)))
                .collect()
        })
        .collect()
}

fn env_diff(a: Option<&Environment>, b: Option<&Environment>) -> Vec<EnvChange> {
    match (a, b) {
        (Some(a), Some(b)) => a.diff(b),
        _ => Vec::new(),
    }
}

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
            let coords = varying_fields(&all.iter().map(|(_, r)| *r).collect::<Vec<_>>());
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
    let diff = match (sides.first(), sides.last()) {
        (Some(x), Some(y)) if sides.len() > 1 => env_diff(x.env.as_ref(), y.env.as_ref()),
        _ => Vec::new(),
    };
    let report = sweep::build(&title, &entries, comparisons, diff, a.cliff_factor);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pacing: Option<u64>, cc: Option<&str>) -> RunRecord {
        let text = include_str!("../../../../schemas/examples/run.v1.example.json");
        let mut r: RunRecord = serde_json::from_str(text).unwrap();
        r.spec.socket.pacing_rate_bps = pacing;
        r.spec.socket.cc = cc.map(str::to_string);
        r
    }

    #[test]
    fn varying_fields_are_named_as_experiments_name_them_and_unset_is_a_dash() {
        let a = record(None, None);
        let b = record(Some(1_000_000_000), None);
        let c = record(None, Some("reno"));
        let coords = varying_fields(&[&a, &b, &c]);
        let at = |run: usize, axis: &str| {
            coords[run]
                .iter()
                .find(|(k, _)| k == axis)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(coords[0].len(), 2, "{coords:?}");
        assert_eq!(at(0, "cc"), Some("-"));
        assert_eq!(at(0, "pacing_rate"), Some("-"));
        assert_eq!(at(1, "pacing_rate"), Some("1000000000"));
        assert_eq!(at(2, "cc"), Some("reno"));
        for c in coords.iter().flatten() {
            assert!(c.0 != "null" && c.1 != "null", "{c:?}");
        }
    }
}
