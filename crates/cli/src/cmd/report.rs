//! `plumb report`: an experiment, or labels and runs, as terminal text,
//! Markdown, and with --html one self-contained page with plots.

use crate::args::{ReportArgs, ReportFormat};
use crate::Failure;
use plumb_compare::Side;
use plumb_report::sweep::{self, Entry};
use plumb_samples::{EnvChange, Environment, RunRecord};

fn params() -> plumb_stats::CompareParams {
    plumb_stats::CompareParams {
        higher_is_better: true,
        ..plumb_stats::CompareParams::default()
    }
}

/// `sndbuf=8K,flows=32,variant=rps` → [(sndbuf, 8K), (flows, 32)].
pub fn coords_of(point: &str) -> Vec<(String, String)> {
    point
        .split(',')
        .filter_map(|p| p.split_once('='))
        .filter(|(k, _)| *k != "variant")
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The spec fields that differ between the runs, as coordinates of each.
fn varying_fields(runs: &[&RunRecord]) -> Vec<Vec<(String, String)>> {
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
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
                .map(|k| (k.rsplit('.').next().unwrap_or(k).to_string(), value(f, k)))
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

pub fn exec(a: ReportArgs) -> Result<i32, Failure> {
    let store = super::db::open(&a.db)?;
    let mut entries: Vec<Entry> = Vec::new();
    let mut sides: Vec<Side> = Vec::new();
    let title;
    match (&a.experiment, a.names.is_empty()) {
        (Some(name), true) => {
            let runs = store
                .experiment_runs(name, a.label.as_deref())
                .map_err(|e| Failure::usage(e.to_string()))?;
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
                let mut record = r.record.clone();
                // Points match across variants and labels by their place
                // in the matrix, whatever else their variant changed.
                record.spec_key = super::sweep::point_without_variant(&t.point);
                entries.push(Entry {
                    series: series.clone(),
                    coords: coords_of(&t.point),
                    record: record.clone(),
                });
                match sides.iter_mut().find(|s| s.name == series) {
                    Some(s) => {
                        s.runs.push(record);
                        if r.env.is_some() {
                            s.env = r.env.clone();
                        }
                    }
                    None => sides.push(Side {
                        name: series,
                        runs: vec![record],
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
            for n in &a.names {
                sides.push(super::db::side(&store, n)?);
            }
            let all: Vec<(&str, &RunRecord)> = sides
                .iter()
                .flat_map(|s| s.runs.iter().map(move |r| (s.name.as_str(), r)))
                .collect();
            let coords = varying_fields(&all.iter().map(|(_, r)| *r).collect::<Vec<_>>());
            for ((series, r), c) in all.iter().zip(coords) {
                entries.push(Entry {
                    series: series.to_string(),
                    coords: c,
                    record: (*r).clone(),
                });
            }
            title = format!("report of {}", a.names.join(", "));
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
        .map(|s| plumb_compare::compare(&sides[0], s, &params()))
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
