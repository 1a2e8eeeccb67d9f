//! `plumb bisect`: the first kernel image of an ordered series (a
//! distribution's packages between two releases, successive builds) whose
//! figures changed beyond noise. Each step boots one image, runs an
//! experiment's points inside it, and answers as `plumb check` does against
//! the good image's runs: good, bad, or skip (the kernel did not boot, or
//! the figures cannot tell).

use super::compare::{guest_side, params, SKIP};
use crate::args::{kernel_arg, BisectArgs, ChangeArg};
use crate::Failure;
use plumb_compare::{Bisect, Change, Comparison};
use plumb_run::vm::{Guest, GuestRun};

/// What one image answered.
struct Step {
    /// The order it was tested in (1 for the good image).
    order: usize,
    answer: Bisect,
    /// Against the good image: each point's change, or why it was skipped.
    said: String,
}

pub fn exec(a: BisectArgs) -> Result<i32, Failure> {
    let plan = super::sweep::load(&a.points, a.quick)?;
    let vm = a.boot.options().map_err(Failure::usage)?;
    let series: Vec<String> = std::iter::once(a.good.clone())
        .chain(a.between.iter().cloned())
        .chain(std::iter::once(a.bad.clone()))
        .collect();
    let specs: Vec<&plumb_spec::Spec> = plan.points.iter().map(|p| &p.spec).collect();
    let mut guests = Vec::new();
    for s in &series {
        let (label, image) = kernel_arg(s);
        guests.push(
            Guest::open(&image, label, &vm, &specs)
                .map_err(|e| Failure::usage(format!("{s}: {}", e.message)))?,
        );
    }
    Guest::distinguish(&mut guests);
    let runs: Vec<GuestRun> = plan
        .points
        .iter()
        .map(|p| plan.guest_run(p, plan.repeat(), Default::default()))
        .collect();
    let mut store = if a.no_store {
        None
    } else {
        Some(super::db::open(&a.db)?)
    };
    let change = match a.change {
        ChangeArg::Worse => Change::Worse,
        ChangeArg::Better => Change::Better,
        ChangeArg::Any => Change::Any,
    };
    let n = guests.len();
    let mut steps: Vec<Option<Step>> = (0..n).map(|_| None).collect();
    let boot = |i: usize, order: usize, store: &mut Option<plumb_store::Store>| {
        eprintln!("step {order}: {} ({})", guests[i].source, guests[i].label());
        guest_side(&guests[i], &runs, store.as_mut())
    };
    // Everything is measured against the good image: it must boot.
    let good = boot(0, 1, &mut store).map_err(|f| Failure {
        code: crate::exit::USAGE,
        message: format!("--good {}: {}", a.good, f.message),
    })?;
    steps[0] = Some(Step {
        order: 1,
        answer: Bisect::Good,
        said: "the reference".into(),
    });
    let judge = |i: usize, order: usize, store: &mut Option<plumb_store::Store>| {
        let side = match boot(i, order, store) {
            Ok(s) => s,
            Err(f) if f.code == SKIP => {
                let why = f.message.lines().next().unwrap_or("").to_string();
                return Ok(Step {
                    order,
                    answer: Bisect::Skip,
                    said: why,
                });
            }
            Err(f) => return Err(f),
        };
        let c = plumb_compare::compare(&good, &side, &params(&a.verdict));
        Ok(Step {
            order,
            answer: plumb_compare::bisect_for(&c, a.threshold, change),
            said: changes(&c),
        })
    };
    let last = judge(n - 1, 2, &mut store)?;
    if last.answer != Bisect::Bad {
        let word = answer_word(Some(last.answer));
        steps[n - 1] = Some(last);
        return Err(Failure::usage(format!(
            "--bad {}: {word} against --good, not bad: nothing to bisect\n{}",
            a.bad,
            table(&guests, &steps).trim_end()
        )));
    }
    steps[n - 1] = Some(last);
    let (mut lo, mut hi, mut order) = (0, n - 1, 2);
    loop {
        let middle = (lo + hi) / 2;
        let next = (lo + 1..hi)
            .filter(|i| steps[*i].is_none())
            .min_by_key(|i| i.abs_diff(middle));
        let Some(i) = next else { break };
        order += 1;
        let s = judge(i, order, &mut store)?;
        match s.answer {
            Bisect::Good => lo = i,
            Bisect::Bad => hi = i,
            Bisect::Skip => {}
        }
        steps[i] = Some(s);
    }
    crate::out!("{}", table(&guests, &steps));
    let first = &guests[hi];
    let skipped: Vec<usize> = (lo + 1..hi).collect();
    if skipped.is_empty() {
        crate::outln!(
            "first bad: {} ({}), after {} ({})",
            first.source,
            first.label(),
            guests[lo].source,
            guests[lo].label()
        );
        Ok(0)
    } else {
        let names: Vec<String> = std::iter::once(hi)
            .chain(skipped)
            .map(|i| guests[i].source.clone())
            .collect();
        crate::outln!(
            "cannot tell which is first bad, skipped images between: {}",
            names.join(", ")
        );
        Ok(SKIP)
    }
}

/// Each point's change against the good image.
fn changes(c: &Comparison) -> String {
    if c.points.is_empty() {
        return "no test point in common with the good image".into();
    }
    c.points
        .iter()
        .map(|p| format!("{:+.1} % ({})", p.change * 100.0, p.verdict))
        .collect::<Vec<_>>()
        .join(", ")
}

fn answer_word(a: Option<Bisect>) -> &'static str {
    match a {
        Some(Bisect::Good) => "good",
        Some(Bisect::Bad) => "bad",
        Some(Bisect::Skip) => "skip",
        None => "-",
    }
}

/// Every image of the series in order: when it was tested, its answer,
/// and what it said against the good one.
fn table(guests: &[Guest], steps: &[Option<Step>]) -> String {
    use plumb_report::table::{Align, Table};
    let mut t = Table::new([
        ("image", Align::Left, 0),
        ("label", Align::Left, 0),
        ("step", Align::Right, 0),
        ("answer", Align::Left, 0),
        ("against good", Align::Left, 0),
    ]);
    for (g, s) in guests.iter().zip(steps) {
        t.row(vec![
            g.source.clone(),
            g.label(),
            s.as_ref().map_or("-".into(), |s| s.order.to_string()),
            answer_word(s.as_ref().map(|s| s.answer)).to_string(),
            s.as_ref().map_or("not tested".into(), |s| s.said.clone()),
        ]);
    }
    t.terminal("")
}
