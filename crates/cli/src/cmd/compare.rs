//! `plumb compare`, `plumb check` and `plumb env`.

use super::db::{open_existing, side};
use crate::args::{CheckArgs, CompareArgs, EnvArgs, Format, VerdictArgs};
use crate::Failure;
use plumb_compare::{Comparison, Side};
use plumb_stats::CompareParams;

pub(crate) fn params(v: &VerdictArgs) -> CompareParams {
    CompareParams {
        alpha: v.alpha,
        noise_band: v.noise_band,
        higher_is_better: true,
        ..CompareParams::default()
    }
}

fn render(c: &Comparison, format: Format) -> Result<String, Failure> {
    plumb_report::compare::render(c, format).map_err(Failure::usage)
}

/// Several comparisons in one format: JSON as one array, the others one
/// after another.
pub(crate) fn render_all(cs: &[Comparison], format: Format) -> Result<String, Failure> {
    plumb_report::compare::render_all(cs, format).map_err(Failure::usage)
}

pub fn compare(a: CompareArgs) -> Result<i32, Failure> {
    let store = open_existing(&a.db)?;
    let sa = side(&store, &a.a)?;
    let sb = side(&store, &a.b)?;
    let mut c = plumb_compare::compare_across(&sa, &sb, &params(&a.verdict), a.across_machines);
    if a.profile {
        if c.points.iter().all(|p| p.profile.is_empty()) {
            return Err(Failure::usage(format!(
                "--profile: no test point of {} and {} was profiled on both sides (run them with --profile)",
                c.a, c.b
            )));
        }
        if !a.function.is_empty() {
            for e in c.points.iter_mut().flat_map(|p| p.profile.iter_mut()) {
                e.functions
                    .retain(|f| a.function.iter().any(|n| f.function.contains(n.as_str())));
            }
        }
        if let Some(path) = &a.flame {
            let page = plumb_report::profile::compare_flame_page(&c, plumb_report::profile::TOP);
            std::fs::write(path, page).map_err(|e| {
                Failure::usage(format!("--flame {}: cannot write: {e}", path.display()))
            })?;
        }
    } else {
        for p in &mut c.points {
            p.profile.clear();
        }
    }
    crate::out!("{}", render(&c, a.verdict.format)?);
    Ok(0)
}

/// Errors in `check` exit 128: `git bisect run` takes 1-127 (but 125) as
/// "bad", so an error there would blame a commit for a typo; above 127 it
/// stops the bisection instead.
const CHECK_ERROR: i32 = 128;

pub fn check(a: CheckArgs) -> Result<i32, Failure> {
    check_inner(a).map_err(|f| Failure {
        code: CHECK_ERROR,
        message: f.message,
    })
}

fn check_inner(a: CheckArgs) -> Result<i32, Failure> {
    if a.dry_run && a.candidate.is_some() {
        return Err(Failure::usage(
            "--dry-run: with --candidate nothing runs; leave out one or the other",
        ));
    }
    let mut store = open_existing(&a.db)?;
    let baseline = side(&store, &a.baseline)?;
    let candidate = match &a.candidate {
        Some(name) => side(&store, name)?,
        None => {
            let specs = plumb_run::experiment::newest_per_point(baseline.records());
            let label = crate::args::label_or_kernel(a.label.as_deref());
            let repeat = a.repeat.repeat();
            if a.dry_run {
                let planned = specs
                    .iter()
                    .map(|r| super::dry::Planned {
                        point: None,
                        spec: r.spec.clone(),
                    })
                    .collect();
                let json = a.verdict.format == Format::Json;
                return super::dry::show(planned, &a.far, &label, &repeat, json);
            }
            // The server end of the runs made now; one started over ssh
            // serves them all and ends with this.
            let family = specs
                .first()
                .map_or(plumb_spec::Family::V4, |r| r.spec.family);
            let end = super::run::reach(&a.far, family)?;
            let ctx = end.context(false, None);
            let mut runs = Vec::new();
            let mut env = None;
            for r in specs {
                let mut spec = r.spec.clone();
                end.aim(&mut spec);
                eprintln!("running {} under label {label}", spec.summary());
                let (rec, e) = super::run::run_and_store(
                    &spec,
                    &label,
                    &ctx,
                    &repeat,
                    if a.no_store { None } else { Some(&mut store) },
                    false,
                )?;
                if !rec.complete {
                    return Err(Failure::usage("interrupted"));
                }
                runs.push(rec);
                env = Some(e);
            }
            Side::new(label, runs, env)
        }
    };
    let c = plumb_compare::compare(&baseline, &candidate, &params(&a.verdict));
    crate::out!("{}", render(&c, a.verdict.format)?);
    let b = plumb_compare::bisect(&c, a.threshold);
    eprintln!(
        "check: {} (threshold -{:.1} %), exit {}",
        match b {
            plumb_compare::Bisect::Good => "good",
            plumb_compare::Bisect::Bad => "bad: regression",
            plumb_compare::Bisect::Skip => "cannot tell",
        },
        a.threshold * 100.0,
        b.exit_code()
    );
    Ok(b.exit_code())
}

pub fn env(a: EnvArgs) -> Result<i32, Failure> {
    match &a.diff {
        None => {
            let env = plumb_run::env::capture(&["lo"]);
            if a.json {
                crate::outln!(
                    "{}",
                    serde_json::to_string_pretty(&env)
                        .map_err(|e| Failure::usage(e.to_string()))?
                );
            } else {
                for (k, v) in &env.facts {
                    crate::outln!("{k} = {v}");
                }
            }
        }
        Some(pair) => {
            let store = open_existing(&a.db)?;
            let sa = side(&store, &pair[0])?;
            let sb = side(&store, &pair[1])?;
            let missing = |s: &Side| {
                Failure::usage(format!("{}: no environment was recorded with it", s.name))
            };
            let ea = sa.env.as_ref().ok_or_else(|| missing(&sa))?;
            let eb = sb.env.as_ref().ok_or_else(|| missing(&sb))?;
            let d = ea.diff(eb);
            if !a.json {
                for note in ea.unknown_notes(eb) {
                    crate::outln!("{note}");
                }
            }
            if a.json {
                crate::outln!(
                    "{}",
                    serde_json::to_string_pretty(&d).map_err(|e| Failure::usage(e.to_string()))?
                );
            } else if d.is_empty() {
                crate::outln!("no difference between {} and {}", sa.name, sb.name);
            } else {
                crate::outln!("A = {}   B = {}", sa.name, sb.name);
                for c in d {
                    crate::outln!("{c}");
                }
            }
        }
    }
    Ok(0)
}
