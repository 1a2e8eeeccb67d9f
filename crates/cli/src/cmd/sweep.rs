//! `plumb sweep FILE`: runs every point of an experiment (see
//! `plumb_run::experiment`), stores each with its experiment tag, prints a
//! line per finished point, and ends with the comparison across variants
//! (or against the experiment's previous label).

use crate::args::SweepArgs;
use crate::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use plumb_report::sweep::{matrix_side, TaggedRun};
use plumb_run::experiment::{self as runner, Observer, Plan, PlanError, SweepError};
use plumb_samples::units::format_half_width;
use plumb_samples::RunRecord;
use plumb_spec::experiment::{Order, Point, PointId};
use plumb_store::{RunTag, Store};

/// Reads and checks an experiment file: every point built, every knob
/// parsed, errors as FILE:LINE: KEY: MESSAGE.
pub(crate) fn load(path: &std::path::Path, quick: bool) -> Result<Plan, Failure> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::usage(format!("{shown}: {e}")))?;
    Plan::parse(&text, quick).map_err(|e| match e {
        PlanError::NoQuick => Failure::usage(format!("--quick: {shown} has no [quick] profile")),
        other => Failure::usage(format!("{shown}:{other}")),
    })
}

/// One line for a finished point.
fn point_line(p: &Point, rec: &RunRecord, id: i64) -> String {
    let c = rec.confidence.as_ref();
    let mean = c.map(|c| c.mean).unwrap_or(0.0);
    let width = c
        .and_then(|c| c.relative_half_width)
        .map(|w| format!(" {}", format_half_width(w)))
        .unwrap_or_default();
    format!(
        "{}: {}{} ({} iteration{}), run {id}",
        p.id,
        rec.metric().format(mean),
        width,
        rec.iterations.len(),
        if rec.iterations.len() == 1 { "" } else { "s" },
    )
}

/// A word as a POSIX shell reads it back unchanged.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The command that goes on with an interrupted sweep: the same file,
/// database, label, profile and (for a random order) seed.
fn resume_command(a: &SweepArgs, seed: Option<u64>) -> String {
    let mut words = vec!["plumb".to_string(), "sweep".into(), "--resume".into()];
    if a.quick {
        words.push("--quick".into());
    }
    if let Some(l) = &a.label {
        words.push("--label".into());
        words.push(shell_word(l));
    }
    if let Some(seed) = seed {
        words.push("--order-seed".into());
        words.push(seed.to_string());
    }
    if let Some(db) = &a.db.db {
        words.push("--db".into());
        words.push(shell_word(&db.display().to_string()));
    }
    words.push(shell_word(&a.file.display().to_string()));
    words.join(" ")
}

/// What a finished point's run is stored with, beside its record.
pub(crate) struct Tags {
    experiment: String,
    /// The experiment's variants in the file's order: a point's rank among
    /// them is stored with it, for `plumb report` to take the same baseline.
    variants: Vec<String>,
    seed: u64,
}

impl Tags {
    pub(crate) fn of(plan: &Plan, seed: u64) -> Tags {
        Tags {
            experiment: plan.experiment.name.clone(),
            variants: plan
                .experiment
                .variants
                .iter()
                .map(|v| v.name.clone())
                .collect(),
            seed,
        }
    }
}

/// A finished point's record as it is stored, naming both ends' builds and
/// where the server was, with its tag: the sweep's and a lab agent's alike.
pub(crate) fn tagged(
    ctx: &super::run::RunContext,
    tags: &Tags,
    point: &Point,
    record: &RunRecord,
) -> (RunRecord, RunTag) {
    let mut record = record.clone();
    let server_build = record
        .iterations
        .iter()
        .find_map(|i| i.server.build.clone());
    record.build = Some(env!("PLUMB_BUILD").to_string());
    record.peer = Some(ctx.peer(&record.spec, server_build));
    let tag = RunTag {
        experiment: tags.experiment.clone(),
        point: point.id.to_string(),
        variant: point.id.variant.clone(),
        seed: Some(tags.seed),
        variant_rank: point.id.variant.as_ref().and_then(|v| {
            let rank = tags.variants.iter().position(|n| n == v)?;
            u32::try_from(rank).ok()
        }),
    };
    (record, tag)
}

/// Shows the sweep on a progress bar and stores each finished point.
struct Keeper<'a> {
    store: &'a mut Store,
    /// The runs' context: how a record names the server end.
    ctx: &'a super::run::RunContext,
    tags: Tags,
    points: usize,
    bar: ProgressBar,
}

impl Observer for Keeper<'_> {
    fn starting(&mut self, index: usize, point: &Point, iteration: &str) {
        self.bar.set_message(format!(
            "point {}/{} {}  iteration {iteration}",
            index + 1,
            self.points,
            point.id,
        ));
    }

    fn iteration_done(&mut self) {
        self.bar.inc(1);
    }

    fn one_more(&mut self) {
        self.bar.inc_length(1);
    }

    fn finished(&mut self, point: &Point, record: &RunRecord) -> Result<(), String> {
        let (record, tag) = tagged(self.ctx, &self.tags, point, record);
        let record = &record;
        let id = self
            .store
            .insert_tagged_run(record, record.environment.as_ref(), &tag)
            .map_err(|e| e.to_string())?;
        self.bar
            .suspend(|| crate::outln!("{}", point_line(point, record, id.0)));
        Ok(())
    }
}

pub fn exec(a: SweepArgs) -> Result<i32, Failure> {
    let mut plan = load(&a.file, a.quick)?;
    let mut far_args = a.far.clone();
    if far_args.server.is_none() {
        far_args.server = plan.experiment.server.clone();
    }
    if far_args.server.is_some() {
        if let Some(p) = plan.points.iter().find(|p| p.spec.topology.is_some()) {
            return Err(Failure::usage(format!(
                "--server: point {} runs over a topology of this host's, both ends here; \
                 leave out --server (and the file's server) or the topology",
                p.id
            )));
        }
    }
    let exp = &plan.experiment;
    let seed = plan.seed(a.order_seed);
    let label = plan.label(a.label.as_deref());
    let repeat = plan.repeat();
    if a.dry_run {
        let planned: Vec<super::dry::Planned> = plan
            .points
            .iter()
            .map(|p| super::dry::Planned {
                point: Some(p.id.to_string()),
                spec: p.spec.clone(),
            })
            .collect();
        let json = a.verdict.format == crate::args::Format::Json;
        let Some(vm) = a.vm.options().map_err(Failure::usage)? else {
            return super::dry::show(planned, &far_args, &label, &repeat, json);
        };
        // Each kernel's plan, under the label its runs will have.
        for (kernel_label, image) in a.vm.kernels() {
            let kernel_label = kernel_label
                .or_else(|| (a.vm.kernel.len() == 1).then(|| a.label.clone()).flatten());
            super::dry::show_in_guest(planned.clone(), &image, kernel_label, &vm, &repeat, json)?;
        }
        return Ok(0);
    }
    let guests = guests(&a, &plan)?;
    let labels: Vec<String> = if guests.is_empty() {
        vec![label.clone()]
    } else {
        guests.iter().map(plumb_run::vm::Guest::label).collect()
    };
    let mut store = super::db::open(&a.db)?;
    let mut todos = Vec::new();
    for label in &labels {
        let stored: Vec<PointId> = store
            .experiment_runs(&exp.name, Some(label))
            .map_err(super::db::store_err)?
            .iter()
            .map(|(t, _)| PointId::parse(&t.point))
            .collect();
        if !stored.is_empty() && !a.resume {
            return Err(Failure::usage(format!(
                "experiment {} already has {} stored point{} under label {label}; \
                 add --resume to go on with the rest, or give another --label",
                exp.name,
                stored.len(),
                if stored.len() == 1 { "" } else { "s" }
            )));
        }
        todos.push(plan.pending(&stored));
    }
    // Under --kernel the knobs and topologies are the guests', not this
    // host's.
    if guests.is_empty() {
        plan.check_host()
            .map_err(|e| Failure::usage(e.to_string()))?;
    }
    let todo: Vec<usize> = todos.iter().flatten().copied().collect();
    let label = labels.join(", ");
    // Every point once per label (per kernel under --kernel).
    let points = plan.points.len() * labels.len();
    eprintln!(
        "experiment {}: {} point{} ({} stored already), label{} {label}, order {}{}, iterations {}..{}",
        exp.name,
        points,
        if points == 1 { "" } else { "s" },
        points - todo.len(),
        if labels.len() == 1 { "" } else { "s" },
        exp.order,
        if exp.order == Order::Random {
            format!(" (seed {seed})")
        } else {
            String::new()
        },
        repeat.min,
        repeat.max
    );

    // Ends the far end's server when the sweep is over, however it ends.
    let family = plan
        .points
        .first()
        .map_or(plumb_spec::Family::V4, |p| p.spec.family);
    let end = super::run::reach(&far_args, family)?;
    for p in &mut plan.points {
        end.aim(&mut p.spec);
    }
    let ctx = end.context(a.exclusive, a.profile.observe().map_err(Failure::usage)?);
    let opts = ctx.options(&label)?;
    // Drawn only here, on the controller thread; indicatif hides it when
    // stderr is not a terminal.
    let bar = ProgressBar::new((todo.len() as u32 * repeat.min) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} iterations  eta {eta}  {msg}")
            .expect("a valid template"),
    );
    let mut keeper = Keeper {
        store: &mut store,
        ctx: &ctx,
        tags: Tags::of(&plan, seed),
        points,
        bar: bar.clone(),
    };
    let outcome = if guests.is_empty() {
        runner::run(&plan, &todo, seed, &opts, &mut keeper)
    } else {
        runner::run_in_guests(&plan, &todos, seed, &opts, &guests, &mut keeper)
    };
    let outcome = outcome.map_err(|e| match &e {
        SweepError::Run { point, source } => Failure::run(source).within(point),
        SweepError::Keep { .. } => Failure::store(e.to_string()),
        SweepError::Knob { .. } | SweepError::Guest { .. } => Failure::usage(e.to_string()),
    });
    bar.finish_and_clear();
    let outcome = outcome?;
    if outcome.interrupted {
        eprintln!(
            "interrupted: {} of {} point{} stored; `{}` goes on",
            outcome.finished,
            todo.len(),
            if todo.len() == 1 { "" } else { "s" },
            resume_command(&a, (exp.order == Order::Random).then_some(seed))
        );
        return Ok(crate::exit::INTERRUPTED);
    }
    let (text, more) = summary(&store, &plan, &labels, &a.verdict, a.quick, &a.file)?;
    crate::out!("{text}");
    for line in more {
        eprintln!("{line}");
    }
    Ok(0)
}

/// The guests of `--kernel`, opened for the plan's points (each refused
/// now, before anything boots, if it lacks what a point needs), labelled
/// apart where two share a release.
fn guests(a: &SweepArgs, plan: &Plan) -> Result<Vec<plumb_run::vm::Guest>, Failure> {
    let Some(vm) = a.vm.options().map_err(Failure::usage)? else {
        return Ok(Vec::new());
    };
    if a.far.server.is_some() || plan.experiment.server.is_some() {
        return Err(Failure::usage(
            "--kernel runs both ends inside each guest; it cannot be used with a server",
        ));
    }
    open_guests(&a.vm.kernels(), a.label.as_deref(), &vm, plan)
}

/// Opens a guest of each kernel for `plan`'s points: a kernel's runs take
/// its LABEL=, else `label` when it is the only kernel, else the guest's
/// release; two under one label are refused.
pub(crate) fn open_guests(
    kernels: &[crate::args::KernelArg],
    label: Option<&str>,
    vm: &plumb_run::vm::VmOptions,
    plan: &Plan,
) -> Result<Vec<plumb_run::vm::Guest>, Failure> {
    let specs: Vec<&plumb_spec::Spec> = plan.points.iter().map(|p| &p.spec).collect();
    let mut guests = Vec::new();
    for (own, image) in kernels {
        let label = own.clone().or_else(|| {
            (kernels.len() == 1)
                .then(|| label.map(str::to_string))
                .flatten()
        });
        guests.push(
            plumb_run::vm::Guest::open(image, label, vm, &specs)
                .map_err(super::run::guest_failure)?,
        );
    }
    plumb_run::vm::Guest::distinguish(&mut guests);
    let mut seen = std::collections::BTreeSet::new();
    for g in &guests {
        if !seen.insert(g.label()) {
            return Err(Failure::usage(format!(
                "--kernel: two kernels under one label, {}: give each its own as LABEL=IMAGE",
                g.label()
            )));
        }
    }
    Ok(guests)
}

/// The comparison at the end of a sweep: every variant against the first;
/// without variants, this label against the experiment's previous one.
/// With it, for each comparison that had too few iterations to decide, how
/// many a side to set in the file.
fn summary(
    store: &Store,
    plan: &Plan,
    labels: &[String],
    v: &crate::args::VerdictArgs,
    quick: bool,
    file: &std::path::Path,
) -> Result<(String, Vec<String>), Failure> {
    let label = labels[0].as_str();
    let exp = &plan.experiment;
    let params = super::compare::params(v);
    let all = store
        .experiment_runs(&exp.name, None)
        .map_err(super::db::store_err)?;
    // Matched across variants and labels by their place in the matrix.
    let side = |name: &str, keep: &dyn Fn(&RunTag, &RunRecord) -> bool| {
        matrix_side(
            name,
            all.iter()
                .filter(|(t, r)| keep(t, &r.record))
                .map(|(t, r)| TaggedRun {
                    point: PointId::parse(&t.point),
                    record: r.record.clone(),
                    env: r.env.clone(),
                }),
        )
    };
    let mut comparisons = Vec::new();
    let labelled = |l: &str| side(l, &|_, r| r.label == l);
    if labels.len() >= 2 {
        // Kernels: each against the first, every variant matched by its
        // place in the matrix.
        for other in &labels[1..] {
            comparisons.push(plumb_compare::compare(
                &labelled(label),
                &labelled(other),
                &params,
            ));
        }
    } else if exp.variants.len() >= 2 {
        let variant = |name: &str| {
            side(name, &|t, r| {
                r.label == label && t.variant.as_deref() == Some(name)
            })
        };
        let base = variant(&exp.variants[0].name);
        for other in &exp.variants[1..] {
            comparisons.push(plumb_compare::compare(
                &base,
                &variant(&other.name),
                &params,
            ));
        }
    } else {
        let previous = all
            .iter()
            .rev()
            .map(|(_, r)| r.record.label.clone())
            .find(|l| l != label);
        if let Some(prev) = previous {
            comparisons.push(plumb_compare::compare(
                &labelled(&prev),
                &labelled(label),
                &params,
            ));
        }
    }
    let ask = plumb_report::compare::IterationsAsk::File { path: file, quick };
    let more = comparisons
        .iter()
        .filter_map(|c| Some((c, plumb_report::compare::more_iterations(c, ask)?)))
        .map(|(c, m)| format!("{}, {} against {}: {m}", exp.name, c.b, c.a))
        .collect();
    Ok((super::compare::render_all(&comparisons, v.format)?, more))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn sweep_args(argv: &[&str]) -> SweepArgs {
        let cli = crate::args::Cli::try_parse_from(argv).unwrap();
        let crate::args::Command::Sweep(a) = cli.command else {
            panic!("parsed as sweep")
        };
        a
    }

    #[test]
    fn the_resume_command_keeps_every_flag_that_picks_the_points() {
        let a = sweep_args(&[
            "plumb",
            "sweep",
            "--db",
            "/tmp/my lab.db",
            "--label",
            "v6.8",
            "--quick",
            "exp.toml",
        ]);
        assert_eq!(
            resume_command(&a, Some(42)),
            "plumb sweep --resume --quick --label v6.8 --order-seed 42 --db '/tmp/my lab.db' exp.toml"
        );
        let plain = sweep_args(&["plumb", "sweep", "exp.toml"]);
        assert_eq!(
            resume_command(&plain, None),
            "plumb sweep --resume exp.toml"
        );
    }
}
