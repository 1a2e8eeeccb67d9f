//! `plumb bisect`: the first kernel image of an ordered series (a
//! distribution's packages between two releases, successive builds), or the
//! first commit of a kernel tree (`--tree`, in [`tree`]), whose figures
//! changed beyond noise. Each step boots one kernel, runs an experiment's
//! points inside it, and answers as `plumb check` does against the good
//! kernel's runs: good, bad, or skip (the kernel did not build or boot, or
//! the figures cannot tell).

mod lab;
mod tree;

use super::compare::{guest_side, params, SKIP};
use crate::args::{kernel_arg, BisectArgs, ChangeArg};
use crate::Failure;
use plumb_compare::{Bisect, Change, Comparison, Side};
use plumb_run::experiment::Plan;
use plumb_run::vm::{Guest, GuestRun, VmOptions};

/// What one kernel answered.
struct Step {
    /// The order it was tested in (1 for the good kernel).
    order: usize,
    answer: Bisect,
    /// Against the good kernel: each point's change, or why it was skipped.
    said: String,
    /// Its runs were made under TCG.
    emulated: bool,
    /// Where its answer is a skip for too few iterations: how many a side
    /// the spread observed needs, and how to ask for them.
    more: Option<String>,
}

impl Step {
    /// What the end of a bisection says after its answer where more
    /// iterations would have decided it: `; ` and the line, or nothing.
    fn more_line(&self) -> String {
        self.more
            .as_ref()
            .map_or(String::new(), |m| format!("; {m}"))
    }

    fn reference() -> Step {
        Step {
            order: 1,
            answer: Bisect::Good,
            said: "the reference".into(),
            emulated: false,
            more: None,
        }
    }
}

/// What every step of a bisection shares: the points, how a guest boots,
/// where the runs are kept, and how an answer is read.
struct Bench<'a> {
    a: &'a BisectArgs,
    plan: Plan,
    vm: VmOptions,
    runs: Vec<GuestRun>,
    store: Option<plumb_store::Store>,
}

impl<'a> Bench<'a> {
    fn new(a: &'a BisectArgs) -> Result<Bench<'a>, Failure> {
        let plan = super::sweep::load(&a.points, a.quick)?;
        let vm = a.boot.options().map_err(Failure::usage)?;
        let runs = plan
            .points
            .iter()
            .map(|p| plan.guest_run(p, plan.repeat(), Default::default()))
            .collect();
        let store = if a.no_store {
            None
        } else {
            Some(super::db::open(&a.db)?)
        };
        Ok(Bench {
            a,
            plan,
            vm,
            runs,
            store,
        })
    }

    /// The series' guests, --good first and --bad last, each opened (and
    /// refused, before anything boots, where it lacks what a point needs)
    /// and labelled apart where two share a release.
    fn guests(&self) -> Result<Vec<Guest>, Failure> {
        let a = self.a;
        let series = std::iter::once(&a.good)
            .chain(&a.between)
            .chain(std::iter::once(&a.bad));
        let mut guests = Vec::new();
        for s in series {
            let (label, image) = kernel_arg(s);
            guests.push(
                Guest::open(&image, label, &self.vm, &self.specs())
                    .map_err(|e| Failure::usage(format!("{s}: {}", e.message)))?,
            );
        }
        Guest::distinguish(&mut guests);
        Ok(guests)
    }

    fn specs(&self) -> Vec<&plumb_spec::Spec> {
        self.plan.points.iter().map(|p| &p.spec).collect()
    }

    /// The points' runs in one boot of `guest`, kept unless --no-store.
    fn measure(&mut self, guest: &Guest) -> Result<Side, Failure> {
        guest_side(guest, &self.runs, self.store.as_mut())
    }

    /// What a step's runs answer against the good kernel's; a kernel that
    /// could not be measured (the failure is a skip) answers skip with the
    /// first line of why.
    fn judge(
        &self,
        good: &Side,
        measured: Result<Side, Failure>,
        order: usize,
    ) -> Result<Step, Failure> {
        let side = match measured {
            Ok(s) => s,
            Err(f) if f.code == SKIP => {
                let why = f.message.lines().next().unwrap_or("").to_string();
                return Ok(Step {
                    order,
                    answer: Bisect::Skip,
                    said: why,
                    emulated: false,
                    more: None,
                });
            }
            Err(f) => return Err(f),
        };
        let change = match self.a.change {
            ChangeArg::Worse => Change::Worse,
            ChangeArg::Better => Change::Better,
            ChangeArg::Any => Change::Any,
        };
        let mut c = plumb_compare::compare(good, &side, &params(&self.a.verdict));
        super::compare::decide(&mut c, good, &side, &self.a.decide, &self.a.verdict)?;
        c.size_needed_for(self.a.threshold);
        let answer = plumb_compare::bisect_for(&c, self.a.threshold, change);
        let more = (answer == Bisect::Skip)
            .then(|| {
                plumb_report::compare::more_iterations(
                    &c,
                    plumb_report::compare::IterationsAsk::File {
                        path: &self.a.points,
                        quick: self.a.quick,
                    },
                )
            })
            .flatten();
        let emulated = side
            .records()
            .any(|r| r.vm.as_ref().is_some_and(|vm| vm.accel == "tcg"));
        Ok(Step {
            order,
            answer,
            said: changes(&c),
            emulated,
            more,
        })
    }
}

/// The good kernel could not be measured: with nothing to compare with,
/// an error naming it (a skip there is no answer), unless interrupted.
fn no_reference(good: String, f: Failure) -> Failure {
    Failure {
        code: if f.code == crate::exit::INTERRUPTED {
            f.code
        } else {
            crate::exit::USAGE
        },
        message: format!("{good}: {}", f.message),
    }
}

pub fn exec(a: BisectArgs) -> Result<i32, Failure> {
    let bench = Bench::new(&a)?;
    match (&a.tree, &a.lab_class) {
        (Some(dir), _) => tree::exec(bench, dir),
        (None, Some(class)) => lab::images(bench, class),
        (None, None) => images(bench),
    }
}

/// The series of images given on the command line.
fn images(mut bench: Bench) -> Result<i32, Failure> {
    let a = bench.a;
    let guests = bench.guests()?;
    let n = guests.len();
    let mut steps: Vec<Option<Step>> = (0..n).map(|_| None).collect();
    let boot = |i: usize, order: usize, bench: &mut Bench| {
        eprintln!("step {order}: {} ({})", guests[i].source, guests[i].label());
        bench.measure(&guests[i])
    };
    // Everything is measured against the good image: it must boot.
    let good = boot(0, 1, &mut bench).map_err(|f| no_reference(format!("--good {}", a.good), f))?;
    steps[0] = Some(Step::reference());
    let measured = boot(n - 1, 2, &mut bench);
    let last = bench.judge(&good, measured, 2)?;
    let bad = last.answer;
    steps[n - 1] = Some(last);
    if bad != Bisect::Bad {
        return Err(not_bad(a, &guests, &steps));
    }
    let (mut lo, mut hi, mut order) = (0, n - 1, 2);
    loop {
        let middle = (lo + hi) / 2;
        let next = (lo + 1..hi)
            .filter(|i| steps[*i].is_none())
            .min_by_key(|i| i.abs_diff(middle));
        let Some(i) = next else { break };
        order += 1;
        let measured = boot(i, order, &mut bench);
        let s = bench.judge(&good, measured, order)?;
        match s.answer {
            Bisect::Good => lo = i,
            Bisect::Bad => hi = i,
            Bisect::Skip => {}
        }
        steps[i] = Some(s);
    }
    Ok(first_bad(&guests, &steps, lo, hi))
}

/// The end of a bisection over images: the table, then the first bad image
/// after the last good one (0), or the candidates skips left between them
/// (125).
fn first_bad(guests: &[Guest], steps: &[Option<Step>], lo: usize, hi: usize) -> i32 {
    crate::out!("{}", image_table(guests, steps));
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
        0
    } else {
        let names: Vec<String> = std::iter::once(hi)
            .chain(skipped)
            .map(|i| guests[i].source.clone())
            .collect();
        crate::outln!(
            "cannot tell which is first bad, skipped images between: {}",
            names.join(", ")
        );
        SKIP
    }
}

/// --bad did not answer bad against --good (its step is the last).
fn not_bad(a: &BisectArgs, guests: &[Guest], steps: &[Option<Step>]) -> Failure {
    let last = steps.last().and_then(Option::as_ref);
    let word = answer_word(last.map(|s| s.answer));
    let more = last.map(Step::more_line).unwrap_or_default();
    Failure::usage(format!(
        "--bad {}: {word} against --good, not bad: nothing to bisect{more}\n{}",
        a.bad,
        image_table(guests, steps).trim_end()
    ))
}

/// Each point's change against the good image.
fn changes(c: &Comparison) -> String {
    if c.points.is_empty() {
        return "no test point in common with the good image".into();
    }
    let said = c
        .points
        .iter()
        .map(|p| format!("{:+.1} % ({})", p.change * 100.0, p.verdict))
        .collect::<Vec<_>>()
        .join(", ");
    // A suspect run makes the answer a skip whatever the figures say: the
    // row says which run, and why.
    match c.suspect.as_slice() {
        [] => said,
        [one] => format!("{said}; suspect: {one}"),
        [first, more @ ..] => format!("{said}; suspect: {first} (and {} more)", more.len()),
    }
}

fn answer_word(a: Option<Bisect>) -> &'static str {
    match a {
        Some(Bisect::Good) => "good",
        Some(Bisect::Bad) => "bad",
        Some(Bisect::Skip) => "skip",
        None => "-",
    }
}

/// Every image of the series in order.
fn image_table(guests: &[Guest], steps: &[Option<Step>]) -> String {
    let rows: Vec<Row> = guests
        .iter()
        .zip(steps)
        .map(|(g, s)| (g.source.clone(), g.label(), s.as_ref()))
        .collect();
    table("image", &rows)
}

/// A row of the table: the kernel's name, its label, and its step.
type Row<'a> = (String, String, Option<&'a Step>);

/// One row per kernel (`what` names the first column: its image or its
/// commit): its label, when it was tested, its answer, and what it said
/// against the good one.
fn table(what: &str, rows: &[Row]) -> String {
    use plumb_report::table::{Align, Table};
    let mut t = Table::new([
        (what, Align::Left, 0),
        ("label", Align::Left, 0),
        ("step", Align::Right, 0),
        ("answer", Align::Left, 0),
        ("against good", Align::Left, 0),
    ]);
    for (name, label, s) in rows {
        t.row(vec![
            name.clone(),
            label.clone(),
            s.map_or("-".into(), |s| s.order.to_string()),
            answer_word(s.map(|s| s.answer)).to_string(),
            s.map_or("not tested".into(), |s| s.said.clone()),
        ]);
    }
    let mut text = t.terminal("");
    if rows.iter().any(|r| r.2.is_some_and(|s| s.emulated)) {
        text.push_str(
            "tcg: the kernels ran under QEMU's emulator, so the figures measure the emulator \
             as well as each kernel and follow the host's load; a run the host disturbed is \
             suspect, and a skip\n",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_tcg_figures_measure_where_a_step_ran_under_it() {
        let step = |order: usize, emulated: bool| Step {
            order,
            answer: Bisect::Good,
            said: "+1.0 % (no difference)".into(),
            emulated,
            more: None,
        };
        let (reference, host, guest) = (Step::reference(), step(2, false), step(2, true));
        assert_eq!(host.more_line(), "");
        fn rows<'s>(reference: &'s Step, s: &'s Step) -> Vec<Row<'s>> {
            vec![
                ("a.deb".into(), "a".into(), Some(reference)),
                ("b.deb".into(), "b".into(), Some(s)),
            ]
        }
        let text = table("image", &rows(&reference, &host));
        assert!(!text.contains("tcg"), "{text}");
        let text = table("image", &rows(&reference, &guest));
        assert!(
            text.contains("tcg: the kernels ran under QEMU's emulator"),
            "{text}"
        );
    }
}
