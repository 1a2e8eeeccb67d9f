//! `plumb sweep FILE`: runs every point of an experiment, each under its
//! variant's knobs, stores each with its experiment tag, and ends with the
//! comparison across variants (or against the experiment's previous label).

use crate::args::SweepArgs;
use crate::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use plumb_compare::Side;
use plumb_engine::SampleSink;
use plumb_run::knob::{self, Journal, Setting};
use plumb_run::{Repeat, RunError, RunOptions};
use plumb_samples::{format_bits_per_sec, IntervalSample, Role, RunRecord};
use plumb_spec::experiment::{Experiment, Order, Point};
use plumb_store::{RunTag, Store};
use std::sync::atomic::Ordering::Relaxed;

struct Quiet;
impl SampleSink for Quiet {
    fn interval(&mut self, _: Role, _: &IntervalSample) {}
}

/// Reads and checks an experiment file: every point built, every knob
/// parsed, errors as FILE:LINE: KEY: MESSAGE.
pub fn load(path: &std::path::Path) -> Result<(Experiment, Vec<Vec<Setting>>), Failure> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::usage(format!("{shown}: {e}")))?;
    let exp = Experiment::parse(&text).map_err(|e| Failure::usage(format!("{shown}:{e}")))?;
    let mut knobs = Vec::new();
    for v in &exp.variants {
        let mut settings = Vec::new();
        for k in &v.knobs {
            settings.push(Setting::new(&k.key, &k.value).map_err(|e| {
                Failure::usage(format!(
                    "{shown}:line {}: variant '{}'.knobs.\"{}\": {}",
                    k.line, v.name, k.key, e.0
                ))
            })?);
        }
        knobs.push(settings);
    }
    Ok((exp, knobs))
}

pub fn show_metric(rec: &RunRecord, v: f64) -> String {
    if rec.spec.is_transactional() {
        format!("{v:.0} tx/s")
    } else {
        format_bits_per_sec(v)
    }
}

/// One line for a finished point.
fn point_line(p: &Point, rec: &RunRecord, id: Option<i64>) -> String {
    let c = rec.confidence.as_ref();
    let mean = c.map(|c| c.mean).unwrap_or(0.0);
    let width = c
        .and_then(|c| c.relative_half_width)
        .map(|w| format!(" ±{:.1} %", w * 100.0))
        .unwrap_or_default();
    format!(
        "{}: {}{} ({} iteration{}){}",
        p.id,
        show_metric(rec, mean),
        width,
        rec.iterations.len(),
        if rec.iterations.len() == 1 { "" } else { "s" },
        id.map(|i| format!(", run {i}")).unwrap_or_default()
    )
}

pub fn exec(a: SweepArgs) -> Result<i32, Failure> {
    let (mut exp, knobs) = load(&a.file)?;
    if a.quick {
        if exp.quick.is_none() {
            return Err(Failure::usage(format!(
                "--quick: {} has no [quick] profile",
                a.file.display()
            )));
        }
        exp = exp.quick_profile();
    }
    let points = exp
        .points()
        .map_err(|e| Failure::usage(format!("{}:{e}", a.file.display())))?;
    let seed = a.order_seed.or(exp.seed).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let label = a
        .label
        .clone()
        .or(exp.label.clone())
        .unwrap_or_else(plumb_sys::proc::kernel_release);
    let repeat = Repeat {
        min: exp.iterations.0,
        max: exp.iterations.1,
        level: exp.confidence.0,
        target: exp.confidence.1,
    };
    let mut store = super::db::open(&a.db)?;
    let stored = store
        .experiment_runs(&exp.name, Some(&label))
        .map_err(|e| Failure::usage(e.to_string()))?;
    if !stored.is_empty() && !a.resume {
        return Err(Failure::usage(format!(
            "experiment {} already has {} stored point{} under label {label}; \
             add --resume to go on with the rest, or give another --label",
            exp.name,
            stored.len(),
            if stored.len() == 1 { "" } else { "s" }
        )));
    }
    let variant_knobs = |p: &Point| -> Vec<Setting> {
        p.variant
            .as_ref()
            .and_then(|name| exp.variants.iter().position(|v| &v.name == name))
            .map(|i| knobs[i].clone())
            .unwrap_or_default()
    };
    // Found out now, not an hour into the sweep.
    for (v, settings) in exp.variants.iter().zip(&knobs) {
        knob::check(settings)
            .map_err(|e| Failure::usage(format!("variant '{}': {}", v.name, e.0)))?;
    }
    if let Some(p) = points.iter().find(|p| p.spec.topology.is_some()) {
        if !plumb_sys::process::is_root() {
            return Err(Failure::usage(format!(
                "{}: topology veth needs root (it creates network namespaces)",
                p.id
            )));
        }
    }
    let todo: Vec<usize> = (0..points.len())
        .filter(|i| !stored.iter().any(|(t, _)| t.point == points[*i].id))
        .collect();
    eprintln!(
        "experiment {}: {} point{} ({} stored already), label {label}, order {}{}, iterations {}..{}",
        exp.name,
        points.len(),
        if points.len() == 1 { "" } else { "s" },
        points.len() - todo.len(),
        exp.order,
        if exp.order == Order::Random {
            format!(" (seed {seed})")
        } else {
            String::new()
        },
        repeat.min,
        repeat.max
    );

    let opts = RunOptions {
        server: None,
        label: label.clone(),
        interrupted: super::run::interrupt_flag(),
        server_exe: std::env::current_exe()
            .map_err(|e| Failure::usage(format!("cannot find the plumb executable: {e}")))?,
        // Experiments run against the embedded server only.
        psk: None,
    };
    let journal = Journal::open_default();
    // Drawn only here, on the controller thread; indicatif hides it when
    // stderr is not a terminal.
    let bar = ProgressBar::new((todo.len() as u32 * repeat.min) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} iterations  eta {eta}  {msg}")
            .expect("a valid template"),
    );
    let env = plumb_run::env::capture(&["lo"]);
    let mut parts: Vec<Vec<RunRecord>> = vec![Vec::new(); points.len()];
    let mut finished = 0usize;
    let store_point =
        |store: &mut Store, i: usize, rec: &RunRecord, bar: &ProgressBar| -> Result<(), Failure> {
            let p = &points[i];
            let id = store
                .insert_tagged_run(
                    rec,
                    Some(&env),
                    &RunTag {
                        experiment: exp.name.clone(),
                        point: p.id.clone(),
                        variant: p.variant.clone(),
                        seed: Some(seed),
                    },
                )
                .map_err(|e| Failure::usage(format!("{}: measured but not stored: {e}", p.id)))?;
            bar.suspend(|| println!("{}", point_line(p, rec, Some(id.0))));
            Ok(())
        };
    let run_unit = |i: usize,
                    iteration: String,
                    rep: &Repeat,
                    bar: &ProgressBar|
     -> Result<RunRecord, Failure> {
        let p = &points[i];
        bar.set_message(format!(
            "point {}/{} {}  iteration {iteration}",
            i + 1,
            points.len(),
            p.id,
        ));
        let (_applied, _) = knob::apply(&journal, &variant_knobs(p))
            .map_err(|e| Failure::usage(format!("{}: {}", p.id, e.0)))?;
        let bar2 = bar.clone();
        let mut progress = |_: &plumb_samples::Iteration, _: &plumb_samples::Confidence| {
            bar2.inc(1);
        };
        plumb_run::run(&p.spec, &opts, rep, &mut Quiet, &mut progress).map_err(|e| match e {
            RunError::Setup { message, .. } => Failure::usage(format!("{}: {message}", p.id)),
            other => Failure::usage(format!("{}: {other}", p.id)),
        })
    };

    let interrupted = || opts.interrupted.load(Relaxed);
    if exp.order == Order::Sequential {
        for &i in &todo {
            let rec = run_unit(i, format!("1..{}", repeat.max), &repeat, &bar)?;
            if !rec.complete || interrupted() {
                break;
            }
            store_point(&mut store, i, &rec, &bar)?;
            finished += 1;
        }
    } else {
        let mut pending = todo.clone();
        let mut round = 0u32;
        while !pending.is_empty() && !interrupted() {
            for i in plumb_run::experiment::round_order(exp.order, &pending, seed, round) {
                let rec = run_unit(i, (parts[i].len() + 1).to_string(), &Repeat::once(), &bar)?;
                if !rec.complete || interrupted() {
                    break;
                }
                parts[i].push(rec);
                let merged =
                    plumb_run::experiment::merge(&parts[i], &repeat).expect("one part at least");
                if plumb_run::experiment::point_done(&merged, &repeat) {
                    store_point(&mut store, i, &merged, &bar)?;
                    finished += 1;
                    pending.retain(|x| *x != i);
                } else if merged.iterations.len() as u32 >= repeat.min {
                    // Past its minimum without the confidence target: one
                    // more iteration than the bar counted.
                    bar.inc_length(1);
                }
            }
            round += 1;
        }
    }
    bar.finish_and_clear();
    if interrupted() || finished < todo.len() {
        eprintln!(
            "interrupted: {finished} of {} point{} stored; `plumb sweep --resume {}` goes on",
            todo.len(),
            if todo.len() == 1 { "" } else { "s" },
            a.file.display()
        );
        return Ok(130);
    }
    print!("{}", summary(&store, &exp, &label, &a.verdict)?);
    Ok(0)
}

/// Sides of the experiment's comparison: runs keyed by their point without
/// the variant, so the same point matches across variants.
fn side(name: &str, runs: Vec<(RunTag, RunRecord)>) -> Side {
    Side {
        name: name.to_string(),
        runs: runs
            .into_iter()
            .map(|(t, mut r)| {
                r.spec_key = point_without_variant(&t.point);
                r
            })
            .collect(),
        env: None,
    }
}

pub fn point_without_variant(point: &str) -> String {
    let kept: Vec<&str> = point
        .split(',')
        .filter(|p| !p.starts_with("variant="))
        .collect();
    if kept.is_empty() {
        "base".into()
    } else {
        kept.join(",")
    }
}

/// The comparison at the end of a sweep: every variant against the first;
/// without variants, this label against the experiment's previous one.
pub fn summary(
    store: &Store,
    exp: &Experiment,
    label: &str,
    v: &crate::args::VerdictArgs,
) -> Result<String, Failure> {
    let params = plumb_stats::CompareParams {
        alpha: v.alpha,
        noise_band: v.noise_band,
        seed: v.seed,
        higher_is_better: true,
        ..plumb_stats::CompareParams::default()
    };
    let all = store
        .experiment_runs(&exp.name, None)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let mut out = String::new();
    if exp.variants.len() >= 2 {
        let of = |variant: &str| {
            all.iter()
                .filter(|(t, r)| r.record.label == label && t.variant.as_deref() == Some(variant))
                .map(|(t, r)| (t.clone(), r.record.clone()))
                .collect::<Vec<_>>()
        };
        let base = &exp.variants[0].name;
        for other in &exp.variants[1..] {
            let c = plumb_compare::compare(
                &side(base, of(base)),
                &side(&other.name, of(&other.name)),
                &params,
            );
            out.push_str(&plumb_report::compare::terminal(&c));
            out.push('\n');
        }
        return Ok(out);
    }
    let previous = all
        .iter()
        .rev()
        .map(|(_, r)| r.record.label.clone())
        .find(|l| l != label);
    if let Some(prev) = previous {
        let of = |l: &str| {
            all.iter()
                .filter(|(_, r)| r.record.label == l)
                .map(|(t, r)| (t.clone(), r.record.clone()))
                .collect::<Vec<_>>()
        };
        let c = plumb_compare::compare(&side(&prev, of(&prev)), &side(label, of(label)), &params);
        out.push_str(&plumb_report::compare::terminal(&c));
    }
    Ok(out)
}
