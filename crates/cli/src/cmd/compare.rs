//! `plumb compare`, `plumb check` and `plumb env`.

use super::db::{open_existing, side};
use crate::args::{CheckArgs, CompareArgs, DecideArgs, EnvArgs, Format, VerdictArgs};
use crate::Failure;
use plumb_compare::{Comparison, Side};
use plumb_report::compare::IterationsAsk;
use plumb_stats::CompareParams;

pub(crate) fn params(v: &VerdictArgs) -> CompareParams {
    CompareParams {
        alpha: v.alpha,
        noise_band: v.noise_band,
        higher_is_better: true,
        ..CompareParams::default()
    }
}

/// `c` judged on `--decide-on`'s figure where one was given.
pub(crate) fn decide(
    c: &mut Comparison,
    a: &Side,
    b: &Side,
    d: &DecideArgs,
    v: &VerdictArgs,
) -> Result<(), Failure> {
    match &d.decide_on {
        Some(f) => plumb_compare::decide::decide_on(c, a, b, f, &params(v))
            .map_err(|e| Failure::usage(format!("--decide-on {}: {e}", f.text))),
        None => Ok(()),
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
    decide(&mut c, &sa, &sb, &a.decide, &a.verdict)?;
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
    if let Some(path) = &a.html {
        let page = plumb_report::tcp::comparison_page(
            &c,
            &sa,
            &sb,
            plumb_report::tcp::PageOptions {
                per_flow: a.per_flow,
            },
        );
        std::fs::write(path, page)
            .map_err(|e| Failure::usage(format!("--html {}: cannot write: {e}", path.display())))?;
    }
    crate::out!("{}", render(&c, a.verdict.format)?);
    if let Some(more) = plumb_report::compare::more_iterations(&c, IterationsAsk::Flag) {
        eprintln!("{more}");
    }
    Ok(0)
}

/// Errors in `check` exit 128: `git bisect run` takes 1-127 (but 125) as
/// "bad", so an error there would blame a commit for a typo; above 127 it
/// stops the bisection instead.
const CHECK_ERROR: i32 = 128;

pub fn check(a: CheckArgs) -> Result<i32, Failure> {
    check_inner(a).map_err(|f| Failure {
        // A kernel that did not boot is a skip, never a fault of plumb's.
        code: if f.code == SKIP { SKIP } else { CHECK_ERROR },
        message: f.message,
    })
}

/// `git bisect run`'s skip.
pub(crate) const SKIP: i32 = 125;

/// A guest's failure: a kernel that did not boot, panicked or hung is a
/// skip (125); anything else is a usage error.
pub(crate) fn vm_failure(e: plumb_run::vm::VmError) -> Failure {
    match e.fault {
        plumb_run::vm::Fault::Boot => Failure {
            code: SKIP,
            message: e.message,
        },
        _ => super::run::guest_failure(e),
    }
}

/// Makes the baseline's points `specs` in one boot of `kernel`, keeping
/// each in `store` when given: `check --kernel`.
fn check_in_guest(
    a: &CheckArgs,
    kernel: &str,
    specs: &[&plumb_samples::RunRecord],
    store: Option<&mut plumb_store::Store>,
) -> Result<Side, Failure> {
    if a.far.server.is_some() {
        return Err(Failure::usage(
            "--kernel runs both ends inside the guest; it cannot be used with --server",
        ));
    }
    let vm = a.boot.options().map_err(Failure::usage)?;
    let (label, image) = crate::args::kernel_arg(kernel);
    let label = label.or_else(|| a.label.clone());
    let points: Vec<&plumb_spec::Spec> = specs.iter().map(|r| &r.spec).collect();
    let guest = plumb_run::vm::Guest::open(&image, label, &vm, &points).map_err(vm_failure)?;
    let repeat = a.repeat.repeat();
    let runs: Vec<plumb_run::vm::GuestRun> = points
        .iter()
        .map(|s| plumb_run::vm::GuestRun {
            spec: s.as_it_ran(),
            repeat,
            knobs: Vec::new(),
            server_knobs: Vec::new(),
            observe: Default::default(),
        })
        .collect();
    eprintln!(
        "running {} test point{} in a guest of {} under label {}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        guest.release,
        guest.label()
    );
    guest_side(&guest, &runs, store)
}

/// Makes `runs` in one boot of `guest`, each kept in `store` when given,
/// as the side of a comparison under the guest's label.
pub(crate) fn guest_side(
    guest: &plumb_run::vm::Guest,
    runs: &[plumb_run::vm::GuestRun],
    mut store: Option<&mut plumb_store::Store>,
) -> Result<Side, Failure> {
    let (mut records, mut env) = (Vec::new(), None);
    guest
        .run(runs, &mut |_, mut rec| {
            rec.build = Some(env!("PLUMB_BUILD").to_string());
            rec.peer = Some(super::run::embedded_peer(&rec.spec));
            if let Some(s) = store.as_deref_mut() {
                let e = rec.environment.clone();
                s.insert_run(&rec, e.as_ref())
                    .map_err(|e| plumb_run::vm::VmError::input(format!("not stored: {e}")))?;
            }
            env = rec.environment.take();
            records.push(rec);
            Ok(())
        })
        .map_err(vm_failure)?;
    Ok(Side::new(guest.label(), records, env))
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
        None if a.kernel.is_some() && !a.dry_run => {
            let specs = plumb_run::experiment::newest_per_point(baseline.records());
            let kernel = a.kernel.as_deref().expect("checked");
            let keep = if a.no_store { None } else { Some(&mut store) };
            check_in_guest(&a, kernel, &specs, keep)?
        }
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
                if let Some(kernel) = &a.kernel {
                    let vm = a.boot.options().map_err(Failure::usage)?;
                    let (kernel_label, image) = crate::args::kernel_arg(kernel);
                    let label = kernel_label.or_else(|| a.label.clone());
                    return super::dry::show_in_guest(planned, &image, label, &vm, &repeat, json);
                }
                return super::dry::show(planned, &a.far, &label, &repeat, json);
            }
            // The server end of the runs made now; one started over ssh
            // serves them all and ends with this.
            let family = specs
                .first()
                .map_or(plumb_spec::Family::V4, |r| r.spec.family);
            let end = super::run::reach(&a.far, family)?;
            let ctx = end.context(false, Default::default());
            let mut runs = Vec::new();
            let mut env = None;
            for r in specs {
                let mut spec = r.spec.as_it_ran();
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
    let mut c = plumb_compare::compare(&baseline, &candidate, &params(&a.verdict));
    decide(&mut c, &baseline, &candidate, &a.decide, &a.verdict)?;
    // What check looks for is a drop beyond its threshold, so that is what
    // the iterations a side it asks for are sized to tell.
    c.size_needed_for(a.threshold);
    crate::out!("{}", render(&c, a.verdict.format)?);
    let b = plumb_compare::bisect(&c, a.threshold);
    // A regression is a drop of a throughput, a rise of a latency.
    let (sign, on) = match &a.decide.decide_on {
        Some(f) if !f.metric().higher_is_better() => ('+', format!(" on {}", f.text)),
        Some(f) => ('-', format!(" on {}", f.text)),
        None => ('-', String::new()),
    };
    eprintln!(
        "check: {} (threshold {sign}{:.1} %{on}), exit {}",
        match b {
            plumb_compare::Bisect::Good => "good",
            plumb_compare::Bisect::Bad => "bad: regression",
            plumb_compare::Bisect::Skip => "cannot tell",
        },
        a.threshold * 100.0,
        b.exit_code()
    );
    if b == plumb_compare::Bisect::Skip {
        if let Some(more) = plumb_report::compare::more_iterations(&c, IterationsAsk::Flag) {
            eprintln!("check: {more}");
        }
    }
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
