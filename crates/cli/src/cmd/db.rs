//! Subcommands over the result database: list, show, export, import, delete,
//! and the resolution of "a label or a run id" shared with compare and check.

use crate::args::{
    CopyArgs, DbArgs, DeleteArgs, ExportArgs, FilterArgs, Format, ImportArgs, ListArgs, ShowArgs,
};
use crate::Failure;
use plumb_compare::Side;
use plumb_samples::Metric;
use plumb_store::{RunFilter, RunId, Store};
use std::io::{Read, Write};

/// The database for a command that stores runs: created when missing.
pub fn open(db: &DbArgs) -> Result<Store, Failure> {
    Store::open_location(&location(db)?).map_err(store_err)
}

/// The database for a command that reads (or deletes) runs: one that does
/// not exist is an error, not a new empty database.
pub fn open_existing(db: &DbArgs) -> Result<Store, Failure> {
    Store::open_existing_location(&location(db)?).map_err(store_err)
}

/// --db, else $PLUMB_DB, else the default file; a postgres:// URL in either
/// names a PostgreSQL database. The default file's directories are made
/// when missing; a path the user named must be in a directory that exists,
/// so that a typo in it is an error rather than a new, empty database.
fn location(db: &DbArgs) -> Result<plumb_store::Location, Failure> {
    use plumb_store::Location;
    let env = std::env::var_os("PLUMB_DB").filter(|p| !p.is_empty());
    let (location, from) = match (&db.db, env) {
        (Some(p), _) => (Location::new(p.clone()), Some("--db")),
        (None, Some(p)) => (Location::new(p), Some("$PLUMB_DB")),
        (None, None) => (Location::default_location(), None),
    };
    if let (Some(from), Location::File(path)) = (from, &location) {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(Failure::usage(format!(
                    "{from} {}: the directory {} does not exist; create it, or correct the path",
                    path.display(),
                    dir.display()
                )));
            }
        }
    }
    Ok(location)
}

pub fn store_err(e: plumb_store::StoreError) -> Failure {
    Failure::store(e.to_string())
}

pub fn run_id(s: &str) -> Result<RunId, Failure> {
    s.trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .map(RunId)
        .ok_or_else(|| {
            Failure::usage(format!(
                "'{s}' is not a run id; use a number as `plumb list` shows it"
            ))
        })
}

pub(crate) fn filter(f: &FilterArgs) -> RunFilter {
    RunFilter {
        label: f.label.clone(),
        workload: f.workload.clone(),
        since: f.since.clone(),
        until: f.until.clone(),
        limit: f.limit,
        ..RunFilter::default()
    }
}

/// A label with stored runs, else a run id. Labels win because a label may
/// look like a number; the error names both readings.
pub fn side(store: &Store, name: &str) -> Result<Side, Failure> {
    let runs = store.runs_with_label(name).map_err(store_err)?;
    if !runs.is_empty() {
        let env = runs
            .iter()
            .max_by(|a, b| a.record.started_at.cmp(&b.record.started_at))
            .and_then(|r| r.env.clone());
        return Ok(Side::new(
            name,
            runs.into_iter().map(|r| r.record).collect(),
            env,
        ));
    }
    if let Ok(id) = run_id(name) {
        if let Some(r) = store.get(id).map_err(store_err)? {
            return Ok(Side::new(format!("run {}", id.0), vec![r.record], r.env));
        }
    }
    Err(Failure::usage(format!(
        "'{name}' is neither a label with stored runs nor a stored run id; see `plumb list`"
    )))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A format a command's `--format` let through but that it has no
/// rendering for: a wiring mistake, said as the flag's error.
pub(crate) fn unwritten(format: Format, what: &str, written: &[Format]) -> Failure {
    let names: Vec<&str> = written.iter().map(|f| f.name()).collect();
    Failure::usage(format!(
        "--format {format}: {what} is written as {}",
        names.join(", ")
    ))
}

/// The rows of `plumb list` as JSON or CSV, every field as stored.
fn list_data(rows: &[plumb_store::RunRow], format: Format) -> Result<String, Failure> {
    Ok(match format {
        Format::Json => {
            let rows: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "run": r.id.0,
                        "started_at": r.started_at,
                        "label": r.label,
                        "workload": r.workload,
                        "spec_key": r.spec_key,
                        "summary": r.summary,
                        "iterations": r.iterations,
                        "complete": r.complete,
                        "throughput_bps": r.throughput_bps,
                        "tps": r.tps,
                    })
                })
                .collect();
            plumb_report::format::json(&rows, "list").map_err(Failure::usage)?
        }
        Format::Csv => {
            let mut out = String::from(
                "run,started_at,label,workload,spec_key,summary,iterations,complete,throughput_bps,tps\n",
            );
            let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            for r in rows {
                out.push_str(&format!(
                    "{},{},{},{},{},{},{},{},{},{}\n",
                    r.id.0,
                    csv_field(&r.started_at),
                    csv_field(&r.label),
                    csv_field(&r.workload),
                    r.spec_key,
                    csv_field(&r.summary),
                    r.iterations,
                    r.complete,
                    num(r.throughput_bps),
                    num(r.tps)
                ));
            }
            out
        }
        other => return Err(unwritten(other, "a list", crate::args::of::LIST)),
    })
}

pub fn list(a: ListArgs) -> Result<i32, Failure> {
    let store = open_existing(&a.db)?;
    let rows = store.list(&filter(&a.filter)).map_err(store_err)?;
    if let Some(format) = a.format {
        crate::out!("{}", list_data(&rows, format)?);
        return Ok(0);
    }
    if rows.is_empty() {
        eprintln!("no runs match");
        return Ok(0);
    }
    // The label column follows the longest label shown, so that one as long
    // as a kernel release keeps the columns after it in line.
    let lw = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(16);
    crate::outln!(
        "{:>5}  {:<20}  {:<lw$}  {:>4}  {:>14}  test point",
        "run",
        "started (UTC)",
        "label",
        "iter",
        "result"
    );
    for r in rows {
        let started: String = r
            .started_at
            .chars()
            .take(19)
            .collect::<String>()
            .replace('T', " ");
        crate::outln!(
            "{:>5}  {:<20}  {:<lw$}  {:>4}  {:>14}  {}{}",
            r.id.0,
            started,
            r.label,
            r.iterations,
            match (r.tps, r.throughput_bps) {
                (Some(t), _) => Metric::Tps.format(t),
                (None, Some(b)) => Metric::Throughput.format(b),
                (None, None) => "-".into(),
            },
            r.summary,
            if r.complete { "" } else { "  [INCOMPLETE]" }
        );
    }
    Ok(0)
}

pub fn show(a: ShowArgs) -> Result<i32, Failure> {
    let store = open_existing(&a.db)?;
    let id = run_id(&a.run)?;
    let run = store
        .get(id)
        .map_err(store_err)?
        .ok_or_else(|| Failure::usage(format!("no run {} in the result database", id.0)))?;
    if let Some(path) = &a.html {
        let opts = plumb_report::tcp::PageOptions {
            per_flow: a.per_flow,
        };
        std::fs::write(path, plumb_report::tcp::run_page(&run.record, opts))
            .map_err(|e| Failure::usage(format!("--html {}: cannot write: {e}", path.display())))?;
    }
    if a.json {
        let text = serde_json::to_string_pretty(&run.record)
            .map_err(|e| Failure::usage(format!("cannot encode the record: {e}")))?;
        crate::outln!("{text}");
    } else if a.profile {
        if let Some(path) = &a.flame {
            std::fs::write(path, plumb_report::profile::run_flame_page(&run.record)).map_err(
                |e| Failure::usage(format!("--flame {}: cannot write: {e}", path.display())),
            )?;
        }
        crate::outln!("run {}  {}", id.0, run.record.spec.summary());
        crate::out!(
            "{}",
            plumb_report::profile::run_profile(&run.record, plumb_report::profile::TOP)
        );
    } else {
        crate::outln!("run {}  started {}", id.0, run.record.started_at);
        crate::out!("{}", plumb_report::run_summary(&run.record));
    }
    Ok(0)
}

pub fn export(a: ExportArgs) -> Result<i32, Failure> {
    let store = open_existing(&a.db)?;
    let f = filter(&a.filter);
    let text = match a.format {
        Format::Json => {
            let e = store.export(&f).map_err(store_err)?;
            plumb_report::format::json(&e, "export").map_err(Failure::usage)?
        }
        Format::Csv => store.export_csv(&f).map_err(store_err)?,
        Format::Openmetrics => {
            let e = store.export(&f).map_err(store_err)?;
            // The export is oldest first; the latest run of a point wins.
            let runs: Vec<_> = e.runs.iter().rev().map(|r| &r.record).collect();
            plumb_report::openmetrics::openmetrics(&runs)
        }
        other => return Err(unwritten(other, "an export", crate::args::of::EXPORT)),
    };
    match &a.output {
        Some(path) => {
            // Written beside the target and renamed, so a failed export
            // never leaves a truncated file under the name asked for.
            let tmp = path.with_extension("plumb-tmp");
            std::fs::write(&tmp, &text)
                .and_then(|_| std::fs::rename(&tmp, path))
                .map_err(|e| {
                    Failure::usage(format!("--output: cannot write {}: {e}", path.display()))
                })?;
        }
        None => {
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
    }
    Ok(0)
}

pub fn import(a: ImportArgs) -> Result<i32, Failure> {
    let mut text = String::new();
    let read = if a.file.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(&a.file).map(|t| text = t)
    };
    read.map_err(|e| Failure::usage(format!("cannot read {}: {e}", a.file.display())))?;
    let export: plumb_store::Export = serde_json::from_str(&text).map_err(|e| {
        Failure::usage(format!(
            "{}: not a plumb export (line {}, column {}): {e}",
            a.file.display(),
            e.line(),
            e.column()
        ))
    })?;
    let mut store = open(&a.db)?;
    let ids = store.import(&export).map_err(store_err)?;
    eprintln!("{}", imported(&ids, export.runs.len()));
    Ok(0)
}

/// What an import did with the `offered` runs of a file: the ids of those
/// it added, and how many it skipped as already stored.
fn imported(ids: &[RunId], offered: usize) -> String {
    let mut line = format!("imported {} run(s)", ids.len());
    let skipped = offered.saturating_sub(ids.len());
    if skipped > 0 {
        line += &format!(", skipped {skipped} already in the store");
    }
    if !ids.is_empty() {
        let list: Vec<String> = ids.iter().map(|i| i.0.to_string()).collect();
        line += &format!(": {}", list.join(" "));
    }
    line
}

/// `plumb db copy FROM TO`: every run, its environment and tag, in
/// batches (each one transaction), skipping the runs TO has already.
pub fn copy(a: CopyArgs) -> Result<i32, Failure> {
    let from = Store::open_existing(&a.from).map_err(store_err)?;
    let mut to = Store::open(&a.to).map_err(store_err)?;
    let all = from.export(&RunFilter::default()).map_err(store_err)?;
    let bar = indicatif::ProgressBar::new(all.runs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  eta {eta}")
            .expect("a valid template"),
    );
    let mut added = 0;
    for batch in all.runs.chunks(100) {
        let part = plumb_store::Export {
            schema: all.schema.clone(),
            runs: batch.to_vec(),
        };
        added += to.import(&part).map_err(store_err)?.len();
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    eprintln!(
        "copied {added} run(s) from {} to {}; {} already there",
        from.path(),
        to.path(),
        all.runs.len() - added
    );
    Ok(0)
}

pub fn delete(a: DeleteArgs) -> Result<i32, Failure> {
    let ids = a
        .runs
        .iter()
        .map(|r| run_id(r))
        .collect::<Result<Vec<_>, _>>()?;
    let mut store = open_existing(&a.db)?;
    let mut missing = Vec::new();
    for id in ids {
        if store.delete(id).map_err(store_err)? {
            eprintln!("deleted run {}", id.0);
        } else {
            missing.push(id.0.to_string());
        }
    }
    if !missing.is_empty() {
        return Err(Failure::usage(format!(
            "no such run: {}",
            missing.join(" ")
        )));
    }
    Ok(0)
}

#[cfg(test)]
mod import_tests {
    use super::{imported, RunId};

    #[test]
    fn an_import_says_how_many_runs_it_skipped() {
        assert_eq!(
            imported(&[], 3),
            "imported 0 run(s), skipped 3 already in the store"
        );
        assert_eq!(
            imported(&[RunId(7), RunId(8)], 3),
            "imported 2 run(s), skipped 1 already in the store: 7 8"
        );
        assert_eq!(imported(&[RunId(7)], 1), "imported 1 run(s): 7");
    }
}
